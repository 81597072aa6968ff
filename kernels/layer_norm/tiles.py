"""Layer norm: what the forward and backward kernels share.

Profile switches (constexpr, so one source serves every target): SELECT_LOADS clamps the
load offsets of out-of-bounds lanes to the last valid row/column, loads unmasked and
selects afterwards (SIMD NPUs read every masked-off address); SLICE_BROADCAST loads
per-row constants (mean, rstd, rowscale) once as a [BLOCK_M] vector and broadcasts the
values instead of loading through a [BLOCK_M, 1] pointer column. Grids are capped at the
profile's MAX_GRID_NUM and programs walk rows (or row or column blocks) in grid-stride
loops with int64 offsets. The tile sizes here are what the plans (:mod:`.plan`,
:mod:`.plan_backward`) build the launches from.
"""
from __future__ import annotations

import functools
import struct
from typing import NamedTuple

import torch
import triton
import triton.language as tl

from triton_cts.execution.input_checks import ShapeMismatchError, WrongDeviceError, check_inputs
from triton_cts.profiles import Profile, cdiv, next_power_of_2
from ..compute import to_compute
from ..fast_launch import PassedChecks, launch_plan, signature
from . import tuning
from .tuning import BACKWARD_WARPS

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
STAT_DTYPES = (torch.float32, torch.float64)
MASK_DTYPES = (torch.bool, torch.uint8)


# --------------------------------------------------------------------------------------
# Helpers shared by the kernels.
# --------------------------------------------------------------------------------------
_to_acc = to_compute  # float64 inputs are computed in float64, all others in float32


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
def _add_triple(a0, b0, c0, a1, b1, c1):
    # combine function of a three-sum tl.reduce
    return a0 + a1, b0 + b1, c0 + c1


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
def _add_block_column_sums(dw, dw_comp, db, db_comp, dy, xhat, HAS_BIAS: tl.constexpr,
                           COMPENSATED: tl.constexpr):
    """A row block's dweight (dy * xhat) and dbias (dy) terms, summed over its rows, added
    to a program's per-column sums, compensated (Kahan) where each lane adds many blocks.
    dy is 0 out of bounds, so the sums need no mask."""
    if COMPENSATED:
        dw, dw_comp = _kahan_add(dw, dw_comp, tl.sum(dy * xhat, axis=0))
        if HAS_BIAS:
            db, db_comp = _kahan_add(db, db_comp, tl.sum(dy, axis=0))
    else:
        dw += tl.sum(dy * xhat, axis=0)
        if HAS_BIAS:
            db += tl.sum(dy, axis=0)
    return dw, dw_comp, db, db_comp


@triton.jit
def _tile_offsets(rows, cols, n_rows, N, SELECT_LOADS: tl.constexpr,
                  EVEN_ROWS: tl.constexpr = False, EVEN_N: tl.constexpr = False):
    """Offsets of tile rows x cols in a contiguous [n_rows, N] tensor: (store offsets,
    load offsets, in-bounds mask). With SELECT_LOADS the load offsets of out-of-bounds
    lanes are clamped to the last row/column, so an unmasked load stays inside the tensor.
    EVEN_ROWS (every row is in bounds) and EVEN_N (the tile's columns are N): that part
    of the mask is a constant the compiler folds away."""
    offs = rows[:, None] * N + cols[None, :]
    if EVEN_ROWS:
        row_mask = tl.full([rows.shape[0], 1], 1, tl.int1)
    else:
        row_mask = rows[:, None] < n_rows
    if EVEN_N:
        mask = row_mask & tl.full([1, cols.shape[0]], 1, tl.int1)
    else:
        mask = row_mask & (cols[None, :] < N)
    if SELECT_LOADS:
        load_offs = tl.minimum(rows, n_rows - 1)[:, None] * N + tl.minimum(cols, N - 1)[None, :]
    else:
        load_offs = offs
    return offs, load_offs, mask


