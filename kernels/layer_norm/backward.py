"""Layer norm and RMS norm backward: five strategies for the weight and bias gradients.

With x the tensor that was normalized (x' of the forward: its residual_out when a
residual, rowscale or dropout was used):

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
  rows in a fixed order (:mod:`.column_sums`). Where the partials are within the
  profile's tuning.layer_norm.backward_last_sum_bytes (and no CUDA graph is captured),
  the program that finishes last sums them instead: one launch, which is what a call of
  a small shape costs. Bitwise reproducible for a given profile and shape (and which of
  the two sums them).
- tiled and columns (:mod:`.long_rows`), row groups (:mod:`.row_groups`): for rows beyond
  half the fused tile (the fused backward holds about twice the forward's arrays a
  column). The atomic and partial strategies hand such rows to row groups where the
  profile has their tile and a row's programs fit those the device keeps resident, to
  columns otherwise.

The dropout backward reads the forward's stored keep-mask rather than regenerating it.

Every entry point of the five is here. Which strategy a call takes, and its kernels'
grids, tiles and warps, are decided by :func:`.plan_backward.backward_plan`: an entry
point checks its operands, asks for the plan (once per profile and shapes) and launches
it (the classes here, in :mod:`.long_rows` and :mod:`.row_groups`).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton import knobs

from .tiles import (CALLER_OPERANDS, _acc_dtype, _add_block_column_sums, _Backward,
                    _dropout_scale, _grads, _load, _load_row_constants, _load_x_dy,
                    _prepare_backward, _row_offsets, _row_operands, _store_input_grads,
                    _tile_offsets, _to_acc, _x_dy_step)
from triton_cts.execution import launches
from triton_cts.execution.input_checks import UnsupportedDtypeError
from triton_cts.profiles import Profile
from .column_sums import ColumnSums, _sum_if_last, last_sum_buffers
from .long_rows import ColumnsBackward, TiledBackward
from .plan import group_units, why_no_groups
from .plan_backward import (ATOMIC, COLUMNS, PARTIAL, ROW_GROUPS, TILED, UNPLACED,
                            BackwardPlan, backward_plan, placed)
from .row_groups import RowGroupsBackward
from ..fast_launch import PlannedLaunch, Replays, launch, launch_plan
from ..row_align import aligned


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
    ARRIVED,                # int32 [1], zero at launch and left so: programs done (LAST_SUMS)
    DW_SUM,                 # pointer to dweight [N]: the partials' sums (LAST_SUMS)
    DB_SUM,                 # pointer to dbias [N], like DW_SUM
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
    COMPENSATED: tl.constexpr,  # compensated partial sums (a program adds many row blocks)
    SELECT_LOADS: tl.constexpr,
    SLICE_BROADCAST: tl.constexpr,
    COMPUTE_FP64: tl.constexpr,
    EVEN_ROWS: tl.constexpr,  # ROWS_PER_PROGRAM divides n_rows: no row masks
    EVEN_N: tl.constexpr,     # BLOCK_N == N: no column masks, N a constant
    PREFETCH: tl.constexpr,   # load the next row block's x and dy before this one's sums
    ROW_ALIGN: tl.constexpr,  # a power of two dividing N (kernels/row_align.py)
    LAST_SUMS: tl.constexpr,  # the last program to finish adds the partial rows
    SUM_BLOCK_P: tl.constexpr,  # partial rows per tile of those sums
):
    pid = tl.program_id(0).to(tl.int64)
    if EVEN_N:
        N = BLOCK_N
    else:
        N = aligned(N, ROW_ALIGN)
    dropout_scale = _dropout_scale(scale_hi, scale_lo, COMPUTE_FP64)
    acc_ty = tl.float64 if COMPUTE_FP64 else tl.float32
    cols = tl.arange(0, BLOCK_N)
    _, w_offs, col_mask = _row_offsets(0, cols, N, SELECT_LOADS, EVEN_N)
    w = _to_acc(_load(W, w_offs, col_mask, SELECT_LOADS), COMPUTE_FP64)[None, :]
    # with COMPENSATED, compensated partial sums: a program adds n_rows / programs row blocks
    # (a plain float32 sum of 2M rows erred by 2.8x the float32 bound, torch's by 0.09x)
    dw = tl.zeros([BLOCK_N], dtype=acc_ty)
    db = tl.zeros([BLOCK_N], dtype=acc_ty)
    dw_comp = tl.zeros([BLOCK_N], dtype=acc_ty)
    db_comp = tl.zeros([BLOCK_N], dtype=acc_ty)
    r = tl.arange(0, ROWS_PER_PROGRAM)
    x_ahead, dy_ahead = 0.0, 0.0
    if PREFETCH:
        x_ahead, dy_ahead = _load_x_dy(X, DY, pid * ROWS_PER_PROGRAM + r, cols, n_rows, N,
                                       SELECT_LOADS, EVEN_N)
    for block in range(pid, tl.cdiv(n_rows, ROWS_PER_PROGRAM), tl.num_programs(0)):
        rows = block * ROWS_PER_PROGRAM + r
        offs, load_offs, mask = _tile_offsets(rows, cols, n_rows, N, SELECT_LOADS, EVEN_ROWS,
                                              EVEN_N)
        x_in, dy_in, x_ahead, dy_ahead = _x_dy_step(
            X, DY, load_offs, mask, rows + tl.num_programs(0) * ROWS_PER_PROGRAM, cols, n_rows,
            N, x_ahead, dy_ahead, PREFETCH, SELECT_LOADS, EVEN_N)
        x = _to_acc(x_in, COMPUTE_FP64)
        dy = _to_acc(dy_in, COMPUTE_FP64)
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
        dw, dw_comp, db, db_comp = _add_block_column_sums(dw, dw_comp, db, db_comp, dy, xhat,
                                                          HAS_BIAS, COMPENSATED)
        rowscale = 1.0
        if HAS_ROWSCALE:
            rowscale = _to_acc(_load_row_constants(ROWSCALE, rows, n_rows, SELECT_LOADS,
                                                   SLICE_BROADCAST), COMPUTE_FP64)
        _store_input_grads(DX, DRESIDUAL_OUT, DRESIDUAL, DROPOUT_MASK, dx, rowscale, offs,
                           load_offs, mask, dropout_scale, HAS_DRESIDUAL_OUT, STORE_DRESIDUAL,
                           HAS_DROPOUT, HAS_ROWSCALE, SELECT_LOADS, COMPUTE_FP64, "")
    if ATOMIC:
        tl.atomic_add(DW + cols, dw, mask=col_mask)
        if HAS_BIAS:
            tl.atomic_add(DB + cols, db, mask=col_mask)
    else:
        # every program stores its row, zeros included: the sum reads all of them
        tl.store(DW + pid * N + cols, dw, mask=col_mask)
        if HAS_BIAS:
            tl.store(DB + pid * N + cols, db, mask=col_mask)
        if LAST_SUMS:
            # no second launch for the column sums: a launch costs more host time than
            # adding a few partial rows takes (tuning.layer_norm.backward_last_sum_bytes)
            _sum_if_last(DW, DW_SUM, DB, DB_SUM, ARRIVED, N, HAS_BIAS, SUM_BLOCK_P, BLOCK_N,
                         SELECT_LOADS, COMPUTE_FP64)


# --------------------------------------------------------------------------------------
# Launches of a backward plan (.plan_backward).
# --------------------------------------------------------------------------------------
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
            do_bench=launches.autotune_timer,
        )(_layer_norm_bwd_fused_kernel)
    if untimed:
        tuner.cache.clear()
    return tuner


class _AtomicBackward:
    """The atomic strategy's launch of ``plan``: the fused kernel autotuned over the
    plan's launches (rows a program, warps, stages; the other constexprs are shared)."""
    __slots__ = ("profile", "configs", "grid", "meta")

    def __init__(self, plan: BackwardPlan, profile: Profile):
        self.profile = profile
        self.configs = tuple((step.tiles["ROWS_PER_PROGRAM"], step.options["num_warps"],
                              step.options["num_stages"]) for step in plan.launches)
        grids = {step.tiles["ROWS_PER_PROGRAM"]: step.grid for step in plan.launches}
        self.grid = lambda meta: grids[meta["ROWS_PER_PROGRAM"]]
        first = plan.launches[0]
        self.meta = {**first.constexprs,
                     **{k: v for k, v in first.tiles.items() if k != "ROWS_PER_PROGRAM"}}

    def __call__(self, p: _Backward, dropout_scale: tuple):
        n_rows, n_cols = p.n_rows, p.n_cols
        acc = _acc_dtype(p.x.dtype)
        dw = torch.zeros(n_cols, dtype=acc, device=p.x.device)
        db = torch.zeros(n_cols, dtype=acc, device=p.x.device) if p.dbias is not None else None
        launch(_atomic_kernel(self.profile, self.configs), self.grid, *_row_operands(p), dw,
               db, dw, dw, dw, n_rows, n_cols, *dropout_scale, **self.meta)
        p.dweight.copy_(dw)
        if db is not None:
            p.dbias.copy_(db)
        return _grads(p)


