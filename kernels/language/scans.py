"""Scans, sorts and reductions along the last axis of a 2-D tensor, as primitives.

Every kernel holds a [BLOCK_R, BLOCK_C] tile of whole rows (BLOCK_C: the row length's
power of two, at most the profile's MAX_FUSED_SIZE; BLOCK_R: as many rows as the
profile's row stack holds) and applies the primitive along axis 1:

- ``_scan_kernel``: ``tl.cumsum`` / ``tl.cumprod`` forward and ``reverse=True``, and
  ``tl.associative_scan`` with a user combine function that does not commute (the
  composition of affine maps x -> a * x + b, in integers that wrap), forward and reverse;
- ``_sort_kernel``: ``tl.sort`` ascending and descending; ``_topk_kernel``: ``tl.topk``;
- ``_arg_kernel``: ``tl.argmax`` / ``tl.argmin`` with ``tie_break_left`` true and false;
- ``_nan_reduce_kernel``: ``tl.max`` / ``tl.min`` as they are, and ``tl.reduce`` over
  ``tl.maximum`` / ``tl.minimum`` with ``propagate_nan=tl.PropagateNan.ALL``;
- ``_size1_kernel``: ``tl.sum``, ``tl.max``, ``tl.min``, ``tl.argmax`` over an axis of
  size 1.

Masked-off lanes of a ragged row load the primitive's identity (0 for sums, 1 for
products, the identity map for the affine scan), so they change no real lane. Sorts and
arg reductions take whole rows of a power-of-two length (a padding value would tie with
real ones); max / min pad with the row's first value. On
select-load profiles (SIMD NPUs) loads clamp their offsets and select instead of masking.
"""
import torch
import triton
import triton.language as tl

from triton_cts.execution.input_checks import (ShapeMismatchError, UnsupportedDtypeError,
                                               check_inputs)
from triton_cts.profiles import Profile, cdiv, next_power_of_2

FLOATS = (torch.float16, torch.bfloat16, torch.float32)
SCAN_DTYPES = FLOATS + (torch.int32, torch.int64)
AFFINE_DTYPES = (torch.int32, torch.int64)
SORT_DTYPES = FLOATS + (torch.int32, torch.int64)


@triton.jit
def _affine_combine(a_l, b_l, a_r, b_r):
    """The map x -> a_l * x + b_l, then x -> a_r * x + b_r: associative, not commutative."""
    return a_l * a_r, b_l * a_r + b_r


@triton.jit
def _max_nan(a, b):
    # cast back: Triton 3.6 returns float32 for 16-bit operands here, and tl.reduce then
    # rejects the combine function ("type mismatch on combine operation")
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL).to(a.dtype)


@triton.jit
def _min_nan(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL).to(a.dtype)


@triton.jit
def _tile(X, R, C, stride_r, pid, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
          SELECT_LOADS: tl.constexpr, IDENTITY: tl.constexpr):
    """(values, offsets, mask) of program ``pid``'s rows; lanes outside hold IDENTITY."""
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_C)
    mask = (rows[:, None] < R) & (cols[None, :] < C)
    if SELECT_LOADS:
        read = tl.minimum(rows, R - 1)[:, None] * stride_r + tl.minimum(cols, C - 1)[None, :]
        x = tl.load(X + read)
        x = tl.where(mask, x, IDENTITY)
    else:
        x = tl.load(X + rows[:, None] * stride_r + cols[None, :], mask=mask, other=IDENTITY)
    return x, rows[:, None] * C + cols[None, :], mask