@triton.jit
def _row_offsets(row, cols, N, SELECT_LOADS: tl.constexpr, EVEN_N: tl.constexpr = False):
    """The same for one row's column tile (the tiled kernels). EVEN_N: the tile divides
    N, so the mask is a constant the compiler folds away (no predicated loads or selects)."""
    offs = row * N + cols
    if EVEN_N:
        mask = tl.full(cols.shape, 1, tl.int1)
    else:
        mask = cols < N
    if SELECT_LOADS:
        load_offs = row * N + tl.minimum(cols, N - 1)
    else:
        load_offs = offs
    return offs, load_offs, mask


@triton.jit
def _load_x_dy(X, DY, rows, cols, n_rows, N, SELECT_LOADS: tl.constexpr, EVEN_N: tl.constexpr):
    """x and dy of tile rows x cols as loaded (their own dtype), 0 out of bounds; the rows
    may run past n_rows (a prefetch of the rows a program reaches next)."""
    _, load_offs, mask = _tile_offsets(rows, cols, n_rows, N, SELECT_LOADS, False, EVEN_N)
    return _load(X, load_offs, mask, SELECT_LOADS), _load(DY, load_offs, mask, SELECT_LOADS)


@triton.jit
def _x_dy_step(X, DY, load_offs, mask, next_rows, cols, n_rows, N, x_ahead, dy_ahead,
               PREFETCH: tl.constexpr, SELECT_LOADS: tl.constexpr, EVEN_N: tl.constexpr):
    """A backward step's x and dy as loaded: (x, dy, x_ahead, dy_ahead). With PREFETCH they
    are the ones loaded a step ahead, and next_rows' are loaded now, to be in flight while
    the caller reduces this step's (x_ahead, dy_ahead: from :func:`_load_x_dy` before the
    first step); without it they are loaded here and x_ahead, dy_ahead pass through."""
    if PREFETCH:
        x_in, dy_in = x_ahead, dy_ahead
        x_ahead, dy_ahead = _load_x_dy(X, DY, next_rows, cols, n_rows, N, SELECT_LOADS, EVEN_N)
    else:
        x_in = _load(X, load_offs, mask, SELECT_LOADS)
        dy_in = _load(DY, load_offs, mask, SELECT_LOADS)
    return x_in, dy_in, x_ahead, dy_ahead


@triton.jit
def _load(PTR, load_offs, mask, SELECT_LOADS: tl.constexpr):
    return _load_hinted(PTR, load_offs, mask, SELECT_LOADS, "")


@triton.jit
def _load_hinted(PTR, load_offs, mask, SELECT_LOADS: tl.constexpr, EVICT: tl.constexpr):
    return _load_with(PTR, load_offs, mask, SELECT_LOADS, EVICT, "")


@triton.jit
def _load_with(PTR, load_offs, mask, SELECT_LOADS: tl.constexpr, EVICT: tl.constexpr,
               CACHE: tl.constexpr):
    # zero where mask is false; SELECT_LOADS: every address is valid, select afterwards.
    # EVICT: the L2 eviction hint ("evict_last": read again soon; "evict_first": not; "").
    # CACHE: the cache modifier (".cg": from L2, for data other programs just wrote; "")
    if SELECT_LOADS:
        v = tl.load(PTR + load_offs, cache_modifier=CACHE, eviction_policy=EVICT)
        v = tl.where(mask, v, tl.zeros_like(v))
    else:
        v = tl.load(PTR + load_offs, mask=mask, other=0, cache_modifier=CACHE,
                    eviction_policy=EVICT)
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
                   COMPUTE_FP64: tl.constexpr, EVICT: tl.constexpr):
    """x' = dropout(x * rowscale) + residual for one tile (any shape), 0 out of bounds;
    EVICT is the L2 hint of the loads (see _load)."""
    x = _to_acc(_load_hinted(X, load_offs, mask, SELECT_LOADS, EVICT), COMPUTE_FP64)
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
        x += _to_acc(_load_hinted(RESIDUAL, load_offs, mask, SELECT_LOADS, EVICT),
                     COMPUTE_FP64)
    if STORE_RESIDUAL_OUT:
        tl.store(RESIDUAL_OUT + offs, x.to(RESIDUAL_OUT.dtype.element_ty), mask=mask)
    return x


