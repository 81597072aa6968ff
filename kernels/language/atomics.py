"""``tl.atomic_*`` as primitives: every lane applies one atomic to a shared slot.

Lane i of n applies ``OP`` with value ``values[i]`` to slot ``i % addresses`` of a copy of
``initial`` and writes the value it got back (the slot's old value) to ``old[i]``. With
one address every lane of every program updates the same word: the heaviest contention
a kernel can make. Masked-off lanes (``mask[i]`` false) must neither update a slot nor
matter; what they get back is undefined. ``tl.atomic_cas`` takes no mask in the
language, so a masked-off cas lane works on a scratch slot behind the real ones.

``orders`` lists the (sem, scope) pairs to run: each runs as its own launch on its own
copy of ``initial``, and the outputs stack them. A "cta"-scoped atomic is atomic only
among the threads of one program, so under that scope every lane lives in one program;
under "gpu" and "sys" the lanes are spread over one warp (wavefront) per program, so
several programs contend for each slot.

On select-load profiles (SIMD NPUs) masked-off lanes would still be read, so loads clamp
their offsets to the last lane and select instead of masking.
"""
import torch
import triton
import triton.language as tl

from triton_cts.execution.input_checks import (ShapeMismatchError, UnsupportedDtypeError,
                                               check_inputs)
from triton_cts.ops.language.atomics import (BITWISE, DEFAULT_ORDER, FLOATS, INTS, OPS_NAMES,
                                             SCOPES, SEMS, declared_dtypes,
                                             frontend_refusal)
from triton_cts.profiles import Profile, cdiv, next_power_of_2

DTYPES = INTS + FLOATS
_SIGNED = {torch.uint32: torch.int32, torch.uint64: torch.int64}


