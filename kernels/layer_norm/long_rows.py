"""Layer norm and RMS norm backward for rows beyond the fused backward (about twice the
forward's arrays a column: half the fused tile): the tiled and column strategies.

- tiled: a dx kernel (two walks over a row's column tiles, the second relying on the cache
  to still hold the row) and a dweight/dbias kernel (column blocks, looping over rows),
  which reads x and dy again: up to 7 passes of x, dy and dx.
- columns (the default where row groups, :mod:`.row_groups`, do not apply): a row-sums
  kernel (one walk over each row for the three scalars
  its dx needs) and a column kernel (a column block of a split of the rows a program: dx,
  and the dweight/dbias partials summed in registers), whose partial rows are summed in a
  fixed order (:mod:`.column_sums`). Five passes that do not rely on the cache:
  forward+backward at bf16 1024x65536 went from 53 to 63% of copy on an H100
  (benchmarks/results/h100.jsonl, experiment "h100-triton3.6-long-rows").

Their tiles, grids and warps are decided by :func:`.plan_backward.backward_plan`; the
classes at the end launch its plan.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .column_sums import ColumnSums
from .plan_backward import BackwardPlan
from .tiles import (_acc_dtype, _add_triple, _Backward, _dropout_scale, _grads, _kahan_add,
                    _load, _load_hinted, _load_row_constants, _row_offsets, _row_operands,
                    _store_input_grads, _tile_offsets, _to_acc)
from ..fast_launch import PlannedLaunch
from ..row_align import aligned


@triton.jit
def _row_sums(DY, X, W, row, N, mean, rstd, BLOCK_N: tl.constexpr, IS_RMS: tl.constexpr,
              SELECT_LOADS: tl.constexpr, COMPUTE_FP64: tl.constexpr,
              TRIPLE_SUMS: tl.constexpr, EVICT: tl.constexpr):
    """(mean_fix, c1, c2) of one long row, from one walk over its column tiles: with
    d = x - mean and g = dy * w, mean_fix = mean(d) (the stored mean's rounding error,
    d being exact when |mean| >> std; 0 in RMS mode, where mean is 0), c1 = mean(g * xhat)
    and c2 = mean(g), so that dx = (g - (xhat * c1 + c2)) * rstd (RMS: no c2 term). Each
    tile is reduced to scalars at once: no tile-wide accumulator is live, so the tile can
    be the backward's whole row tile."""
    acc_ty = tl.float64 if COMPUTE_FP64 else tl.float32
    zero = tl.zeros([], dtype=acc_ty)
    sum_gd, sum_g, sum_d = zero, zero, zero
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        _, load_offs, mask = _row_offsets(row, cols, N, SELECT_LOADS)
        _, w_offs, _ = _row_offsets(0, cols, N, SELECT_LOADS)
        x = _to_acc(_load_hinted(X, load_offs, mask, SELECT_LOADS, EVICT), COMPUTE_FP64)
        dy = _to_acc(_load_hinted(DY, load_offs, mask, SELECT_LOADS, EVICT), COMPUTE_FP64)
        w = _to_acc(_load(W, w_offs, mask, SELECT_LOADS), COMPUTE_FP64)
        d = tl.where(mask, x - mean, 0.0)
        g = dy * w
        if TRIPLE_SUMS:
            # one reduction pass for the three: faster, not for float64 (it spilled)
            # measured: benchmarks/results/h200.jsonl, experiment "comments"
            tile_gd, tile_g, tile_d = tl.reduce((g * d, g, d), 0, _add_triple)
            sum_gd += tile_gd
            sum_g += tile_g
            sum_d += tile_d
        else:
            sum_gd += tl.sum(g * d, axis=0)
            sum_g += tl.sum(g, axis=0)
            sum_d += tl.sum(d, axis=0)
    mean_fix = 0.0
    if not IS_RMS:
        mean_fix = sum_d / N
    c1 = (sum_gd - mean_fix * sum_g) * rstd / N
    return mean_fix, c1, sum_g / N


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
    TRIPLE_SUMS: tl.constexpr,  # the three sums in one tl.reduce (where the backend lowers it)
    ROW_ALIGN: tl.constexpr,  # a power of two dividing N (kernels/row_align.py)
    KEEP: tl.constexpr,    # L2 hint of pass 1's loads of x and dy (read again in pass 2)
    STREAM: tl.constexpr,  # L2 hint of pass 2's loads and of the stores (not read again)
):
    pid = tl.program_id(0).to(tl.int64)
    N = aligned(N, ROW_ALIGN)
    dropout_scale = _dropout_scale(scale_hi, scale_lo, COMPUTE_FP64)
    for row in range(pid, n_rows, tl.num_programs(0)):
        rstd = _to_acc(tl.load(RSTD + row), COMPUTE_FP64)
        mean = 0.0
        if not IS_RMS:
            mean = _to_acc(tl.load(MEAN + row), COMPUTE_FP64)
        rowscale = 1.0
        if HAS_ROWSCALE:
            rowscale = _to_acc(tl.load(ROWSCALE + row), COMPUTE_FP64)
        mean_fix, c1, c2 = _row_sums(DY, X, W, row, N, mean, rstd, BLOCK_N, IS_RMS,
                                     SELECT_LOADS, COMPUTE_FP64, TRIPLE_SUMS, KEEP)
        if not IS_RMS:
            tl.store(MEAN_FIX + row, mean_fix.to(MEAN_FIX.dtype.element_ty))
        # pass 2: dx tile by tile, last tile first (the likeliest still in cache)
        n_tiles = tl.cdiv(N, BLOCK_N)
        for i in range(0, n_tiles):
            cols = (n_tiles - 1 - i) * BLOCK_N + tl.arange(0, BLOCK_N)
            offs, load_offs, mask = _row_offsets(row, cols, N, SELECT_LOADS)
            _, w_offs, _ = _row_offsets(0, cols, N, SELECT_LOADS)
            x = _to_acc(_load_hinted(X, load_offs, mask, SELECT_LOADS, STREAM), COMPUTE_FP64)
            dy = _to_acc(_load_hinted(DY, load_offs, mask, SELECT_LOADS, STREAM), COMPUTE_FP64)
            w = _to_acc(_load(W, w_offs, mask, SELECT_LOADS), COMPUTE_FP64)
            xhat = ((x - mean) - mean_fix) * rstd
            if IS_RMS:
                dx = (dy * w - xhat * c1) * rstd
            else:
                dx = (dy * w - (xhat * c1 + c2)) * rstd
            _store_input_grads(DX, DRESIDUAL_OUT, DRESIDUAL, DROPOUT_MASK, dx, rowscale, offs,
                               load_offs, mask, dropout_scale, HAS_DRESIDUAL_OUT,
                               STORE_DRESIDUAL, HAS_DROPOUT, HAS_ROWSCALE, SELECT_LOADS,
                               COMPUTE_FP64, STREAM)


