"""``tl.atomic_*`` as primitive ops: add, max, min, and, or, xor, xchg and cas, each for
the dtypes the profile declares (``[atomics]``), under every memory ordering (``sem``)
and scope.

The launcher (``kernels/language/atomics.py``) has every lane of every program apply the
atomic to a shared slot and returns, per (sem, scope), the slots after the launch and the
value each lane got back. Whatever order the hardware serialized the lanes in, a correct
atomic leaves a history: the lanes ordered so that each got back the value the one
before it left. :func:`linearization_problem` checks such an order exists (an Eulerian
path through the values the slot held: each lane an edge from the value it got back to
the value it left), which holds for every op and order, and says what breaks it.

What the language leaves undefined (float max/min of -0.0 against +0.0, and of NaN) is
not checked but recorded as behaviour by the suite.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Callable

import torch

from triton_cts.ops.language import COMPILE_SUITE
from triton_cts.ops.spec import OpSpec

SUITE = "test_language_ops"
OPS_NAMES = ("add", "max", "min", "and", "or", "xor", "xchg", "cas")
SEMS = ("relaxed", "acquire", "release", "acq_rel")
SCOPES = ("gpu", "cta", "sys")
#: What a kernel gets without naming sem or scope (Triton's defaults).
DEFAULT_ORDER = ("acq_rel", "gpu")
#: Bitwise atomics exist only for integers (the language refuses floats).
BITWISE = ("and", "or", "xor")
INTS = (torch.int8, torch.int16, torch.int32, torch.uint32, torch.int64, torch.uint64)
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
#: Compile checks cover every (sem, scope) pair for these ops (a read-modify-write and the
#: compare-and-swap, which lower differently) in this dtype (every profile declares int32
#: for every atomic); other ops and dtypes compile at the default order, and device checks
#: run every pair for every op. Each pair is its own kernel: 12 compiles per profile each.
EVERY_ORDER_OPS = ("add", "cas")
EVERY_ORDER_DTYPE = torch.int32


def every_order() -> tuple[tuple[str, str], ...]:
    """Every (sem, scope) pair the language takes."""
    return tuple((sem, scope) for sem in SEMS for scope in SCOPES)


def declared_dtypes(op: str, profile) -> tuple[torch.dtype, ...]:
    """The dtypes the profile declares ``tl.atomic_<op>`` for. Profiles list add, max,
    min, cas and xchg (``[atomics]``); the bitwise ops, which no profile lists, take the
    integer dtypes of ``atomics.add`` (PTX atom.and/or/xor and AMD global_atomic_and/or/
    xor work at the widths of the integer adds)."""
    if op in BITWISE:
        return tuple(d for d in INTS if profile.supports_atomic("add", d))
    return tuple(d for d in INTS + FLOATS if profile.supports_atomic(op, d))


def _triton_backends() -> set[str]:
    """The profile backends this Triton builds for ("cuda", "hip")."""
    try:
        from triton.backends import backends
    except ImportError:  # pragma: no cover - a Triton without backends
        return set()
    return {{"nvidia": "cuda", "amd": "hip"}.get(b, b) for b in backends}


def frontend_refusal(op: str, dtype: torch.dtype, profile) -> str | None:
    """Why this Triton's language refuses ``tl.atomic_<op>`` on ``dtype`` for a profile
    whose toolchain is not this Triton (a backend it does not have), or None. The rules
    are upstream's (triton/language/semantic.py: ``_validate_atomic_rmw_element_type``,
    ``atomic_cas``): read-modify-write atomics take float16 and bfloat16 only for add, and
    no 8-bit or 16-bit integers; cas takes 16, 32 and 64-bit elements. Where the profile's
    backend is this Triton's own, a refused dtype it declares is its error, and fails."""
    import triton
    if profile.backend in _triton_backends():
        return None
    bits = dtype.itemsize * 8
    if op == "cas":
        why = None if bits in (16, 32, 64) else "atomic_cas only supports widths 16, 32, 64"
    elif dtype in (torch.float16, torch.bfloat16) and op != "add":
        why = f"atomic_{op} does not support {str(dtype).removeprefix('torch.')}"
    elif not dtype.is_floating_point and bits < 32:
        why = f"atomic_{op} does not support {str(dtype).removeprefix('torch.')}"
    else:
        why = None
    return None if why is None else (
        f"triton {triton.__version__}'s language refuses it ('{why}'); profile "
        f"'{profile.name}' declares it for its own toolchain (backend '{profile.backend}')")