@triton.jit
def _atomic_kernel(
    P,                            # pointer to the slots (and, for cas, one scratch slot after them)
    V,                            # pointer to the lanes' values [n]
    CMP,                          # pointer to the lanes' compare values [n] (cas only)
    MASK,                         # pointer to the lanes' mask [n] as int8 (HAS_MASK only)
    OLD,                          # pointer to the values the lanes got back [n]
    n,                            # number of lanes
    addresses,                    # number of slots: lane i updates slot i % addresses
    OP: tl.constexpr,             # "add", "max", "min", "and", "or", "xor", "xchg", "cas"
    SEM: tl.constexpr,            # memory ordering: relaxed, acquire, release, acq_rel
    SCOPE: tl.constexpr,          # gpu, cta or sys
    HAS_MASK: tl.constexpr,       # lanes carry a mask
    SELECT_LOADS: tl.constexpr,   # masked-off lanes must read a valid address
    BLOCK: tl.constexpr,          # lanes per program
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    read = tl.minimum(offs, n - 1) if SELECT_LOADS else offs
    if SELECT_LOADS:
        v = tl.load(V + read)
    else:
        v = tl.load(V + read, mask=inside, other=0)
    active = inside
    if HAS_MASK:
        if SELECT_LOADS:
            m = tl.load(MASK + read)
        else:
            m = tl.load(MASK + read, mask=inside, other=0)
        active = active & (m != 0)
    ptr = P + offs % addresses
    if OP == "add":
        old = tl.atomic_add(ptr, v, mask=active, sem=SEM, scope=SCOPE)
    elif OP == "max":
        old = tl.atomic_max(ptr, v, mask=active, sem=SEM, scope=SCOPE)
    elif OP == "min":
        old = tl.atomic_min(ptr, v, mask=active, sem=SEM, scope=SCOPE)
    elif OP == "and":
        old = tl.atomic_and(ptr, v, mask=active, sem=SEM, scope=SCOPE)
    elif OP == "or":
        old = tl.atomic_or(ptr, v, mask=active, sem=SEM, scope=SCOPE)
    elif OP == "xor":
        old = tl.atomic_xor(ptr, v, mask=active, sem=SEM, scope=SCOPE)
    elif OP == "xchg":
        old = tl.atomic_xchg(ptr, v, mask=active, sem=SEM, scope=SCOPE)
    else:
        # no mask in the language: masked-off lanes compare-and-swap a scratch slot
        if SELECT_LOADS:
            cmp = tl.load(CMP + read)
        else:
            cmp = tl.load(CMP + read, mask=inside, other=0)
        slot = tl.where(active, offs % addresses, addresses)  # a select of offsets, not pointers
        old = tl.atomic_cas(P + slot, cmp, v, sem=SEM, scope=SCOPE)
    # every lane inside stores (a contiguous mask): a masked-off lane's old is undefined
    tl.store(OLD + offs, old, mask=inside)


# --------------------------------------------------------------------------------------
# Launchers
# --------------------------------------------------------------------------------------
def atomic(values: torch.Tensor, initial: torch.Tensor, mask: torch.Tensor | None = None,
           cmp: torch.Tensor | None = None, *, op: str, orders=(DEFAULT_ORDER,),
           profile: Profile) -> tuple[torch.Tensor, torch.Tensor]:
    """(final, old): ``final[j]`` the slots after every lane applied ``tl.atomic_<op>`` under
    ``orders[j]`` (a (sem, scope) pair), ``old[j]`` what each lane got back. ``values``
    (n lanes), ``initial`` (the slots), ``mask`` (n bools, optional), ``cmp`` (n compare
    values, cas only) share one dtype but the mask."""
    if op not in OPS_NAMES:
        raise ValueError(f"tl_atomic: op must be one of {OPS_NAMES}, got '{op}'")
    check_inputs(f"tl_atomic_{op}", profile, DTYPES, values=values, initial=initial, cmp=cmp)
    name = str(values.dtype).removeprefix("torch.")
    if values.dtype not in declared_dtypes(op, profile):
        where = "the integer dtypes of atomics.add" if op in BITWISE else f"atomics.{op}"
        raise UnsupportedDtypeError(f"tl_atomic_{op}: profile '{profile.name}' does not declare "
                                    f"atomic {op} on {name} ({where} in {profile.source})")
    refused = frontend_refusal(op, values.dtype, profile)
    if refused:
        raise UnsupportedDtypeError(f"tl_atomic_{op} on {name}: {refused}")
    if values.dim() != 1 or initial.dim() != 1 or initial.numel() == 0:
        raise ShapeMismatchError(f"tl_atomic_{op}: values and initial must be 1-D and initial "
                                 f"non-empty, got {tuple(values.shape)} and {tuple(initial.shape)}")
    if initial.dtype != values.dtype or (cmp is not None and cmp.dtype != values.dtype):
        raise UnsupportedDtypeError(f"tl_atomic_{op}: values, initial and cmp must share a dtype")
    if (op == "cas") != (cmp is not None):
        raise ValueError(f"tl_atomic_{op}: cmp is required for cas and only for cas")
    for extra, what in ((mask, "mask"), (cmp, "cmp")):
        if extra is not None and tuple(extra.shape) != tuple(values.shape):
            raise ShapeMismatchError(f"tl_atomic_{op}: {what} must have values' shape "
                                     f"{tuple(values.shape)}, got {tuple(extra.shape)}")
    for sem, scope in orders:
        if sem not in SEMS or scope not in SCOPES:
            raise ValueError(f"tl_atomic_{op}: (sem, scope) must be from {SEMS} x {SCOPES}, "
                             f"got ({sem!r}, {scope!r})")
    n, slots = values.numel(), initial.numel()
    # torch moves unsigned tensors on a GPU only partly: copies go through signed views
    signed = _SIGNED.get(values.dtype, values.dtype)
    finals = torch.empty((len(orders), slots), dtype=signed, device=values.device)
    olds = torch.empty((len(orders), n), dtype=signed, device=values.device)
    start = initial.view(signed)
    if n == 0:
        finals.copy_(start.expand(len(orders), slots))
        return finals.view(values.dtype), olds.view(values.dtype)
    mask8 = mask.to(torch.int8).contiguous() if mask is not None else None
    for j, (sem, scope) in enumerate(orders):
        # the slots, then the scratch slot masked-off cas lanes work on
        work = torch.cat([start, start[:1]]).contiguous()
        # cta scope: one program holds every lane; else one warp per program
        block = next_power_of_2(n) if scope == "cta" else profile.warp_size
        _atomic_kernel[(cdiv(n, block),)](
            work.view(values.dtype), values.contiguous(),
            cmp.contiguous() if cmp is not None else values,
            mask8 if mask8 is not None else values, olds[j].view(values.dtype), n, slots,
            OP=op, SEM=sem, SCOPE=scope, HAS_MASK=mask is not None,
            SELECT_LOADS=profile.select_loads, BLOCK=block, num_warps=1,
        )
        finals[j] = work[:slots]
    return finals.view(values.dtype), olds.view(values.dtype)


def _op_launcher(op: str):
    def launch(values, initial, mask=None, cmp=None, *, orders=(DEFAULT_ORDER,),
               profile: Profile):
        return atomic(values, initial, mask, cmp, op=op, orders=orders, profile=profile)
    launch.__name__ = f"atomic_{op}"
    launch.__doc__ = f"``atomic`` with ``op='{op}'``."
    return launch


atomic_add = _op_launcher("add")
atomic_max = _op_launcher("max")
atomic_min = _op_launcher("min")
atomic_and = _op_launcher("and")
atomic_or = _op_launcher("or")
atomic_xor = _op_launcher("xor")
atomic_xchg = _op_launcher("xchg")
atomic_cas = _op_launcher("cas")