@triton.jit
def _add_column_terms(acc_w, comp_w, acc_b, comp_b, dy, xhat, HAS_BIAS: tl.constexpr,
                      COMPENSATED: tl.constexpr):
    """One tile's terms of dweight (dy * xhat) and dbias (dy) added to tile-wide sums,
    compensated (Kahan) where a lane adds many tiles."""
    if COMPENSATED:
        acc_w, comp_w = _kahan_add(acc_w, comp_w, dy * xhat)
        if HAS_BIAS:
            acc_b, comp_b = _kahan_add(acc_b, comp_b, dy)
    else:
        acc_w += dy * xhat
        if HAS_BIAS:
            acc_b += dy
    return acc_w, comp_w, acc_b, comp_b


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
    COMPENSATED: tl.constexpr,  # compensated sums (each lane adds many rows)
    SELECT_LOADS: tl.constexpr,
    SLICE_BROADCAST: tl.constexpr,
    COMPUTE_FP64: tl.constexpr,
    ROW_ALIGN: tl.constexpr,  # a power of two dividing N (kernels/row_align.py)
):
    pid = tl.program_id(0).to(tl.int64)
    N = aligned(N, ROW_ALIGN)
    acc_ty = tl.float64 if COMPUTE_FP64 else tl.float32
    for block in range(pid, tl.cdiv(N, BLOCK_N), tl.num_programs(0)):
        cols = block * BLOCK_N + tl.arange(0, BLOCK_N)
        # with COMPENSATED, compensated sums: each lane adds n_rows / BLOCK_M terms, and a
        # plain float32 sum of 4M rows erred by 14x the float32 bound where torch's cascade
        # sum stayed inside it
        acc_w = tl.zeros([BLOCK_M, BLOCK_N], dtype=acc_ty)
        acc_b = tl.zeros([BLOCK_M, BLOCK_N], dtype=acc_ty)
        comp_w = tl.zeros([BLOCK_M, BLOCK_N], dtype=acc_ty)
        comp_b = tl.zeros([BLOCK_M, BLOCK_N], dtype=acc_ty)
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
            acc_w, comp_w, acc_b, comp_b = _add_column_terms(  # dy is 0 out of bounds
                acc_w, comp_w, acc_b, comp_b, dy, xhat, HAS_BIAS, COMPENSATED)
        col_mask = cols < N
        tl.store(DW + cols, tl.sum(acc_w, axis=0).to(DW.dtype.element_ty), mask=col_mask)
        if HAS_BIAS:
            tl.store(DB + cols, tl.sum(acc_b, axis=0).to(DB.dtype.element_ty), mask=col_mask)