class _PartialBackward:
    """The partial strategy's launches of ``plan``: the fused kernel and the column sums
    of its partial rows, or the fused kernel alone with its last program adding them
    (``plan.last_sums``) where the call has their buffers
    (:func:`.column_sums.last_sum_buffers`). Both replayed for inputs of one signature."""
    __slots__ = ("planned", "summed", "sums", "programs")

    def __init__(self, plan: BackwardPlan):
        (fused,) = plan.launches
        self.planned = PlannedLaunch(_layer_norm_bwd_fused_kernel, fused.grid, **fused.meta)
        self.summed = (None if plan.last_sums is None else PlannedLaunch(
            _layer_norm_bwd_fused_kernel, plan.last_sums.grid, **plan.last_sums.meta))
        self.sums, self.programs = ColumnSums(plan.sums), plan.partials

    def __call__(self, p: _Backward, dropout_scale: tuple):
        x, n_rows, n_cols, programs = p.x, p.n_rows, p.n_cols, self.programs
        acc = _acc_dtype(x.dtype)
        has_bias = p.dbias is not None
        # one launch where the host is what limits a call of few partial rows (see
        # last_sum_buffers); while a CUDA graph is captured, two: the graph replays them faster
        buffers = (last_sum_buffers(x.device, programs, n_cols, acc, has_bias)
                   if self.summed is not None else None)
        if buffers is not None:
            planned = self.summed
            arrived, dw, db = buffers
        else:
            planned = self.planned
            dw = torch.empty(programs, n_cols, dtype=acc, device=x.device)
            db = torch.empty(programs, n_cols, dtype=acc, device=x.device) if has_bias else None
            arrived = None
        # the checks' entry stands for the profile, the options and the shapes (see Replays);
        # the caller's tensors come first: the rest are allocated here
        tensors = (*p[:12], dw, db, arrived)
        key = (arrived is not None,)
        if _REPLAYS.replay(p.checked, key, tensors, callers=CALLER_OPERANDS):
            return _grads(p)
        with _REPLAYS.record(p.checked, key, tensors):
            if arrived is not None:
                planned(*_row_operands(p), dw, db if has_bias else dw, arrived, p.dweight,
                        p.dbias if has_bias else p.dweight, n_rows, n_cols, *dropout_scale)
            else:
                planned(*_row_operands(p), dw, db if has_bias else dw, dw, dw, dw, n_rows,
                        n_cols, *dropout_scale)
                self.sums([(dw, p.dweight)] + ([(db, p.dbias)] if has_bias else []))
        return _grads(p)


