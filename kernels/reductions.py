"""Max and product reductions: over the whole tensor, and along the last dim.

max_all (two-stage): a capped grid of programs each walks a grid-stride range of blocks,
keeping an elementwise running max, reduces it once and writes one partial per program; a
second launch of the same kernel with one program reduces the partials. No atomics, so it
runs for every dtype and is deterministic.

max_all_atomic: one launch. Programs fold their result into a single accumulator with
``tl.atomic_max``; when the tensor fits one tile per program (the ONE_TILE_PER_CTA
heuristic) the kernel has no loop at all. fp16/bf16 are accumulated in a float32 buffer
(exact: max only selects) because compilers reject fp16/bf16 atomic_max; the profile must
list the accumulator dtype under ``atomics.max``. The accumulator is not autotuned: an
autotuner would reset it to 0 between configs, and max needs it at -inf.

NaN: torch.max returns NaN when the input holds one (and max(dim) its first index).
``tl.max`` and maxnum-style instructions drop NaN, so the running max is an explicit
compare-and-select that keeps a NaN once seen. Triton lowers float atomic_max to integer
atomics split on the sign bit, which loses negative NaNs, so the atomic variant raises a
separate int32 NaN flag and the launcher writes NaN where it is set.

max_dim returns (values, first index of the max) along the last dim, as torch.max(x, -1).
Each program of the rows kernel walks BLOCK_M rows in steps of BLOCK_N columns
(``reductions_tuning.row_reduction_tile``), keeping a running max and the step it came
from per lane, and ends with one tl.reduce over (value, index) pairs; a row that fits one
step is reduced at once. Few rows longer than MAX_FUSED_SIZE are split into chunks so that
short-and-wide inputs still fill the device: stage 1 writes one (value, index) partial per
(row, chunk), stage 2 reduces each row's partials. Both kernels use a 1-D grid with
grid-stride loops, so no axis ever sees M beyond its limit.

prod_all / prod_dim: the same shapes of work with a multiply. Blocks multiply elementwise
into a running product and finish with ``tl.reduce`` and a multiply combine_fn, which
Triton lowers as a binary tree (log2(BLOCK) dependent multiplies instead of BLOCK: shorter
dependency chains pipeline better). Products accumulate in float64 where the profile's
target has it (``dtypes.supported``), else in float32, and partials are kept in that
precision between stages: float32 multiplies of values near 1 round with a bias (about
-5e-10 relative a multiply), so a float32 tree of 2^26 factors near 1 erred more than
torch's float32 prod (benchmarks/results/h100.jsonl, experiment "comments"). The kernels
are bound by memory: one float64 multiply per float32 element read at the profile's
``peak.memory_bandwidth_gbs`` is about 1% of its ``peak.dense_tflops.float64`` on
nvidia-sm90.

On select-load profiles (SIMD NPUs) masked-off lanes still read memory, so the kernels
clamp offsets to a valid element and select the neutral value (-inf / dtype min for max,
1 for prod) in those lanes instead of using masked loads.
"""
import math

import torch
import triton
import triton.language as tl

from triton_cts.execution.input_checks import UnsupportedDtypeError, check_inputs
from triton_cts.profiles import Profile, cdiv, next_power_of_2
from .fast_launch import PassedChecks, PlannedLaunch, Replays, launch, launch_plan, signature
from .reductions_tuning import reduction_grid, row_reduction_tile
from .row_align import aligned, row_align

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
MAX_DTYPES = FLOATS + (torch.int32, torch.int64)
PROD_DTYPES = FLOATS

#: Index that loses every tie: masked-off lanes and empty accumulators carry it.
IDX_SENTINEL = tl.constexpr(2**63 - 1)


def _lowest(dtype: torch.dtype):
    """The identity of max for ``dtype``: -inf for floats, the most negative integer."""
    return float("-inf") if dtype.is_floating_point else torch.iinfo(dtype).min