@triton.jit
def _layer_norm_bwd_row_sums_kernel(
    DY, X, W, MEAN, RSTD,   # as _layer_norm_bwd_dx_tiled_kernel
    ROW_SUMS,               # pointer to [3, n_rows]: each row's mean_fix, c1 and c2 (written)
    n_rows, N,
    BLOCK_N: tl.constexpr,  # columns per tile: a row takes cdiv(N, BLOCK_N) tiles
    IS_RMS: tl.constexpr,
    SELECT_LOADS: tl.constexpr,
    COMPUTE_FP64: tl.constexpr,
    TRIPLE_SUMS: tl.constexpr,
    ROW_ALIGN: tl.constexpr,
    EVICT: tl.constexpr,    # L2 hint of the loads (the column kernel reads x and dy later)
):
    """The column strategy's first kernel: one walk over each row for the three scalars
    its dx needs (see _row_sums); nothing is written per element."""
    pid = tl.program_id(0).to(tl.int64)
    N = aligned(N, ROW_ALIGN)
    for row in range(pid, n_rows, tl.num_programs(0)):
        rstd = _to_acc(tl.load(RSTD + row), COMPUTE_FP64)
        mean = 0.0
        if not IS_RMS:
            mean = _to_acc(tl.load(MEAN + row), COMPUTE_FP64)
        mean_fix, c1, c2 = _row_sums(DY, X, W, row, N, mean, rstd, BLOCK_N, IS_RMS,
                                     SELECT_LOADS, COMPUTE_FP64, TRIPLE_SUMS, EVICT)
        out_ty = ROW_SUMS.dtype.element_ty
        tl.store(ROW_SUMS + row, mean_fix.to(out_ty))
        tl.store(ROW_SUMS + n_rows + row, c1.to(out_ty))
        tl.store(ROW_SUMS + 2 * n_rows + row, c2.to(out_ty))


