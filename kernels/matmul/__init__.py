"""Matrix multiplication C = A @ B for 2-D A (M x K) and B (K x N).

Each program computes [BLOCK_SIZE_M, BLOCK_SIZE_N] tiles of C, accumulating
[BLOCK_SIZE_K]-deep products in float32 with ``tl.dot``. Tiles are numbered in grouped
order: GROUP_SIZE_M rows of tiles are walked column by column, so programs running at the
same time share rows of A and columns of B in L2 instead of each streaming its own.

The grid is 1-D and capped at the profile's MAX_GRID_NUM; when there are more tiles than
that (and only then: GRID_STRIDE), each program walks tiles with a grid-stride loop, so
any matrix size launches within axis 0's limit.

Ragged edges (M, N, K not multiples of the block) are masked, K only where it is ragged
(EVEN_K); on select-load profiles (SIMD NPUs) masked-off lanes would still be read, so
offsets are clamped to the last row or column (those rows and columns are computed and
never stored) and the K tail is zeroed with a select instead. Strides are passed, so
transposed or sliced inputs work as they are.

Where the profile has ``[[autotune.matmul_tma]]`` configs (targets with tensor descriptors,
TMA on Hopper, where they were measured faster), 16-bit products larger than the
profile's ``tuning.matmul.pointer_max_work`` (M*N*K: smaller ones launch faster through
pointers, Triton encoding host descriptors on every launch) whose matrices a
descriptor takes as they are or transposed (unit stride along one axis, 16-byte aligned
base and rows: an M-major A or a K-major B is read through a descriptor over its
transpose) run a persistent kernel instead: one program per compute unit walks the
tiles in the same grouped order, loading tiles through descriptors, which also bound
the ragged edges; so do float32 products in tf32 on targets whose tf32 dots read K-major
operands (below), B read through a descriptor over B^T. Everything else (IEEE float32,
other strided views, other targets) runs the pointer kernel above.

fp32 inputs use ``input_precision="tf32"`` only where the profile says the hardware runs
tf32 (``dtypes.tf32``), else "ieee". The output has the input dtype, or is the caller's
``out`` (the input dtype or float32), into which ``accumulate`` adds the product in the
kernels' epilogue: the float32 sum of products over chunks of K, each chunk's product
never stored apart (the fused linear cross-entropy's weight gradient). Where the target's
tf32 dots read both operands K-major from shared memory (``dtypes.tf32_k_major``: Hopper's
wgmma), an operand that is not (a row-major B) is first copied K-major: otherwise every
tile of it is transposed into shared memory a 4-byte element at a time (sm_90 PTX:
``cp.async.ca`` of 4 bytes where K-major B gets 16-byte ``cp.async.cg``), and the product
ran slower at every tile (benchmarks/results/h100.jsonl, experiment "comments").

Block sizes, GROUP_SIZE_M, num_warps and num_stages come from the profile's
``[[autotune.matmul]]`` configs, autotuned once per power-of-two bucket of (M, N, K)
(the sizes rounded up): a config that wins at 3000 wins at 4096 as well, and a caller
whose sizes vary (the chunks of a fused linear cross-entropy, sequence lengths) would
otherwise tune every config again, and compile each for the new sizes, on every new
size. Only when a profile has none
does the launcher fall back to a small built-in list (sized to the profile's default
num_warps). Configs whose pipelined tiles cannot fit the profile's shared memory are
pruned before tuning, and so are IEEE float32 configs whose FMA accumulator would crowd a
thread's registers (``limits.registers_per_thread``). Without a device (interpreter, or
launches captured for cross-compilation) the autotuner's benchmark runs each config once
and times nothing. Once the autotuner has picked a config for a bucket, later calls
launch the pick directly (``fast_launch.tuned_launch``): the autotuner's and Triton's
per-call work cost more than a small product's kernel.
"""
import dataclasses
import functools

import torch

from ..fast_launch import PassedChecks, Replays, launch, signature, tuned_launch
from ..grid_stride import launch_grid
from .kernels import _contiguous_kernel
from .tuning import (FMA_ACCUMULATOR_SHARE, TMA_DTYPES, _autotuner, _tiles,  # noqa: F401
                     pointer_max_work)
from triton_cts.execution.input_checks import (ShapeMismatchError, UnsupportedDtypeError,
                                               WrongDeviceError, check_inputs)
from triton_cts.profiles import Profile, cdiv, next_power_of_2

DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _tma_layout(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, profile: Profile,
               fp32_tf32: bool, accumulate: bool, any_size: bool = False) -> tuple | None:
    """(A_M_MAJOR, B_K_MAJOR, C_STAGED) where the tensor-descriptor kernel runs this
    product, else None. It runs where the profile has its configs
    (``autotune.matmul_tma``: the target has tensor descriptors and they were measured
    faster), the product is larger than ``tuning.matmul.pointer_max_work`` (M*N*K; unless
    ``any_size``), and A and B are what a descriptor takes (unit stride along its rows,
    16-byte aligned base and row stride) as they are or transposed: 16-bit A row-major or
    M-major and B row-major or K-major, or float32 as tf32 on a target whose tf32 dots
    read K-major operands, A row-major and B K-major. A 16-bit C of the inputs' dtype is
    staged and stored through its descriptor (a C a descriptor does not take leaves the
    product to the pointer kernel); a float32 C, or one the product is added into, is
    stored through pointers."""
    if not profile.has_autotune_configs("matmul_tma"):
        return None
    if not any_size and a.shape[0] * a.shape[1] * b.shape[1] <= pointer_max_work(profile):
        return None
    elem = a.element_size()

    def described(t):
        return (t.stride(1) == 1 and t.stride(0) * t.element_size() % 16 == 0
                and t.data_ptr() % 16 == 0)
    if a.dtype in TMA_DTYPES:
        a_m_major, b_k_major = not described(a), not described(b)
        if (a_m_major and not described(a.t())) or (b_k_major and not described(b.t())):
            return None
        staged = c.dtype == a.dtype and not accumulate
        if staged and not (b.shape[1] * elem % 16 == 0 and described(c)):
            return None
        return a_m_major, b_k_major, staged
    if fp32_tf32 and profile.tf32_k_major and described(a) and described(b.t()):
        return False, True, False
    return None


def _descriptor(t: torch.Tensor):
    """A host tensor descriptor of the 2-D ``t``, with placeholder tiles (each config's
    pre-hook sets its own), made without the constructor's checks: :func:`_tma_layout`
    made them (unit last stride, 16-byte aligned base and rows) and the sizes are
    positive; they cost more than the rest of a small product's launch."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    desc = object.__new__(TensorDescriptor)
    desc.__dict__.update(_field_defaults(TensorDescriptor), base=t, shape=t.shape,
                         strides=t.stride(), block_shape=[16, 16])
    return desc


@functools.cache
def _field_defaults(cls) -> dict:
    """The default values of a dataclass's fields (Triton versions add descriptor fields)."""
    return {f.name: f.default for f in dataclasses.fields(cls)
            if f.default is not dataclasses.MISSING}


def _matmul_tma(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, layout: tuple,
                accumulate: bool, precision: str, profile: Profile) -> None:
    M, K = a.shape
    N = b.shape[1]
    a_m_major, b_k_major, staged = layout  # from _tma_layout
    a_desc = _descriptor(a.t() if a_m_major else a)
    b_desc = _descriptor(b.t() if b_k_major else b)
    c_out = _descriptor(c) if staged else c
    programs = min(profile.compute_units, profile.max_grid_num)
    grid = lambda META: (min(programs, _tiles(META)),)  # noqa: E731
    buckets = (next_power_of_2(M), next_power_of_2(N), next_power_of_2(K))
    # the layouts positional: the configs' pre-hook and pruning read them
    tuned_launch(_autotuner(profile, tma=True, accumulate=accumulate), grid,
                 (a_desc, b_desc, c_out, M, N, K, *buckets, *layout, accumulate, precision),
                 {"NUM_PROGRAMS": programs}, (*buckets, *layout, precision, c.dtype))


def _contiguous(x: torch.Tensor, profile: Profile, out: torch.Tensor | None = None) -> torch.Tensor:
    """A contiguous copy of the 2-D view ``x`` (into ``out`` where given), by
    :func:`_contiguous_kernel` with square tiles of the profile's elementwise block."""
    if out is None:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    side = 1 << (profile.elementwise_block(x.dtype).bit_length() - 1) // 2
    grid, grid_stride = launch_grid(profile, cdiv(x.shape[0], side) * cdiv(x.shape[1], side))
    launch(_contiguous_kernel, grid, x, out, *x.shape, *x.stride(), BLOCK=side,
           GRID_STRIDE=grid_stride, num_warps=profile.num_warps_for(side * side))
    return out


#: Inputs (signature and input_precision) that passed :func:`_check`, per profile
_CHECKS = PassedChecks()
#: The launches of calls on inputs of one layout, replayed (small products' Python)
_REPLAYS = Replays()


