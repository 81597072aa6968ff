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
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton import knobs

from . import tuning
from .tiles import (CALLER_OPERANDS, COMPENSATE_ROWS,
                    DEFAULT_ROWS_PER_PROGRAM, _acc_dtype, _add_block_column_sums,
                    _backward_flags, _backward_row_tile, _backward_tile, _dropout_scale,
                    _grads, _load,
                    _load_row_constants, _load_x_dy, _prepare_backward, _row_block,
                    _row_offsets, _row_operands, _store_input_grads, _tile_offsets, _to_acc,
                    _x_dy_step)
from .tuning import BACKWARD_WARPS
from triton_cts.execution import launches
from triton_cts.execution.input_checks import UnsupportedDtypeError
from triton_cts.profiles import Profile, cdiv, next_power_of_2
from .column_sums import _sum_if_last, _sum_partials, last_sum_buffers
from .row_groups import _backward_long_rows
from ..fast_launch import PlannedLaunch, Replays, launch, launch_plan
from ..row_align import aligned, row_align



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
# Launchers.
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


def _atomic_configs(n_rows: int, block_n: int, dtype: torch.dtype, profile: Profile) -> tuple:
    """(rows, num_warps, num_stages) per config: the profile's autotune.layer_norm_backward
    table, or DEFAULT_ROWS_PER_PROGRAM; those whose tile exceeds the backward's row tile
    are dropped."""
    table = profile.autotune_configs("layer_norm_backward")
    if table is None:
        table = [{"ROWS_PER_PROGRAM": r} for r in DEFAULT_ROWS_PER_PROGRAM]
    limit = _backward_row_tile(dtype, profile)
    backward_warps = tuning.warps_table(profile, BACKWARD_WARPS, dtype)
    configs = []
    for cfg in table:
        unknown = set(cfg) - {"ROWS_PER_PROGRAM", "num_warps", "num_stages"}
        if "ROWS_PER_PROGRAM" not in cfg or unknown:
            raise ValueError(f"{profile.source}: autotune.layer_norm_backward configs take "
                             f"ROWS_PER_PROGRAM (required), num_warps, num_stages; got {cfg}")
        rows = next_power_of_2(cfg["ROWS_PER_PROGRAM"])
        if rows * block_n > limit or rows > next_power_of_2(n_rows):
            continue
        warps = profile.num_warps_for(rows * block_n, dtype, backward_warps)
        configs.append((rows, cfg.get("num_warps", warps),
                        cfg.get("num_stages", 3)))
    if not configs:  # one row per step always fits
        configs.append((1, profile.num_warps_for(block_n, dtype, backward_warps), 3))
    return tuple(dict.fromkeys(configs))


def _start_fused_backward(op, dy, x, weight, bias, mean, rstd, rms, rowscale, dropout_mask,
                          dropout_p, dresidual_out, has_residual, profile: Profile):
    """What the fused strategies share before their kernels: checked operands, and the
    finished gradients when there is nothing to launch (empty input) or the rows are
    longer than the fused backward takes (handed to the long-row strategies); None otherwise."""
    p, dropout_scale = _prepare_backward(op, dy, x, weight, bias, mean, rstd, rms, rowscale,
                                         dropout_mask, dropout_p, dresidual_out, has_residual,
                                         profile)
    n_rows, n_cols = p.n_rows, p.n_cols
    if n_rows == 0 or n_cols == 0:
        return p, dropout_scale, _grads(p)
    if not p.checked.fused:
        return p, dropout_scale, _backward_long_rows(p, dropout_scale, profile)
    return p, dropout_scale, None


def layer_norm_backward_atomic(dy, x, weight, bias, mean, rstd, *, rms: bool = False,
                               rowscale=None, dropout_mask=None, dropout_p: float = 0.0,
                               dresidual_out=None, has_residual: bool = False,
                               profile: Profile):
    """Backward with dweight/dbias accumulated by tl.atomic_add (float32 buffers, float64
    for float64 inputs); rows per program autotuned. Rows beyond half the fused tile take
    the long-row strategies (row groups or columns). See :func:`layer_norm_backward` for
    the arguments."""
    op = "layer_norm_backward_atomic"
    p, dropout_scale, done = _start_fused_backward(
        op, dy, x, weight, bias, mean, rstd, rms, rowscale, dropout_mask, dropout_p,
        dresidual_out, has_residual, profile)
    if done is not None:
        return done
    n_rows, n_cols = p.n_rows, p.n_cols
    acc = _acc_dtype(x.dtype)
    if not profile.supports_atomic("add", acc):
        raise UnsupportedDtypeError(
            f"{op}: {x.dtype} accumulates in {acc}, and profile '{profile.name}' has no "
            f"{acc} atomic_add (atomics.add in {profile.source})")
    dw = torch.zeros(n_cols, dtype=acc, device=x.device)
    db = torch.zeros(n_cols, dtype=acc, device=x.device) if p.dbias is not None else None
    block_n = next_power_of_2(n_cols)
    kernel = _atomic_kernel(profile, _atomic_configs(n_rows, block_n, x.dtype, profile))
    # a few programs per compute unit walk the rows: each atomic add rounds the float32
    # sums once, and one per row block (65536 programs) erred by 2x the float32 bound
    programs = profile.compute_units * profile.partials_per_compute_unit
    grid = lambda meta: (profile.capped_grid(min(programs,  # noqa: E731
                                                 cdiv(n_rows, meta["ROWS_PER_PROGRAM"]))),)
    launch(kernel, grid, *_row_operands(p), dw, db, dw, dw, dw, n_rows, n_cols, *dropout_scale,
           BLOCK_N=block_n, ATOMIC=True, COMPENSATED=n_rows > COMPENSATE_ROWS,
           EVEN_ROWS=False, EVEN_N=False, PREFETCH=False, LAST_SUMS=False, SUM_BLOCK_P=1,
           SLICE_BROADCAST=profile.slice_broadcast,
           ROW_ALIGN=row_align(n_cols, profile.vector_elements(x.dtype)), **p.flags)
    p.dweight.copy_(dw)
    if db is not None:
        p.dbias.copy_(db)
    return _grads(p)


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
    op = "layer_norm_backward_partial"
    p, dropout_scale, done = _start_fused_backward(
        op, dy, x, weight, bias, mean, rstd, rms, rowscale, dropout_mask, dropout_p,
        dresidual_out, has_residual, profile)
    if done is not None:
        return done
    n_rows, n_cols = p.n_rows, p.n_cols
    acc = _acc_dtype(x.dtype)
    programs, planned, summed = _partial_plan(profile, n_rows, n_cols, x.dtype, p.flag_key)
    has_bias = p.dbias is not None
    # one launch where the host is what limits a call of few partial rows (see
    # last_sum_buffers); while a CUDA graph is captured, two: the graph replays them faster
    buffers = (last_sum_buffers(x.device, programs, n_cols, acc, has_bias)
               if summed is not None else None)
    if buffers is not None:
        planned = summed
        arrived, dw, db = buffers
    else:
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
            planned(*_row_operands(p), dw, db if has_bias else dw, dw, dw, dw, n_rows, n_cols,
                    *dropout_scale)
            _sum_partials([(dw, p.dweight)] + ([(db, p.dbias)] if has_bias else []), profile)
    return _grads(p)


