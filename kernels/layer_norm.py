"""Layer norm and RMS norm over the last dimension: forward and three backward strategies.

    x'   = dropout(x * rowscale) + residual        (each piece optional)
    y    = (x' - mean) * rstd * weight + bias      rstd = 1 / sqrt(var(x') + eps)
    y    = x' * rstd * weight (+ bias)             RMS mode: rstd = 1 / sqrt(mean(x'^2) + eps)

Forward. When a row fits the profile's fused tile (N <= MAX_FUSED_SIZE counted in float32
elements, the dtype a held row has in registers), one kernel reads each element once: a
program holds a [BLOCK_M, BLOCK_N] tile, a whole row per tile row, with BLOCK_M > 1 when N
is small so that short rows still fill a program. It centres twice: x - mean0 is exact
when |mean| >> std, and mean(d) restores what rounding mean0 lost. Longer rows take the
tiled kernel, which walks column tiles twice: the sums of d = x - shift and d^2, the shift
being the mean of the row's first tile, then the normalization (the second pass re-reads
the row from cache). Neither E[x^2] - E[x]^2 cancellation nor the float32 rounding of a
large mean reaches y. Every N runs. Options follow FlashAttention's Triton layer norm:
rowscale, then dropout, then the residual add (prenorm: x' is returned as residual_out);
mean and rstd are saved
(float32, float64 for float64 inputs). Dropout draws tl.rand(seed, row * N + col): the
Philox counter is the element's index, so the mask depends only on (seed, shape) and not
on the tiling, the grid or the strategy.

Backward, with x the tensor that was normalized (x' above: the forward's residual_out
when a residual, rowscale or dropout was used):

    xhat = (x - mean) * rstd,   g = dy * weight
    dx'  = rstd * (g - xhat * mean(g * xhat) - mean(g))        (RMS: no mean(g) term)
    dweight = sum over rows of dy * xhat,   dbias = sum over rows of dy

(x - mean also loses its row mean, which undoes the rounding of a saved float32 mean).
dx' (plus the incoming gradient of residual_out, if any) is the residual's gradient; the
input's is dx' * keep / (1 - p) * rowscale. dweight and dbias reduce over rows while dx
reduces over columns, so the strategies differ in how the row sums are combined:

- atomic: one fused kernel, each program adds its dweight/dbias partials into float32
  buffers (float64 for float64 inputs) with tl.atomic_add: fast, but the order of the
  additions, hence the last bits, changes from run to run. Rows per program is autotuned,
  so the buffers are in the autotuner's reset_to_zero: it runs every config on the
  caller's buffers.
- partial: the same fused kernel writes one row of partials per program, at most the
  profile's partials_per_compute_unit programs per compute unit; a second kernel sums the
  rows in a fixed order. Bitwise
  reproducible for a given profile and shape.
- tiled: for rows beyond half the fused tile (the fused backward holds about twice the
  forward's arrays a column): a dx kernel (two passes over column tiles per row) and a
  dweight/dbias kernel (column blocks, looping over rows). The other two strategies hand
  such rows to it.

The dropout backward reads the forward's stored keep-mask rather than regenerating it.

Profile switches (constexpr, so one source serves every target): SELECT_LOADS clamps the
load offsets of out-of-bounds lanes to the last valid row/column, loads unmasked and
selects afterwards (SIMD NPUs read every masked-off address); SLICE_BROADCAST loads
per-row constants (mean, rstd, rowscale) once as a [BLOCK_M] vector and broadcasts the
values instead of loading through a [BLOCK_M, 1] pointer column. Grids are capped at the
profile's MAX_GRID_NUM and programs walk rows (or row or column blocks) in grid-stride
loops with int64 offsets.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from triton import knobs

from .grid_stride import block_range, launch_grid
from triton_cts import launches
from triton_cts.launch import ShapeMismatchError, UnsupportedDtypeError, check_inputs
from triton_cts.profiles import Profile, cdiv, next_power_of_2

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
STAT_DTYPES = (torch.float32, torch.float64)
MASK_DTYPES = (torch.bool, torch.uint8)
#: Rows per program the atomic backward tries when the profile lists no
#: ``autotune.layer_norm_backward`` configs (filtered to those whose tile fits).
DEFAULT_ROWS_PER_PROGRAM = (1, 4, 16, 64)


# --------------------------------------------------------------------------------------
# Helpers shared by the kernels.
# --------------------------------------------------------------------------------------
@triton.jit
def _to_acc(v, COMPUTE_FP64: tl.constexpr):
    # float64 inputs are computed in float64, all others in float32
    return v.to(tl.float64) if COMPUTE_FP64 else v.to(tl.float32)


@triton.jit
def _dropout_scale(scale_hi, scale_lo, COMPUTE_FP64: tl.constexpr):
    # float arguments arrive as float32: float64 kernels rebuild 1 / (1 - p) from two parts
    if COMPUTE_FP64:
        return (tl.zeros([], dtype=tl.float64) + scale_hi) + scale_lo
    else:
        return scale_hi


@triton.jit
def _add_pair(a0, b0, a1, b1):
    # combine function of a two-sum tl.reduce: both sums in one reduction pass
    return a0 + a1, b0 + b1


@triton.jit
def _kahan_add(total, comp, v):
    """Lane-wise compensated running sum: comp holds what rounding total dropped, so a
    row summed over many tiles keeps the accuracy of one tree sum. An inf makes comp NaN:
    it is reset so that total keeps plain-sum semantics (inf, or NaN for inf - inf)."""
    y = v - comp
    t = total + y
    comp = (t - total) - y
    return t, tl.where(comp == comp, comp, 0.0)


@triton.jit
def _tile_offsets(rows, cols, n_rows, N, SELECT_LOADS: tl.constexpr):
    """Offsets of tile rows x cols in a contiguous [n_rows, N] tensor: (store offsets,
    load offsets, in-bounds mask). With SELECT_LOADS the load offsets of out-of-bounds
    lanes are clamped to the last row/column, so an unmasked load stays inside the tensor."""
    offs = rows[:, None] * N + cols[None, :]
    mask = (rows[:, None] < n_rows) & (cols[None, :] < N)
    if SELECT_LOADS:
        load_offs = tl.minimum(rows, n_rows - 1)[:, None] * N + tl.minimum(cols, N - 1)[None, :]
    else:
        load_offs = offs
    return offs, load_offs, mask


@triton.jit
def _row_offsets(row, cols, N, SELECT_LOADS: tl.constexpr):
    """The same for one row's column tile (the tiled kernels)."""
    offs = row * N + cols
    mask = cols < N
    if SELECT_LOADS:
        load_offs = row * N + tl.minimum(cols, N - 1)
    else:
        load_offs = offs
    return offs, load_offs, mask


@triton.jit
def _load(PTR, load_offs, mask, SELECT_LOADS: tl.constexpr):
    # zero where mask is false; SELECT_LOADS: every address is valid, select afterwards
    if SELECT_LOADS:
        v = tl.load(PTR + load_offs)
        v = tl.where(mask, v, tl.zeros_like(v))
    else:
        v = tl.load(PTR + load_offs, mask=mask, other=0)
    return v


@triton.jit
def _load_row_constants(PTR, rows, n_rows, SELECT_LOADS: tl.constexpr,
                        SLICE_BROADCAST: tl.constexpr):
    """One value per tile row, as a [BLOCK_M, 1] column that broadcasts over the columns."""
    if SELECT_LOADS:
        # valid addresses for every lane; the caller masks the results of rows >= n_rows
        rows = tl.minimum(rows, n_rows - 1)
        if SLICE_BROADCAST:
            v = tl.load(PTR + rows)[:, None]
        else:
            v = tl.load(PTR + rows[:, None])
    else:
        if SLICE_BROADCAST:
            # one vector load, then broadcast the values
            v = tl.load(PTR + rows, mask=rows < n_rows, other=0)[:, None]
        else:
            # a [BLOCK_M, 1] pointer column: coalesced and cached on GPUs
            v = tl.load(PTR + rows[:, None], mask=rows[:, None] < n_rows, other=0)
    return v