@triton.jit
def _layer_norm_bwd_columns_kernel(
    # as _layer_norm_bwd_fused_kernel:
    DY, X, W, MEAN, RSTD, ROWSCALE, DROPOUT_MASK, DRESIDUAL_OUT, DX, DRESIDUAL,
    ROW_SUMS,               # pointer to [3, n_rows]: mean_fix, c1, c2 of each row
    DW,                     # pointer to dweight partials [n_splits, N]
    DB,                     # pointer to dbias partials, like DW (unused without HAS_BIAS)
    n_rows, N, scale_hi, scale_lo,
    n_col_blocks,           # cdiv(N, BLOCK_N)
    rows_per_split,         # rows of one split (a multiple of BLOCK_M)
    n_tasks,                # n_col_blocks * n_splits: (column block, split) pairs
    BLOCK_M: tl.constexpr,  # rows per tile
    BLOCK_N: tl.constexpr,  # columns per tile (a column block)
    IS_RMS: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    HAS_ROWSCALE: tl.constexpr,
    HAS_DROPOUT: tl.constexpr,
    HAS_DRESIDUAL_OUT: tl.constexpr,
    STORE_DRESIDUAL: tl.constexpr,
    COMPENSATED: tl.constexpr,  # compensated partial sums (each lane adds many row tiles)
    SELECT_LOADS: tl.constexpr,
    SLICE_BROADCAST: tl.constexpr,
    COMPUTE_FP64: tl.constexpr,
    ROW_ALIGN: tl.constexpr,
):
    """The column strategy's second kernel: a program takes a column block of a split of
    the rows, walks its rows tile by tile, writes dx and sums dweight and dbias down its
    columns in registers; each split stores one row of partials. x and dy are read once
    here and once by the row sums: five passes in all, none that relies on the cache."""
    pid = tl.program_id(0).to(tl.int64)
    N = aligned(N, ROW_ALIGN)
    dropout_scale = _dropout_scale(scale_hi, scale_lo, COMPUTE_FP64)
    acc_ty = tl.float64 if COMPUTE_FP64 else tl.float32
    # one grid axis, (column block, split) pairs in a grid-stride loop: NPUs flatten the
    # other axes, and the grid is capped at the profile's MAX_GRID_NUM
    for task in range(pid, n_tasks, tl.num_programs(0)):
        split = task // n_col_blocks
        cols = (task % n_col_blocks) * BLOCK_N + tl.arange(0, BLOCK_N)
        _, w_offs, col_mask = _row_offsets(0, cols, N, SELECT_LOADS)
        w = _to_acc(_load(W, w_offs, col_mask, SELECT_LOADS), COMPUTE_FP64)[None, :]
        acc_w = tl.zeros([BLOCK_M, BLOCK_N], dtype=acc_ty)
        acc_b = tl.zeros([BLOCK_M, BLOCK_N], dtype=acc_ty)
        comp_w = tl.zeros([BLOCK_M, BLOCK_N], dtype=acc_ty)
        comp_b = tl.zeros([BLOCK_M, BLOCK_N], dtype=acc_ty)
        first = split * rows_per_split
        end = tl.minimum(first + rows_per_split, n_rows)
        for start in range(first, end, BLOCK_M):
            rows = start + tl.arange(0, BLOCK_M)
            # rows past the split's end are masked (and clamped for SELECT_LOADS) as if
            # they were past the tensor's
            offs, load_offs, mask = _tile_offsets(rows, cols, end, N, SELECT_LOADS)
            x = _to_acc(_load(X, load_offs, mask, SELECT_LOADS), COMPUTE_FP64)
            dy = _to_acc(_load(DY, load_offs, mask, SELECT_LOADS), COMPUTE_FP64)
            rstd = _to_acc(_load_row_constants(RSTD, rows, end, SELECT_LOADS,
                                               SLICE_BROADCAST), COMPUTE_FP64)
            c1 = _to_acc(_load_row_constants(ROW_SUMS + n_rows, rows, end, SELECT_LOADS,
                                             SLICE_BROADCAST), COMPUTE_FP64)
            if IS_RMS:
                xhat = x * rstd
                dx = (dy * w - xhat * c1) * rstd
            else:
                mean = _to_acc(_load_row_constants(MEAN, rows, end, SELECT_LOADS,
                                                   SLICE_BROADCAST), COMPUTE_FP64)
                mean_fix = _to_acc(_load_row_constants(ROW_SUMS, rows, end, SELECT_LOADS,
                                                       SLICE_BROADCAST), COMPUTE_FP64)
                c2 = _to_acc(_load_row_constants(ROW_SUMS + 2 * n_rows, rows, end,
                                                 SELECT_LOADS, SLICE_BROADCAST), COMPUTE_FP64)
                xhat = tl.where(mask, ((x - mean) - mean_fix) * rstd, 0.0)
                dx = (dy * w - (xhat * c1 + c2)) * rstd
            rowscale = 1.0
            if HAS_ROWSCALE:
                rowscale = _to_acc(_load_row_constants(ROWSCALE, rows, end, SELECT_LOADS,
                                                       SLICE_BROADCAST), COMPUTE_FP64)
            _store_input_grads(DX, DRESIDUAL_OUT, DRESIDUAL, DROPOUT_MASK, dx, rowscale, offs,
                               load_offs, mask, dropout_scale, HAS_DRESIDUAL_OUT,
                               STORE_DRESIDUAL, HAS_DROPOUT, HAS_ROWSCALE, SELECT_LOADS,
                               COMPUTE_FP64, "")
            acc_w, comp_w, acc_b, comp_b = _add_column_terms(  # dy is 0 out of bounds
                acc_w, comp_w, acc_b, comp_b, dy, xhat, HAS_BIAS, COMPENSATED)
        tl.store(DW + split * N + cols, tl.sum(acc_w, axis=0), mask=col_mask)
        if HAS_BIAS:
            tl.store(DB + split * N + cols, tl.sum(acc_b, axis=0), mask=col_mask)