def _check(a: torch.Tensor, b: torch.Tensor, input_precision, profile: Profile) -> None:
    """What :func:`matmul` takes: the errors name the problem."""
    check_inputs("matmul", profile, DTYPES, a=a, b=b)
    if input_precision not in (None, "ieee", "tf32"):
        raise ValueError(f"matmul: input_precision must be None, 'ieee' or 'tf32', got "
                         f"{input_precision!r}")
    if input_precision == "tf32" and not profile["dtypes.tf32"]:
        raise UnsupportedDtypeError(f"matmul: profile '{profile.name}' runs no tf32 dots "
                                    f"(dtypes.tf32 in {profile.source})")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ShapeMismatchError(f"matmul: need a (M x K) and b (K x N), got a={tuple(a.shape)}, "
                                 f"b={tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise UnsupportedDtypeError(f"matmul: a and b must have one dtype, got {a.dtype} and {b.dtype}")
    if str(a.dtype).removeprefix("torch.") not in profile["dtypes.dot"]:
        raise UnsupportedDtypeError(f"matmul: profile '{profile.name}' has no tl.dot for {a.dtype} "
                                    f"(dtypes.dot in {profile.source})")


def matmul(a: torch.Tensor, b: torch.Tensor, *, profile: Profile,
           input_precision: str | None = None, out: torch.Tensor | None = None,
           accumulate: bool = False) -> torch.Tensor:
    """``a @ b`` for 2-D ``a`` (M x K) and ``b`` (K x N) of one dtype; returns M x N.
    ``input_precision`` of float32 dots: "tf32" or "ieee"; None: tf32 where the profile's
    tensor cores run it (``dtypes.tf32``), else ieee. ``out``: the M x N tensor the
    product is written into and returned (contiguous, of a's dtype or float32, on a's
    device, sharing no memory with a or b); with ``accumulate``, ``out += a @ b``, the
    sum taken in float32 (what a sum of products over chunks of K takes)."""
    return _matmul(a, b, profile, input_precision, False, out, accumulate)


def matmul_tma(a: torch.Tensor, b: torch.Tensor, *, profile: Profile,
               input_precision: str | None = None, out: torch.Tensor | None = None,
               accumulate: bool = False) -> torch.Tensor:
    """:func:`matmul` with the tensor-descriptor kernel at every size where the matrices
    allow it, small products included (:func:`matmul` runs those up to
    ``tuning.matmul.pointer_max_work`` on the pointer kernel, whose launch costs less): the
    variant through which the suites, which draw small products, check that kernel. A
    profile without ``[[autotune.matmul_tma]]`` configs declines it."""
    if not profile.has_autotune_configs("matmul_tma"):
        raise UnsupportedDtypeError(f"matmul_tma: profile '{profile.name}' has no "
                                    f"tensor-descriptor matmul ([[autotune.matmul_tma]] in "
                                    f"{profile.source})")
    return _matmul(a, b, profile, input_precision, True, out, accumulate)


def matmul_k_chunks(a: torch.Tensor, b: torch.Tensor, *, profile: Profile,
                    input_precision: str | None = None) -> torch.Tensor:
    """``a @ b`` as the fused linear cross-entropy makes its weight gradient: A read
    M-major and B K-major (copies of them), the product summed over two chunks of K into a
    float32 ``out`` (the first chunk's written, the second's added in the epilogue,
    :func:`matmul`'s ``accumulate``), returned in a's dtype; through the
    tensor-descriptor kernel at every size where the profile has it (as
    :func:`matmul_tma`), else the pointer kernel: the variant through which the suites
    check ``out``, ``accumulate`` and the transposed layouts."""
    _CHECKS.checked(profile, (input_precision, signature(a, b)), a, _check, a, b,
                    input_precision, profile)
    a_m, b_k = a.t().contiguous().t(), b.t().contiguous().t()
    out = torch.empty((a.shape[0], b.shape[1]), dtype=torch.float32, device=a.device)
    half = a.shape[1] // 2
    _matmul(a_m[:, :half], b_k[:half], profile, input_precision, True, out, False)
    _matmul(a_m[:, half:], b_k[half:], profile, input_precision, True, out, True)
    return out.to(a.dtype)


def _check_out(a, b, out, accumulate: bool) -> None:
    """What ``out`` and ``accumulate`` must be (checked on every call: a view's layout and
    memory are not in the inputs' signature)."""
    if out is None:
        if accumulate:
            raise ValueError("matmul: accumulate=True adds the product into out: pass out")
        return
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"matmul: out must be a tensor, got {type(out).__name__}")
    if out.dtype not in (a.dtype, torch.float32):
        raise UnsupportedDtypeError(f"matmul: out must be {a.dtype} (a's dtype) or "
                                    f"torch.float32, got {out.dtype}")
    if out.shape != (a.shape[0], b.shape[1]):
        raise ShapeMismatchError(f"matmul: out must be M x N = {(a.shape[0], b.shape[1])}, "
                                 f"got {tuple(out.shape)}")
    if out.device != a.device:
        raise WrongDeviceError(f"matmul: out on {out.device}, a on {a.device}")
    if not out.is_contiguous():
        raise ValueError(f"matmul: out must be contiguous, got strides {out.stride()}")
    for name, t in (("a", a), ("b", b)):
        if out.numel() and t.numel() and _overlap(out, t):
            raise ValueError(f"matmul: out shares memory with {name}")


