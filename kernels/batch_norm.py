"""Batch normalization, training forward, over NCHW (also (N, C) and (N, C, L)) inputs.

    mean_c = mean of x[:, c, ...],  var_c = biased variance,  invstd_c = 1 / sqrt(var_c + eps)
    y = (x - mean_c) * invstd_c * weight_c + bias_c
    running_mean = (1 - momentum) * running_mean + momentum * mean_c
    running_var  = (1 - momentum) * running_var  + momentum * var_c * n / (n - 1)

The input is viewed as [N, C, L] (L = H*W, 1 for (N, C) inputs). Two passes over the data
(statistics, then normalize), not three:

1. Statistics in one read. ``E[x^2] - E[x]^2`` loses every significant digit when the mean
   is large against the spread (mean 1e4, std 1e-2 in float32: the two terms agree to all
   24 bits), and even a float32 mean alone is too coarse there (its ulp, 1e-3, is a tenth
   of the spread). So each program shifts its values by the mean of its first tile,
   d = x - shift (0 if that mean is not finite): x - shift is then exact for such data and
   the shifted sums are small numbers held to full precision; the mean is kept as the pair
   (shift, mean_d). A tile's mean is a better shift than a single element, which may be an
   outlier whose rounding would enter every d. Each tile gives a sum and the sum of squared
   deviations from its own mean (M2, no cancellation), merged into the program's running
   (count, sum, M2) with Chan's formula. Sums are kept rather than running means so that a
   +inf comes out as a mean of +inf, as in torch.
2. Normalize. A large channel is split across S programs (S from the profile's compute
   units, so a few channels still fill the device); each writes its partial (count, shift,
   sum, M2) to its own slot. The normalize kernel merges a channel's S partials in a fixed
   order, against split 0's shift (deterministic, no float atomics); the program of split 0
   writes save_mean, save_invstd and the running statistics, and every program normalizes
   its own tiles as ((x - shift) - mean_d) * invstd * weight + bias: subtracting the
   shifted mean, not the rounded full mean, keeps y accurate when the mean is large.

A tile is [BLOCK_C, BLOCK_R, BLOCK_L]: BLOCK_C neighbouring channels at once when L is
short, so that a row of the tile is one contiguous run of memory (for (N, C) inputs a
one-channel tile would read one element per row). Per-channel values (shift, mean, scale,
bias) are [BLOCK_C] vectors broadcast over the tile. Work items (channel block, split) are
walked with a grid-stride loop, so the grid stays within the profile's MAX_GRID_NUM.
Statistics and save_mean / save_invstd are float32 (float64 for float64 inputs), as torch
keeps them on GPUs.
"""
import math

import torch
import triton
import triton.language as tl

from triton_cts.execution.input_checks import ShapeMismatchError, check_inputs
from triton_cts.profiles import Profile, cdiv, next_power_of_2
from .fast_launch import launch, launch_plan

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

INF = tl.constexpr(float("inf"))


