"""Layer norm and RMS norm for long rows, each row shared by a group of programs: the
backward, and the float32 layer-norm forward.

dx needs two sums over its whole row before any element can be written; a long row does
not fit one program. The column strategy (:mod:`.long_rows`) reads x and dy twice for it:
once for the row sums, once for dx. Here a row is split over a *group* of programs, each
holding one column slice of it (and of the next rows) in registers:

1. each program reduces its slice to three partial sums per row and stores them;
2. the group meets at a counter (one atomic add each, then a wait until every program of
   the group has arrived) and each program reads all the group's partial sums;
3. each program writes dx of its slice from the registers, and adds its dweight/dbias
   terms to sums of its columns it keeps in registers over all the group's rows.

x and dy are read once: three passes of x, dy and dx where the column strategy moves five.
The partial rows of dweight/dbias (one a group) are summed in a fixed order
(:mod:`.column_sums`), so the result is bitwise reproducible for a given profile, shape
and compute-unit count.

The wait needs every program of a group resident at once, so this strategy is taken only
where the profile says how many programs a compute unit keeps resident
(``tuning.layer_norm.backward_row_group_tile``, ``_32bit``), with registers capped to fit
them (``maxnreg``, CUDA only), and the grid is at most that many programs on each compute
unit the attached device has. The interpreter runs a grid's programs one after another,
so there a group is a single program holding whole rows: its arithmetic is checked, the
meeting of several programs only on a device.

The forward (``tuning.layer_norm.forward_row_group_tile``, ``_32bit``) meets once a row
block: each program stores its slice's mean and sum of squared deviations from it, and
every program combines the group's in a fixed order and normalizes its slice from its
registers. x is read once, where the tiled forward walks a row three times.

Where each direction takes row groups, and their layout, tiles and warps, are decided by
the plans (:func:`.plan.forward_plan`, :func:`.plan_backward.backward_plan`); the classes
at the end launch them.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .column_sums import ColumnSums
from .tiles import (_acc_dtype, _add_pair, _add_triple, _Backward, _dropout_scale, _grads,
                    _add_block_column_sums, _load, _load_row_constants, _load_x_dy,
                    _row_offsets, _row_operands, _store_input_grads, _tile_offsets, _to_acc,
                    _x_dy_step)
from ..fast_launch import PlannedLaunch
from ..row_align import aligned
from .plan import ForwardPlan
from .plan_backward import BackwardPlan


@triton.jit
def _reconverted(v, F16_ASM: tl.constexpr):
    # v (16-bit) in float32 again, by a conversion the compiler does not merge with the
    # first one: merged, the float32 copies of x and dy stay live across the meeting in
    # place of the 16-bit ones, and a tile of 2 rows x 4096 columns spilled 152 bytes a
    # thread at 128 registers (none this way). bfloat16 is float32's upper half, shifted
    # in exactly; float16 through an inline conversion the compiler keeps where it is
    # (CUDA: the tile is a CUDA field; the interpreter converts plainly).
    if v.dtype == tl.bfloat16:
        return (v.to(tl.uint16, bitcast=True).to(tl.uint32) << 16).to(tl.float32, bitcast=True)
    elif F16_ASM:
        return tl.inline_asm_elementwise("cvt.f32.f16 $0, $1;", "=r,h", [v], dtype=tl.float32,
                                         is_pure=False, pack=1)
    else:
        return v.to(tl.float32)


@triton.jit
def _meet(ARRIVED, group, meeting, n_parts):
    # every thread's partial-sum stores before the release, then wait for the whole group
    tl.debug_barrier()
    target = (meeting + 1) * n_parts
    arrived = tl.atomic_add(ARRIVED + group, 1, sem="release", scope="gpu") + 1
    while arrived < target:
        arrived = tl.atomic_add(ARRIVED + group, 0, sem="acquire", scope="gpu")


@triton.jit
def _layer_norm_fwd_row_groups_kernel(
    X, Y, W, B, MEAN, RSTD,
    SUMS,                   # [n_groups, 2, PARTS_BLOCK, ROWS, 2]: each part's row statistics
    ARRIVED,                # [n_groups] int32, zero at launch: arrivals at each group's counter
    n_rows, N, eps,
    n_groups,               # groups of n_parts programs: the grid is n_groups * n_parts
    n_parts,                # programs a row is split over: cdiv(N, BLOCK_N)
    PARTS_BLOCK: tl.constexpr,  # next_power_of_2(n_parts)
    ROWS: tl.constexpr,     # rows a group takes at each meeting
    BLOCK_N: tl.constexpr,  # columns of a program's slice
    IS_RMS: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    RECONVERT: tl.constexpr,  # 16-bit x: held as loaded, converted again after the meeting
    F16_ASM: tl.constexpr,  # float16 reconverted by inline PTX (see _reconverted)
    PAIRED_SUMS: tl.constexpr,  # both sums in one tl.reduce (where the backend lowers it)
    SELECT_LOADS: tl.constexpr,
    ROW_ALIGN: tl.constexpr,
):
    # Each program reduces its slice of ROWS rows to a mean and a sum of squared deviations
    # from it (RMS norm: a sum of squares), the group meets, and each program combines the
    # parts' statistics in a fixed order (Chan et al.: the parts' means weighted by their
    # columns, their deviation sums plus each part's columns times its mean's squared
    # distance from the row's) and normalizes its slice from its registers: x is read once.
    pid = tl.program_id(0).to(tl.int64)
    N = aligned(N, ROW_ALIGN)
    group = pid // n_parts
    part = pid % n_parts
    cols = part * BLOCK_N + tl.arange(0, BLOCK_N)
    _, w_offs, col_mask = _row_offsets(0, cols, N, SELECT_LOADS)
    w = _to_acc(_load(W, w_offs, col_mask, SELECT_LOADS), False)[None, :]
    r = tl.arange(0, ROWS)
    parts = tl.arange(0, PARTS_BLOCK)
    in_group = (parts < n_parts)[:, None]
    # each part's share of a row's columns (the last part may be ragged; none past it)
    share = (tl.maximum(tl.minimum(N - parts * BLOCK_N, BLOCK_N), 0) / N)[:, None]
    n_mine = tl.minimum(N - part * BLOCK_N, BLOCK_N)
    meeting = 0
    for block in range(group, tl.cdiv(n_rows, ROWS), n_groups):
        rows = block * ROWS + r
        offs, load_offs, mask = _tile_offsets(rows, cols, n_rows, N, SELECT_LOADS)
        x_in = _load(X, load_offs, mask, SELECT_LOADS)
        x = _to_acc(x_in, False)
        slot = SUMS + ((group * 2 + meeting % 2) * PARTS_BLOCK) * (ROWS * 2)
        mine = slot + part * (ROWS * 2) + r * 2
        if IS_RMS:
            tl.store(mine, tl.sum(x * x, axis=1))
        else:
            # as the fused forward: centred twice, d = x - mean0 then mean(d), what
            # rounding mean0 lost (a slice with inf or NaN keeps the plain mean0)
            mean0 = tl.sum(x, axis=1) / n_mine
            d = tl.where(mask, x - mean0[:, None], 0.0)
            if PAIRED_SUMS:
                sum_d, sum_dd = tl.reduce((d, d * d), 1, _add_pair)
            else:
                sum_d, sum_dd = tl.sum(d, axis=1), tl.sum(d * d, axis=1)
            mean_d = sum_d / n_mine
            tl.store(mine, tl.where(mean_d == mean_d, mean0 + mean_d, mean0))
            tl.store(mine + 1, tl.maximum(sum_dd - sum_d * mean_d, 0.0))
        _meet(ARRIVED, group, meeting, n_parts)
        # the group's statistics, read past the (incoherent) L1, combined in a fixed order
        theirs = slot + parts[:, None] * (ROWS * 2) + r[None, :] * 2
        mean = tl.zeros([ROWS], dtype=tl.float32)
        if IS_RMS:
            squares = tl.load(theirs, mask=in_group, other=0.0, cache_modifier=".cg")
            var = tl.sum(squares, 0) / N
        else:
            means = tl.load(theirs, mask=in_group, other=0.0, cache_modifier=".cg")
            devs = tl.load(theirs + 1, mask=in_group, other=0.0, cache_modifier=".cg")
            mean = tl.sum(share * means, 0)
            apart = tl.where(in_group, means - mean[None, :], 0.0)
            var = tl.sum(devs, 0) / N + tl.sum(share * apart * apart, 0)
        rstd = 1.0 / tl.sqrt(var + eps)
        if part == 0:
            in_rows = rows < n_rows
            tl.store(RSTD + rows, rstd, mask=in_rows)
            if not IS_RMS:
                tl.store(MEAN + rows, mean, mask=in_rows)
        if RECONVERT:
            x = _reconverted(x_in, F16_ASM)
        y = (x - mean[:, None]) * rstd[:, None] * w
        if HAS_BIAS:
            y += _to_acc(_load(B, w_offs, col_mask, SELECT_LOADS), False)[None, :]
        tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=mask)
        meeting += 1


@triton.jit
def _layer_norm_bwd_row_groups_kernel(
    # as _layer_norm_bwd_fused_kernel:
    DY, X, W, MEAN, RSTD, ROWSCALE, DROPOUT_MASK, DRESIDUAL_OUT, DX, DRESIDUAL,
    SUMS,                   # [n_groups, 2, PARTS_BLOCK, ROWS, 4]: each part's row sums
    ARRIVED,                # [n_groups] int32, zero at launch: arrivals at each group's counter
    DW,                     # pointer to dweight partials [n_groups, N]
    DB,                     # pointer to dbias partials, like DW (unused without HAS_BIAS)
    n_rows, N, scale_hi, scale_lo,
    n_groups,               # groups of n_parts programs: the grid is n_groups * n_parts
    n_parts,                # programs a row is split over: cdiv(N, BLOCK_N)
    PARTS_BLOCK: tl.constexpr,  # next_power_of_2(n_parts)
    ROWS: tl.constexpr,     # rows a group takes at each meeting
    BLOCK_N: tl.constexpr,  # columns of a program's slice
    PREFETCH: tl.constexpr,  # load the next rows' x and dy before each meeting
    RECONVERT: tl.constexpr,  # 16-bit x and dy: held as loaded, converted again after it
    F16_ASM: tl.constexpr,  # float16 reconverted by inline PTX (see _reconverted)
    IS_RMS: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    HAS_ROWSCALE: tl.constexpr,
    HAS_DROPOUT: tl.constexpr,
    HAS_DRESIDUAL_OUT: tl.constexpr,
    STORE_DRESIDUAL: tl.constexpr,
    COMPENSATED: tl.constexpr,  # compensated dweight/dbias sums (each lane adds many rows)
    TRIPLE_SUMS: tl.constexpr,  # the three sums in one tl.reduce (where the backend lowers it)
    SELECT_LOADS: tl.constexpr,
    SLICE_BROADCAST: tl.constexpr,
    COMPUTE_FP64: tl.constexpr,
    EVEN_ROWS: tl.constexpr,  # ROWS divides n_rows: no row masks but those of the prefetch
    EVEN_N: tl.constexpr,     # BLOCK_N divides N: no column masks
    ROW_ALIGN: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    N = aligned(N, ROW_ALIGN)
    group = pid // n_parts
    part = pid % n_parts
    dropout_scale = _dropout_scale(scale_hi, scale_lo, COMPUTE_FP64)
    acc_ty = tl.float64 if COMPUTE_FP64 else tl.float32
    cols = part * BLOCK_N + tl.arange(0, BLOCK_N)
    _, w_offs, col_mask = _row_offsets(0, cols, N, SELECT_LOADS, EVEN_N)
    # held over all the group's rows: measured faster than reloaded after each meeting
    w = _to_acc(_load(W, w_offs, col_mask, SELECT_LOADS), COMPUTE_FP64)[None, :]
    r = tl.arange(0, ROWS)
    parts = tl.arange(0, PARTS_BLOCK)
    acc_w = tl.zeros([BLOCK_N], dtype=acc_ty)
    acc_b = tl.zeros([BLOCK_N], dtype=acc_ty)
    comp_w = tl.zeros([BLOCK_N], dtype=acc_ty)
    comp_b = tl.zeros([BLOCK_N], dtype=acc_ty)
    meeting = 0
    x_ahead, dy_ahead = 0.0, 0.0
    if PREFETCH:
        x_ahead, dy_ahead = _load_x_dy(X, DY, group * ROWS + r, cols, n_rows, N, SELECT_LOADS,
                                       EVEN_N)
    for block in range(group, tl.cdiv(n_rows, ROWS), n_groups):
        rows = block * ROWS + r
        offs, load_offs, mask = _tile_offsets(rows, cols, n_rows, N, SELECT_LOADS, EVEN_ROWS,
                                              EVEN_N)
        # with PREFETCH the loads of the next rows are in flight while the group meets
        x_in, dy_in, x_ahead, dy_ahead = _x_dy_step(
            X, DY, load_offs, mask, rows + n_groups * ROWS, cols, n_rows, N, x_ahead, dy_ahead,
            PREFETCH, SELECT_LOADS, EVEN_N)
        x = _to_acc(x_in, COMPUTE_FP64)
        dy = _to_acc(dy_in, COMPUTE_FP64)
        rstd = _to_acc(_load_row_constants(RSTD, rows, n_rows, SELECT_LOADS, SLICE_BROADCAST),
                       COMPUTE_FP64)
        mean = 0.0
        if not IS_RMS:
            mean = _to_acc(_load_row_constants(MEAN, rows, n_rows, SELECT_LOADS,
                                                SLICE_BROADCAST), COMPUTE_FP64)
        d = tl.where(mask, x - mean, 0.0)
        g = dy * w
        if TRIPLE_SUMS:
            sum_gd, sum_g, sum_d = tl.reduce((g * d, g, d), 1, _add_triple)
        else:
            sum_gd, sum_g, sum_d = tl.sum(g * d, axis=1), tl.sum(g, axis=1), tl.sum(d, axis=1)
        # two slots a group, used in turn: a program can be one meeting ahead of another
        # (it passed this meeting, the other is still reading its sums) but not two
        slot = SUMS + ((group * 2 + meeting % 2) * PARTS_BLOCK) * (ROWS * 4)
        mine = slot + part * (ROWS * 4) + r * 4
        tl.store(mine, sum_gd)
        tl.store(mine + 1, sum_g)
        tl.store(mine + 2, sum_d)
        _meet(ARRIVED, group, meeting, n_parts)
        # the group's sums, read past the (incoherent) L1 and added in a fixed order
        theirs = slot + parts[:, None] * (ROWS * 4) + r[None, :] * 4
        in_group = (parts < n_parts)[:, None]
        all_gd = tl.load(theirs, mask=in_group, other=0.0, cache_modifier=".cg")
        all_g = tl.load(theirs + 1, mask=in_group, other=0.0, cache_modifier=".cg")
        all_d = tl.load(theirs + 2, mask=in_group, other=0.0, cache_modifier=".cg")
        if TRIPLE_SUMS:
            sum_gd, sum_g, sum_d = tl.reduce((all_gd, all_g, all_d), 0, _add_triple)
        else:
            sum_gd, sum_g, sum_d = tl.sum(all_gd, 0), tl.sum(all_g, 0), tl.sum(all_d, 0)
        if RECONVERT:
            # the same values as before the meeting, from the 16-bit registers
            x = _reconverted(x_in, F16_ASM)
            dy = _reconverted(dy_in, F16_ASM)
            d = tl.where(mask, x - mean, 0.0)
            g = dy * w
        # as _row_sums: mean_fix = mean(d) undoes the stored mean's rounding
        mean_fix = 0.0
        if not IS_RMS:
            mean_fix = (sum_d / N)[:, None]
        c1 = (sum_gd[:, None] - mean_fix * sum_g[:, None]) * rstd / N
        xhat = tl.where(mask, (d - mean_fix) * rstd, 0.0)
        if IS_RMS:
            dx = (g - xhat * c1) * rstd
        else:
            dx = (g - (xhat * c1 + sum_g[:, None] / N)) * rstd
        rowscale = 1.0
        if HAS_ROWSCALE:
            rowscale = _to_acc(_load_row_constants(ROWSCALE, rows, n_rows, SELECT_LOADS,
                                                   SLICE_BROADCAST), COMPUTE_FP64)
        _store_input_grads(DX, DRESIDUAL_OUT, DRESIDUAL, DROPOUT_MASK, dx, rowscale, offs,
                           load_offs, mask, dropout_scale, HAS_DRESIDUAL_OUT, STORE_DRESIDUAL,
                           HAS_DROPOUT, HAS_ROWSCALE, SELECT_LOADS, COMPUTE_FP64, "")
        acc_w, comp_w, acc_b, comp_b = _add_block_column_sums(acc_w, comp_w, acc_b, comp_b, dy,
                                                              xhat, HAS_BIAS, COMPENSATED)
        meeting += 1
    tl.store(DW + group * N + cols, acc_w, mask=col_mask)
    if HAS_BIAS:
        tl.store(DB + group * N + cols, acc_b, mask=col_mask)


# --------------------------------------------------------------------------------------
# Launches of the plans (.plan, .plan_backward).
# --------------------------------------------------------------------------------------
class _ForwardRowGroups:
    """The row-group forward as a layer-norm forward plan: called with the forward
    launch's arguments, it makes the group statistics' buffer and counters and launches."""
    __slots__ = ("planned", "n_groups", "n_parts", "n_sums")

    def __init__(self, planned, n_groups: int, n_parts: int, n_sums: int):
        self.planned, self.n_groups, self.n_parts, self.n_sums = planned, n_groups, n_parts, n_sums

    def __call__(self, x, y, w, b, residual, residual_out, rowscale, dropout_mask, mean, rstd,
                 n_rows, n_cols, eps, *_):
        sums = torch.empty(self.n_sums, dtype=torch.float32, device=x.device)
        arrived = torch.zeros(self.n_groups, dtype=torch.int32, device=x.device)
        self.planned(x, y, w, b, mean, rstd, sums, arrived, n_rows, n_cols, eps,
                     self.n_groups, self.n_parts)


def forward_row_groups_launch(plan: ForwardPlan) -> _ForwardRowGroups:
    """The row-group forward launch of ``plan`` (:func:`.plan.forward_plan`)."""
    return _ForwardRowGroups(PlannedLaunch(_layer_norm_fwd_row_groups_kernel, plan.grid,
                                           **plan.meta), *plan.groups)


class RowGroupsBackward:
    """The row-group strategy's launches of ``plan``: the row-group kernel, then the column
    sums of its partial rows (one a group)."""
    __slots__ = ("planned", "sums", "n_groups", "n_parts", "n_sums")

    def __init__(self, plan: BackwardPlan):
        (groups,) = plan.launches
        self.planned = PlannedLaunch(_layer_norm_bwd_row_groups_kernel, groups.grid,
                                     **groups.meta)
        self.sums = ColumnSums(plan.sums)
        (self.n_groups, self.n_parts), self.n_sums = plan.scalars, plan.scratch

    def __call__(self, p: _Backward, dropout_scale: tuple):
        n_groups = self.n_groups
        device = p.x.device
        acc = _acc_dtype(p.x.dtype)
        sums = torch.empty(self.n_sums, dtype=acc, device=device)
        arrived = torch.zeros(n_groups, dtype=torch.int32, device=device)
        dw = torch.empty(n_groups, p.n_cols, dtype=acc, device=device)
        db = (torch.empty(n_groups, p.n_cols, dtype=acc, device=device)
              if p.dbias is not None else None)
        self.planned(*_row_operands(p), sums, arrived, dw, db if db is not None else dw,
                     p.n_rows, p.n_cols, *dropout_scale, n_groups, self.n_parts)
        self.sums([(dw, p.dweight)] + ([(db, p.dbias)] if db is not None else []))
        return _grads(p)