def _overlap(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Whether the bytes ``x`` and ``y`` span overlap (views of one storage included)."""
    def span(t):
        first = t.data_ptr()
        return first, first + t.element_size() * (1 + sum((n - 1) * abs(st) for n, st in
                                                          zip(t.shape, t.stride())))
    (x0, x1), (y0, y1) = span(x), span(y)
    return x0 < y1 and y0 < x1


def _matmul(a: torch.Tensor, b: torch.Tensor, profile: Profile, input_precision,
            any_size: bool, out: torch.Tensor | None, accumulate: bool) -> torch.Tensor:
    try:
        # what the launches depend on besides the profile (the replay key, see Replays);
        # a call into out is not replayed: out's checks look at its memory every call
        key = (input_precision, any_size, a.shape, b.shape, a.stride(), b.stride(), a.dtype,
               b.dtype, a.device, b.device) if out is None else None
        c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device) \
            if out is None else out
        a_op, b_op, copies = _k_major_operands(a, b, profile, input_precision)
    except (AttributeError, IndexError, TypeError):
        key, tensors = None, ()  # not 2-D tensors: the checks say what is wrong
    else:
        # a_op and b_op are a and b where no copy is made: only the tensors made here
        # are added, so that a tensor in two places means a is b (see Replays)
        tensors = (a, b, c, *[t for t in (a_op, b_op, *[t for pair in copies for t in pair])
                              if t is not a and t is not b])
        if key is not None and _REPLAYS.replay(profile, key, tensors):
            return c
    _CHECKS.checked(profile, (input_precision, signature(a, b)), a, _check, a, b,
                    input_precision, profile)
    _check_out(a, b, out, accumulate)
    M, K = a.shape
    N = b.shape[1]
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c if accumulate else c.zero_()
    with _REPLAYS.record(profile, key, tensors):
        _launch_matmul(a_op, b_op, c, copies, profile, input_precision, any_size, accumulate)
    return c


def _tf32(a: torch.Tensor, profile: Profile, input_precision) -> bool:
    """Whether a float32 product runs as tf32 (None: where the profile's tensor cores do)."""
    if a.dtype != torch.float32:
        return False
    return input_precision == "tf32" or (input_precision is None and bool(profile["dtypes.tf32"]))


def _k_major_operands(a: torch.Tensor, b: torch.Tensor, profile: Profile, input_precision):
    """(A and B as the kernel takes them, the (source, destination) pairs of the K-major
    copies that make them): the target's tf32 dots read both operands K-major from shared
    memory; one that is not gets its copy there transposed a 4-byte element at a time, in
    every tile, for the whole product: a K-major copy first costs one pass over it. The
    buffers and views are made before the launches, so that a replayed call has its own."""
    if not (_tf32(a, profile, input_precision) and profile.tf32_k_major):
        return a, b, ()
    copies = []
    if a.stride(1) != 1:
        copies.append((a, torch.empty(a.shape, dtype=a.dtype, device=a.device)))
        a = copies[-1][1]
    if b.stride(0) != 1:
        copies.append((b.t(), torch.empty(b.shape[::-1], dtype=b.dtype, device=b.device)))
        b = copies[-1][1].t()
    return a, b, tuple(copies)


def _launch_matmul(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, copies: tuple,
                   profile: Profile, input_precision, any_size: bool, accumulate: bool) -> None:
    M, K = a.shape
    N = b.shape[1]
    fp32_tf32 = _tf32(a, profile, input_precision)
    precision = "tf32" if fp32_tf32 else "ieee"
    for source, destination in copies:
        _contiguous(source, profile, destination)
    layout = _tma_layout(a, b, c, profile, fp32_tf32, accumulate, any_size)
    if layout is not None:
        _matmul_tma(a, b, c, layout, accumulate, precision, profile)
        return
    grid = lambda META: (profile.capped_grid(_tiles(META)),)  # noqa: E731
    buckets = (next_power_of_2(M), next_power_of_2(N), next_power_of_2(K))
    k_contiguous = 2 * (a.stride(1) == 1) + (b.stride(0) == 1)
    tuned_launch(_autotuner(profile, tma=False, accumulate=accumulate), grid,
                 (a, b, c, M, N, K, *buckets, k_contiguous,
                  a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1)),
                 {"INPUT_PRECISION": precision, "SELECT_LOADS": profile.select_loads,
                  "ACCUMULATE": accumulate},
                 (*buckets, k_contiguous, precision, a.dtype, c.dtype))