#: The partial-sum backward's two launches, replayed for inputs of one signature
_REPLAYS = Replays()


@launch_plan
def _backward_launch(profile: Profile, n_rows: int, n_cols: int, dtype: torch.dtype,
                     flag_key: tuple, units: int, interpreting: bool, strategy: str):
    """The launch of :func:`.plan_backward.backward_plan`'s plan (None where it has none),
    made once per profile and key: called with a call's operands and dropout scale, it
    returns the gradients."""
    plan = backward_plan(profile, n_rows, n_cols, dtype, *flag_key, units, interpreting,
                         strategy)
    if plan is None:
        return None
    if plan.strategy == ATOMIC:
        return _AtomicBackward(plan, profile)
    return _LAUNCHES[plan.strategy](plan)


_LAUNCHES = {PARTIAL: _PartialBackward, TILED: TiledBackward, COLUMNS: ColumnsBackward,
             ROW_GROUPS: RowGroupsBackward}


def _backward(op: str, strategy: str, dy, x, weight, bias, mean, rstd, rms, rowscale,
              dropout_mask, dropout_p, dresidual_out, has_residual, profile: Profile):
    """Every backward entry point: the checked operands, then the launch of the plan of
    ``strategy`` for them (no launch for an empty input)."""
    p, dropout_scale = _prepare_backward(op, dy, x, weight, bias, mean, rstd, rms, rowscale,
                                         dropout_mask, dropout_p, dresidual_out, has_residual,
                                         profile)
    if p.n_rows == 0 or p.n_cols == 0:
        return _grads(p)
    # where the launch runs is read (one device query) only where the plan may need it
    where = (group_units(x.device, profile) if placed(strategy, p.checked.fused)
             else UNPLACED)
    planned = _backward_launch(profile, p.n_rows, p.n_cols, x.dtype, p.flag_key, *where,
                               strategy)
    if planned is None:
        if strategy == ATOMIC:
            acc = _acc_dtype(x.dtype)
            raise UnsupportedDtypeError(
                f"{op}: {x.dtype} accumulates in {acc}, and profile '{profile.name}' has no "
                f"{acc} atomic_add (atomics.add in {profile.source})")
        why = why_no_groups(x.dtype, p.n_cols, profile, "backward")
        raise UnsupportedDtypeError(f"{op}: {why}")
    return planned(p, dropout_scale)