@triton.jit
def _prenorm_input(X, RESIDUAL, RESIDUAL_OUT, DROPOUT_MASK, offs, load_offs, mask, rowscale,
                   dropout_p, dropout_scale, seed, RNG_32BIT: tl.constexpr,
                   HAS_ROWSCALE: tl.constexpr, HAS_DROPOUT: tl.constexpr,
                   STORE_DROPOUT_MASK: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                   STORE_RESIDUAL_OUT: tl.constexpr, SELECT_LOADS: tl.constexpr,
                   COMPUTE_FP64: tl.constexpr):
    """x' = dropout(x * rowscale) + residual for one tile (any shape), 0 out of bounds."""
    x = _to_acc(_load(X, load_offs, mask, SELECT_LOADS), COMPUTE_FP64)
    if HAS_ROWSCALE:
        x = x * rowscale
    if HAS_DROPOUT:
        # the Philox counter is the element index: same mask for every tiling and grid;
        # compared in float32 everywhere (the interpreter passes float arguments as float64)
        # (RNG_32BIT: a 32-bit counter, for backends without 64-bit Philox; it wraps
        # every 2^32 elements)
        counter = offs.to(tl.int32) if RNG_32BIT else offs
        keep = tl.rand(seed, counter) > (tl.zeros([], dtype=tl.float32) + dropout_p)
        x = tl.where(keep, x * dropout_scale, 0.0)
        if STORE_DROPOUT_MASK:
            tl.store(DROPOUT_MASK + offs, keep, mask=mask)
    if HAS_RESIDUAL:
        x += _to_acc(_load(RESIDUAL, load_offs, mask, SELECT_LOADS), COMPUTE_FP64)
    if STORE_RESIDUAL_OUT:
        tl.store(RESIDUAL_OUT + offs, x.to(RESIDUAL_OUT.dtype.element_ty), mask=mask)
    return x


@triton.jit
def _store_input_grads(DX, DRESIDUAL_OUT, DRESIDUAL, DROPOUT_MASK, dx, rowscale,
                       offs, load_offs, mask, dropout_scale,
                       HAS_DRESIDUAL_OUT: tl.constexpr, STORE_DRESIDUAL: tl.constexpr,
                       HAS_DROPOUT: tl.constexpr, HAS_ROWSCALE: tl.constexpr,
                       SELECT_LOADS: tl.constexpr, COMPUTE_FP64: tl.constexpr):
    """From the gradient of x' to those of the residual and of x (through dropout, rowscale)."""
    if HAS_DRESIDUAL_OUT:
        # prenorm: residual_out = x' was also used downstream
        dx += _to_acc(_load(DRESIDUAL_OUT, load_offs, mask, SELECT_LOADS), COMPUTE_FP64)
    if STORE_DRESIDUAL:
        tl.store(DRESIDUAL + offs, dx.to(DRESIDUAL.dtype.element_ty), mask=mask)
    if HAS_DROPOUT:
        keep = _load(DROPOUT_MASK, load_offs, mask, SELECT_LOADS)
        dx = tl.where(keep != 0, dx * dropout_scale, 0.0)
    if HAS_ROWSCALE:
        dx = dx * rowscale
    tl.store(DX + offs, dx.to(DX.dtype.element_ty), mask=mask)