# --------------------------------------------------------------------------------------
# Launches of a backward plan (.plan_backward).
# --------------------------------------------------------------------------------------
class TiledBackward:
    """The tiled strategy's launches of ``plan``: called with a call's operands and
    dropout scale, it launches the dx kernel, then the dweight/dbias kernel."""
    __slots__ = ("dx", "dwdb")

    def __init__(self, plan: BackwardPlan):
        dx, dwdb = plan.launches
        self.dx = PlannedLaunch(_layer_norm_bwd_dx_tiled_kernel, dx.grid, **dx.meta)
        self.dwdb = PlannedLaunch(_layer_norm_bwd_dwdb_kernel, dwdb.grid, **dwdb.meta)

    def __call__(self, p: _Backward, dropout_scale: tuple):
        n_rows, n_cols = p.n_rows, p.n_cols
        mean_fix = torch.empty(n_rows, dtype=p.rstd.dtype, device=p.rstd.device)
        self.dx(*_row_operands(p), mean_fix, n_rows, n_cols, *dropout_scale)
        self.dwdb(p.dy, p.x, p.mean if p.mean is not None else p.rstd, p.rstd, mean_fix,
                  p.dweight, p.dbias if p.dbias is not None else p.dweight, n_rows, n_cols)
        return _grads(p)


class ColumnsBackward:
    """The column strategy's launches of ``plan``: the row sums, the column kernel, then
    the column sums of its partial rows."""
    __slots__ = ("row_sums", "columns", "sums", "n_splits", "work")

    def __init__(self, plan: BackwardPlan):
        row_sums, columns = plan.launches
        self.row_sums = PlannedLaunch(_layer_norm_bwd_row_sums_kernel, row_sums.grid,
                                      **row_sums.meta)
        self.columns = PlannedLaunch(_layer_norm_bwd_columns_kernel, columns.grid,
                                     **columns.meta)
        self.sums, self.n_splits, self.work = ColumnSums(plan.sums), plan.partials, plan.scalars

    def __call__(self, p: _Backward, dropout_scale: tuple):
        n_rows, n_cols = p.n_rows, p.n_cols
        row_sums = torch.empty(3, n_rows, dtype=p.rstd.dtype, device=p.rstd.device)
        self.row_sums(p.dy, p.x, p.weight, p.mean if p.mean is not None else p.rstd, p.rstd,
                      row_sums, n_rows, n_cols)
        acc = _acc_dtype(p.x.dtype)
        dw = torch.empty(self.n_splits, n_cols, dtype=acc, device=p.x.device)
        db = (torch.empty(self.n_splits, n_cols, dtype=acc, device=p.x.device)
              if p.dbias is not None else None)
        self.columns(*_row_operands(p), row_sums, dw, db if db is not None else dw, n_rows,
                     n_cols, *dropout_scale, *self.work)
        self.sums([(dw, p.dweight)] + ([(db, p.dbias)] if db is not None else []))
        return _grads(p)
