"""Cross-entropy over a vocabulary, loss and gradient in one pass over the logits.

For a row of logits x (V classes) with label y and label smoothing eps:

    lse  = m + log(s),   m = max_j x_j,   s = sum_j exp(x_j - m)
    loss = (1 - eps) * (lse - x_y) + eps * (lse - mean_j x_j)
    dx_j = k * (exp(x_j - m) / s - eps / V - (1 - eps) * [j == y])

with k = 1 for the sums ("none", "sum") and 1 / (rows not ignored) for "mean". A row whose
label is ``ignore_index`` has loss 0 and gradient 0; a label outside [0, V) that is not
ignored gives a NaN loss and gradient for its row (torch raises; checking on the host
would cost a synchronization, and CUDA graphs forbid it). As Liger-Kernel does, the
forward writes the gradient of the loss (for an upstream gradient of 1) while the logits
are on chip, so training reads the logits once or twice and never again in the backward
(:class:`CrossEntropyFunction` scales the saved gradient by the upstream one).

Two kernels, chosen by V against the profile's MAX_FUSED_SIZE (counted in float32, the
dtype a held row has in registers):

- fused (V fits a block): a program holds [BLOCK_M, BLOCK_V] whole rows, short rows
  stacked up to the profile's row stack, and reads each logit once;
- tiled (large vocabularies, 128k-256k): per row, one pass over column tiles keeps a
  running max and a rescaled running sum (with the sum of x and the label's logit), then
  a second pass writes the gradient (the row, 256 KiB in bfloat16 at 128k, is re-read
  from cache).

The loss is float32 (float64 for float64 logits) whatever the logits' dtype; the gradient
has the logits' dtype. For "sum" and "mean" the per-row losses are summed by one program
in a fixed order (deterministic), and "mean" divides by the count of rows not ignored,
counted by one program before the main kernel (every row's gradient needs it). Where the
profile takes it for few logits (``tuning.cross_entropy.one_launch_elements``), the three
are one launch: every program counts the labels itself, and the one that finishes last
sums the losses in the same order. Programs walk rows in a grid-stride loop capped at the
profile's MAX_GRID_NUM, with int64 offsets.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .grid_stride import block_range, last_to_finish, launch_grid, rearm
from triton_cts.execution.input_checks import (ShapeMismatchError, UnsupportedDtypeError,
                                               WrongDeviceError, check_inputs)
from triton_cts.profiles import Profile, cdiv, next_power_of_2
from . import cross_entropy_tuning
from .fast_launch import (PassedChecks, PlannedLaunch, Replays, launch, launch_plan, signature,
                          stream_buffers)

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
LABEL_DTYPES = (torch.int32, torch.int64)
REDUCTIONS = ("none", "sum", "mean")

NEG_INF = tl.constexpr(float("-inf"))
# NaN is built where it is used, as NEG_INF - NEG_INF: a NaN global fails Triton 3.6's
# check that no global changed since compilation (nan != nan) on every call after the first


@triton.jit
def _row_loss(m, s, sum_x, x_y, n_cols, smoothing):
    lse = m + tl.log(s)
    # without smoothing the mean term is left out, not multiplied by 0: it is infinite
    # in a row holding -inf, and 0 * inf would make the loss NaN
    smooth = tl.where(smoothing > 0, smoothing * (lse - sum_x / n_cols), 0.0)
    return (1.0 - smoothing) * (lse - x_y) + smooth


@triton.jit
def _ce_fused_kernel(
    X,                          # pointer to the logits, contiguous [n_rows, n_cols]
    LABELS,                     # pointer to the labels [n_rows], int32 or int64
    LOSS,                       # pointer to the per-row losses [n_rows], float32 (float64)
    DX,                         # pointer to the gradient, like X
    N_VALID,                    # pointer to the count of rows not ignored (MEAN only)
    OUT,                        # pointer to the reduced loss (LAST_SUM only)
    ARRIVED,                    # pointer to an int32 counter, zero at launch (LAST_SUM only)
    n_rows,                     # rows (tokens)
    n_cols,                     # V (<= BLOCK_V)
    ignore_index,               # label of rows that count for nothing
    smoothing,                  # label smoothing eps
    BLOCK_M: tl.constexpr,      # rows per program and loop step
    BLOCK_V: tl.constexpr,      # next_power_of_2(V): a whole row in one block
    MEAN: tl.constexpr,         # scale the gradient by 1 / (rows not ignored)
    COUNT_LABELS: tl.constexpr, # each program counts those rows itself (else N_VALID)
    LAST_SUM: tl.constexpr,     # the last program to finish sums the losses into OUT
    SUM_BLOCK: tl.constexpr,    # labels and losses per step of the count and the sum
    SELECT_LOADS: tl.constexpr, # clamp masked-off lanes to valid addresses, select after
    ACC_DTYPE: tl.constexpr,    # float32, or float64 for float64 logits
    GRID_STRIDE: tl.constexpr,  # fewer programs than row blocks: each walks several
):
    pid = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_V)
    col_mask = cols < n_cols
    n_valid = _mean_count(LABELS, N_VALID, n_rows, ignore_index, MEAN, COUNT_LABELS,
                          SUM_BLOCK, ACC_DTYPE)
    scale = 1.0
    if MEAN:
        scale = 1.0 / n_valid
    step, stop = block_range(pid, tl.cdiv(n_rows, BLOCK_M), GRID_STRIDE)
    for block in range(pid, stop, step):
        rows = block * BLOCK_M + tl.arange(0, BLOCK_M)
        row_mask = rows < n_rows
        mask = row_mask[:, None] & col_mask[None, :]
        offs = rows[:, None] * n_cols + cols[None, :]
        if SELECT_LOADS:
            safe_rows = tl.minimum(rows, n_rows - 1)
            safe = safe_rows[:, None] * n_cols + tl.minimum(cols, n_cols - 1)[None, :]
            x = tl.where(mask, tl.load(X + safe), NEG_INF)
            y = tl.load(LABELS + safe_rows)
        else:
            x = tl.load(X + offs, mask=mask, other=NEG_INF)
            y = tl.load(LABELS + rows, mask=row_mask, other=ignore_index)
        x = x.to(ACC_DTYPE)
        m = tl.max(x, axis=1)
        e = tl.exp(x - m[:, None])           # masked lanes: exp(-inf) = 0
        s = tl.sum(e, axis=1)
        is_y = cols[None, :] == y[:, None]
        x_y = tl.sum(tl.where(is_y, x, 0.0), axis=1)
        sum_x = tl.sum(tl.where(mask, x, 0.0), axis=1)
        valid = (y >= 0) & (y < n_cols)
        ignored = y == ignore_index
        loss = _row_loss(m, s, sum_x, x_y, n_cols, smoothing)
        loss = tl.where(ignored, 0.0, tl.where(valid, loss, NEG_INF - NEG_INF))
        tl.store(LOSS + rows, loss.to(LOSS.dtype.element_ty), mask=row_mask)
        g = e / s[:, None] - smoothing / n_cols - tl.where(is_y, 1.0 - smoothing, 0.0)
        g = tl.where(valid[:, None], g * scale, NEG_INF - NEG_INF)
        g = tl.where(ignored[:, None], 0.0, g)
        tl.store(DX + offs, g.to(DX.dtype.element_ty), mask=mask)
    if LAST_SUM:
        _reduce_if_last(LOSS, OUT, ARRIVED, n_valid, n_rows, MEAN, SUM_BLOCK)


@triton.jit
def _ce_tiled_kernel(
    X,                          # pointer to the logits, contiguous [n_rows, n_cols]
    LABELS,                     # pointer to the labels [n_rows]
    LOSS,                       # pointer to the per-row losses [n_rows]
    DX,                         # pointer to the gradient, like X
    N_VALID,                    # pointer to the count of rows not ignored (MEAN only)
    OUT,                        # pointer to the reduced loss (LAST_SUM only)
    ARRIVED,                    # pointer to an int32 counter, zero at launch (LAST_SUM only)
    n_rows,
    n_cols,                     # V (any size)
    ignore_index,
    smoothing,
    BLOCK_V: tl.constexpr,      # columns per tile
    MEAN: tl.constexpr,
    COUNT_LABELS: tl.constexpr,  # as in _ce_fused_kernel
    LAST_SUM: tl.constexpr,
    SUM_BLOCK: tl.constexpr,
    SELECT_LOADS: tl.constexpr,
    ACC_DTYPE: tl.constexpr,
    HAS_SMOOTHING: tl.constexpr,  # smoothing > 0: the row's sum of x is needed
):
    pid = tl.program_id(0).to(tl.int64)
    n_valid = _mean_count(LABELS, N_VALID, n_rows, ignore_index, MEAN, COUNT_LABELS,
                          SUM_BLOCK, ACC_DTYPE)
    scale = 1.0
    if MEAN:
        scale = 1.0 / n_valid
    for row in range(pid, n_rows, tl.num_programs(0)):
        base = X + row * n_cols
        y = tl.load(LABELS + row)
        ignored = y == ignore_index
        valid = (y >= 0) & (y < n_cols)
        # the label's logit: one load, not a block reduction a tile (an invalid label
        # reads column 0, and its loss is NaN or, ignored, 0 whatever it read)
        x_y = tl.load(base + tl.where(valid, y, 0)).to(ACC_DTYPE)
        # Pass 1: running max m, running sum s of exp(x - m) and, with smoothing, the sum
        # of x: each a block reduction a tile, in a loop that is bound by memory
        m = tl.full([], NEG_INF, ACC_DTYPE)
        s = tl.zeros([], ACC_DTYPE)
        # scalars, reduced per tile: vector accumulators as wide as the tile spilled
        # (sm_90, 16384-wide tiles: 88-112 bytes of stack a thread)
        sum_x = tl.zeros([], ACC_DTYPE)
        for start in range(0, n_cols, BLOCK_V):
            cols = start + tl.arange(0, BLOCK_V)
            mask = cols < n_cols
            if SELECT_LOADS:
                x = tl.where(mask, tl.load(base + tl.minimum(cols, n_cols - 1)), NEG_INF)
            else:
                x = tl.load(base + cols, mask=mask, other=NEG_INF)
            x = x.to(ACC_DTYPE)
            m_new = tl.maximum(m, tl.max(x, axis=0))
            # while m is -inf the sum holds only zeros (or a NaN that must survive), and
            # -inf lanes add nothing: guard both, or -inf - -inf = NaN would leak in
            alpha = tl.where(m == NEG_INF, 0.0, tl.exp(m - m_new))
            p = tl.where(x == NEG_INF, 0.0, tl.exp(x - m_new))
            s = s * alpha + tl.sum(p, axis=0)
            m = m_new
            if HAS_SMOOTHING:
                sum_x += tl.sum(tl.where(mask, x, 0.0), axis=0)
        loss = _row_loss(m, s, sum_x, x_y, n_cols, smoothing)
        loss = tl.where(ignored, 0.0, tl.where(valid, loss, NEG_INF - NEG_INF))
        tl.store(LOSS + row, loss.to(LOSS.dtype.element_ty))
        # Pass 2: the gradient. An all -inf row has m = -inf, s = 0 and comes out NaN.
        inv_s = 1.0 / s
        k = tl.where(valid, scale, NEG_INF - NEG_INF)
        k = tl.where(ignored, 0.0, k)
        out = DX + row * n_cols
        for start in range(0, n_cols, BLOCK_V):
            cols = start + tl.arange(0, BLOCK_V)
            mask = cols < n_cols
            if SELECT_LOADS:
                x = tl.where(mask, tl.load(base + tl.minimum(cols, n_cols - 1)), NEG_INF)
            else:
                x = tl.load(base + cols, mask=mask, other=NEG_INF)
            g = tl.exp(x.to(ACC_DTYPE) - m) * inv_s - smoothing / n_cols \
                - tl.where(cols == y, 1.0 - smoothing, 0.0)
            g = tl.where(ignored, 0.0, g * k)  # ignored rows: 0 even where g is NaN
            tl.store(out + cols, g.to(DX.dtype.element_ty), mask=mask)
    if LAST_SUM:
        _reduce_if_last(LOSS, OUT, ARRIVED, n_valid, n_rows, MEAN, SUM_BLOCK)


@triton.jit
def _count_valid(LABELS, n_rows, ignore_index, BLOCK: tl.constexpr):
    # a fixed order: the count is exact and the same on every run
    acc = tl.zeros([BLOCK], tl.int64)
    for start in range(0, n_rows, BLOCK):
        rows = start + tl.arange(0, BLOCK)
        y = tl.load(LABELS + rows, mask=rows < n_rows, other=ignore_index)
        acc += (y != ignore_index).to(tl.int64)
    return tl.sum(acc, axis=0)


@triton.jit
def _sum_losses(LOSS, OUT, n_valid, n_rows, BLOCK: tl.constexpr, MEAN: tl.constexpr,
                CACHE: tl.constexpr):
    # CACHE: the loads' cache modifier (".cg": from L2, for losses other programs just wrote)
    acc = tl.zeros([BLOCK], OUT.dtype.element_ty)
    for start in range(0, n_rows, BLOCK):
        rows = start + tl.arange(0, BLOCK)
        acc += tl.load(LOSS + rows, mask=rows < n_rows, other=0.0, cache_modifier=CACHE)
    total = tl.sum(acc, axis=0)
    if MEAN:
        total = total / n_valid  # 0/0 = NaN when every row is ignored
    tl.store(OUT, total)


@triton.jit
def _mean_count(LABELS, N_VALID, n_rows, ignore_index, MEAN: tl.constexpr,
                COUNT_LABELS: tl.constexpr, COUNT_BLOCK: tl.constexpr, ACC_DTYPE: tl.constexpr):
    """The rows not ignored, as ACC_DTYPE (1 where the reduction is not a mean): counted
    by the program itself (COUNT_LABELS) or loaded from N_VALID."""
    n_valid = tl.full([], 1, ACC_DTYPE)
    if MEAN:
        if COUNT_LABELS:
            n_valid = _count_valid(LABELS, n_rows, ignore_index, COUNT_BLOCK).to(ACC_DTYPE)
        else:
            n_valid = tl.load(N_VALID).to(ACC_DTYPE)
    return n_valid


@triton.jit
def _reduce_if_last(LOSS, OUT, ARRIVED, n_valid, n_rows, MEAN: tl.constexpr,
                    SUM_BLOCK: tl.constexpr):
    """Called by every program once it has stored its rows' losses: the program that
    finishes last sums them as :func:`_sum_losses_kernel` does and leaves ARRIVED (int32,
    zero at launch) zero again for the next launch."""
    if last_to_finish(ARRIVED):
        _sum_losses(LOSS, OUT, n_valid, n_rows, SUM_BLOCK, MEAN, ".cg")
        rearm(ARRIVED)


@triton.jit
def _count_valid_kernel(
    LABELS,                     # pointer to the labels [n_rows]
    N_VALID,                    # pointer to the count, one float32 (float64)
    n_rows,
    ignore_index,
    BLOCK: tl.constexpr,        # labels per loop step
):
    tl.store(N_VALID, _count_valid(LABELS, n_rows, ignore_index, BLOCK)
             .to(N_VALID.dtype.element_ty))


@triton.jit
def _sum_losses_kernel(
    LOSS,                       # pointer to the per-row losses [n_rows]
    N_VALID,                    # pointer to the count of rows not ignored (MEAN only)
    OUT,                        # pointer to the reduced loss, one element
    n_rows,
    BLOCK: tl.constexpr,        # losses per loop step
    MEAN: tl.constexpr,         # divide by N_VALID (0/0 = NaN when every row is ignored)
):
    n_valid = 1.0
    if MEAN:
        n_valid = tl.load(N_VALID)
    _sum_losses(LOSS, OUT, n_valid, n_rows, BLOCK, MEAN, "")


@triton.jit
def _scale_rows_kernel(
    G,                          # pointer to the saved gradient, contiguous [n_rows, n_cols]
    SCALE,                      # pointer to the upstream gradient: one value, or one a row
    OUT,                        # pointer to the scaled gradient, like G
    n_rows,
    n_cols,
    BLOCK: tl.constexpr,        # columns per loop step
    PER_ROW: tl.constexpr,      # SCALE holds one value a row ("none"), else one
):
    pid = tl.program_id(0).to(tl.int64)
    for row in range(pid, n_rows, tl.num_programs(0)):
        k = tl.load(SCALE + row) if PER_ROW else tl.load(SCALE)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n_cols
            g = tl.load(G + row * n_cols + cols, mask=mask, other=0.0)
            out = g.to(k.dtype) * k  # in the upstream gradient's dtype, float32 or float64
            tl.store(OUT + row * n_cols + cols, out.to(OUT.dtype.element_ty), mask=mask)


# --------------------------------------------------------------------------------------
# Launchers
# --------------------------------------------------------------------------------------
def _loss_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _acc(dtype: torch.dtype):
    return tl.float64 if dtype == torch.float64 else tl.float32


def _fused_rows(profile: Profile, n_rows: int, block_v: int, acc: torch.dtype) -> int:
    """Rows per program of the fused kernel: short rows stacked up to the profile's row
    stack (counted in the dtype rows are held in), never so many that a compute unit gets
    no program."""
    stack = min(profile.max_fused_elements(acc), profile.row_stack_elements(acc))
    by_size = max(1, stack // block_v)
    per_unit = max(1, cdiv(n_rows, profile.compute_units))
    return max(1, min(by_size, 1 << (per_unit.bit_length() - 1)))


#: Inputs (signature and reduction) that passed :func:`_check`, per profile
_CHECKS = PassedChecks()
#: The launches of calls on inputs of one layout and options, replayed
_REPLAYS = Replays()


def _check(op, logits, labels, reduction, profile) -> None:
    check_inputs(op, profile, DTYPES, logits=logits)
    if not isinstance(labels, torch.Tensor) or labels.dtype not in LABEL_DTYPES:
        raise UnsupportedDtypeError(f"{op}: labels must be an int32 or int64 tensor, got "
                                    f"{getattr(labels, 'dtype', type(labels).__name__)}")
    check_inputs(op, profile, LABEL_DTYPES, logits=None, labels=labels)
    if labels.device != logits.device:
        raise WrongDeviceError(f"{op}: logits on {logits.device}, labels on {labels.device}")
    if logits.dim() < 1 or labels.shape != logits.shape[:-1]:
        raise ShapeMismatchError(f"{op}: labels must have the logits' shape without the class "
                                 f"dim, {tuple(logits.shape[:-1])}, got {tuple(labels.shape)}")
    if logits.shape[-1] == 0:  # torch raises too (every label is out of bounds)
        raise ValueError(f"{op}: logits have no classes (last dim 0)")
    if reduction not in REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {REDUCTIONS}, got {reduction!r}")


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor, *, ignore_index: int = -100,
                  label_smoothing: float = 0.0, reduction: str = "mean",
                  profile: Profile) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, dlogits)`` of the cross-entropy of ``logits`` ``[..., V]`` against
    ``labels`` ``[...]``: the loss (float32, float64 for float64 logits; of labels' shape
    for "none", else a scalar) and its gradient with respect to the logits for an
    upstream gradient of 1 (the logits' dtype and shape)."""
    return _cross_entropy(logits, labels, ignore_index, label_smoothing, reduction, False,
                          profile)