def _wrap(value: int, dtype: torch.dtype) -> int:
    """``value`` wrapped to ``dtype``'s range, as integer hardware does."""
    bits = dtype.itemsize * 8
    value &= (1 << bits) - 1
    signed = torch.iinfo(dtype).min < 0
    return value - (1 << bits) if signed and value >> (bits - 1) else value


def _apply(op: str):
    """new = f(old, value, cmp, dtype) on Python numbers (exact: floats are drawn so
    every partial sum is representable, and max/min of ordered values selects one)."""
    def f(old, value, cmp, dtype):
        if op == "add":
            return _wrap(old + value, dtype) if not dtype.is_floating_point else old + value
        if op == "max":
            return max(old, value)
        if op == "min":
            return min(old, value)
        if op == "and":
            return old & value
        if op == "or":
            return old | value
        if op == "xor":
            return old ^ value
        if op == "xchg":
            return value
        return value if old == cmp else old  # cas
    return f


@dataclass(frozen=True)
class AtomicPrimitive:
    """``tl.atomic_<op>``; ``apply(old, value, cmp, dtype)`` the slot's new value."""

    op: str
    apply: Callable

    def __repr__(self) -> str:
        return f"AtomicPrimitive({self.op})"


def linearization_problem(primitive: AtomicPrimitive, initial, final, values, olds,
                          cmps=None, dtype=torch.int32) -> str | None:
    """Why no serial order of the lanes explains ``final`` and ``olds`` for one slot
    (Python numbers: the slot's ``initial`` and ``final`` value, the active lanes'
    ``values``, what each got back, their ``cmps`` for cas), or None if one does.

    Each lane is an edge old -> apply(old, value): a serial history is a path from
    ``initial`` to ``final`` using every edge once (an Eulerian path), which exists iff
    every value but the ends has as many edges in as out, the start one more out, the end
    one more in (or all balanced where initial == final), and the edges are connected."""
    cmps = cmps if cmps is not None else [None] * len(values)
    edges = [(o, primitive.apply(o, v, c, dtype)) for o, v, c in zip(olds, values, cmps)]
    if not edges:
        return None if final == initial else (f"no lane was active, yet the slot went from "
                                              f"{initial} to {final}")
    out_deg, in_deg = Counter(), Counter()
    adjacent = defaultdict(set)
    for src, dst in edges:
        out_deg[src] += 1
        in_deg[dst] += 1
        adjacent[src].add(dst)
        adjacent[dst].add(src)
    if out_deg[initial] == 0:
        return (f"no lane got back the slot's initial value {initial}: the first lane to "
                f"update it must have (got back: {sorted(Counter(olds).items())[:8]})")
    for node in set(out_deg) | set(in_deg):
        want = (1 if node == initial else 0) - (1 if node == final else 0)
        if out_deg[node] - in_deg[node] != want:
            return (f"the value {node} was left by {in_deg[node]} lane(s) and got back by "
                    f"{out_deg[node]}, which no serial order of the lanes gives (initial "
                    f"{initial}, final {final})")
    seen, stack = {initial}, [initial]
    while stack:
        for nxt in adjacent[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    stray = [n for n in adjacent if n not in seen]
    if stray or final not in seen:
        return (f"values {sorted(stray)[:4] or [final]} cannot be reached from the initial "
                f"value {initial} by any serial order of the lanes")
    return None


def _reference(values, initial, mask=None, cmp=None, *, orders=(DEFAULT_ORDER,)):
    """No single result is right: the suite checks the launcher's results against every
    serial order of the lanes instead (:func:`linearization_problem`)."""
    raise NotImplementedError("atomics are checked by linearization_problem, not against "
                              "one reference result")


def _make_args(op: str):
    def make_args(x: torch.Tensor, gen: torch.Generator):
        values = x.reshape(-1)
        initial = values[:1].clone()
        every = x.dtype == EVERY_ORDER_DTYPE and op in EVERY_ORDER_OPS
        kwargs = {"orders": every_order()} if every else {}
        if op == "cas":
            return (values, initial, None, values.roll(1)), kwargs
        return (values, initial), kwargs
    return make_args


@dataclass(frozen=True, repr=False)
class AtomicOpSpec(OpSpec):
    """An atomic's OpSpec: the dtypes it is compiled for under a profile are those the
    profile declares for the atomic and this Triton's language takes, not every dtype the
    profile supports (the compile suite's list; the language suite reports the others as
    not supported, with the launcher's reason)."""

    def supported_dtypes(self, profile) -> list[torch.dtype]:
        op = self.primitive.op
        declared = declared_dtypes(op, profile)
        return [d for d in super().supported_dtypes(profile)
                if d in declared and frontend_refusal(op, d, profile) is None]


def _op(op: str):
    floats = () if op in BITWISE else FLOATS
    return AtomicOpSpec(
        suites=(COMPILE_SUITE, SUITE),  # as primitive_op sets them
        name=f"tl_atomic_{op}", primitive=AtomicPrimitive(op, _apply(op)),
        description=f"tl.atomic_{op} by every lane on shared slots (one slot: every "
                    f"program on one address), under every sem and scope; the results "
                    f"must come from some serial order of the lanes",
        reference=_reference, reference_kernel=f"kernels.language.atomics:atomic_{op}",
        dtypes=INTS + floats, make_args=_make_args(op), min_ndim=1, max_ndim=1,
        compile_shapes=((64,),),
    )


OPS = tuple(_op(op) for op in OPS_NAMES)


# ---- known interpreter gaps, probed (so a fixed Triton is checked again at once) --------
_GAPS: dict = {}


def interpreter_gap(op: str, dtype: torch.dtype) -> str | None:
    """Why Triton's interpreter cannot be judged on ``tl.atomic_<op>`` in ``dtype``, or
    None. Probed with a kernel of its own (never the checked one): two lanes apply the
    atomic to one slot holding a negative value, one lane's value negative too, and the
    final slot and the values the lanes got back must come from a serial order of the
    lanes (:func:`linearization_problem`). Triton 3.6's interpreter hands back garbage
    from float64 atomic_min on negative slots (the float's bits read as unsigned). cas,
    which takes compare values, is not probed."""
    if op == "cas":
        return None
    if (op, dtype) not in _GAPS:
        _GAPS[op, dtype] = _atomic_probe(op, dtype)
    return _GAPS[op, dtype]


def _atomic_probe(op: str, dtype: torch.dtype) -> str | None:
    import triton
    import triton.language as tl
    from triton_cts.execution import launches
    from triton_cts.execution.interpreter_defects import interpreter_failure

    @triton.jit
    def _interpreter_atomic_probe(P, V, OLD, OP: tl.constexpr):
        offs = tl.arange(0, 2)
        v = tl.load(V + offs)
        ptr = P + offs * 0
        if OP == "add":
            old = tl.atomic_add(ptr, v)
        elif OP == "max":
            old = tl.atomic_max(ptr, v)
        elif OP == "min":
            old = tl.atomic_min(ptr, v)
        elif OP == "and":
            old = tl.atomic_and(ptr, v)
        elif OP == "or":
            old = tl.atomic_or(ptr, v)
        elif OP == "xor":
            old = tl.atomic_xor(ptr, v)
        else:
            old = tl.atomic_xchg(ptr, v)
        tl.store(OLD + offs, old)

    values, initial = ([-1.5, 2.0], -0.5) if dtype.is_floating_point else \
        ([_wrap(-1, dtype), 2], _wrap(-5, dtype))
    slot = torch.tensor([initial], dtype=dtype)
    old = torch.empty(2, dtype=dtype)
    name = str(dtype).removeprefix("torch.")
    try:
        with launches.interpreted():
            _interpreter_atomic_probe[(1,)](slot, torch.tensor(values, dtype=dtype), old, OP=op)
    except Exception as exc:  # noqa: BLE001 - the interpreter's own failure is the gap
        # None where the language refuses it: the check fails or is not offered
        return interpreter_failure(exc, f"tl.atomic_{op} on {name}")
    why = linearization_problem(AtomicPrimitive(op, _apply(op)), initial, slot.item(),
                                values, old.tolist(), None, dtype)
    return None if why is None else (
        f"the interpreter of triton {triton.__version__} computes tl.atomic_{op} on {name} "
        f"wrongly (two lanes {values} on a slot of {initial}: {why})")