# --------------------------------------------------------------------------------------
# Entry points.
# --------------------------------------------------------------------------------------
def layer_norm_backward_atomic(dy, x, weight, bias, mean, rstd, *, rms: bool = False,
                               rowscale=None, dropout_mask=None, dropout_p: float = 0.0,
                               dresidual_out=None, has_residual: bool = False,
                               profile: Profile):
    """Backward with dweight/dbias accumulated by tl.atomic_add (float32 buffers, float64
    for float64 inputs); rows per program autotuned. Rows beyond half the fused tile take
    the long-row strategies (row groups or columns). See :func:`layer_norm_backward` for
    the arguments."""
    return _backward("layer_norm_backward_atomic", ATOMIC, dy, x, weight, bias, mean, rstd,
                     rms, rowscale, dropout_mask, dropout_p, dresidual_out, has_residual,
                     profile)


def layer_norm_backward_partial(dy, x, weight, bias, mean, rstd, *, rms: bool = False,
                                rowscale=None, dropout_mask=None, dropout_p: float = 0.0,
                                dresidual_out=None, has_residual: bool = False,
                                profile: Profile):
    """Deterministic backward: one row of dweight/dbias partials per program (at most the
    profile's partials_per_compute_unit programs per compute unit), summed in a fixed order
    by a second kernel, or, for partials within the profile's
    ``tuning.layer_norm.backward_last_sum_bytes`` outside CUDA-graph capture, by the
    program that finishes last (one launch a call). Bitwise reproducible for a given
    profile, shape and choice of those two (their sums' last bits may differ). Rows beyond
    half the fused tile take the long-row strategies (row groups or columns). See
    :func:`layer_norm_backward` for the arguments."""
    return _backward("layer_norm_backward_partial", PARTIAL, dy, x, weight, bias, mean, rstd,
                     rms, rowscale, dropout_mask, dropout_p, dresidual_out, has_residual,
                     profile)