@triton.jit
def _store_input_grads(DX, DRESIDUAL_OUT, DRESIDUAL, DROPOUT_MASK, dx, rowscale,
                       offs, load_offs, mask, dropout_scale,
                       HAS_DRESIDUAL_OUT: tl.constexpr, STORE_DRESIDUAL: tl.constexpr,
                       HAS_DROPOUT: tl.constexpr, HAS_ROWSCALE: tl.constexpr,
                       SELECT_LOADS: tl.constexpr, COMPUTE_FP64: tl.constexpr,
                       EVICT: tl.constexpr):
    """From the gradient of x' to those of the residual and of x (through dropout, rowscale);
    EVICT is the L2 hint of the loads and stores (see _load_hinted)."""
    if HAS_DRESIDUAL_OUT:
        # prenorm: residual_out = x' was also used downstream
        dx += _to_acc(_load_hinted(DRESIDUAL_OUT, load_offs, mask, SELECT_LOADS, EVICT),
                      COMPUTE_FP64)
    if STORE_DRESIDUAL:
        tl.store(DRESIDUAL + offs, dx.to(DRESIDUAL.dtype.element_ty), mask=mask,
                 eviction_policy=EVICT)
    if HAS_DROPOUT:
        keep = _load_hinted(DROPOUT_MASK, load_offs, mask, SELECT_LOADS, EVICT)
        dx = tl.where(keep != 0, dx * dropout_scale, 0.0)
    if HAS_ROWSCALE:
        dx = dx * rowscale
    tl.store(DX + offs, dx.to(DX.dtype.element_ty), mask=mask, eviction_policy=EVICT)



