"""Faulty language primitives. Each reuses the reference launcher's checks but breaks one
thing the language suite must catch: a sqrt off by 2 ULPs beyond the profile's bound, a
narrowing conversion that truncates instead of rounding to nearest even, and ``//`` /
``%`` with Python's floor semantics instead of C's truncation."""
import torch
import triton
import triton.language as tl

from kernels.grid_stride import block_range
from kernels.language import elementwise_launch
from triton_cts.execution.input_checks import check_inputs
from triton_cts.ops.language import math as lm


@triton.jit
def _sqrt_plus_ulps_kernel(X, Y, n_elements, ULPS: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                           GRID_STRIDE: tl.constexpr):
    pid = tl.program_id(0)
    step, stop = block_range(pid, tl.cdiv(n_elements, BLOCK_SIZE), GRID_STRIDE)
    for block in range(pid, stop, step):
        offs = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offs < n_elements
        y = tl.sqrt(tl.load(X + offs, mask=mask, other=1.0))
        bits = y.to(tl.int32, bitcast=True) if Y.dtype.element_ty == tl.float32 \
            else y.to(tl.int64, bitcast=True)
        nudged = (bits + ULPS).to(Y.dtype.element_ty, bitcast=True)
        ok = (y == y) & (y > 0) & (y < float("inf"))  # finite positive results only
        tl.store(Y + offs, tl.where(ok, nudged, y), mask=mask)


def sqrt_off_by_2_ulps_beyond_bound(x, *, profile):
    """sqrt, then that many ULPs up: the profile's bound plus 2."""
    check_inputs("tl_sqrt", profile, (torch.float32, torch.float64), x=x)
    x = x.contiguous()
    y = torch.empty_like(x)
    if x.numel():
        grid, launch = elementwise_launch(profile, x.numel(), x.dtype)
        ulps = int(lm.bound(profile, "sqrt", x.dtype).ulp) + 2
        _sqrt_plus_ulps_kernel[grid](x, y, x.numel(), ULPS=ulps, **launch)
    return y


@triton.jit
def _cast_rtz_kernel(X, Y, n_elements, BLOCK_SIZE: tl.constexpr, GRID_STRIDE: tl.constexpr):
    pid = tl.program_id(0)
    step, stop = block_range(pid, tl.cdiv(n_elements, BLOCK_SIZE), GRID_STRIDE)
    for block in range(pid, stop, step):
        offs = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offs < n_elements
        x = tl.load(X + offs, mask=mask)
        tl.store(Y + offs, x.to(Y.dtype.element_ty, fp_downcast_rounding="rtz"), mask=mask)


def cast_down_truncating(x, *, dtype, profile):
    """float32 to a narrower float rounding toward zero instead of to nearest even."""
    check_inputs("tl_cast_float32_to", profile, (torch.float32,), x=x)
    x = x.contiguous()
    y = torch.empty(x.shape, dtype=dtype)
    if x.numel():
        grid, launch = elementwise_launch(profile, x.numel(), x.dtype)
        _cast_rtz_kernel[grid](x, y, x.numel(), **launch)
    return y


@triton.jit
def _floor_divmod_kernel(X, D, Q, R, n_elements, BLOCK_SIZE: tl.constexpr,
                         GRID_STRIDE: tl.constexpr):
    pid = tl.program_id(0)
    step, stop = block_range(pid, tl.cdiv(n_elements, BLOCK_SIZE), GRID_STRIDE)
    for block in range(pid, stop, step):
        offs = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offs < n_elements
        x = tl.load(X + offs, mask=mask, other=1)
        d = tl.load(D + offs, mask=mask, other=1)
        q = x // d
        r = x % d
        # Python: the remainder takes the divisor's sign, the quotient rounds down
        fix = (r != 0) & ((r < 0) != (d < 0))
        tl.store(Q + offs, tl.where(fix, q - 1, q), mask=mask)
        tl.store(R + offs, tl.where(fix, r + d, r), mask=mask)


def divmod_python_style(x, d, *, profile):
    """``//`` and ``%`` with Python's floor semantics."""
    check_inputs("tl_int_divmod", profile, (torch.int8, torch.int16, torch.int32,
                                            torch.int64, torch.uint8, torch.uint32), x=x, d=d)
    x, d = x.contiguous(), d.contiguous()
    q, r = torch.empty_like(x), torch.empty_like(x)
    if x.numel():
        grid, launch = elementwise_launch(profile, x.numel(), x.dtype)
        _floor_divmod_kernel[grid](x, d, q, r, x.numel(), **launch)
    return q, r