def cross_entropy_tiled(logits: torch.Tensor, labels: torch.Tensor, *, ignore_index: int = -100,
                        label_smoothing: float = 0.0, reduction: str = "mean",
                        profile: Profile) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`cross_entropy` through the tiled (two-pass) kernel whatever V is."""
    return _cross_entropy(logits, labels, ignore_index, label_smoothing, reduction, True,
                          profile)


def _cross_entropy(logits, labels, ignore_index, label_smoothing, reduction, tiled: bool,
                   profile: Profile):
    op = "cross_entropy"
    _CHECKS.checked(profile, (reduction, signature(logits, labels)), logits, _check, op,
                    logits, labels, reduction, profile)
    if not 0.0 <= float(label_smoothing) <= 1.0:
        raise ValueError(f"{op}: label_smoothing must be in [0, 1], got {label_smoothing}")
    # The kernels take pointers and (n_rows, n_cols): every tensor keeps the caller's shape.
    n_cols = logits.shape[-1]
    x = logits.contiguous()
    y = labels.contiguous()
    n_rows = x.numel() // n_cols
    loss_dtype = _loss_dtype(logits.dtype)
    dx = torch.empty_like(x)
    losses = torch.empty(labels.shape, dtype=loss_dtype, device=x.device)
    mean = reduction == "mean"
    out = losses if reduction == "none" else torch.empty((), dtype=loss_dtype, device=x.device)
    if n_rows == 0:  # no launch; torch: the sum of nothing is 0, its mean 0/0
        if reduction != "none":
            out.fill_(float("nan") if mean else 0.0)
        return out, dx
    # few rows, reduced: one launch, whose last program sums the losses (see _plan)
    arrived = None
    if reduction != "none" and cross_entropy_tuning.one_launch(profile, n_rows, n_cols):
        arrived = stream_buffers(x.device, ("cross_entropy",),
                                 lambda: torch.zeros(1, dtype=torch.int32, device=x.device))
    n_valid = (torch.empty(1, dtype=loss_dtype, device=x.device)
               if mean and arrived is None else None)
    # (out is losses where nothing is reduced: a tensor is named once, see Replays)
    tensors = (x, y, losses, dx, n_valid, None if out is losses else out, arrived)
    key = (reduction, tiled, int(ignore_index), float(label_smoothing), arrived is None,
           *[(t.shape, t.stride(), t.dtype, t.device) for t in (x, y)])
    if _REPLAYS.replay(profile, key, tensors):
        return out, dx
    count, loss, total, one = _plan(profile, n_rows, n_cols, logits.dtype, tiled,
                                    float(label_smoothing) > 0, mean)
    with _REPLAYS.record(profile, key, tensors):
        if arrived is not None:  # unused pointers get a valid tensor
            one(x, y, losses, dx, losses, out, arrived, n_rows, n_cols, int(ignore_index),
                float(label_smoothing))
        else:
            if mean:
                count(y, n_valid, n_rows, int(ignore_index))
            loss(x, y, losses, dx, losses if n_valid is None else n_valid, out, losses,
                 n_rows, n_cols, int(ignore_index), float(label_smoothing))
            if reduction != "none":
                total(losses, losses if n_valid is None else n_valid, out, n_rows)
    return out, dx


@launch_plan
def _plan(profile: Profile, n_rows: int, n_cols: int, dtype: torch.dtype, tiled: bool,
          smoothing: bool, mean: bool) -> tuple:
    """The launches of a call: the one-program count of valid labels, the loss kernel over
    logits of ``dtype``, the one-program sum of the losses, and the loss kernel doing all
    three in one launch: each program counts the labels (``mean``), and the one that
    finishes last adds the losses in the sum's order, on a counter kept per stream
    (:func:`~kernels.fast_launch.stream_buffers`). The one launch is for few rows
    (``tuning.cross_entropy.one_launch_elements``): each program reads every label, and
    such a call is bound by the host, which spends 7-15 us a launch; while a CUDA graph is
    captured the three launches are taken (a graph replays them at no host cost). The sum
    kernel runs the loss kernel's warps, so that its reduction is the last program's, to
    the bit: a graph and an eager call give the same loss."""
    loss, grid, meta = _loss_launch(profile, n_rows, n_cols, dtype, tiled, smoothing)
    small = profile.elementwise_block(torch.float32)
    return (PlannedLaunch(_count_valid_kernel, (1,), BLOCK=small,
                          num_warps=profile.num_warps_for(small)),
            PlannedLaunch(loss, grid, MEAN=mean, COUNT_LABELS=False, LAST_SUM=False,
                          SUM_BLOCK=small, **meta),
            PlannedLaunch(_sum_losses_kernel, (1,), MEAN=mean, BLOCK=small,
                          num_warps=meta["num_warps"]),
            PlannedLaunch(loss, grid, MEAN=mean, COUNT_LABELS=mean, LAST_SUM=True,
                          SUM_BLOCK=small, **meta))


def _loss_launch(profile: Profile, n_rows: int, n_cols: int, dtype: torch.dtype, tiled: bool,
                 smoothing: bool) -> tuple:
    """(kernel, grid, constexprs and options from the profile) of the loss kernel."""
    meta = dict(SELECT_LOADS=profile.select_loads, ACC_DTYPE=_acc(dtype))
    loss_dtype = _loss_dtype(dtype)
    max_fused = profile.max_fused_elements(loss_dtype)  # a held row is float32 (float64)
    block_v = next_power_of_2(n_cols)
    if block_v <= max_fused and not tiled:
        block_m = _fused_rows(profile, n_rows, block_v, loss_dtype)
        grid, grid_stride = launch_grid(profile, cdiv(n_rows, block_m))
        return _ce_fused_kernel, grid, dict(
            meta, BLOCK_M=block_m, BLOCK_V=block_v, GRID_STRIDE=grid_stride,
            num_warps=profile.num_warps_for(block_m * block_v, dtype))
    # half the fused tile with label smoothing: a second tile of temporaries must fit
    # (the Ascend 910B's unified buffer overflowed)
    # measured: benchmarks/results/h100.jsonl, experiment "comments"
    block_v = min(block_v, max(1, max_fused // 2 if smoothing else max_fused))
    return _ce_tiled_kernel, (profile.capped_grid(n_rows),), dict(
        meta, BLOCK_V=block_v, HAS_SMOOTHING=smoothing,
        num_warps=profile.num_warps_for(block_v, dtype))


def scale_gradient(dlogits: torch.Tensor, grad_loss: torch.Tensor, *, profile: Profile):
    """``dlogits * grad_loss`` (one upstream value, or one a row for "none"), new tensor."""
    n_cols = dlogits.shape[-1] if dlogits.dim() else 1
    g = dlogits.contiguous()
    out = torch.empty_like(g)
    if g.numel() == 0:
        return out
    n_rows = g.numel() // n_cols
    grid, meta = _scale_plan(profile, n_rows, n_cols, g.dtype)
    launch(_scale_rows_kernel, grid, g, grad_loss.contiguous(), out, n_rows, n_cols,
           PER_ROW=grad_loss.dim() > 0, **meta)
    return out


@launch_plan
def _scale_plan(profile: Profile, n_rows: int, n_cols: int, dtype: torch.dtype) -> tuple:
    """(grid, block and num_warps) of :func:`scale_gradient`."""
    block = min(profile.elementwise_block(dtype), next_power_of_2(n_cols))
    return (profile.capped_grid(n_rows),), dict(BLOCK=block,
                                                num_warps=profile.num_warps_for(block))


class CrossEntropyFunction(torch.autograd.Function):
    """Differentiable :func:`cross_entropy` returning the loss: the forward computes the
    gradient too, and the backward only scales it by the upstream gradient."""

    @staticmethod
    def forward(ctx, logits, labels, ignore_index, label_smoothing, reduction, profile):
        loss, dlogits = cross_entropy(logits, labels, ignore_index=ignore_index,
                                      label_smoothing=label_smoothing, reduction=reduction,
                                      profile=profile)
        ctx.save_for_backward(dlogits)
        ctx.profile = profile
        ctx.mark_non_differentiable(labels)
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        (dlogits,) = ctx.saved_tensors
        grad = scale_gradient(dlogits, grad_loss.to(dlogits.dtype if dlogits.dtype ==
                                                    torch.float64 else torch.float32),
                              profile=ctx.profile)
        return grad, None, None, None, None, None


def cross_entropy_autograd(logits, labels, *, ignore_index: int = -100,
                           label_smoothing: float = 0.0, reduction: str = "mean",
                           profile: Profile) -> torch.Tensor:
    """Differentiable :func:`cross_entropy` (the loss only)."""
    return CrossEntropyFunction.apply(logits, labels, ignore_index, label_smoothing,
                                      reduction, profile)