# --------------------------------------------------------------------------------------
# Tile sizes (from the profile) and argument checks.
# --------------------------------------------------------------------------------------
def _prev_power_of_2(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """What the kernels compute in and save mean/rstd in: float32, float64 for float64."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _row_tile(dtype: torch.dtype, profile: Profile) -> int:
    """Most columns of one row a program holds at once. A held row is float32 in registers
    whatever the input dtype, so MAX_FUSED_SIZE is counted in float32 elements: counted in
    bf16 elements, a 32768-column row spilled (224 bytes of stack on sm_90) and the bf16
    forward was slower (benchmarks/results/h200.jsonl, experiment "comments")."""
    return profile.max_fused_elements(_acc_dtype(dtype))


def _backward_row_tile(dtype: torch.dtype, profile: Profile) -> int:
    """Longest row the fused backward holds: half the row tile. Per column it keeps x, dy,
    the weight, dx and the dweight/dbias sums, about twice the forward's arrays: at the
    full row tile (16384 columns on sm_90) it spilled 184 to 384 bytes a thread at 16 or 32
    warps (benchmarks/results/h200.jsonl, experiment "comments")."""
    return max(1, _row_tile(dtype, profile) // 2)


@launch_plan  # asked on every backward launch
def _backward_row_tile_of(profile: Profile, dtype: torch.dtype) -> int:
    return _backward_row_tile(dtype, profile)


def _fits_fused_backward(n_cols: int, dtype: torch.dtype, profile: Profile) -> bool:
    return n_cols <= _backward_row_tile_of(profile, dtype)


def _tiled_backward_block(n_cols: int, dtype: torch.dtype,
                          profile: Profile) -> tuple[int, dict[str, int]]:
    """(columns per tile, launch options) of the tiled backward's dx kernel. Like the tiled
    forward it reduces each tile to scalars at once, so a tile is the fused backward's row
    tile (it holds the same x, dy, w and their products), with the warps (and register
    cap) of twice as many elements in ``tuning.layer_norm.backward_num_warps_by_block``.
    (With three tile-wide accumulators the tile was a quarter of the forward's row tile,
    and slower: benchmarks/results/h100.jsonl, experiment "comments".)"""
    block = max(1, min(_backward_row_tile(dtype, profile), next_power_of_2(n_cols)))
    return block, profile.launch_options_for(2 * block, dtype,
                                             tuning.warps_table(profile, BACKWARD_WARPS, dtype))


def _row_block(n_rows: int, block_n: int, tile: int, profile: Profile) -> int:
    """Rows per tile of the fused kernels when a row is short: rows are added up to
    ``tile`` elements, but no more than leaves every compute unit a row block."""
    fill = max(1, tile // block_n)
    share = _prev_power_of_2(cdiv(n_rows, profile.compute_units))
    return max(1, min(fill, share))


def _backward_tile(dtype: torch.dtype, profile: Profile) -> int:
    # the fused backward stacks short rows up to half its row tile (twice the arrays)
    # measured: benchmarks/results/h200.jsonl, experiment "comments"
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
    has one (benchmarks/results/h200.jsonl, experiment "comments"), otherwise a column
    block per compute unit with [BLOCK_M, BLOCK_N] tiles of x, dy and the two sums
    filling half a row tile."""
    tile = tuning.column_sum_tile(profile)
    if tile is not None:
        rows, cols, num_warps = tile
        return (min(rows, next_power_of_2(n_rows)), min(cols, next_power_of_2(n_cols)),
                num_warps)
    block_n = _column_block(n_cols, profile)
    block_m = max(1, min(next_power_of_2(n_rows),
                         _backward_row_tile(dtype, profile) // block_n))
    return block_m, block_n, profile.num_warps_for(2 * block_m * block_n, dtype)


def _column_tile(n_rows: int, n_cols: int, dtype: torch.dtype,
                 profile: Profile) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps, programs) of the column strategy's column kernel: the
    profile's measured ``tuning.layer_norm.backward_column_tile`` (``_32bit``: rows,
    columns, warps, programs a compute unit) where it has one, else the dweight/dbias
    kernel's tile (the same walk down a column block) and ``partials_per_compute_unit``
    programs a unit."""
    tile = tuning.backward_column_tile(profile, dtype)
    if tile is not None:
        rows, cols, num_warps, per_unit = tile
        programs = profile.compute_units * per_unit
    else:
        # a program holds x, dy, w, xhat and dx of its tile besides the two sums: half
        # the dweight/dbias kernel's rows (with them, sm_80 spilled at float32)
        rows, cols, num_warps = _column_sum_tile(n_rows, n_cols, dtype, profile)
        rows = max(1, rows // 2)
        programs = profile.compute_units * tuning.partials_for(profile, dtype, stacked=False)
    # float64 holds twice the registers an element: a quarter of the rows (the 32-bit
    # tile spilled 424 bytes a thread on sm_90)
    if dtype.itemsize > 4:
        rows = max(1, rows // 4)
    return (min(rows, next_power_of_2(n_rows)), min(cols, next_power_of_2(n_cols)),
            num_warps, programs)


def _check_vector(op: str, name: str, t: torch.Tensor | None, n: int) -> None:
    if t is not None and tuple(t.shape) != (n,):
        raise ShapeMismatchError(f"{op}: '{name}' must have shape ({n},) to match the last "
                                 f"dim of x, got {tuple(t.shape)}")


def _check_rows(op: str, name: str, t: torch.Tensor | None, x: torch.Tensor) -> None:
    if t is not None and t.numel() != x.shape[:-1].numel():
        raise ShapeMismatchError(f"{op}: '{name}' must hold one value per row of x, shape "
                                 f"{tuple(x.shape[:-1])}, got shape {tuple(t.shape)}")


@functools.lru_cache(maxsize=64)  # launchers ask on every call, mostly for 0.0
def _dropout_scale_parts(dropout_p: float) -> tuple[float, float]:
    """1 / (1 - dropout_p) as float32 plus its rounding error (float kernel arguments are
    float32; float64 kernels add the parts back)."""
    scale = 1.0 / (1.0 - dropout_p)
    hi = struct.unpack("f", struct.pack("f", scale))[0]  # round to float32, off the GPU
    return hi, scale - hi


def _check_dropout_p(op: str, dropout_p: float) -> None:
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"{op}: dropout_p must be in [0, 1), got {dropout_p}")


# ---- the backward's arguments, checked, with its outputs allocated ----------------------
class _Checked(NamedTuple):
    """What a backward call derives from inputs that passed the checks, remembered for
    their signature (it stands for profile, options and shapes as a replay's owner)."""
    n_rows: int
    n_cols: int
    flags: dict            # the dx kernels' operand constexprs
    flag_key: tuple        # what they are built from
    fused: bool            # whether a row fits the fused backward (half the fused tile)


class _Backward(NamedTuple):
    """Validated, contiguous backward operands and the outputs to fill, in the caller's
    shapes (the kernels take pointers and (n_rows, n_cols): no view is made per call)."""
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
    n_rows: int
    n_cols: int
    flags: dict            # the dx kernels' operand constexprs (shared: not to be mutated)
    flag_key: tuple        # what they are built from, a launch plan's key
    checked: _Checked      # what the checks remembered for these inputs (a replay's owner)


#: The leading fields of :class:`_Backward` that hold the caller's tensors (the rest are
#: allocated by the launcher): what a replay tests for alignment
CALLER_OPERANDS = _Backward._fields.index("dx")


#: The backward's inputs that passed :func:`_check_backward` on a GPU, with what depends on
#: their shapes alone: a call with the same signature skips the checks.
_BACKWARD_CHECKS = PassedChecks()


def _prepare_backward(op, dy, x, weight, bias, mean, rstd, rms, rowscale, dropout_mask,
                      dropout_p, dresidual_out, has_residual, profile) -> tuple[_Backward, tuple]:
    # every launch of the backward passes here: once a signature has passed the checks,
    # a call takes one table lookup, the contiguous operands and the outputs
    key = (op, rms, has_residual, dropout_p,
           signature(dy, x, weight, bias, mean, rstd, rowscale, dropout_mask, dresidual_out))
    known = _BACKWARD_CHECKS.get(profile, key)
    if known is None:
        _check_backward(op, dy, x, weight, bias, mean, rstd, rms, rowscale, dropout_mask,
                        dropout_p, dresidual_out, profile)
        flag_key = (rms, bias is not None, rowscale is not None, dropout_mask is not None,
                    dresidual_out is not None, has_residual)
        known = _BACKWARD_CHECKS.remember(profile, key, x.device, _Checked(
            x.shape[:-1].numel(), x.shape[-1], _backward_flags(profile, x.dtype, *flag_key),
            flag_key, _fits_fused_backward(x.shape[-1], x.dtype, profile)))
    n_rows, n_cols, flags, flag_key, _ = known
    x = x.contiguous()
    dx = torch.empty_like(x)
    # (new_empty: the checks put weight and bias on x's device; it parses no keywords)
    prep = _Backward(  # positional: keywords cost microseconds on every launch
        dy.contiguous(), x, weight.contiguous(), None if rms else mean.contiguous(),
        rstd.contiguous(), None if rowscale is None else rowscale.contiguous(),
        None if dropout_mask is None else dropout_mask.contiguous(),
        None if dresidual_out is None else dresidual_out.contiguous(),
        dx, torch.empty_like(dx) if has_residual else None,
        weight.new_empty(n_cols), None if bias is None else bias.new_empty(n_cols),
        n_rows, n_cols, flags, flag_key, known)
    if n_rows == 0:
        prep.dweight.zero_()
        if prep.dbias is not None:
            prep.dbias.zero_()
    return prep, _dropout_scale_parts(dropout_p)


def _check_backward(op, dy, x, weight, bias, mean, rstd, rms, rowscale, dropout_mask,
                    dropout_p, dresidual_out, profile) -> None:
    """Every check of the backward's inputs, raising on the first that fails."""
    check_inputs(op, profile, DTYPES, dy=dy, x=x, weight=weight, bias=bias,
                 rowscale=rowscale, dresidual_out=dresidual_out)
    if dy is None or rstd is None:
        raise ValueError(f"{op}: dy and rstd are required")
    if not _stats_ok(mean, rstd, x, profile):
        check_inputs(op, profile, STAT_DTYPES, mean=mean, rstd=rstd)
        raise WrongDeviceError(f"{op}: mean and rstd must be on x's device, {x.device}")
    if dropout_mask is not None:
        check_inputs(op, profile, MASK_DTYPES, dropout_mask=dropout_mask)
    if x.ndim == 0:
        raise ShapeMismatchError(f"{op}: x must have at least 1 dim, got shape ()")
    shape = x.shape
    for name, t in (("dy", dy), ("dropout_mask", dropout_mask), ("dresidual_out", dresidual_out)):
        if t is not None and t.shape != shape:
            raise ShapeMismatchError(f"{op}: {name} must have x's shape {tuple(shape)}, "
                                     f"got {tuple(t.shape)}")
    n_cols = shape[-1]
    _check_vector(op, "weight", weight, n_cols)
    _check_vector(op, "bias", bias, n_cols)
    if not rms and mean is None:
        raise ValueError(f"{op}: mean is required unless rms=True")
    n_rows = shape[:-1].numel()
    for name, t in (("mean", None if rms else mean), ("rstd", rstd), ("rowscale", rowscale)):
        if t is not None and t.numel() != n_rows:
            _check_rows(op, name, t, x)
    _check_dropout_p(op, dropout_p)
    if dropout_p > 0.0 and dropout_mask is None:
        raise ValueError(f"{op}: dropout_p > 0 needs the forward's dropout_mask")


def _stats_ok(mean, rstd, x, profile) -> bool:
    """Whether mean (None in RMS mode) and rstd are tensors of a statistics dtype the
    profile supports, on x's device: the quick test; check_inputs says what is wrong."""
    device = x.device
    for t in (mean, rstd):
        if t is None:
            continue
        if (not isinstance(t, torch.Tensor) or t.dtype not in STAT_DTYPES
                or not profile.supports_dtype(t.dtype) or t.device != device):
            return False
    return True


@launch_plan
def _backward_flags(profile, dtype, rms, has_bias, has_rowscale, has_dropout,
                    has_dresidual_out, has_residual) -> dict:
    """The dx kernels' operand constexprs, one dict per combination (callers must not
    mutate it): built once, not on every launch."""
    return dict(IS_RMS=rms, HAS_BIAS=has_bias, HAS_ROWSCALE=has_rowscale,
                 HAS_DROPOUT=has_dropout, HAS_DRESIDUAL_OUT=has_dresidual_out,
                 STORE_DRESIDUAL=has_residual, SELECT_LOADS=profile.select_loads,
                 COMPUTE_FP64=dtype == torch.float64)


def _row_operands(p: _Backward) -> tuple:
    """The leading arguments of the dx kernels, with a valid tensor for each unused one."""
    return (p.dy, p.x, p.weight, p.mean if p.mean is not None else p.rstd, p.rstd,
            p.rowscale if p.rowscale is not None else p.rstd,
            p.dropout_mask if p.dropout_mask is not None else p.dy,
            p.dresidual_out if p.dresidual_out is not None else p.dy,
            p.dx, p.dresidual if p.dresidual is not None else p.dx)


def _grads(p: _Backward) -> tuple:
    # plain tuples: harnesses rebuild outputs with type(out)(iterable)
    grads = (p.dx, p.dweight, p.dbias)
    return grads if p.dresidual is None else grads + (p.dresidual,)