# --------------------------------------------------------------------------------------
# Forward kernels.
# --------------------------------------------------------------------------------------
@triton.jit
def _layer_norm_fwd_fused_kernel(
    X,                      # pointer to the input [n_rows, N], contiguous
    Y,                      # pointer to the output, like X
    W,                      # pointer to the weight [N]
    B,                      # pointer to the bias [N] (unused without HAS_BIAS)
    RESIDUAL,               # pointer to the residual, like X (unused without HAS_RESIDUAL)
    RESIDUAL_OUT,           # pointer to x' = the normalized input, like X
    ROWSCALE,               # pointer to the per-row scale [n_rows]
    DROPOUT_MASK,           # pointer to the bool keep-mask, like X
    MEAN,                   # pointer to the per-row mean [n_rows] (unused in RMS mode)
    RSTD,                   # pointer to the per-row 1/std [n_rows]
    n_rows,                 # rows of X
    N,                      # columns of X: the normalized length
    eps,                    # added to the variance
    dropout_p,              # probability of dropping an element
    scale_hi,               # 1 / (1 - dropout_p), rounded to float32
    scale_lo,               # the rounding error, for float64 kernels
    seed,                   # Philox seed of the dropout mask
    BLOCK_M: tl.constexpr,  # rows per tile
    BLOCK_N: tl.constexpr,  # columns per tile, >= N
    IS_RMS: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    STORE_RESIDUAL_OUT: tl.constexpr,
    HAS_ROWSCALE: tl.constexpr,
    HAS_DROPOUT: tl.constexpr,
    STORE_DROPOUT_MASK: tl.constexpr,
    RNG_32BIT: tl.constexpr,    # 32-bit Philox counters (the profile's rng_counter_bits)
    SELECT_LOADS: tl.constexpr,
    SLICE_BROADCAST: tl.constexpr,
    COMPUTE_FP64: tl.constexpr,
    GRID_STRIDE: tl.constexpr,  # fewer programs than row blocks: each walks several
    PAIRED_SUMS: tl.constexpr,  # both sums in one tl.reduce (where the backend lowers it)
):
    pid = tl.program_id(0).to(tl.int64)  # int64 row offsets past 2^31 elements
    dropout_scale = _dropout_scale(scale_hi, scale_lo, COMPUTE_FP64)
    cols = tl.arange(0, BLOCK_N)
    _, w_offs, col_mask = _row_offsets(0, cols, N, SELECT_LOADS)
    # weight and bias are the same for every row: load them once per program
    w = _to_acc(_load(W, w_offs, col_mask, SELECT_LOADS), COMPUTE_FP64)[None, :]
    if HAS_BIAS:
        b = _to_acc(_load(B, w_offs, col_mask, SELECT_LOADS), COMPUTE_FP64)[None, :]
    step, stop = block_range(pid, tl.cdiv(n_rows, BLOCK_M), GRID_STRIDE)
    for block in range(pid, stop, step):
        rows = block * BLOCK_M + tl.arange(0, BLOCK_M)
        offs, load_offs, mask = _tile_offsets(rows, cols, n_rows, N, SELECT_LOADS)
        rowscale = 1.0
        if HAS_ROWSCALE:
            rowscale = _to_acc(_load_row_constants(ROWSCALE, rows, n_rows, SELECT_LOADS,
                                                   SLICE_BROADCAST), COMPUTE_FP64)
        x = _prenorm_input(X, RESIDUAL, RESIDUAL_OUT, DROPOUT_MASK, offs, load_offs, mask,
                           rowscale, dropout_p, dropout_scale, seed, RNG_32BIT, HAS_ROWSCALE,
                           HAS_DROPOUT, STORE_DROPOUT_MASK, HAS_RESIDUAL, STORE_RESIDUAL_OUT,
                           SELECT_LOADS, COMPUTE_FP64)
        row_mask = rows < n_rows
        if IS_RMS:
            xc = x
            var = tl.sum(x * x, axis=1) / N
        else:
            # the row is in registers: centre it before squaring, twice: d = x - mean0 is
            # exact when |mean| >> std, and mean(d) is what rounding mean0 lost, so
            # var = E[d^2] - mean(d)^2 cancels nothing. Both sums in one reduction.
            mean0 = tl.sum(x, axis=1, keep_dims=True) / N
            d = tl.where(mask, x - mean0, 0.0)
            if PAIRED_SUMS:
                sum_d, sum_dd = tl.reduce((d, d * d), 1, _add_pair, keep_dims=True)
            else:
                sum_d = tl.sum(d, axis=1, keep_dims=True)
                sum_dd = tl.sum(d * d, axis=1, keep_dims=True)
            mean_d = sum_d / N
            xc = tl.where(mask, d - mean_d, 0.0)
            # a row with inf or NaN: mean_d is NaN, the plain mean0 is what sum / N gives
            mean = tl.sum(tl.where(mean_d == mean_d, mean0 + mean_d, mean0), axis=1)
            tl.store(MEAN + rows, mean.to(MEAN.dtype.element_ty), mask=row_mask)
            # rounding can leave a constant row's variance a hair below 0 (NaN stays NaN)
            var = sum_dd / N - mean_d * mean_d
            var = tl.sum(tl.where(var < 0, 0.0, var), axis=1)
        rstd = 1.0 / tl.sqrt(var + eps)
        tl.store(RSTD + rows, rstd.to(RSTD.dtype.element_ty), mask=row_mask)
        y = xc * rstd[:, None] * w
        if HAS_BIAS:
            y += b
        tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _layer_norm_fwd_tiled_kernel(
    # as _layer_norm_fwd_fused_kernel:
    X, Y, W, B, RESIDUAL, RESIDUAL_OUT, ROWSCALE, DROPOUT_MASK, MEAN, RSTD,
    n_rows, N, eps, dropout_p, scale_hi, scale_lo, seed,
    BLOCK_N: tl.constexpr,  # columns per tile, < N: a row takes several tiles
    IS_RMS: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    STORE_RESIDUAL_OUT: tl.constexpr,
    HAS_ROWSCALE: tl.constexpr,
    HAS_DROPOUT: tl.constexpr,
    STORE_DROPOUT_MASK: tl.constexpr,
    RNG_32BIT: tl.constexpr,    # 32-bit Philox counters (the profile's rng_counter_bits)
    SELECT_LOADS: tl.constexpr,
    COMPUTE_FP64: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    dropout_scale = _dropout_scale(scale_hi, scale_lo, COMPUTE_FP64)
    acc_ty = tl.float64 if COMPUTE_FP64 else tl.float32
    for row in range(pid, n_rows, tl.num_programs(0)):
        rowscale = 1.0
        if HAS_ROWSCALE:
            rowscale = _to_acc(tl.load(ROWSCALE + row), COMPUTE_FP64)
        # The shift: the mean of the row's first tile (x' recomputed, nothing stored).
        # d = x' - shift is exact when |mean| >> std, and the tile is a fraction f of the
        # row, so (mean - shift)^2 <= var / f: E[d^2] - E[d]^2 loses at most a factor
        # 1 + 1/f of float32 rounding to cancellation, however the row is ordered. One
        # pass then gathers the sums of d and d^2 (and x' is stored where asked).
        shift = 0.0
        if not IS_RMS:
            cols = tl.arange(0, BLOCK_N)
            offs, load_offs, mask = _row_offsets(row, cols, N, SELECT_LOADS)
            x = _prenorm_input(X, RESIDUAL, RESIDUAL_OUT, DROPOUT_MASK, offs, load_offs, mask,
                               rowscale, dropout_p, dropout_scale, seed, RNG_32BIT, HAS_ROWSCALE,
                               HAS_DROPOUT, False, HAS_RESIDUAL, False, SELECT_LOADS,
                               COMPUTE_FP64)
            shift = tl.sum(x, axis=0) / tl.minimum(N, BLOCK_N)
        sum_d = tl.zeros([BLOCK_N], dtype=acc_ty)
        comp_d = tl.zeros([BLOCK_N], dtype=acc_ty)
        sum_dd = tl.zeros([BLOCK_N], dtype=acc_ty)
        sum_x = tl.zeros([BLOCK_N], dtype=acc_ty)
        for start in range(0, N, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            offs, load_offs, mask = _row_offsets(row, cols, N, SELECT_LOADS)
            x = _prenorm_input(X, RESIDUAL, RESIDUAL_OUT, DROPOUT_MASK, offs, load_offs, mask,
                               rowscale, dropout_p, dropout_scale, seed, RNG_32BIT, HAS_ROWSCALE,
                               HAS_DROPOUT, STORE_DROPOUT_MASK, HAS_RESIDUAL,
                               STORE_RESIDUAL_OUT, SELECT_LOADS, COMPUTE_FP64)
            if IS_RMS:
                sum_dd += x * x
            else:
                d = tl.where(mask, x - shift, 0.0)
                sum_d, comp_d = _kahan_add(sum_d, comp_d, d)
                sum_dd += d * d
                sum_x += x
        mean_d = 0.0
        if IS_RMS:
            var = tl.sum(sum_dd, axis=0) / N
        else:
            mean_d = tl.sum(sum_d, axis=0) / N
            var = tl.sum(sum_dd, axis=0) / N - mean_d * mean_d
            var = tl.where(var < 0, 0.0, var)  # rounding of a constant row (NaN stays NaN)
            # a row with inf or NaN: mean_d is NaN; the plain sum / N is what torch gives
            mean = tl.where(mean_d == mean_d, shift + mean_d, tl.sum(sum_x, axis=0) / N)
            tl.store(MEAN + row, mean.to(MEAN.dtype.element_ty))
        rstd = 1.0 / tl.sqrt(var + eps)
        tl.store(RSTD + row, rstd.to(RSTD.dtype.element_ty))
        # second pass: recompute x' (the same values: tl.rand is counter-based), normalize
        for start in range(0, N, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            offs, load_offs, mask = _row_offsets(row, cols, N, SELECT_LOADS)
            x = _prenorm_input(X, RESIDUAL, RESIDUAL_OUT, DROPOUT_MASK, offs, load_offs, mask,
                               rowscale, dropout_p, dropout_scale, seed, RNG_32BIT, HAS_ROWSCALE,
                               HAS_DROPOUT, False, HAS_RESIDUAL, False, SELECT_LOADS,
                               COMPUTE_FP64)
            _, w_offs, _ = _row_offsets(0, cols, N, SELECT_LOADS)
            w = _to_acc(_load(W, w_offs, mask, SELECT_LOADS), COMPUTE_FP64)
            if IS_RMS:
                y = x * rstd * w
            else:
                y = ((x - shift) - mean_d) * rstd * w
            if HAS_BIAS:
                y += _to_acc(_load(B, w_offs, mask, SELECT_LOADS), COMPUTE_FP64)
            tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=mask)


# --------------------------------------------------------------------------------------
# Backward kernels.
# --------------------------------------------------------------------------------------
@triton.jit
def _layer_norm_bwd_fused_kernel(
    DY,                     # pointer to the output gradient [n_rows, N], contiguous
    X,                      # pointer to the normalized input x', like DY
    W,                      # pointer to the weight [N]
    MEAN,                   # pointer to the per-row mean [n_rows] (unused in RMS mode)
    RSTD,                   # pointer to the per-row 1/std [n_rows]
    ROWSCALE,               # pointer to the per-row scale [n_rows]
    DROPOUT_MASK,           # pointer to the forward's keep-mask (bool or uint8), like DY
    DRESIDUAL_OUT,          # pointer to the gradient of residual_out, like DY
    DX,                     # pointer to the input gradient, like DY
    DRESIDUAL,              # pointer to the residual gradient, like DY
    DW,                     # pointer to dweight partials: [N] (ATOMIC) or [programs, N]
    DB,                     # pointer to dbias partials, like DW (unused without HAS_BIAS)
    n_rows,                 # rows of DY
    N,                      # columns of DY
    scale_hi,               # 1 / (1 - dropout_p), rounded to float32
    scale_lo,               # the rounding error, for float64 kernels
    ROWS_PER_PROGRAM: tl.constexpr,  # rows per tile: a program walks row blocks of this height
    BLOCK_N: tl.constexpr,  # columns per tile, >= N
    IS_RMS: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    HAS_ROWSCALE: tl.constexpr,
    HAS_DROPOUT: tl.constexpr,
    HAS_DRESIDUAL_OUT: tl.constexpr,
    STORE_DRESIDUAL: tl.constexpr,
    ATOMIC: tl.constexpr,   # add partials into DW/DB atomically, else store row pid of DW/DB
    SELECT_LOADS: tl.constexpr,
    SLICE_BROADCAST: tl.constexpr,
    COMPUTE_FP64: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    dropout_scale = _dropout_scale(scale_hi, scale_lo, COMPUTE_FP64)
    acc_ty = tl.float64 if COMPUTE_FP64 else tl.float32
    cols = tl.arange(0, BLOCK_N)
    _, w_offs, col_mask = _row_offsets(0, cols, N, SELECT_LOADS)
    w = _to_acc(_load(W, w_offs, col_mask, SELECT_LOADS), COMPUTE_FP64)[None, :]
    dw = tl.zeros([BLOCK_N], dtype=acc_ty)
    db = tl.zeros([BLOCK_N], dtype=acc_ty)
    for block in range(pid, tl.cdiv(n_rows, ROWS_PER_PROGRAM), tl.num_programs(0)):
        rows = block * ROWS_PER_PROGRAM + tl.arange(0, ROWS_PER_PROGRAM)
        offs, load_offs, mask = _tile_offsets(rows, cols, n_rows, N, SELECT_LOADS)
        x = _to_acc(_load(X, load_offs, mask, SELECT_LOADS), COMPUTE_FP64)
        dy = _to_acc(_load(DY, load_offs, mask, SELECT_LOADS), COMPUTE_FP64)
        rstd = _to_acc(_load_row_constants(RSTD, rows, n_rows, SELECT_LOADS, SLICE_BROADCAST),
                       COMPUTE_FP64)
        if IS_RMS:
            xhat = x * rstd
        else:
            mean = _to_acc(_load_row_constants(MEAN, rows, n_rows, SELECT_LOADS,
                                               SLICE_BROADCAST), COMPUTE_FP64)
            # x - mean is exact when |mean| >> std, and its row mean is the rounding
            # error of the stored mean: removing it keeps xhat accurate there
            d = tl.where(mask, x - mean, 0.0)
            d -= tl.sum(d, axis=1, keep_dims=True) / N
            xhat = tl.where(mask, d * rstd, 0.0)
        g = dy * w
        c1 = tl.sum(g * xhat, axis=1, keep_dims=True) / N
        if IS_RMS:
            dx = (g - xhat * c1) * rstd
        else:
            c2 = tl.sum(g, axis=1, keep_dims=True) / N
            dx = (g - (xhat * c1 + c2)) * rstd
        # dy is 0 out of bounds, so the partial sums need no mask
        dw += tl.sum(dy * xhat, axis=0)
        if HAS_BIAS:
            db += tl.sum(dy, axis=0)
        rowscale = 1.0
        if HAS_ROWSCALE:
            rowscale = _to_acc(_load_row_constants(ROWSCALE, rows, n_rows, SELECT_LOADS,
                                                   SLICE_BROADCAST), COMPUTE_FP64)
        _store_input_grads(DX, DRESIDUAL_OUT, DRESIDUAL, DROPOUT_MASK, dx, rowscale, offs,
                           load_offs, mask, dropout_scale, HAS_DRESIDUAL_OUT, STORE_DRESIDUAL,
                           HAS_DROPOUT, HAS_ROWSCALE, SELECT_LOADS, COMPUTE_FP64)
    if ATOMIC:
        tl.atomic_add(DW + cols, dw, mask=col_mask)
        if HAS_BIAS:
            tl.atomic_add(DB + cols, db, mask=col_mask)
    else:
        # every program stores its row, zeros included: the sum reads all of them
        tl.store(DW + pid * N + cols, dw, mask=col_mask)
        if HAS_BIAS:
            tl.store(DB + pid * N + cols, db, mask=col_mask)


@triton.jit
def _sum_columns(PARTIAL, OUT, program, n_programs, n_partials, N, BLOCK_P: tl.constexpr,
                 BLOCK_N: tl.constexpr, SELECT_LOADS: tl.constexpr, COMPUTE_FP64: tl.constexpr):
    acc_ty = tl.float64 if COMPUTE_FP64 else tl.float32
    for block in range(program, tl.cdiv(N, BLOCK_N), n_programs):
        cols = block * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tl.zeros([BLOCK_P, BLOCK_N], dtype=acc_ty)
        # a fixed order of additions: the result is the same bits on every run
        for start in range(0, n_partials, BLOCK_P):
            rows = start + tl.arange(0, BLOCK_P)
            _, load_offs, mask = _tile_offsets(rows, cols, n_partials, N, SELECT_LOADS)
            acc += _to_acc(_load(PARTIAL, load_offs, mask, SELECT_LOADS), COMPUTE_FP64)
        tl.store(OUT + cols, tl.sum(acc, axis=0).to(OUT.dtype.element_ty), mask=cols < N)


@triton.jit
def _sum_rows_kernel(
    PARTIAL,                # pointer to the partial sums [n_partials, N], contiguous
    OUT,                    # pointer to the column sums [N]
    PARTIAL_2,              # a second [n_partials, N], like PARTIAL (programs n_programs and up)
    OUT_2,                  # its column sums [N]
    n_programs,             # programs per pair: the grid is one or two times this
    n_partials,             # rows of PARTIAL
    N,                      # columns of PARTIAL
    BLOCK_P: tl.constexpr,  # partial rows per tile
    BLOCK_N: tl.constexpr,  # columns per program
    SELECT_LOADS: tl.constexpr,
    COMPUTE_FP64: tl.constexpr,
):
    # dweight and dbias in one launch (a launch costs more host time than this kernel
    # runs), split on grid axis 0: NPUs flatten the other axes
    pid = tl.program_id(0).to(tl.int64)
    if pid < n_programs:
        _sum_columns(PARTIAL, OUT, pid, n_programs, n_partials, N, BLOCK_P, BLOCK_N,
                     SELECT_LOADS, COMPUTE_FP64)
    else:
        _sum_columns(PARTIAL_2, OUT_2, pid - n_programs, n_programs, n_partials, N, BLOCK_P,
                     BLOCK_N, SELECT_LOADS, COMPUTE_FP64)


@triton.jit
def _layer_norm_bwd_dx_tiled_kernel(
    # as _layer_norm_bwd_fused_kernel:
    DY, X, W, MEAN, RSTD, ROWSCALE, DROPOUT_MASK, DRESIDUAL_OUT, DX, DRESIDUAL,
    MEAN_FIX,               # pointer to the per-row mean corrections [n_rows], written here
    n_rows, N, scale_hi, scale_lo,
    BLOCK_N: tl.constexpr,  # columns per tile: a row takes cdiv(N, BLOCK_N) tiles
    IS_RMS: tl.constexpr,
    HAS_ROWSCALE: tl.constexpr,
    HAS_DROPOUT: tl.constexpr,
    HAS_DRESIDUAL_OUT: tl.constexpr,
    STORE_DRESIDUAL: tl.constexpr,
    SELECT_LOADS: tl.constexpr,
    COMPUTE_FP64: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    dropout_scale = _dropout_scale(scale_hi, scale_lo, COMPUTE_FP64)
    acc_ty = tl.float64 if COMPUTE_FP64 else tl.float32
    for row in range(pid, n_rows, tl.num_programs(0)):
        rstd = _to_acc(tl.load(RSTD + row), COMPUTE_FP64)
        mean = 0.0
        if not IS_RMS:
            mean = _to_acc(tl.load(MEAN + row), COMPUTE_FP64)
        rowscale = 1.0
        if HAS_ROWSCALE:
            rowscale = _to_acc(tl.load(ROWSCALE + row), COMPUTE_FP64)
        # pass 1: the row sums of g * d, g and d (d = x - mean), accumulated lane-wise and
        # reduced once. mean(d) is the stored mean's rounding error (d is exact when
        # |mean| >> std): it is folded in here, and passed on to the dweight kernel
        sum_gd = tl.zeros([BLOCK_N], dtype=acc_ty)
        sum_g = tl.zeros([BLOCK_N], dtype=acc_ty)
        sum_d = tl.zeros([BLOCK_N], dtype=acc_ty)
        for start in range(0, N, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            _, load_offs, mask = _row_offsets(row, cols, N, SELECT_LOADS)
            _, w_offs, _ = _row_offsets(0, cols, N, SELECT_LOADS)
            x = _to_acc(_load(X, load_offs, mask, SELECT_LOADS), COMPUTE_FP64)
            dy = _to_acc(_load(DY, load_offs, mask, SELECT_LOADS), COMPUTE_FP64)
            w = _to_acc(_load(W, w_offs, mask, SELECT_LOADS), COMPUTE_FP64)
            d = tl.where(mask, x - mean, 0.0)
            g = dy * w
            sum_gd += g * d
            sum_g += g
            sum_d += d
        mean_fix = 0.0
        if not IS_RMS:
            mean_fix = tl.sum(sum_d, axis=0) / N
            tl.store(MEAN_FIX + row, mean_fix.to(MEAN_FIX.dtype.element_ty))
        sum_g = tl.sum(sum_g, axis=0)
        c1 = (tl.sum(sum_gd, axis=0) - mean_fix * sum_g) * rstd / N
        c2 = sum_g / N
        # pass 2: dx tile by tile
        for start in range(0, N, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            offs, load_offs, mask = _row_offsets(row, cols, N, SELECT_LOADS)
            _, w_offs, _ = _row_offsets(0, cols, N, SELECT_LOADS)
            x = _to_acc(_load(X, load_offs, mask, SELECT_LOADS), COMPUTE_FP64)
            dy = _to_acc(_load(DY, load_offs, mask, SELECT_LOADS), COMPUTE_FP64)
            w = _to_acc(_load(W, w_offs, mask, SELECT_LOADS), COMPUTE_FP64)
            xhat = ((x - mean) - mean_fix) * rstd
            if IS_RMS:
                dx = (dy * w - xhat * c1) * rstd
            else:
                dx = (dy * w - (xhat * c1 + c2)) * rstd
            _store_input_grads(DX, DRESIDUAL_OUT, DRESIDUAL, DROPOUT_MASK, dx, rowscale, offs,
                               load_offs, mask, dropout_scale, HAS_DRESIDUAL_OUT,
                               STORE_DRESIDUAL, HAS_DROPOUT, HAS_ROWSCALE, SELECT_LOADS,
                               COMPUTE_FP64)


@triton.jit
def _layer_norm_bwd_dwdb_kernel(
    DY,                     # pointer to the output gradient [n_rows, N], contiguous
    X,                      # pointer to the normalized input x', like DY
    MEAN,                   # pointer to the per-row mean [n_rows] (unused in RMS mode)
    RSTD,                   # pointer to the per-row 1/std [n_rows]
    MEAN_FIX,               # pointer to the dx kernel's mean corrections [n_rows]
    DW,                     # pointer to dweight [N], in the weight's dtype
    DB,                     # pointer to dbias [N] (unused without HAS_BIAS)
    n_rows,                 # rows of DY
    N,                      # columns of DY
    BLOCK_M: tl.constexpr,  # rows per tile
    BLOCK_N: tl.constexpr,  # columns per program
    IS_RMS: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    SELECT_LOADS: tl.constexpr,
    SLICE_BROADCAST: tl.constexpr,
    COMPUTE_FP64: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    acc_ty = tl.float64 if COMPUTE_FP64 else tl.float32
    for block in range(pid, tl.cdiv(N, BLOCK_N), tl.num_programs(0)):
        cols = block * BLOCK_N + tl.arange(0, BLOCK_N)
        acc_w = tl.zeros([BLOCK_M, BLOCK_N], dtype=acc_ty)
        acc_b = tl.zeros([BLOCK_M, BLOCK_N], dtype=acc_ty)
        for start in range(0, n_rows, BLOCK_M):
            rows = (start + tl.arange(0, BLOCK_M)).to(tl.int64)
            _, load_offs, mask = _tile_offsets(rows, cols, n_rows, N, SELECT_LOADS)
            x = _to_acc(_load(X, load_offs, mask, SELECT_LOADS), COMPUTE_FP64)
            dy = _to_acc(_load(DY, load_offs, mask, SELECT_LOADS), COMPUTE_FP64)
            rstd = _to_acc(_load_row_constants(RSTD, rows, n_rows, SELECT_LOADS,
                                               SLICE_BROADCAST), COMPUTE_FP64)
            if IS_RMS:
                xhat = x * rstd
            else:
                mean = _to_acc(_load_row_constants(MEAN, rows, n_rows, SELECT_LOADS,
                                                   SLICE_BROADCAST), COMPUTE_FP64)
                mean_fix = _to_acc(_load_row_constants(MEAN_FIX, rows, n_rows, SELECT_LOADS,
                                                       SLICE_BROADCAST), COMPUTE_FP64)
                xhat = ((x - mean) - mean_fix) * rstd
            acc_w += dy * xhat  # dy is 0 out of bounds
            if HAS_BIAS:
                acc_b += dy
        col_mask = cols < N
        tl.store(DW + cols, tl.sum(acc_w, axis=0).to(DW.dtype.element_ty), mask=col_mask)
        if HAS_BIAS:
            tl.store(DB + cols, tl.sum(acc_b, axis=0).to(DB.dtype.element_ty), mask=col_mask)


# --------------------------------------------------------------------------------------
# Launchers.
# --------------------------------------------------------------------------------------
class LayerNormOutput(NamedTuple):
    y: torch.Tensor
    mean: torch.Tensor | None           # None in RMS mode
    rstd: torch.Tensor
    residual_out: torch.Tensor | None   # x', when a residual, rowscale or dropout was used
    dropout_mask: torch.Tensor | None   # bool keep-mask, when asked for and dropout_p > 0


def _prev_power_of_2(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """What the kernels compute in and save mean/rstd in: float32, float64 for float64."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _row_tile(dtype: torch.dtype, profile: Profile) -> int:
    """Most columns of one row a program holds at once. A held row is float32 in registers
    whatever the input dtype, so MAX_FUSED_SIZE is counted in float32 elements: counted in
    bf16 elements, a 32768-column row spilled (224 bytes of stack on sm_90) and the bf16
    forward ran at a third of the float32 one's bandwidth on an H200."""
    return profile.max_fused_elements(_acc_dtype(dtype))


def _forward_row_tile(dtype: torch.dtype, profile: Profile, dropout: bool) -> int:
    """Most elements a fused forward program holds: the row tile, half of it with dropout,
    whose Philox rounds keep about as many 32-bit words live again (one 4096-column float32
    row with dropout needed 278560 bytes of the NPU's 196608-byte unified buffer, bishengir
    UB check, triton-ascend 3.2; without dropout it fits)."""
    tile = _row_tile(dtype, profile)
    return max(1, tile // 2) if dropout else tile


def _fits_fused(n_cols: int, dtype: torch.dtype, profile: Profile, dropout: bool) -> bool:
    return n_cols <= _forward_row_tile(dtype, profile, dropout)


def _backward_row_tile(dtype: torch.dtype, profile: Profile) -> int:
    """Longest row the fused backward holds: half the row tile. Per column it keeps x, dy,
    the weight, dx and the dweight/dbias sums, about twice the forward's arrays: at the
    full row tile (16384 columns on sm_90) it spilled 184 to 384 bytes a thread at 16 or 32
    warps, and took 250 us where torch's backward took 262 (bf16 4096x16384, H200)."""
    return max(1, _row_tile(dtype, profile) // 2)


def _fits_fused_backward(n_cols: int, dtype: torch.dtype, profile: Profile) -> bool:
    return n_cols <= _backward_row_tile(dtype, profile)


#: Tile-wide arrays a tiled kernel keeps live: the tile and up to four accumulators.
TILED_ARRAYS = 4


def _tiled_block(n_cols: int, dtype: torch.dtype, profile: Profile) -> tuple[int, int]:
    """(columns per tile, num_warps) of the tiled kernels. Beside the tile they keep
    tile-wide accumulators, so a tile is the row tile over TILED_ARRAYS and gets the warps
    of the registers all of them take: whole row tiles spilled 64 to 152 bytes a thread
    on sm_90, and half ones at 16 warps crashed the AMD backend's LLVM (float64 with
    dropout, triton 3.9)."""
    block = min(max(1, _row_tile(dtype, profile) // TILED_ARRAYS), next_power_of_2(n_cols))
    return block, profile.num_warps_for(TILED_ARRAYS * block, dtype)


def _row_block(n_rows: int, block_n: int, tile: int, profile: Profile) -> int:
    """Rows per tile of the fused kernels when a row is short: rows are added up to
    ``tile`` elements, but no more than leaves every compute unit a row block."""
    fill = max(1, tile // block_n)
    share = _prev_power_of_2(cdiv(n_rows, profile.compute_units))
    return max(1, min(fill, share))


def _forward_tile(dtype: torch.dtype, profile: Profile, dropout: bool) -> int:
    # short rows stack up to the profile's row stack, longer ones get a program each:
    # many small programs hide memory latency better than few wide ones (on an H200, one
    # 1024-column row per program ran 25-39% faster than stacking rows up to the fused tile)
    stack = profile.row_stack_elements(dtype)
    return min(stack, _forward_row_tile(dtype, profile, True)) if dropout else stack


def _backward_tile(dtype: torch.dtype, profile: Profile) -> int:
    # short rows of the fused backward stack up to half its row tile: it keeps twice the
    # forward's arrays (x, dy, xhat, dy * w, dx, all float32) and then the dweight/dbias
    # sums. (Stacking them only up to an elementwise block of 1024 float32 elements took
    # float32 forward+backward at 32768x1024 from 0.175 to 0.29 ms on an H200.)
    return max(1, _backward_row_tile(dtype, profile) // 2)


def _column_block(n_cols: int, profile: Profile) -> int:
    """Columns per program of the column-block kernels: enough programs for every compute
    unit, at least a warp's width of contiguous elements per row."""
    want = next_power_of_2(cdiv(n_cols, profile.compute_units))
    return max(1, min(next_power_of_2(n_cols), max(profile.warp_size, want)))


def _column_sum_tile(n_rows: int, n_cols: int, dtype: torch.dtype,
                     profile: Profile) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps) of the dweight/dbias kernel. Each program walks every
    row, so its speed is how many loads are in flight: the profile's measured tile where it
    has one (on an H200 a 32x32 tile at 8 warps, many programs a SM, took 0.71x the time
    of the default at bf16 4096x16384), otherwise a column block per compute unit with
    [BLOCK_M, BLOCK_N] tiles of x, dy and the two sums filling half a row tile."""
    tile = profile.column_sum_tile
    if tile is not None:
        rows, cols, num_warps = tile
        return (min(rows, next_power_of_2(n_rows)), min(cols, next_power_of_2(n_cols)),
                num_warps)
    block_n = _column_block(n_cols, profile)
    block_m = max(1, min(next_power_of_2(n_rows),
                         _backward_row_tile(dtype, profile) // block_n))
    return block_m, block_n, profile.num_warps_for(2 * block_m * block_n, dtype)


def _check_vector(op: str, name: str, t: torch.Tensor | None, n: int) -> None:
    if t is not None and tuple(t.shape) != (n,):
        raise ShapeMismatchError(f"{op}: '{name}' must have shape ({n},) to match the last "
                                 f"dim of x, got {tuple(t.shape)}")


def _check_rows(op: str, name: str, t: torch.Tensor | None, x: torch.Tensor) -> None:
    rows = x.shape[:-1].numel()
    if t is not None and t.numel() != rows:
        raise ShapeMismatchError(f"{op}: '{name}' must hold one value per row of x, shape "
                                 f"{tuple(x.shape[:-1])}, got shape {tuple(t.shape)}")


def _dropout_scale_parts(dropout_p: float) -> tuple[float, float]:
    """1 / (1 - dropout_p) as float32 plus its rounding error (float kernel arguments are
    float32; float64 kernels add the parts back)."""
    scale = 1.0 / (1.0 - dropout_p)
    hi = struct.unpack("f", struct.pack("f", scale))[0]  # round to float32, off the GPU
    return hi, scale - hi


def _check_dropout_p(op: str, dropout_p: float) -> None:
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"{op}: dropout_p must be in [0, 1), got {dropout_p}")


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
               eps: float = 1e-5, *, residual: torch.Tensor | None = None,
               rowscale: torch.Tensor | None = None, dropout_p: float = 0.0,
               seed: int | None = None, return_dropout_mask: bool = False, rms: bool = False,
               profile: Profile) -> LayerNormOutput:
    """Layer norm (or RMS norm with ``rms=True``) of ``x`` over its last dim.

    ``x' = dropout(x * rowscale[..., None]) + residual`` is normalized; it is returned as
    ``residual_out`` (in the residual's dtype, else x's) whenever it differs from ``x``, and
    it is the ``x`` the backward launchers take. ``seed`` fixes the dropout mask (drawn
    from torch's generator when None); the bool keep-mask is returned when
    ``return_dropout_mask`` and ``dropout_p > 0``. mean (None in RMS mode) and rstd have
    shape ``x.shape[:-1]``, float32 (float64 for float64 inputs).
    """
    op = "layer_norm"
    check_inputs(op, profile, DTYPES, x=x, weight=weight, bias=bias, residual=residual,
                 rowscale=rowscale)
    if x.ndim == 0:
        raise ShapeMismatchError(f"{op}: x must have at least 1 dim, got shape ()")
    n_cols = x.shape[-1]
    _check_vector(op, "weight", weight, n_cols)
    _check_vector(op, "bias", bias, n_cols)
    if residual is not None and residual.shape != x.shape:
        raise ShapeMismatchError(f"{op}: residual must have x's shape {tuple(x.shape)}, "
                                 f"got {tuple(residual.shape)}")
    _check_rows(op, "rowscale", rowscale, x)
    _check_dropout_p(op, dropout_p)
    has_dropout = dropout_p > 0.0
    if has_dropout and seed is None:
        seed = int(torch.randint(0, 2**31 - 1, ()).item())
    if seed is not None and not 0 <= int(seed) < 2**63:
        raise ValueError(f"{op}: seed must be in [0, 2^63), got {seed}")

    n_rows = x.shape[:-1].numel()
    x2 = x.contiguous().reshape(n_rows, n_cols)
    y = torch.empty_like(x2)
    stat_shape = x.shape[:-1]
    stat_dtype = _acc_dtype(x.dtype)
    mean = None if rms else torch.empty(n_rows, dtype=stat_dtype, device=x.device)
    rstd = torch.empty(n_rows, dtype=stat_dtype, device=x.device)
    transformed = residual is not None or rowscale is not None or has_dropout
    residual_out = None
    if transformed:
        res_dtype = residual.dtype if residual is not None else x.dtype
        residual_out = torch.empty(n_rows, n_cols, dtype=res_dtype, device=x.device)
    dropout_mask = None
    if has_dropout and return_dropout_mask:
        dropout_mask = torch.empty(n_rows, n_cols, dtype=torch.bool, device=x.device)

    def shaped() -> LayerNormOutput:
        return LayerNormOutput(
            y.view(x.shape), None if mean is None else mean.view(stat_shape),
            rstd.view(stat_shape),
            None if residual_out is None else residual_out.view(x.shape),
            None if dropout_mask is None else dropout_mask.view(x.shape))

    if n_rows == 0 or n_cols == 0:
        # no launch; the statistics of an empty row are 0/0
        if mean is not None:
            mean.fill_(float("nan"))
        rstd.fill_(float("nan"))
        return shaped()

    res2 = residual.contiguous().view(n_rows, n_cols) if residual is not None else None
    scale2 = rowscale.contiguous().view(n_rows) if rowscale is not None else None
    w = weight.contiguous()
    b = bias.contiguous() if bias is not None else None
    # unused pointers get a valid tensor: the flags keep the kernel from touching them
    common = (x2, y, w, b if b is not None else w, res2 if res2 is not None else x2,
              residual_out if residual_out is not None else y,
              scale2 if scale2 is not None else rstd,
              dropout_mask if dropout_mask is not None else y,
              mean if mean is not None else rstd, rstd,
              n_rows, n_cols, float(eps), float(dropout_p), *_dropout_scale_parts(dropout_p),
              int(seed) if seed is not None else 0)
    flags = dict(IS_RMS=rms, HAS_BIAS=b is not None, HAS_RESIDUAL=res2 is not None,
                 STORE_RESIDUAL_OUT=residual_out is not None, HAS_ROWSCALE=scale2 is not None,
                 HAS_DROPOUT=has_dropout, STORE_DROPOUT_MASK=dropout_mask is not None,
                 RNG_32BIT=profile.rng_counter_bits == 32,
                 SELECT_LOADS=profile.select_loads, COMPUTE_FP64=x.dtype == torch.float64)
    if _fits_fused(n_cols, x.dtype, profile, has_dropout):
        block_n = next_power_of_2(n_cols)
        block_m = _row_block(n_rows, block_n, _forward_tile(x.dtype, profile, has_dropout),
                             profile)
        grid, grid_stride = launch_grid(profile, cdiv(n_rows, block_m))
        _layer_norm_fwd_fused_kernel[grid](
            *common, BLOCK_M=block_m, BLOCK_N=block_n, SLICE_BROADCAST=profile.slice_broadcast,
            GRID_STRIDE=grid_stride, PAIRED_SUMS=profile.multi_operand_reduce,
            num_warps=profile.num_warps_for(block_m * block_n, x.dtype),
            **flags)
    else:
        block_n, num_warps = _tiled_block(n_cols, x.dtype, profile)
        grid = (profile.capped_grid(n_rows),)
        _layer_norm_fwd_tiled_kernel[grid](*common, BLOCK_N=block_n, num_warps=num_warps,
                                           **flags)
    return shaped()


def layer_norm_forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                       eps: float = 1e-5, *, profile: Profile):
    """Plain layer norm returning the tuple ``(y, mean, rstd)``."""
    out = layer_norm(x, weight, bias, eps, profile=profile)
    return out.y, out.mean, out.rstd


def layer_norm_residual_dropout(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                                residual: torch.Tensor, rowscale: torch.Tensor,
                                eps: float = 1e-5, *, dropout_p: float = 0.25, seed: int = 0,
                                profile: Profile):
    """Prenorm layer norm with every option on, returning the tuple
    ``(y, residual_out, mean, rstd, dropout_mask)``."""
    out = layer_norm(x, weight, bias, eps, residual=residual, rowscale=rowscale,
                     dropout_p=dropout_p, seed=seed, return_dropout_mask=True, profile=profile)
    return out.y, out.residual_out, out.mean, out.rstd, out.dropout_mask


# ---- backward -----------------------------------------------------------------------
class _Backward(NamedTuple):
    """Validated, contiguous 2-D backward operands and the outputs to fill."""
    dy: torch.Tensor
    x: torch.Tensor
    weight: torch.Tensor
    mean: torch.Tensor | None
    rstd: torch.Tensor
    rowscale: torch.Tensor | None
    dropout_mask: torch.Tensor | None
    dresidual_out: torch.Tensor | None
    dx: torch.Tensor
    dresidual: torch.Tensor | None
    dweight: torch.Tensor
    dbias: torch.Tensor | None
    shape: torch.Size
    flags: dict


def _prepare_backward(op, dy, x, weight, bias, mean, rstd, rms, rowscale, dropout_mask,
                      dropout_p, dresidual_out, has_residual, profile) -> tuple[_Backward, tuple]:
    check_inputs(op, profile, DTYPES, dy=dy, x=x, weight=weight, bias=bias,
                 rowscale=rowscale, dresidual_out=dresidual_out)
    check_inputs(op, profile, STAT_DTYPES, mean=mean, rstd=rstd)
    check_inputs(op, profile, MASK_DTYPES, dropout_mask=dropout_mask)
    if x.ndim == 0:
        raise ShapeMismatchError(f"{op}: x must have at least 1 dim, got shape ()")
    for name, t in (("dy", dy), ("dropout_mask", dropout_mask), ("dresidual_out", dresidual_out)):
        if t is not None and t.shape != x.shape:
            raise ShapeMismatchError(f"{op}: {name} must have x's shape {tuple(x.shape)}, "
                                     f"got {tuple(t.shape)}")
    n_cols = x.shape[-1]
    _check_vector(op, "weight", weight, n_cols)
    _check_vector(op, "bias", bias, n_cols)
    if not rms and mean is None:
        raise ValueError(f"{op}: mean is required unless rms=True")
    _check_rows(op, "mean", None if rms else mean, x)
    _check_rows(op, "rstd", rstd, x)
    _check_rows(op, "rowscale", rowscale, x)
    _check_dropout_p(op, dropout_p)
    if dropout_p > 0.0 and dropout_mask is None:
        raise ValueError(f"{op}: dropout_p > 0 needs the forward's dropout_mask")

    n_rows = x.shape[:-1].numel()
    flat = (lambda t, *s: None if t is None else t.contiguous().reshape(*s))
    dx = torch.empty(n_rows, n_cols, dtype=x.dtype, device=x.device)
    acc = _acc_dtype(x.dtype)
    prep = _Backward(
        dy=flat(dy, n_rows, n_cols), x=flat(x, n_rows, n_cols), weight=weight.contiguous(),
        mean=None if rms else flat(mean, n_rows), rstd=flat(rstd, n_rows),
        rowscale=flat(rowscale, n_rows), dropout_mask=flat(dropout_mask, n_rows, n_cols),
        dresidual_out=flat(dresidual_out, n_rows, n_cols),
        dx=dx, dresidual=torch.empty_like(dx) if has_residual else None,
        dweight=torch.empty(n_cols, dtype=weight.dtype, device=x.device),
        dbias=None if bias is None else torch.empty(n_cols, dtype=bias.dtype, device=x.device),
        shape=x.shape,
        flags=dict(IS_RMS=rms, HAS_BIAS=bias is not None, HAS_ROWSCALE=rowscale is not None,
                   HAS_DROPOUT=dropout_mask is not None,
                   HAS_DRESIDUAL_OUT=dresidual_out is not None, STORE_DRESIDUAL=has_residual,
                   SELECT_LOADS=profile.select_loads, COMPUTE_FP64=acc == torch.float64))
    if n_rows == 0:
        prep.dweight.zero_()
        if prep.dbias is not None:
            prep.dbias.zero_()
    return prep, _dropout_scale_parts(dropout_p)


def _row_operands(p: _Backward) -> tuple:
    """The leading arguments of the dx kernels, with a valid tensor for each unused one."""
    return (p.dy, p.x, p.weight, p.mean if p.mean is not None else p.rstd, p.rstd,
            p.rowscale if p.rowscale is not None else p.rstd,
            p.dropout_mask if p.dropout_mask is not None else p.dy,
            p.dresidual_out if p.dresidual_out is not None else p.dy,
            p.dx, p.dresidual if p.dresidual is not None else p.dx)


def _grads(p: _Backward) -> tuple:
    # plain tuples: harnesses rebuild outputs with type(out)(iterable)
    grads = (p.dx.view(p.shape), p.dweight, p.dbias)
    return grads if p.dresidual is None else grads + (p.dresidual.view(p.shape),)


def _bench_once(kernel_call, quantiles=None):
    """The autotuner's timer: times configs on a device; while interpreting or capturing
    launches for compile mode there is nothing to time, so each config runs once."""
    if knobs.runtime.interpret or launches.capturing():
        kernel_call()
        return 0.0
    from triton.runtime.driver import driver
    return driver.active.get_benchmarker()(kernel_call, quantiles=quantiles)


_atomic_autotuners: dict = {}


def _atomic_kernel(profile: Profile, configs: tuple) -> triton.runtime.Autotuner:
    """The fused backward kernel autotuned over ``configs``: one autotuner per profile and
    config set, since a choice timed on one target says nothing about another. Where
    nothing can be timed (interpreter, compile capture) the choice is not kept: every call
    runs, or captures, every config."""
    untimed = bool(knobs.runtime.interpret) or launches.capturing()
    key = (profile.name, configs, untimed)
    tuner = _atomic_autotuners.get(key)
    if tuner is None:
        tuner = _atomic_autotuners[key] = triton.autotune(
            configs=[triton.Config({"ROWS_PER_PROGRAM": rows}, num_warps=warps, num_stages=stages)
                     for rows, warps, stages in configs],
            key=["n_rows", "N"],
            reset_to_zero=["DW", "DB"],  # every config accumulates into the caller's buffers
            do_bench=_bench_once,
        )(_layer_norm_bwd_fused_kernel)
    if untimed:
        tuner.cache.clear()
    return tuner


def _atomic_configs(n_rows: int, block_n: int, dtype: torch.dtype, profile: Profile) -> tuple:
    """(rows, num_warps, num_stages) per config: the profile's autotune.layer_norm_backward
    table, or DEFAULT_ROWS_PER_PROGRAM; those whose tile exceeds the backward's row tile
    are dropped."""
    table = profile.autotune_configs("layer_norm_backward")
    if table is None:
        table = [{"ROWS_PER_PROGRAM": r} for r in DEFAULT_ROWS_PER_PROGRAM]
    limit = _backward_row_tile(dtype, profile)
    configs = []
    for cfg in table:
        unknown = set(cfg) - {"ROWS_PER_PROGRAM", "num_warps", "num_stages"}
        if "ROWS_PER_PROGRAM" not in cfg or unknown:
            raise ValueError(f"{profile.source}: autotune.layer_norm_backward configs take "
                             f"ROWS_PER_PROGRAM (required), num_warps, num_stages; got {cfg}")
        rows = next_power_of_2(cfg["ROWS_PER_PROGRAM"])
        if rows * block_n > limit or rows > next_power_of_2(n_rows):
            continue
        warps = profile.num_warps_for(rows * block_n, dtype)
        configs.append((rows, cfg.get("num_warps", warps),
                        cfg.get("num_stages", 3)))
    if not configs:  # one row per step always fits
        configs.append((1, profile.num_warps_for(block_n, dtype), 3))
    return tuple(dict.fromkeys(configs))


def _start_fused_backward(op, dy, x, weight, bias, mean, rstd, rms, rowscale, dropout_mask,
                          dropout_p, dresidual_out, has_residual, profile: Profile):
    """What the fused strategies share before their kernels: checked operands, and the
    finished gradients when there is nothing to launch (empty input) or the rows are
    longer than the fused backward takes (handed to the tiled strategy); None otherwise."""
    p, dropout_scale = _prepare_backward(op, dy, x, weight, bias, mean, rstd, rms, rowscale,
                                         dropout_mask, dropout_p, dresidual_out, has_residual,
                                         profile)
    n_rows, n_cols = p.dx.shape
    if n_rows == 0 or n_cols == 0:
        return p, dropout_scale, _grads(p)
    if not _fits_fused_backward(n_cols, x.dtype, profile):
        return p, dropout_scale, _backward_tiled(p, dropout_scale, profile)
    return p, dropout_scale, None


def layer_norm_backward_atomic(dy, x, weight, bias, mean, rstd, *, rms: bool = False,
                               rowscale=None, dropout_mask=None, dropout_p: float = 0.0,
                               dresidual_out=None, has_residual: bool = False,
                               profile: Profile):
    """Backward with dweight/dbias accumulated by tl.atomic_add (float32 buffers, float64
    for float64 inputs); rows per program autotuned. Rows beyond half the fused tile use
    the tiled strategy. See :func:`layer_norm_backward` for the arguments."""
    op = "layer_norm_backward_atomic"
    p, dropout_scale, done = _start_fused_backward(
        op, dy, x, weight, bias, mean, rstd, rms, rowscale, dropout_mask, dropout_p,
        dresidual_out, has_residual, profile)
    if done is not None:
        return done
    n_rows, n_cols = p.dx.shape
    acc = _acc_dtype(x.dtype)
    if not profile.supports_atomic("add", acc):
        raise UnsupportedDtypeError(
            f"{op}: {x.dtype} accumulates in {acc}, and profile '{profile.name}' has no "
            f"{acc} atomic_add (atomics.add in {profile.source})")
    dw = torch.zeros(n_cols, dtype=acc, device=x.device)
    db = torch.zeros(n_cols, dtype=acc, device=x.device) if p.dbias is not None else None
    block_n = next_power_of_2(n_cols)
    kernel = _atomic_kernel(profile, _atomic_configs(n_rows, block_n, x.dtype, profile))
    grid = lambda meta: (profile.capped_grid(cdiv(n_rows, meta["ROWS_PER_PROGRAM"])),)
    kernel[grid](*_row_operands(p), dw, db, n_rows, n_cols, *dropout_scale,
                 BLOCK_N=block_n, ATOMIC=True, SLICE_BROADCAST=profile.slice_broadcast,
                 **p.flags)
    p.dweight.copy_(dw)
    if db is not None:
        p.dbias.copy_(db)
    return _grads(p)


def _sum_partials(pairs: list[tuple[torch.Tensor, torch.Tensor]], profile: Profile) -> None:
    """Column sums of one or two (partial [n_partials, N], out [N]) pairs, in one launch."""
    partial, out = pairs[0]
    partial_2, out_2 = pairs[-1]
    n_partials, n_cols = partial.shape
    block_n = _column_block(n_cols, profile)
    block_p = max(1, min(next_power_of_2(n_partials),
                         profile.max_fused_elements(partial.dtype) // block_n))
    n_programs = max(1, min(cdiv(n_cols, block_n), profile.max_grid_num // len(pairs)))
    grid = (n_programs * len(pairs),)
    _sum_rows_kernel[grid](partial, out, partial_2, out_2, n_programs, n_partials, n_cols,
                           BLOCK_P=block_p, BLOCK_N=block_n, SELECT_LOADS=profile.select_loads,
                           COMPUTE_FP64=partial.dtype == torch.float64,
                           num_warps=profile.num_warps_for(block_p * block_n, partial.dtype))


def layer_norm_backward_partial(dy, x, weight, bias, mean, rstd, *, rms: bool = False,
                                rowscale=None, dropout_mask=None, dropout_p: float = 0.0,
                                dresidual_out=None, has_residual: bool = False,
                                profile: Profile):
    """Deterministic backward: one row of dweight/dbias partials per program (at most the
    profile's partials_per_compute_unit programs per compute unit), summed in a fixed order
    by a second kernel. Bitwise reproducible for a given profile and shape. Rows beyond
    half the fused tile use the tiled strategy. See :func:`layer_norm_backward` for the
    arguments."""
    op = "layer_norm_backward_partial"
    p, dropout_scale, done = _start_fused_backward(
        op, dy, x, weight, bias, mean, rstd, rms, rowscale, dropout_mask, dropout_p,
        dresidual_out, has_residual, profile)
    if done is not None:
        return done
    n_rows, n_cols = p.dx.shape
    acc = _acc_dtype(x.dtype)
    block_n = next_power_of_2(n_cols)
    block_m = _row_block(n_rows, block_n, _backward_tile(x.dtype, profile), profile)
    # a few programs per compute unit: one (the source article's rule) left an H200's SMs
    # with too few warps in flight to hide memory latency
    partials = profile.compute_units * profile.partials_per_compute_unit
    programs = profile.capped_grid(min(partials, cdiv(n_rows, block_m)))
    dw = torch.empty(programs, n_cols, dtype=acc, device=x.device)
    db = torch.empty(programs, n_cols, dtype=acc, device=x.device) if p.dbias is not None else None
    _layer_norm_bwd_fused_kernel[(programs,)](
        *_row_operands(p), dw, db if db is not None else dw,
        n_rows, n_cols, *dropout_scale, ROWS_PER_PROGRAM=block_m, BLOCK_N=block_n,
        ATOMIC=False, SLICE_BROADCAST=profile.slice_broadcast,
        num_warps=profile.num_warps_for(block_m * block_n, x.dtype), **p.flags)
    _sum_partials([(dw, p.dweight)] + ([(db, p.dbias)] if db is not None else []), profile)
    return _grads(p)


def _backward_tiled(p: _Backward, dropout_scale: tuple, profile: Profile):
    n_rows, n_cols = p.dx.shape
    dtype = p.x.dtype
    block_n, num_warps = _tiled_block(n_cols, dtype, profile)
    flags = {k: v for k, v in p.flags.items() if k != "HAS_BIAS"}
    mean_fix = torch.empty(n_rows, dtype=p.rstd.dtype, device=p.rstd.device)
    _layer_norm_bwd_dx_tiled_kernel[(profile.capped_grid(n_rows),)](
        *_row_operands(p), mean_fix, n_rows, n_cols, *dropout_scale, BLOCK_N=block_n,
        num_warps=num_warps, **flags)
    block_m, block_n, num_warps = _column_sum_tile(n_rows, n_cols, dtype, profile)
    _layer_norm_bwd_dwdb_kernel[(profile.capped_grid(cdiv(n_cols, block_n)),)](
        p.dy, p.x, p.mean if p.mean is not None else p.rstd, p.rstd, mean_fix, p.dweight,
        p.dbias if p.dbias is not None else p.dweight, n_rows, n_cols,
        BLOCK_M=block_m, BLOCK_N=block_n, IS_RMS=p.flags["IS_RMS"],
        HAS_BIAS=p.dbias is not None, SELECT_LOADS=profile.select_loads,
        SLICE_BROADCAST=profile.slice_broadcast, COMPUTE_FP64=p.flags["COMPUTE_FP64"],
        num_warps=num_warps)
    return _grads(p)


def layer_norm_backward_tiled(dy, x, weight, bias, mean, rstd, *, rms: bool = False,
                              rowscale=None, dropout_mask=None, dropout_p: float = 0.0,
                              dresidual_out=None, has_residual: bool = False,
                              profile: Profile):
    """Backward for any row length: a dx kernel looping over column tiles (two passes per
    row) and a dweight/dbias kernel over column blocks looping over rows. See
    :func:`layer_norm_backward` for the arguments."""
    op = "layer_norm_backward_tiled"
    p, dropout_scale = _prepare_backward(op, dy, x, weight, bias, mean, rstd, rms, rowscale,
                                         dropout_mask, dropout_p, dresidual_out, has_residual,
                                         profile)
    n_rows, n_cols = p.dx.shape
    if n_rows == 0 or n_cols == 0:
        return _grads(p)
    return _backward_tiled(p, dropout_scale, profile)


def layer_norm_backward(dy, x, weight, bias, mean, rstd, *, rms: bool = False,
                        rowscale=None, dropout_mask=None, dropout_p: float = 0.0,
                        dresidual_out=None, has_residual: bool = False, profile: Profile):
    """Gradients of :func:`layer_norm`: the deterministic partial-sum strategy when a row
    fits the fused backward (half the fused tile), the tiled one otherwise.

    ``x`` is the tensor that was normalized (the forward's ``residual_out`` when it is not
    None), ``mean``/``rstd`` the forward's (``mean`` unused with ``rms=True``). With
    dropout, pass the forward's ``dropout_mask`` and ``dropout_p``; with rowscale, the
    same ``rowscale``; ``dresidual_out`` is the gradient flowing into ``residual_out``.
    Returns ``(dx, dweight, dbias)``, dbias None when bias is None; with
    ``has_residual=True`` also ``dresidual``, the residual's gradient: the gradient of
    ``x'`` plus ``dresidual_out``, before dropout and rowscale (dx is that times
    keep / (1 - p) * rowscale).
    """
    if _fits_fused_backward(x.shape[-1] if x.ndim else 1, x.dtype, profile):
        strategy = layer_norm_backward_partial
    else:
        strategy = layer_norm_backward_tiled
    return strategy(dy, x, weight, bias, mean, rstd, rms=rms, rowscale=rowscale,
                    dropout_mask=dropout_mask, dropout_p=dropout_p,
                    dresidual_out=dresidual_out, has_residual=has_residual, profile=profile)


# ---- RMS norm -----------------------------------------------------------------------
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, *, profile: Profile):
    """RMS norm over the last dim: ``(y, rstd)``, y = x * rstd * weight."""
    out = layer_norm(x, weight, None, eps, rms=True, profile=profile)
    return out.y, out.rstd


def rms_norm_backward(dy, x, weight, rstd, *, profile: Profile):
    """Gradients of :func:`rms_norm`: ``(dx, dweight)``."""
    dx, dweight, _ = layer_norm_backward(dy, x, weight, None, None, rstd, rms=True,
                                         profile=profile)
    return dx, dweight


# ---- autograd -----------------------------------------------------------------------
class LayerNormFunction(torch.autograd.Function):
    """Differentiable :func:`layer_norm`: returns y, or (y, residual_out) with a residual
    (prenorm); gradients flow to x, weight, bias and residual."""

    @staticmethod
    def forward(ctx, x, weight, bias, residual, rowscale, eps, dropout_p, seed, rms, profile):
        out = layer_norm(x, weight, bias, eps, residual=residual, rowscale=rowscale,
                         dropout_p=dropout_p, seed=seed, return_dropout_mask=True, rms=rms,
                         profile=profile)
        normed = out.residual_out if out.residual_out is not None else x
        ctx.save_for_backward(normed, weight, bias, out.mean, out.rstd, rowscale,
                              out.dropout_mask)
        ctx.dropout_p, ctx.rms, ctx.profile = dropout_p, rms, profile
        ctx.has_residual = residual is not None
        if ctx.has_residual:
            return out.y, out.residual_out
        return out.y

    @staticmethod
    def backward(ctx, dy, dresidual_out=None):
        normed, weight, bias, mean, rstd, rowscale, dropout_mask = ctx.saved_tensors
        grads = layer_norm_backward(
            dy, normed, weight, bias, mean, rstd, rms=ctx.rms, rowscale=rowscale,
            dropout_mask=dropout_mask, dropout_p=ctx.dropout_p,
            dresidual_out=dresidual_out,
            has_residual=ctx.has_residual, profile=ctx.profile)
        dx, dweight, dbias = grads[:3]
        dresidual = grads[3] if ctx.has_residual else None
        return dx, dweight, dbias, dresidual, None, None, None, None, None, None


def layer_norm_autograd(x, weight, bias, eps: float = 1e-5, *, residual=None, rowscale=None,
                        dropout_p: float = 0.0, seed: int | None = None, rms: bool = False,
                        profile: Profile):
    """:class:`LayerNormFunction` with keyword options (fix ``seed`` for gradcheck)."""
    if dropout_p > 0.0 and seed is None:
        seed = int(torch.randint(0, 2**31 - 1, ()).item())
    return LayerNormFunction.apply(x, weight, bias, residual, rowscale, eps, dropout_p, seed,
                                   rms, profile)


def rms_norm_autograd(x, weight, eps: float = 1e-6, *, profile: Profile):
    """Differentiable :func:`rms_norm` (y only)."""
    return LayerNormFunction.apply(x, weight, None, None, None, eps, 0.0, None, True, profile)