# --------------------------------------------------------------------------------------
# Combine functions (tl.reduce lowers them as a binary tree over the reduced axis).
# --------------------------------------------------------------------------------------
@triton.jit
def _max_nan_combine(a, b):
    # a wins if larger or NaN: once a NaN enters, it stays (x > NaN is False)
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def _argmax_combine(va, ia, vb, ib):
    # Order: NaN above everything, then by value; equal values (NaN == NaN here) go to
    # the smaller index, as torch returns the first occurrence.
    a_nan = va != va
    b_nan = vb != vb
    a_wins = (va > vb) | (a_nan & ~b_nan)
    tie = (va == vb) | (a_nan & b_nan)
    take_a = a_wins | (tie & (ia < ib))
    return tl.where(take_a, va, vb), tl.where(take_a, ia, ib)


@triton.jit
def _to_output(res, OUT):
    """A float64 product in OUT's dtype through float32 where OUT is narrower: Triton's
    interpreter gets float64 -> bfloat16 wrong, and torch rounds a float32 product too."""
    if OUT.dtype.element_ty == tl.float64:
        return res.to(tl.float64)
    else:
        return res.to(tl.float32).to(OUT.dtype.element_ty)


@triton.jit
def _mul_combine(a, b):
    return a * b


@triton.jit
def _load_block(X, offs, n, OTHER, SELECT_LOADS: tl.constexpr):
    """X[offs] where offs < n, OTHER elsewhere (select-load targets read X[n - 1] there)."""
    mask = offs < n
    if SELECT_LOADS:
        x = tl.load(X + tl.minimum(offs, n - 1))
    else:
        x = tl.load(X + offs, mask=mask, other=OTHER)
    return tl.where(mask, x, OTHER)


# --------------------------------------------------------------------------------------
# max over the whole tensor
# --------------------------------------------------------------------------------------
@triton.jit
def _max_all_kernel(
    X,                            # pointer to the input (or stage-1 partials), contiguous
    OUT,                          # pointer to one value per program
    n_elements,                   # number of elements in X
    LOWEST: tl.constexpr,         # identity of max in the compute dtype (-inf / int min)
    BLOCK_SIZE: tl.constexpr,     # elements per loop step
    HALF_TO_FP32: tl.constexpr,   # fp16/bf16 are compared in float32
    SELECT_LOADS: tl.constexpr,   # masked-off lanes must read a valid address
):
    pid = tl.program_id(0).to(tl.int64)
    acc = tl.full([BLOCK_SIZE], LOWEST, tl.float32 if HALF_TO_FP32 else X.dtype.element_ty)
    for block in range(pid, tl.cdiv(n_elements, BLOCK_SIZE), tl.num_programs(0)):
        offs = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        x = _load_block(X, offs, n_elements, LOWEST, SELECT_LOADS)
        acc = _max_nan_combine(x.to(acc.dtype), acc)
    res = tl.reduce(acc, 0, _max_nan_combine)
    tl.store(OUT + pid, res.to(OUT.dtype.element_ty))