@triton.jit
def _load_tile(
    X,                          # pointer to x, contiguous [N, C, L]
    chans,                      # [BLOCK_C] channel indices of the work item
    t,                          # tile index within the channel block's (N, L) plane
    n_batch, n_chan, n_inner,   # N, C, L
    n_tiles_l,                  # tiles along L
    BLOCK_R: tl.constexpr,      # rows (batch index) per tile
    BLOCK_L: tl.constexpr,      # columns (spatial index) per tile
    SELECT_LOADS: tl.constexpr, # clamp masked-off lanes to valid addresses, select after
    ACC_DTYPE: tl.constexpr,
):
    """Tile t, [BLOCK_C, BLOCK_R, BLOCK_L], as ACC_DTYPE and 0 where masked, with its
    offsets, mask and per-channel count."""
    r0 = (t // n_tiles_l) * BLOCK_R
    l0 = (t % n_tiles_l) * BLOCK_L
    rows = r0 + tl.arange(0, BLOCK_R)
    cols = l0 + tl.arange(0, BLOCK_L)
    mask = (chans < n_chan)[:, None, None] & (rows < n_batch)[None, :, None] \
        & (cols < n_inner)[None, None, :]
    offs = chans[:, None, None] * n_inner + rows[None, :, None] * n_chan * n_inner \
        + cols[None, None, :]
    if SELECT_LOADS:
        safe = tl.minimum(chans, n_chan - 1)[:, None, None] * n_inner \
            + tl.minimum(rows, n_batch - 1)[None, :, None] * n_chan * n_inner \
            + tl.minimum(cols, n_inner - 1)[None, None, :]
        x = tl.where(mask, tl.load(X + safe).to(ACC_DTYPE), 0.0)
    else:
        x = tl.load(X + offs, mask=mask, other=0.0).to(ACC_DTYPE)
    count = tl.minimum(n_batch - r0, BLOCK_R) * tl.minimum(n_inner - l0, BLOCK_L)
    # "+ zeros" rather than .to(): sizes equal to 1 reach the kernel as constexpr ints.
    return x, offs, mask, count + tl.zeros([], ACC_DTYPE)


@triton.jit
def _channel_sum(v):
    """[BLOCK_C, BLOCK_R, BLOCK_L] -> [BLOCK_C]: innermost axes first, so that a sequential
    reducer (the interpreter's numpy) still sums each channel pairwise."""
    return tl.sum(tl.sum(v, axis=2), axis=1)


@triton.jit
def _tile_moments(x, mask, count, shift):
    """Per channel: the sum of x - shift, and the sum of squared deviations from the tile's
    own mean."""
    d = tl.where(mask, x - shift[:, None, None], 0.0)
    total = _channel_sum(d)
    dev = tl.where(mask, d - (total / count)[:, None, None], 0.0)
    return total, _channel_sum(dev * dev)


@triton.jit
def _load_channels(P, chans, n_chan, SELECT_LOADS: tl.constexpr):
    """P[chans] for a [BLOCK_C] block of channel indices, 0 past the last channel."""
    cmask = chans < n_chan
    if SELECT_LOADS:
        return tl.where(cmask, tl.load(P + tl.minimum(chans, n_chan - 1)), 0.0)
    return tl.load(P + chans, mask=cmask, other=0.0)


@triton.jit
def _load_partials(
    PARTIAL,                    # pointer to partials [4, n_splits, C]
    s0,                         # first split of this step
    chans,                      # [BLOCK_C] channel indices
    n_splits, n_chan,
    BLOCK_S: tl.constexpr,      # splits per step
    SELECT_LOADS: tl.constexpr,
):
    """[BLOCK_S, BLOCK_C] blocks of count, shift, sum and M2; 0 outside the valid range."""
    splits = s0 + tl.arange(0, BLOCK_S)
    mask = (splits < n_splits)[:, None] & (chans < n_chan)[None, :]
    plane = n_splits * n_chan
    if SELECT_LOADS:
        p = PARTIAL + tl.minimum(splits, n_splits - 1)[:, None] * n_chan \
            + tl.minimum(chans, n_chan - 1)[None, :]
        cnt = tl.where(mask, tl.load(p), 0.0)
        shift = tl.where(mask, tl.load(p + plane), 0.0)
        total = tl.where(mask, tl.load(p + 2 * plane), 0.0)
        m2 = tl.where(mask, tl.load(p + 3 * plane), 0.0)
    else:
        p = PARTIAL + splits[:, None] * n_chan + chans[None, :]
        cnt = tl.load(p, mask=mask, other=0.0)
        shift = tl.load(p + plane, mask=mask, other=0.0)
        total = tl.load(p + 2 * plane, mask=mask, other=0.0)
        m2 = tl.load(p + 3 * plane, mask=mask, other=0.0)
    return cnt, shift, total, m2


@triton.jit
def _batch_norm_stats_kernel(
    X,                          # pointer to x, contiguous [N, C, L]
    PARTIAL,                    # pointer to partials [4, n_splits, C]: count, shift, sum, M2
    n_batch, n_chan, n_inner,   # N, C, L
    n_splits,                   # programs per channel block S
    n_tiles_l,                  # tiles along L
    n_tiles,                    # tiles per channel block
    BLOCK_R: tl.constexpr,      # rows (batch index) per tile
    BLOCK_C: tl.constexpr,      # channels per tile
    BLOCK_L: tl.constexpr,      # columns (spatial index) per tile
    SELECT_LOADS: tl.constexpr, # clamp masked-off lanes to valid addresses, select after
    ACC_DTYPE: tl.constexpr,    # float32, or float64 for float64 inputs
):
    pid = tl.program_id(0).to(tl.int64)
    n_work = tl.cdiv(n_chan, BLOCK_C) * n_splits
    plane = n_splits * n_chan               # elements in one row of PARTIAL
    for work in range(pid, n_work, tl.num_programs(0)):
        split = work % n_splits
        chans = (work // n_splits) * BLOCK_C + tl.arange(0, BLOCK_C)
        # The first tile's mean (0 if not finite) is this program's shift.
        x, offs, mask, count = _load_tile(X, chans, split, n_batch, n_chan, n_inner, n_tiles_l,
                                          BLOCK_R, BLOCK_L, SELECT_LOADS, ACC_DTYPE)
        shift = _channel_sum(x) / count
        shift = tl.where(tl.abs(shift) < INF, shift, 0.0)
        total, m2 = _tile_moments(x, mask, count, shift)
        for t in range(split + n_splits, n_tiles, n_splits):
            x, offs, mask, n_t = _load_tile(X, chans, t, n_batch, n_chan, n_inner, n_tiles_l,
                                            BLOCK_R, BLOCK_L, SELECT_LOADS, ACC_DTYPE)
            sum_t, m2_t = _tile_moments(x, mask, n_t, shift)
            # Chan et al.: M2 = M2_a + M2_b + delta^2 * n_a * n_b / (n_a + n_b).
            delta = sum_t / n_t - total / count
            m2 += m2_t + delta * delta * (count * n_t / (count + n_t))
            total += sum_t
            count += n_t
        slots = PARTIAL + split * n_chan + chans
        cmask = chans < n_chan
        tl.store(slots, count + tl.zeros_like(total), mask=cmask)
        tl.store(slots + plane, shift, mask=cmask)
        tl.store(slots + 2 * plane, total, mask=cmask)
        tl.store(slots + 3 * plane, m2, mask=cmask)


@triton.jit
def _batch_norm_apply_kernel(
    X,                          # pointer to x, contiguous [N, C, L]
    Y,                          # pointer to y, same shape and dtype
    PARTIAL,                    # pointer to partials [4, n_splits, C] from the stats kernel
    W,                          # pointer to weight [C] (unused without HAS_WEIGHT)
    B,                          # pointer to bias [C] (unused without HAS_BIAS)
    RUNNING_MEAN,               # pointer to running_mean [C], updated in place
    RUNNING_VAR,                # pointer to running_var [C], updated in place
    SAVE_MEAN,                  # pointer to the batch mean [C], ACC_DTYPE
    SAVE_INVSTD,                # pointer to the batch 1/sqrt(var + eps) [C], ACC_DTYPE
    n_batch, n_chan, n_inner,   # N, C, L
    n_splits,                   # programs per channel block S
    n_tiles_l,                  # tiles along L
    n_tiles,                    # tiles per channel block
    n_total,                    # N * L, values per channel
    EPS: tl.constexpr,          # constexpr: a float argument would be rounded to float32
    MOMENTUM: tl.constexpr,     # as EPS
    HAS_WEIGHT: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    HAS_RUNNING: tl.constexpr,  # update running_mean and running_var
    BLOCK_R: tl.constexpr,      # rows (batch index) per tile
    BLOCK_C: tl.constexpr,      # channels per tile
    BLOCK_L: tl.constexpr,      # columns (spatial index) per tile
    BLOCK_S: tl.constexpr,      # splits merged per step
    SELECT_LOADS: tl.constexpr, # clamp masked-off lanes to valid addresses, select after
    ACC_DTYPE: tl.constexpr,    # float32, or float64 for float64 inputs
):
    pid = tl.program_id(0).to(tl.int64)
    n_work = tl.cdiv(n_chan, BLOCK_C) * n_splits
    plane = n_splits * n_chan
    n = n_total + tl.zeros([], ACC_DTYPE)  # n_total = 1 arrives as a constexpr int
    for work in range(pid, n_work, tl.num_programs(0)):
        split = work % n_splits
        chans = (work // n_splits) * BLOCK_C + tl.arange(0, BLOCK_C)
        cmask = chans < n_chan
        # Merge the channel block's partials against split 0's shift, in a fixed order:
        # every split computes the same statistics, whichever program wrote which partial.
        # shift_i - shift is exact when the data sit far from 0 relative to their spread.
        shift = _load_channels(PARTIAL + plane, chans, n_chan, SELECT_LOADS)
        total = tl.zeros([BLOCK_C], ACC_DTYPE)
        for s0 in range(0, n_splits, BLOCK_S):
            cnt_i, shift_i, sum_i, m2_i = _load_partials(PARTIAL, s0, chans, n_splits, n_chan,
                                                         BLOCK_S, SELECT_LOADS)
            total += tl.sum(sum_i + cnt_i * (shift_i - shift[None, :]), axis=0)
        mean_d = total / n
        m2 = tl.zeros([BLOCK_C], ACC_DTYPE)
        for s0 in range(0, n_splits, BLOCK_S):
            cnt_i, shift_i, sum_i, m2_i = _load_partials(PARTIAL, s0, chans, n_splits, n_chan,
                                                         BLOCK_S, SELECT_LOADS)
            mean_i = (sum_i + cnt_i * (shift_i - shift[None, :])) / tl.maximum(cnt_i, 1.0)
            dev = tl.where(cnt_i > 0, mean_i - mean_d[None, :], 0.0)
            m2 += tl.sum(m2_i + cnt_i * dev * dev, axis=0)
        var = m2 / n
        invstd = 1.0 / tl.sqrt(var + EPS)
        if split == 0:
            mean = shift + mean_d
            tl.store(SAVE_MEAN + chans, mean, mask=cmask)
            tl.store(SAVE_INVSTD + chans, invstd, mask=cmask)
            if HAS_RUNNING:
                rm = _load_channels(RUNNING_MEAN, chans, n_chan, SELECT_LOADS).to(ACC_DTYPE)
                rv = _load_channels(RUNNING_VAR, chans, n_chan, SELECT_LOADS).to(ACC_DTYPE)
                unbiased = m2 / (n - 1.0)  # n = 1: 0/0 = NaN, as torch
                rm = (1.0 - MOMENTUM) * rm + MOMENTUM * mean
                rv = (1.0 - MOMENTUM) * rv + MOMENTUM * unbiased
                tl.store(RUNNING_MEAN + chans, rm.to(RUNNING_MEAN.dtype.element_ty), mask=cmask)
                tl.store(RUNNING_VAR + chans, rv.to(RUNNING_VAR.dtype.element_ty), mask=cmask)
        scale = invstd
        if HAS_WEIGHT:
            scale = scale * _load_channels(W, chans, n_chan, SELECT_LOADS).to(ACC_DTYPE)
        offset = tl.zeros([BLOCK_C], ACC_DTYPE)
        if HAS_BIAS:
            offset = _load_channels(B, chans, n_chan, SELECT_LOADS).to(ACC_DTYPE)
        # Per-channel vectors, broadcast over the tile.
        shift3 = shift[:, None, None]
        mean3 = mean_d[:, None, None]
        scale3 = scale[:, None, None]
        offset3 = offset[:, None, None]
        for t in range(split, n_tiles, n_splits):
            x, offs, mask, n_t = _load_tile(X, chans, t, n_batch, n_chan, n_inner, n_tiles_l,
                                            BLOCK_R, BLOCK_L, SELECT_LOADS, ACC_DTYPE)
            y = ((x - shift3) - mean3) * scale3 + offset3
            tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=mask)


# --------------------------------------------------------------------------------------
# Launcher
# --------------------------------------------------------------------------------------
def _check_channel_vector(name: str, t: torch.Tensor | None, channels: int, x_shape) -> None:
    if t is not None and tuple(t.shape) != (channels,):
        raise ShapeMismatchError(
            f"batch_norm_train: '{name}' must have shape ({channels},) for x of shape "
            f"{tuple(x_shape)} (channels are dim 1), got {tuple(t.shape)}")


def _tile_shape(profile: Profile, dtype: torch.dtype, n_batch: int, n_chan: int,
                n_inner: int) -> tuple[int, int, int]:
    """(BLOCK_R, BLOCK_C, BLOCK_L) within one streaming block (the profile's elementwise
    block): L first (contiguous), what is left shared between channels and rows, rows
    taking the larger half, and channels whatever rows cannot use. Where the profile pads
    a tile's innermost rows (tile_row_min_bytes), a narrow L costs the padded bytes:
    [N, C] inputs (L = 1) overflowed the NPU's unified buffer otherwise."""
    block = profile.elementwise_block(dtype)
    block_l = min(next_power_of_2(n_inner), block)
    row_bytes = max(block_l * dtype.itemsize, profile.tile_row_min_bytes)
    left = max(1, block * dtype.itemsize // row_bytes)
    block_c = min(next_power_of_2(n_chan), 1 << ((left.bit_length() - 1) // 2))
    block_r = min(next_power_of_2(n_batch), left // block_c)
    block_c = min(next_power_of_2(n_chan), left // block_r)
    return block_r, block_c, block_l


def batch_norm_train(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
                     running_mean: torch.Tensor | None, running_var: torch.Tensor | None,
                     momentum: float = 0.1, eps: float = 1e-5, *, profile: Profile):
    """Training-mode batch norm over dim 1 of ``x`` ([N, C, *]).

    Returns ``(y, save_mean, save_invstd, running_mean, running_var)``: y has x's dtype;
    save_mean and save_invstd are float32 (float64 for float64 x); running_mean and
    running_var are the given tensors, updated in place (None if they were None).
    Any of weight, bias, running_mean, running_var may be None.
    """
    op = "batch_norm_train"
    check_inputs(op, profile, DTYPES, x=x, weight=weight, bias=bias,
                 running_mean=running_mean, running_var=running_var)
    if x.dim() < 2:
        raise ShapeMismatchError(f"{op}: x must have at least 2 dims [N, C, *], got shape "
                                 f"{tuple(x.shape)}")
    if (running_mean is None) != (running_var is None):
        raise ValueError(f"{op}: running_mean and running_var must both be given or both be None")
    if not isinstance(momentum, (int, float)) or not isinstance(eps, (int, float)):
        raise TypeError(f"{op}: momentum and eps must be numbers, got {momentum!r} and {eps!r}")
    n_batch, n_chan = x.shape[0], x.shape[1]
    n_inner = math.prod(x.shape[2:])
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                    ("running_var", running_var)):
        _check_channel_vector(name, t, n_chan, x.shape)

    x = x.contiguous()
    y = torch.empty_like(x)
    stat_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    save_mean = torch.empty(n_chan, dtype=stat_dtype, device=x.device)
    save_invstd = torch.empty(n_chan, dtype=stat_dtype, device=x.device)
    if n_chan == 0 or n_batch * n_inner == 0:
        # No values: the statistics are NaN (a mean of nothing), running stats untouched.
        save_mean.fill_(float("nan"))
        save_invstd.fill_(float("nan"))
        return y, save_mean, save_invstd, running_mean, running_var

    # Running statistics are updated in place; a strided one goes through a contiguous copy.
    rm, rv = running_mean, running_var
    if rm is not None:
        rm = rm if rm.is_contiguous() else rm.contiguous()
        rv = rv if rv.is_contiguous() else rv.contiguous()
    weight = weight.contiguous() if weight is not None else None
    bias = bias.contiguous() if bias is not None else None

    n_splits, grid, shape_args, tile, block_s = _plan(profile, n_batch, n_chan, n_inner, x.dtype)
    partial = torch.empty((4, n_splits, n_chan), dtype=stat_dtype, device=x.device)
    launch(_batch_norm_stats_kernel, grid, x, partial, *shape_args, **tile)
    launch(_batch_norm_apply_kernel, grid,
        x, y, partial,
        weight if weight is not None else save_mean,   # placeholders are never read
        bias if bias is not None else save_mean,
        rm if rm is not None else save_mean,
        rv if rv is not None else save_invstd,
        save_mean, save_invstd, *shape_args, n_batch * n_inner,
        EPS=float(eps), MOMENTUM=float(momentum),
        HAS_WEIGHT=weight is not None, HAS_BIAS=bias is not None, HAS_RUNNING=rm is not None,
        BLOCK_S=block_s, **tile)

    if running_mean is not None and rm is not running_mean:
        running_mean.copy_(rm)
    if running_var is not None and rv is not running_var:
        running_var.copy_(rv)
    return y, save_mean, save_invstd, running_mean, running_var


@launch_plan
def _plan(profile: Profile, n_batch: int, n_chan: int, n_inner: int,
          dtype: torch.dtype) -> tuple:
    """(splits S per channel block, grid, the kernels' size arguments, their shared
    constexprs and num_warps, BLOCK_S) of :func:`batch_norm_train` on [N, C, L] ``dtype``."""
    block_r, block_c, block_l = _tile_shape(profile, dtype, n_batch, n_chan, n_inner)
    n_tiles_l = cdiv(n_inner, block_l)
    n_tiles = cdiv(n_batch, block_r) * n_tiles_l
    n_blocks = cdiv(n_chan, block_c)
    num_warps = profile.num_warps_for(block_r * block_c * block_l)
    # Split each channel block over enough programs to give every compute unit as many
    # warps as one block may hold (a few channels still fill the device), never into more
    # parts than it has tiles. The partial buffers are sized from that.
    programs = profile.compute_units * max(1, profile.max_num_warps // num_warps)
    n_splits = max(1, min(n_tiles, cdiv(programs, n_blocks)))
    grid = (profile.capped_grid(n_blocks * n_splits),)
    stat_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    acc = tl.float64 if stat_dtype == torch.float64 else tl.float32
    shape_args = (n_batch, n_chan, n_inner, n_splits, n_tiles_l, n_tiles)
    tile = dict(BLOCK_R=block_r, BLOCK_C=block_c, BLOCK_L=block_l,
                SELECT_LOADS=profile.select_loads, ACC_DTYPE=acc, num_warps=num_warps)
    # The merge reads [BLOCK_S, BLOCK_C] blocks of partials: keep them within a block too.
    block_s = min(next_power_of_2(n_splits),
                  max(1, profile.elementwise_block(stat_dtype) // block_c))
    return n_splits, grid, shape_args, tile, block_s