def layer_norm_backward_tiled(dy, x, weight, bias, mean, rstd, *, rms: bool = False,
                              rowscale=None, dropout_mask=None, dropout_p: float = 0.0,
                              dresidual_out=None, has_residual: bool = False,
                              profile: Profile):
    """Backward for any row length: a dx kernel looping over column tiles (two passes per
    row) and a dweight/dbias kernel over column blocks looping over rows
    (:mod:`.long_rows`). See :func:`layer_norm_backward` for the arguments."""
    return _backward("layer_norm_backward_tiled", TILED, dy, x, weight, bias, mean, rstd,
                     rms, rowscale, dropout_mask, dropout_p, dresidual_out, has_residual,
                     profile)


def layer_norm_backward_columns(dy, x, weight, bias, mean, rstd, *, rms: bool = False,
                                rowscale=None, dropout_mask=None, dropout_p: float = 0.0,
                                dresidual_out=None, has_residual: bool = False,
                                profile: Profile):
    """Backward for any row length in three launches (:mod:`.long_rows`): the row sums
    (one walk over each row for the three scalars its dx needs), a column kernel (a
    column block of a split of the rows a program: dx, and the dweight/dbias partials
    summed in registers), and the partials' column sums in a fixed order. Bitwise
    reproducible for a given profile and shape. See :func:`layer_norm_backward` for the
    arguments."""
    return _backward("layer_norm_backward_columns", COLUMNS, dy, x, weight, bias, mean, rstd,
                     rms, rowscale, dropout_mask, dropout_p, dresidual_out, has_residual,
                     profile)


def layer_norm_backward_row_groups(dy, x, weight, bias, mean, rstd, *, rms: bool = False,
                                   rowscale=None, dropout_mask=None, dropout_p: float = 0.0,
                                   dresidual_out=None, has_residual: bool = False,
                                   profile: Profile):
    """Backward for any row length with each row split over a group of resident programs
    that exchange their partial sums (:mod:`.row_groups`), and the dweight/dbias
    partials' column sums in a fixed order. Not supported on profiles without
    ``tuning.layer_norm.backward_row_group_tile`` for the dtype, nor for rows longer than
    the programs the device keeps resident. See :func:`layer_norm_backward` for the
    arguments."""
    return _backward("layer_norm_backward_row_groups", ROW_GROUPS, dy, x, weight, bias, mean,
                     rstd, rms, rowscale, dropout_mask, dropout_p, dresidual_out,
                     has_residual, profile)


def layer_norm_backward(dy, x, weight, bias, mean, rstd, *, rms: bool = False,
                        rowscale=None, dropout_mask=None, dropout_p: float = 0.0,
                        dresidual_out=None, has_residual: bool = False, profile: Profile):
    """Gradients of :func:`layer_norm`: the deterministic partial-sum strategy when a row
    fits the fused backward (half the fused tile), row groups beyond it where the profile
    has their tile (:mod:`.row_groups`), the column strategy otherwise.

    ``x`` is the tensor that was normalized (the forward's ``residual_out`` when it is not
    None), ``mean``/``rstd`` the forward's (``mean`` unused with ``rms=True``). With
    dropout, pass the forward's ``dropout_mask`` and ``dropout_p``; with rowscale, the
    same ``rowscale``; ``dresidual_out`` is the gradient flowing into ``residual_out``.
    Returns ``(dx, dweight, dbias)``, dbias None when bias is None; with
    ``has_residual=True`` also ``dresidual``, the residual's gradient: the gradient of
    ``x'`` plus ``dresidual_out``, before dropout and rowscale (dx is that times
    keep / (1 - p) * rowscale).
    """
    # the partial strategy's plan hands rows past the fused backward to the long-row ones
    return layer_norm_backward_partial(dy, x, weight, bias, mean, rstd, rms=rms,
                                       rowscale=rowscale, dropout_mask=dropout_mask,
                                       dropout_p=dropout_p, dresidual_out=dresidual_out,
                                       has_residual=has_residual, profile=profile)


def rms_norm_backward(dy, x, weight, rstd, *, profile: Profile):
    """Gradients of :func:`rms_norm`: ``(dx, dweight)``."""
    dx, dweight, _ = layer_norm_backward(dy, x, weight, None, None, rstd, rms=True,
                                         profile=profile)
    return dx, dweight