@triton.jit
def _scan_kernel(X, A, FWD, REV, R, C, stride_r,
                 OP: tl.constexpr,              # "cumsum", "cumprod" or "affine"
                 SELECT_LOADS: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    if OP == "cumsum":
        x, offs, mask = _tile(X, R, C, stride_r, pid, BLOCK_R, BLOCK_C, SELECT_LOADS, 0)
        fwd = tl.cumsum(x, axis=1)
        rev = tl.cumsum(x, axis=1, reverse=True)
    elif OP == "cumprod":
        x, offs, mask = _tile(X, R, C, stride_r, pid, BLOCK_R, BLOCK_C, SELECT_LOADS, 1)
        fwd = tl.cumprod(x, axis=1)
        rev = tl.cumprod(x, axis=1, reverse=True)
    else:  # X holds b, A holds a of each lane's map a * x + b
        b, offs, mask = _tile(X, R, C, stride_r, pid, BLOCK_R, BLOCK_C, SELECT_LOADS, 0)
        a, offs, mask = _tile(A, R, C, stride_r, pid, BLOCK_R, BLOCK_C, SELECT_LOADS, 1)
        _, fwd = tl.associative_scan((a, b), 1, _affine_combine)
        _, rev = tl.associative_scan((a, b), 1, _affine_combine, reverse=True)
    tl.store(FWD + offs, fwd, mask=mask)
    tl.store(REV + offs, rev, mask=mask)


@triton.jit
def _sort_kernel(X, ASC, DESC, R, stride_r,
                 SELECT_LOADS: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    x, offs, mask = _tile(X, R, BLOCK_C, stride_r, pid, BLOCK_R, BLOCK_C, SELECT_LOADS, 0)
    tl.store(ASC + offs, tl.sort(x, dim=1), mask=mask)
    tl.store(DESC + offs, tl.sort(x, dim=1, descending=True), mask=mask)


@triton.jit
def _topk_kernel(X, TOP, R, stride_r, K: tl.constexpr,
                 SELECT_LOADS: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    x, offs, mask = _tile(X, R, BLOCK_C, stride_r, pid, BLOCK_R, BLOCK_C, SELECT_LOADS, 0)
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    top_offs = rows[:, None] * K + tl.arange(0, K)[None, :]
    tl.store(TOP + top_offs, tl.topk(x, K, dim=1), mask=rows[:, None] < R)


@triton.jit
def _arg_kernel(X, OUT, R, C, stride_r,
                SELECT_LOADS: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """OUT [4, R]: argmax and argmin with tie_break_left, then without (whole rows: a
    padding lane could win a tie that no side is promised)."""
    pid = tl.program_id(0)
    x, offs, mask = _tile(X, R, C, stride_r, pid, BLOCK_R, BLOCK_C, SELECT_LOADS, 0)
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    keep = rows < R
    tl.store(OUT + rows, tl.argmax(x, 1, tie_break_left=True), mask=keep)
    tl.store(OUT + R + rows, tl.argmin(x, 1, tie_break_left=True), mask=keep)
    tl.store(OUT + 2 * R + rows, tl.argmax(x, 1, tie_break_left=False), mask=keep)
    tl.store(OUT + 3 * R + rows, tl.argmin(x, 1, tie_break_left=False), mask=keep)


@triton.jit
def _nan_reduce_kernel(X, OUT, R, C, stride_r,
                       SELECT_LOADS: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """OUT [4, R]: tl.max, tl.min, and the reductions propagating NaN. Lanes past the row
    hold the row's first value (a max or min of a row does not change by repeating it)."""
    pid = tl.program_id(0)
    x, offs, mask = _tile(X, R, C, stride_r, pid, BLOCK_R, BLOCK_C, SELECT_LOADS, 0)
    first = tl.sum(tl.where(tl.arange(0, BLOCK_C)[None, :] == 0, x, 0), axis=1)
    x = tl.where(mask, x, first[:, None])
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    keep = rows < R
    tl.store(OUT + rows, tl.max(x, 1), mask=keep)
    tl.store(OUT + R + rows, tl.min(x, 1), mask=keep)
    tl.store(OUT + 2 * R + rows, tl.reduce(x, 1, _max_nan), mask=keep)
    tl.store(OUT + 3 * R + rows, tl.reduce(x, 1, _min_nan), mask=keep)


@triton.jit
def _size1_kernel(X, OUT, IDX, R, SELECT_LOADS: tl.constexpr, BLOCK_R: tl.constexpr):
    """OUT [4, R]: sum, max, min of x[:, None] over its axis of size 1, then the same over
    the size-1 axis 0 of x[None, :]; IDX [R]: argmax over the size-1 axis."""
    pid = tl.program_id(0)
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    keep = rows < R
    if SELECT_LOADS:
        x = tl.load(X + tl.minimum(rows, R - 1))
    else:
        x = tl.load(X + rows, mask=keep, other=0)
    col = x[:, None]   # [BLOCK_R, 1]
    row = x[None, :]   # [1, BLOCK_R]
    tl.store(OUT + rows, tl.sum(col, axis=1), mask=keep)
    tl.store(OUT + R + rows, tl.max(col, axis=1), mask=keep)
    tl.store(OUT + 2 * R + rows, tl.min(col, axis=1), mask=keep)
    tl.store(OUT + 3 * R + rows, tl.sum(row, axis=0), mask=keep)
    tl.store(IDX + rows, tl.argmax(col, axis=1), mask=keep)


# --------------------------------------------------------------------------------------
# Launchers
# --------------------------------------------------------------------------------------
def _rows(op: str, x: torch.Tensor, profile: Profile, power_of_two: bool = False):
    """(R, C, BLOCK_R, BLOCK_C, grid) of a row-wise launch over 2-D ``x``."""
    if x.dim() != 2:
        raise ShapeMismatchError(f"{op}: needs a 2-D tensor, got shape {tuple(x.shape)}")
    R, C = x.shape
    block_c = next_power_of_2(max(C, 1))
    if power_of_two and C != block_c:
        raise ShapeMismatchError(f"{op}: rows must have a power-of-two length, got {C}")
    if block_c > profile.max_fused_elements(x.dtype):
        raise ShapeMismatchError(
            f"{op}: a row of {C} {str(x.dtype).removeprefix('torch.')} elements is longer than "
            f"one block may hold on profile '{profile.name}' "
            f"({profile.max_fused_elements(x.dtype)}: launch.max_fused_size_bytes)")
    stack = profile.row_stack_elements(x.dtype) // block_c
    block_r = max(1, min(next_power_of_2(max(R, 1)), stack))
    return R, C, block_r, block_c, (max(1, cdiv(R, block_r)),)


def _launch_options(profile: Profile, block_r: int, block_c: int, dtype) -> dict:
    return {"SELECT_LOADS": profile.select_loads, "BLOCK_R": block_r, "BLOCK_C": block_c,
            "num_warps": profile.num_warps_for(block_r * block_c, dtype)}


def _scan(op: str, x: torch.Tensor, a: torch.Tensor | None, profile: Profile, dtypes):
    check_inputs(f"tl_{op}", profile, dtypes, x=x, a=a)
    R, C, block_r, block_c, grid = _rows(f"tl_{op}", x, profile)
    x = x.contiguous()
    fwd = torch.empty((R, C), dtype=x.dtype, device=x.device)
    rev = torch.empty((R, C), dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return fwd, rev
    _scan_kernel[grid](x, a.contiguous() if a is not None else x, fwd, rev, R, C, x.stride(0),
                       OP=op, **_launch_options(profile, block_r, block_c, x.dtype))
    return fwd, rev


def cumsum(x: torch.Tensor, *, profile: Profile):
    """(tl.cumsum(x, 1), tl.cumsum(x, 1, reverse=True)) of 2-D ``x``, in x's dtype."""
    return _scan("cumsum", x, None, profile, SCAN_DTYPES)


def cumprod(x: torch.Tensor, *, profile: Profile):
    """(tl.cumprod(x, 1), tl.cumprod(x, 1, reverse=True)) of 2-D ``x``."""
    return _scan("cumprod", x, None, profile, SCAN_DTYPES)


def affine_scan(b: torch.Tensor, a: torch.Tensor, *, profile: Profile):
    """The b part of ``tl.associative_scan`` over the maps x -> a * x + b along each row,
    forward and reverse (integers, wrapping)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        raise ShapeMismatchError(f"tl_associative_scan: a and b must match, got "
                                 f"{tuple(a.shape)} {a.dtype} and {tuple(b.shape)} {b.dtype}")
    return _scan("affine", b, a, profile, AFFINE_DTYPES)


def sort(x: torch.Tensor, *, profile: Profile):
    """(tl.sort ascending, tl.sort descending) along the rows of 2-D ``x`` (a power-of-two
    row length)."""
    check_inputs("tl_sort", profile, SORT_DTYPES, x=x)
    R, C, block_r, block_c, grid = _rows("tl_sort", x, profile, power_of_two=True)
    x = x.contiguous()
    asc = torch.empty((R, C), dtype=x.dtype, device=x.device)
    desc = torch.empty((R, C), dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return asc, desc
    _sort_kernel[grid](x, asc, desc, R, x.stride(0),
                       **_launch_options(profile, block_r, block_c, x.dtype))
    return asc, desc


def topk(x: torch.Tensor, k: int = 1, *, profile: Profile) -> torch.Tensor:
    """tl.topk(x, k, dim=1): the k largest of each row of 2-D ``x``, descending (a
    power-of-two row length; ``k`` a power of two no longer than a row)."""
    check_inputs("tl_topk", profile, SORT_DTYPES, x=x)
    if not hasattr(tl, "topk"):
        raise UnsupportedDtypeError(f"tl_topk: triton {triton.__version__} has no tl.topk")
    R, C, block_r, block_c, grid = _rows("tl_topk", x, profile, power_of_two=True)
    if k < 1 or k > C or k & (k - 1):
        raise ShapeMismatchError(f"tl_topk: k must be a power of two in [1, {C}], got {k}")
    x = x.contiguous()
    top = torch.empty((R, k), dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return top
    _topk_kernel[grid](x, top, R, x.stride(0), K=k,
                       **_launch_options(profile, block_r, block_c, x.dtype))
    return top


def arg_reduce(x: torch.Tensor, *, profile: Profile) -> torch.Tensor:
    """int32 [4, R]: tl.argmax, tl.argmin with tie_break_left=True, then with False, along
    the rows of 2-D ``x`` (a power-of-two row length)."""
    check_inputs("tl_argmax", profile, SORT_DTYPES, x=x)
    R, C, block_r, block_c, grid = _rows("tl_argmax", x, profile, power_of_two=True)
    out = torch.empty((4, R), dtype=torch.int32, device=x.device)
    if x.numel() == 0:
        return out
    x = x.contiguous()
    _arg_kernel[grid](x, out, R, C, x.stride(0),
                      **_launch_options(profile, block_r, block_c, x.dtype))
    return out


def nan_reduce(x: torch.Tensor, *, profile: Profile) -> torch.Tensor:
    """[4, R] in x's dtype: tl.max, tl.min, and tl.reduce over tl.maximum / tl.minimum with
    propagate_nan=ALL, along the rows of 2-D ``x``."""
    check_inputs("tl_max_nan", profile, FLOATS, x=x)
    R, C, block_r, block_c, grid = _rows("tl_max_nan", x, profile)
    out = torch.empty((4, R), dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    x = x.contiguous()
    _nan_reduce_kernel[grid](x, out, R, C, x.stride(0),
                             **_launch_options(profile, block_r, block_c, x.dtype))
    return out


def size1_reduce(x: torch.Tensor, *, profile: Profile):
    """([4, R] in x's dtype, [R] int32): sum, max, min over the size-1 axis 1 of
    x[:, None], sum over the size-1 axis 0 of x[None, :]; argmax over axis 1."""
    check_inputs("tl_reduce_size1", profile, SORT_DTYPES, x=x)
    if x.dim() != 1:
        raise ShapeMismatchError(f"tl_reduce_size1: needs a 1-D tensor, got {tuple(x.shape)}")
    R = x.numel()
    out = torch.empty((4, R), dtype=x.dtype, device=x.device)
    idx = torch.empty((R,), dtype=torch.int32, device=x.device)
    if R == 0:
        return out, idx
    block_r = min(next_power_of_2(R), profile.row_stack_elements(x.dtype))
    _size1_kernel[(cdiv(R, block_r),)](x.contiguous(), out, idx, R,
                                      SELECT_LOADS=profile.select_loads, BLOCK_R=block_r,
                                      num_warps=profile.num_warps_for(block_r, x.dtype))
    return out, idx