@triton.heuristics(values={
    # every program gets at most one tile: straight-line code, no loop
    "ONE_TILE_PER_CTA": lambda args: args["n_elements"] <= args["BLOCK_SIZE"] * args["n_programs"],
})
@triton.jit
def _max_all_atomic_kernel(
    X,                            # pointer to the input, contiguous
    OUT,                          # pointer to the 1-element accumulator, pre-filled with LOWEST
    NAN_FLAG,                     # pointer to an int32 set to 1 by any program that saw a NaN
    n_elements,                   # number of elements in X
    n_programs,                   # programs launched (the heuristic compares against it)
    LOWEST: tl.constexpr,         # identity of max in the compute dtype
    BLOCK_SIZE: tl.constexpr,     # elements per tile
    HALF_TO_FP32: tl.constexpr,   # fp16/bf16 are compared in float32
    IS_FLOAT: tl.constexpr,       # integers cannot hold NaN: no flag
    SELECT_LOADS: tl.constexpr,   # masked-off lanes must read a valid address
    ONE_TILE_PER_CTA: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    if ONE_TILE_PER_CTA:
        offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        acc = _load_block(X, offs, n_elements, LOWEST, SELECT_LOADS)
        acc = acc.to(tl.float32 if HALF_TO_FP32 else acc.dtype)
    else:
        acc = tl.full([BLOCK_SIZE], LOWEST, tl.float32 if HALF_TO_FP32 else X.dtype.element_ty)
        for block in range(pid, tl.cdiv(n_elements, BLOCK_SIZE), tl.num_programs(0)):
            offs = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
            x = _load_block(X, offs, n_elements, LOWEST, SELECT_LOADS)
            acc = _max_nan_combine(x.to(acc.dtype), acc)
    res = tl.reduce(acc, 0, _max_nan_combine).to(OUT.dtype.element_ty)
    if IS_FLOAT:
        is_nan = res != res
        tl.atomic_max(NAN_FLAG, 1, mask=is_nan)
        tl.atomic_max(OUT, res, mask=~is_nan)
    else:
        tl.atomic_max(OUT, res)


# --------------------------------------------------------------------------------------
# max along the last dim: (values, indices)
# --------------------------------------------------------------------------------------
@triton.jit
def _row_tile(X, rows, cols, M, N, stride_xm, OTHER, SELECT_LOADS: tl.constexpr):
    """The [rows, cols] tile of X, OTHER where outside [M, N]."""
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    if SELECT_LOADS:
        x = tl.load(X + tl.minimum(rows, M - 1)[:, None] * stride_xm
                    + tl.minimum(cols, N - 1)[None, :])
        return tl.where(mask, x, OTHER)
    return tl.load(X + rows[:, None] * stride_xm + cols[None, :], mask=mask, other=OTHER)


@triton.jit
def _max_dim_rows_kernel(
    X,                            # pointer to the [M, N] input, unit column stride
    VALUES,                       # pointer to the [M] maxima, input dtype
    INDICES,                      # pointer to the [M] int64 indices
    M, N,                         # rows and row length (N < 2**31)
    stride_xm,                    # elements between rows of X
    LOWEST: tl.constexpr,         # identity of max in the compute dtype
    BLOCK_M: tl.constexpr,        # rows per program and loop step
    BLOCK_N: tl.constexpr,        # columns per loop step
    ONE_STEP: tl.constexpr,       # BLOCK_N >= N: a row in one block, no column loop
    HALF_TO_FP32: tl.constexpr,   # fp16/bf16 are compared in float32
    SELECT_LOADS: tl.constexpr,   # masked-off lanes must read a valid address
    ROW_ALIGN: tl.constexpr,      # a power of two dividing N and stride_xm (kernels/row_align.py)
):
    pid = tl.program_id(0).to(tl.int64)
    N = aligned(N, ROW_ALIGN)
    stride_xm = aligned(stride_xm, ROW_ALIGN)
    lanes = tl.arange(0, BLOCK_N)
    # masked-off lanes keep their (>= N) index: they lose every tie to a real element
    lane_idx = tl.broadcast_to(lanes[None, :], (BLOCK_M, BLOCK_N))
    for row_block in range(pid, tl.cdiv(M, BLOCK_M), tl.num_programs(0)):
        rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
        if ONE_STEP:
            best = _row_tile(X, rows, lanes, M, N, stride_xm, LOWEST, SELECT_LOADS)
            best = best.to(tl.float32 if HALF_TO_FP32 else best.dtype)
            best_idx = lane_idx
        else:
            # A running max per lane and the step it came from, starting at step 0: a row
            # of LOWEST values resolves to its first index. A lane sees its columns in
            # increasing order, so it keeps its max unless the new value is larger or a
            # first NaN (three operations an element: this loop sets max_dim's pace).
            best = tl.full([BLOCK_M, BLOCK_N], LOWEST,
                           tl.float32 if HALF_TO_FP32 else X.dtype.element_ty)
            best_start = tl.zeros([BLOCK_M, BLOCK_N], tl.int32)
            for start in range(0, N, BLOCK_N):
                x = _row_tile(X, rows, start + lanes, M, N, stride_xm, LOWEST, SELECT_LOADS)
                x = x.to(best.dtype)
                keep = (best >= x) | (best != best)
                best = tl.where(keep, best, x)
                best_start = tl.where(keep, best_start, start)
            best_idx = best_start + lane_idx
        val, arg = tl.reduce((best, best_idx), 1, _argmax_combine)
        tl.store(VALUES + rows, val.to(VALUES.dtype.element_ty), mask=rows < M)
        tl.store(INDICES + rows, arg.to(tl.int64), mask=rows < M)


@triton.jit
def _max_dim_chunks_kernel(
    X,                            # pointer to the [M, N] input (stage 1) or partial values (stage 2)
    X_IDX,                        # pointer to [M, N] int64 indices matching X (stage 2 only)
    VALUES,                       # pointer to [M, n_chunks] maxima, one per (row, chunk)
    INDICES,                      # pointer to [M, n_chunks] int64 indices
    M, N,                         # rows and row length of X
    stride_xm,                    # elements between rows of X (and of X_IDX)
    n_chunks,                     # chunks per row
    chunk_size,                   # columns per chunk (the last one may be shorter)
    LOWEST: tl.constexpr,         # identity of max in the compute dtype
    BLOCK_N: tl.constexpr,        # columns per loop step
    HAS_X_IDX: tl.constexpr,      # indices come from X_IDX instead of column numbers
    HALF_TO_FP32: tl.constexpr,   # fp16/bf16 are compared in float32
    SELECT_LOADS: tl.constexpr,   # masked-off lanes must read a valid address
):
    pid = tl.program_id(0).to(tl.int64)
    for tile in range(pid, M * n_chunks, tl.num_programs(0)):
        row = tile // n_chunks
        start = (tile - row * n_chunks) * chunk_size
        end = tl.minimum(start + chunk_size, N)
        best = tl.full([BLOCK_N], LOWEST, tl.float32 if HALF_TO_FP32 else X.dtype.element_ty)
        best_idx = tl.full([BLOCK_N], IDX_SENTINEL, tl.int64)
        for col in range(start, end, BLOCK_N):
            cols = col + tl.arange(0, BLOCK_N)
            x = _load_block(X + row * stride_xm, cols, end, LOWEST, SELECT_LOADS)
            if HAS_X_IDX:
                i = _load_block(X_IDX + row * stride_xm, cols, end, IDX_SENTINEL, SELECT_LOADS)
            else:
                i = tl.where(cols < end, cols.to(tl.int64), IDX_SENTINEL)
            best, best_idx = _argmax_combine(best, best_idx, x.to(best.dtype), i)
        val, arg = tl.reduce((best, best_idx), 0, _argmax_combine)
        tl.store(VALUES + tile, val.to(VALUES.dtype.element_ty))
        tl.store(INDICES + tile, arg)


# --------------------------------------------------------------------------------------
# product over the whole tensor and along the last dim
# --------------------------------------------------------------------------------------
@triton.jit
def _prod_all_kernel(
    X,                            # pointer to the input (or stage-1 partials), contiguous
    OUT,                          # pointer to one product per program
    n_elements,                   # number of elements in X
    BLOCK_SIZE: tl.constexpr,     # elements per loop step
    COMPUTE_FP64: tl.constexpr,   # multiply in float64 (the target has it), else float32
    SELECT_LOADS: tl.constexpr,   # masked-off lanes must read a valid address
):
    pid = tl.program_id(0).to(tl.int64)
    acc = tl.full([BLOCK_SIZE], 1.0, tl.float64 if COMPUTE_FP64 else tl.float32)
    for block in range(pid, tl.cdiv(n_elements, BLOCK_SIZE), tl.num_programs(0)):
        offs = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        acc = acc * _load_block(X, offs, n_elements, 1.0, SELECT_LOADS).to(acc.dtype)
    res = tl.reduce(acc, 0, _mul_combine)
    tl.store(OUT + pid, _to_output(res, OUT))


@triton.jit
def _prod_dim_rows_kernel(
    X,                            # pointer to the [M, N] input, unit column stride
    OUT,                          # pointer to the [M] products
    M, N,                         # rows and row length
    stride_xm,                    # elements between rows of X
    BLOCK_M: tl.constexpr,        # rows per program and loop step
    BLOCK_N: tl.constexpr,        # columns per loop step
    ONE_STEP: tl.constexpr,       # BLOCK_N >= N: a row in one block, no column loop
    COMPUTE_FP64: tl.constexpr,   # multiply in float64 (the target has it), else float32
    SELECT_LOADS: tl.constexpr,   # masked-off lanes must read a valid address
    ROW_ALIGN: tl.constexpr,      # a power of two dividing N and stride_xm (kernels/row_align.py)
):
    pid = tl.program_id(0).to(tl.int64)
    N = aligned(N, ROW_ALIGN)
    stride_xm = aligned(stride_xm, ROW_ALIGN)
    lanes = tl.arange(0, BLOCK_N)
    acc_dtype = tl.float64 if COMPUTE_FP64 else tl.float32
    for row_block in range(pid, tl.cdiv(M, BLOCK_M), tl.num_programs(0)):
        rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
        if ONE_STEP:
            acc = _row_tile(X, rows, lanes, M, N, stride_xm, 1.0, SELECT_LOADS).to(acc_dtype)
        else:
            acc = tl.full([BLOCK_M, BLOCK_N], 1.0, acc_dtype)
            for start in range(0, N, BLOCK_N):
                x = _row_tile(X, rows, start + lanes, M, N, stride_xm, 1.0, SELECT_LOADS)
                acc = acc * x.to(acc_dtype)
        res = tl.reduce(acc, 1, _mul_combine)
        tl.store(OUT + rows, _to_output(res, OUT), mask=rows < M)


@triton.jit
def _prod_dim_chunks_kernel(
    X,                            # pointer to the [M, N] input (stage 1) or partials (stage 2)
    OUT,                          # pointer to [M, n_chunks] products, one per (row, chunk)
    M, N,                         # rows and row length of X
    stride_xm,                    # elements between rows of X
    n_chunks,                     # chunks per row
    chunk_size,                   # columns per chunk (the last one may be shorter)
    BLOCK_N: tl.constexpr,        # columns per loop step
    COMPUTE_FP64: tl.constexpr,   # multiply in float64 (the target has it), else float32
    SELECT_LOADS: tl.constexpr,   # masked-off lanes must read a valid address
):
    pid = tl.program_id(0).to(tl.int64)
    for tile in range(pid, M * n_chunks, tl.num_programs(0)):
        row = tile // n_chunks
        start = (tile - row * n_chunks) * chunk_size
        end = tl.minimum(start + chunk_size, N)
        acc = tl.full([BLOCK_N], 1.0, tl.float64 if COMPUTE_FP64 else tl.float32)
        for col in range(start, end, BLOCK_N):
            cols = col + tl.arange(0, BLOCK_N)
            acc = acc * _load_block(X + row * stride_xm, cols, end, 1.0,
                                    SELECT_LOADS).to(acc.dtype)
        res = tl.reduce(acc, 0, _mul_combine)
        tl.store(OUT + tile, _to_output(res, OUT))


# --------------------------------------------------------------------------------------
# Launchers
# --------------------------------------------------------------------------------------
def _as_rows(x: torch.Tensor) -> tuple[torch.Tensor, tuple[int, ...]]:
    """``x`` as [M, N] with unit column stride (N = last dim), and the output shape."""
    if x.dim() == 0:
        return x.reshape(1, 1), ()
    x2 = x.reshape(-1, x.shape[-1])
    if x2.stride(1) != 1:  # rows may be strided, columns must be unit-stride
        x2 = x2.contiguous()
    return x2, tuple(x.shape[:-1])


def _split_rows(profile: Profile, dtype: torch.dtype, M: int, N: int) -> tuple[int, int, int]:
    """(BLOCK_N, n_chunks, chunk_size) for rows too long for one block: enough chunks that
    every compute unit gets a program even when there are few rows."""
    block_n = min(profile.elementwise_block(dtype, N), profile.max_fused_elements(dtype))
    blocks_per_row = cdiv(N, block_n)
    n_chunks = min(blocks_per_row, max(1, cdiv(profile.compute_units, M)))
    blocks_per_chunk = cdiv(blocks_per_row, n_chunks)
    n_chunks = cdiv(blocks_per_row, blocks_per_chunk)
    return block_n, n_chunks, blocks_per_chunk * block_n


def _constants(profile: Profile, op: str, dtype: torch.dtype) -> tuple[dict, torch.dtype]:
    """(the constexprs every launch of ``op`` ("max" or "prod") takes, the dtype of its
    partials)."""
    if op == "max":
        # partials stay in x's dtype, which is exact for max
        return dict(LOWEST=_lowest(dtype), HALF_TO_FP32=dtype in (torch.float16, torch.bfloat16),
                    SELECT_LOADS=profile.select_loads), dtype
    fp64 = _multiply_in_float64(dtype, profile)
    return (dict(COMPUTE_FP64=fp64, SELECT_LOADS=profile.select_loads),
            torch.float64 if fp64 else torch.float32)


@launch_plan
def _all_plan(profile: Profile, op: str, n: int, dtype: torch.dtype) -> tuple:
    """(programs, partials' dtype, stage-1 constexprs and num_warps, stage-2 ones) of
    max_all or prod_all over ``n`` elements: stage 1 gives one partial per program, and
    one program folds them when there are several."""
    constants, partial_dtype = _constants(profile, op, dtype)
    block = profile.elementwise_block(dtype, n)
    # a few programs per compute unit, not one a block (a lone second stage was slow)
    # measured: benchmarks/results/h100.jsonl, experiment "comments"
    grid = reduction_grid(profile, cdiv(n, block), dtype)
    block2 = profile.elementwise_block(partial_dtype, grid)
    return (grid, partial_dtype,
            dict(constants, BLOCK_SIZE=block, num_warps=profile.num_warps_for(block)),
            dict(constants, BLOCK_SIZE=block2, num_warps=profile.num_warps_for(block2)))


@launch_plan
def _dim_plan(profile: Profile, op: str, M: int, N: int, stride: int,
              dtype: torch.dtype) -> tuple:
    """(n_chunks, chunk_size, partials' dtype, the first launch, the second or None) of
    max_dim or prod_dim over [M, N] with ``stride`` elements between rows: n_chunks 0
    where rows are at most MAX_FUSED_SIZE or many (one launch of the rows kernel); else
    the chunks kernel, and with several chunks a row, the same kernel over each row's
    partials. The launches are planned: a call hashes no constexprs."""
    rows_kernel, chunks_kernel = _DIM_KERNELS[op]
    constants, partial_dtype = _constants(profile, op, dtype)
    block_n, n_chunks, chunk_size = _split_rows(profile, dtype, M, N)
    # rows past MAX_FUSED_SIZE take the rows kernel too where there are enough of them to
    # fill the device (one chunk a row); its int32 column indices need N < 2**31
    if N <= profile.max_fused_elements(dtype) or (n_chunks == 1 and N < 2**31):
        if op == "prod" and 3 * N > 2 * next_power_of_2(N) \
                and N <= profile.max_fused_elements(dtype):
            # a row in one power-of-two block (short rows stacked up to an elementwise
            # block), where that leaves under a third of its lanes masked: no running
            # product, and more loads in flight a thread than a walk in steps
            block_n = next_power_of_2(N)
            block_m = max(1, min(next_power_of_2(M), profile.elementwise_block(dtype) // block_n))
        else:
            # a walk along the rows in steps (the profile's row-reduction tile): max's
            # (value, index) compare costs more a lane than its load, and a whole row in
            # one next_power_of_2(N) block left up to half its lanes masked (4104 columns:
            # 8192) and held 16 warps a row
            block_m, block_n = row_reduction_tile(profile, M, N, dtype)
        return 0, 0, partial_dtype, PlannedLaunch(
            rows_kernel, (profile.capped_grid(cdiv(M, block_m)),), **constants,
            BLOCK_M=block_m, BLOCK_N=block_n, ONE_STEP=block_n >= N,
            ROW_ALIGN=row_align(math.gcd(N, stride), profile.vector_elements(dtype)),
            num_warps=profile.num_warps_for(block_m * block_n)), None
    # few long rows: stage 1 reduces (row, chunk) tiles to partials, stage 2 each row's
    # partials
    # max: stage 2 also loads the int64 indices, the wider load
    block_c = profile.elementwise_block(torch.int64 if op == "max" else partial_dtype, n_chunks)
    # max's chunks kernel takes x's column indices, or (second launch) the partials' own
    idx = ({"HAS_X_IDX": False}, {"HAS_X_IDX": True}) if op == "max" else ({}, {})
    return (n_chunks, chunk_size, partial_dtype,
            PlannedLaunch(chunks_kernel, (profile.capped_grid(M * n_chunks),), **constants,
                          **idx[0], BLOCK_N=block_n, num_warps=profile.num_warps_for(block_n)),
            PlannedLaunch(chunks_kernel, (profile.capped_grid(M),), **constants, **idx[1],
                          BLOCK_N=block_c, num_warps=profile.num_warps_for(block_c)))


@launch_plan
def _max_atomic_plan(profile: Profile, n: int, dtype: torch.dtype) -> tuple:
    """(programs, constexprs and num_warps) of :func:`max_all_atomic` (LOWEST, -inf for
    every float, is also the identity of the float32 accumulator of fp16/bf16)."""
    block = profile.elementwise_block(dtype, n)
    return profile.capped_grid(cdiv(n, block)), dict(
        _constants(profile, "max", dtype)[0], BLOCK_SIZE=block,
        IS_FLOAT=dtype.is_floating_point, num_warps=profile.num_warps_for(block))


def max_all(x: torch.Tensor, *, profile: Profile) -> torch.Tensor:
    """Maximum of every element of ``x`` (0-d tensor of x's dtype); NaN if any is NaN."""
    check_inputs("max_all", profile, MAX_DTYPES, x=x)
    if x.numel() == 0:
        raise RuntimeError("max_all: the max of an empty tensor is undefined (torch.max raises too)")
    x = x.contiguous()  # the kernel takes a pointer and a count: no flat view is made
    n = x.numel()
    grid, partial_dtype, meta, meta2 = _all_plan(profile, "max", n, x.dtype)
    out = torch.empty((), dtype=x.dtype, device=x.device)
    # stage 1: one partial per program (the result itself when one program suffices)
    partials = out if grid == 1 else torch.empty(grid, dtype=partial_dtype, device=x.device)
    launch(_max_all_kernel, (grid,), x, partials, n, **meta)
    if grid > 1:
        # stage 2: one program folds the partials
        launch(_max_all_kernel, (1,), partials, out, grid, **meta2)
    return out


def max_all_atomic(x: torch.Tensor, *, profile: Profile) -> torch.Tensor:
    """``max_all`` in one launch: programs combine their maxima with ``tl.atomic_max``."""
    check_inputs("max_all_atomic", profile, MAX_DTYPES, x=x)
    if x.numel() == 0:
        raise RuntimeError("max_all_atomic: the max of an empty tensor is undefined (torch.max raises too)")
    half = x.dtype in (torch.float16, torch.bfloat16)
    acc_dtype = torch.float32 if half else x.dtype
    if not profile.supports_atomic("max", acc_dtype):
        raise UnsupportedDtypeError(
            f"max_all_atomic: needs atomic_max on {str(acc_dtype).removeprefix('torch.')} "
            f"(accumulator for {str(x.dtype).removeprefix('torch.')} inputs), which profile "
            f"'{profile.name}' does not list (atomics.max in {profile.source})")
    is_float = x.dtype.is_floating_point
    if is_float and not profile.supports_atomic("max", torch.int32):
        raise UnsupportedDtypeError(
            f"max_all_atomic: needs atomic_max on int32 for its NaN flag, which profile "
            f"'{profile.name}' does not list (atomics.max in {profile.source})")
    x = x.contiguous()
    n = x.numel()
    acc = torch.full((), _lowest(acc_dtype), dtype=acc_dtype, device=x.device)
    nan_flag = torch.zeros((), dtype=torch.int32, device=x.device)
    grid, meta = _max_atomic_plan(profile, n, x.dtype)
    launch(_max_all_atomic_kernel, (grid,), x, acc, nan_flag, n, grid, **meta)
    if is_float:
        acc = torch.where(nan_flag.bool(), torch.full_like(acc, float("nan")), acc)
    return acc.to(x.dtype)


#: Inputs that passed max_dim's or prod_dim's checks (per profile, op and signature), and
#: their one-launch calls on inputs of one layout, replayed
_DIM_CHECKS, _REPLAYS = PassedChecks(), Replays()


def _check_dim(op: str, x: torch.Tensor, profile: Profile) -> None:
    check_inputs(op, profile, MAX_DTYPES if op == "max_dim" else PROD_DTYPES, x=x)
    if op == "max_dim" and x.dim() > 0 and x.shape[-1] == 0:
        raise IndexError("max_dim: the last dim has size 0; the max of an empty row is "
                         "undefined (torch.max raises too)")


def max_dim(x: torch.Tensor, *, profile: Profile) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, indices) of the max along the last dim, like ``torch.max(x, dim=-1)``:
    NaN wins, ties go to the first index."""
    _DIM_CHECKS.checked(profile, ("max_dim", signature(x)), x, _check_dim, "max_dim", x,
                        profile)
    x2, out_shape = _as_rows(x)
    M, N = x2.shape
    # allocated in the output shape: the kernels take pointers
    values = torch.empty(out_shape, dtype=x.dtype, device=x.device)
    indices = torch.empty(out_shape, dtype=torch.int64, device=x.device)
    if M == 0:
        return values, indices
    key = ("max", x2.shape, x2.stride(), x.dtype, x.device)
    if _REPLAYS.replay(profile, key, (x2, values, indices)):
        return values, indices
    n_chunks, chunk_size, partial_dtype, first, second = _dim_plan(
        profile, "max", M, N, x2.stride(0), x.dtype)
    if not n_chunks:
        with _REPLAYS.record(profile, key, (x2, values, indices)):
            first(x2, values, indices, M, N, x2.stride(0))
        return values, indices
    part_v, part_i = (values, indices) if n_chunks == 1 else (
        torch.empty((M, n_chunks), dtype=partial_dtype, device=x.device),
        torch.empty((M, n_chunks), dtype=torch.int64, device=x.device))
    first(x2, x2, part_v, part_i, M, N, x2.stride(0), n_chunks, chunk_size)
    if n_chunks > 1:
        second(part_v, part_i, values, indices, M, n_chunks, n_chunks, 1, n_chunks)
    return values, indices


def _multiply_in_float64(dtype: torch.dtype, profile: Profile) -> bool:
    """Products accumulate in float64 on targets with float64 (see the module docstring)."""
    return dtype == torch.float64 or profile.supports_dtype(torch.float64)


def prod_all(x: torch.Tensor, *, profile: Profile) -> torch.Tensor:
    """Product of every element of ``x`` (0-d tensor of x's dtype); 1 for an empty tensor."""
    check_inputs("prod_all", profile, PROD_DTYPES, x=x)
    out = torch.ones((), dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    x = x.contiguous()
    n = x.numel()
    grid, acc_dtype, meta, meta2 = _all_plan(profile, "prod", n, x.dtype)
    # stage 1: one partial product per program, kept in the accumulation dtype
    partials = out if grid == 1 else torch.empty(grid, dtype=acc_dtype, device=x.device)
    launch(_prod_all_kernel, (grid,), x, partials, n, **meta)
    if grid > 1:
        launch(_prod_all_kernel, (1,), partials, out, grid, **meta2)
    return out


def prod_dim(x: torch.Tensor, *, profile: Profile) -> torch.Tensor:
    """Product along the last dim (``torch.prod(x, dim=-1)``); 1 for rows of length 0."""
    _DIM_CHECKS.checked(profile, ("prod_dim", signature(x)), x, _check_dim, "prod_dim", x,
                        profile)
    if x.dim() > 0 and x.shape[-1] == 0:
        return torch.ones(x.shape[:-1], dtype=x.dtype, device=x.device)
    x2, out_shape = _as_rows(x)
    M, N = x2.shape
    out = torch.empty(out_shape, dtype=x.dtype, device=x.device)
    if M == 0:
        return out
    key = ("prod", x2.shape, x2.stride(), x.dtype, x.device)
    if _REPLAYS.replay(profile, key, (x2, out)):
        return out
    n_chunks, chunk_size, acc_dtype, first, second = _dim_plan(
        profile, "prod", M, N, x2.stride(0), x.dtype)
    if not n_chunks:
        with _REPLAYS.record(profile, key, (x2, out)):
            first(x2, out, M, N, x2.stride(0))
        return out
    partials = out if n_chunks == 1 else torch.empty((M, n_chunks), dtype=acc_dtype, device=x.device)
    first(x2, partials, M, N, x2.stride(0), n_chunks, chunk_size)
    if n_chunks > 1:
        second(partials, out, M, n_chunks, n_chunks, 1, n_chunks)
    return out


#: Each per-row reduction's kernels: (rows kernel, chunks kernel)
_DIM_KERNELS = {"max": (_max_dim_rows_kernel, _max_dim_chunks_kernel),
                "prod": (_prod_dim_rows_kernel, _prod_dim_chunks_kernel)}