#: The partial-sum backward's two launches, replayed for inputs of one signature
_REPLAYS = Replays()


@launch_plan
def _partial_plan(profile: Profile, n_rows: int, n_cols: int, dtype: torch.dtype,
                  flag_key: tuple) -> tuple[int, PlannedLaunch, PlannedLaunch | None]:
    """(programs, the launch of the partial-sum backward's dx kernel, the same launch with
    its last program adding the partial rows where the profile takes that, else None);
    ``flag_key`` is what the operands' constexprs are built from (``_Backward.flag_key``)."""
    block_n = next_power_of_2(n_cols)
    block_m = _row_block(n_rows, block_n, _backward_tile(dtype, profile), profile)
    # a few programs per compute unit: one left too few warps in flight
    # measured: benchmarks/results/h200.jsonl, experiment "comments"
    partials = profile.compute_units * tuning.partials_for(profile, dtype, stacked=block_m > 1)
    programs = profile.capped_grid(min(partials, cdiv(n_rows, block_m)))
    # without masks where a program holds one row (faster; stacked rows, RMS norm slower)
    # measured: benchmarks/results/h200.jsonl, experiment "comments"
    even = not flag_key[0] and block_m == 1 and n_cols == block_n
    # one row a program, where the profile says: the next row's x and dy are loaded before
    # this row's sums, so a program keeps loads in flight through them (stacked rows lost
    # so: see tuning.layer_norm.backward_prefetch in nvidia-sm90-h200.toml). Not on float64:
    # its spills at 4096 columns went from 48 to 176 bytes a thread with it (sm_90)
    prefetch = block_m == 1 and dtype.itemsize <= 4 and tuning.backward_prefetch(profile)
    meta = dict(
        ROWS_PER_PROGRAM=block_m, BLOCK_N=block_n, ATOMIC=False,
        COMPENSATED=n_rows > COMPENSATE_ROWS, EVEN_ROWS=even, EVEN_N=even, PREFETCH=prefetch,
        SLICE_BROADCAST=profile.slice_broadcast,
        ROW_ALIGN=row_align(n_cols, profile.vector_elements(dtype)),
        **profile.launch_options_for(block_m * block_n, dtype,
                                     tuning.warps_table(profile, BACKWARD_WARPS, dtype)),
        **_backward_flags(profile, dtype, *flag_key))
    # few partial rows (tuning.layer_norm.backward_last_sum_bytes): the last program adds
    # them in tiles of its own rows (at least two), which keeps the kernel's registers
    # (sm_90, triton 3.9: 48 to 163 a thread at 64 to 4096 columns, within 3 of the
    # kernel without the sums; the whole partials in one tile took 64 -> 106-255 and
    # spilled, twice its rows 160 -> 202 at 32 stacked rows)
    last_sums = tuning.backward_last_sum(profile, programs, n_cols, _acc_dtype(dtype))
    sum_block_p = min(next_power_of_2(programs), max(2, block_m))
    return (programs,
            PlannedLaunch(_layer_norm_bwd_fused_kernel, (programs,), **meta,
                          LAST_SUMS=False, SUM_BLOCK_P=1),
            PlannedLaunch(_layer_norm_bwd_fused_kernel, (programs,), **meta,
                          LAST_SUMS=True, SUM_BLOCK_P=sum_block_p) if last_sums else None)


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
    # the partial strategy hands rows past the fused backward to the long-row ones
    return layer_norm_backward_partial(dy, x, weight, bias, mean, rstd, rms=rms,
                                       rowscale=rowscale, dropout_mask=dropout_mask,
                                       dropout_p=dropout_p, dresidual_out=dresidual_out,
                                       has_residual=has_residual, profile=profile)



def rms_norm_backward(dy, x, weight, rstd, *, profile: Profile):
    """Gradients of :func:`rms_norm`: ``(dx, dweight)``."""
    dx, dweight, _ = layer_norm_backward(dy, x, weight, None, None, rstd, rms=True,
                                         profile=profile)
    return dx, dweight
