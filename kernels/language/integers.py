"""Integer semantics of the Triton language: C division and remainder, shifts, wrap-around
arithmetic, ``tl.umulhi``, and int64 index arithmetic beyond 2^31.

Each kernel computes the operators on two loaded operands in their own type (no casts:
the point is what the language does in that type) and stores every result.
"""
import torch
import triton
import triton.language as tl

from . import elementwise_launch
from ..grid_stride import block_range
from triton_cts.execution.input_checks import (UnsupportedDtypeError, check_inputs,
                                               check_same_shape)
from triton_cts.profiles import Profile

INTS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint32,
        torch.uint64)


@triton.jit
def _two_results_kernel(
    X, Y,                       # pointers to the operands, contiguous, one integer type
    A, B,                       # pointers to the two results, same type
    n_elements,
    OP: tl.constexpr,           # "divmod": x // y, x % y; "shift": x << y, x >> y
    BLOCK_SIZE: tl.constexpr,
    GRID_STRIDE: tl.constexpr,
):
    pid = tl.program_id(0)
    step, stop = block_range(pid, tl.cdiv(n_elements, BLOCK_SIZE), GRID_STRIDE)
    for block in range(pid, stop, step):
        offs = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offs < n_elements
        x = tl.load(X + offs, mask=mask, other=1)
        y = tl.load(Y + offs, mask=mask, other=1)  # 1: no division by zero on masked lanes
        if OP == "divmod":
            a = x // y
            b = x % y
        else:
            tl.static_assert(OP == "shift", "unknown integer operation")
            a = x << y
            b = x >> y
        tl.store(A + offs, a, mask=mask)
        tl.store(B + offs, b, mask=mask)


@triton.jit
def _wrap_kernel(X, Y, S, D, P, n_elements, BLOCK_SIZE: tl.constexpr,
                 GRID_STRIDE: tl.constexpr):
    # S, D, P = x + y, x - y, x * y in the operands' type: wrap around on overflow
    pid = tl.program_id(0)
    step, stop = block_range(pid, tl.cdiv(n_elements, BLOCK_SIZE), GRID_STRIDE)
    for block in range(pid, stop, step):
        offs = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offs < n_elements
        x = tl.load(X + offs, mask=mask, other=0)
        y = tl.load(Y + offs, mask=mask, other=0)
        tl.store(S + offs, x + y, mask=mask)
        tl.store(D + offs, x - y, mask=mask)
        tl.store(P + offs, x * y, mask=mask)


@triton.jit
def _umulhi_kernel(X, Y, H, n_elements, BLOCK_SIZE: tl.constexpr, GRID_STRIDE: tl.constexpr):
    pid = tl.program_id(0)
    step, stop = block_range(pid, tl.cdiv(n_elements, BLOCK_SIZE), GRID_STRIDE)
    for block in range(pid, stop, step):
        offs = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offs < n_elements
        x = tl.load(X + offs, mask=mask, other=0)
        y = tl.load(Y + offs, mask=mask, other=0)
        tl.store(H + offs, tl.umulhi(x, y), mask=mask)


@triton.jit
def _offsets_kernel(R, C, O, stride, n_elements, BLOCK_SIZE: tl.constexpr,
                    GRID_STRIDE: tl.constexpr):
    # O = R * stride + C: int32 rows and columns, an int64 stride past 2^31 (promotion)
    pid = tl.program_id(0)
    step, stop = block_range(pid, tl.cdiv(n_elements, BLOCK_SIZE), GRID_STRIDE)
    for block in range(pid, stop, step):
        offs = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offs < n_elements
        r = tl.load(R + offs, mask=mask, other=0)
        c = tl.load(C + offs, mask=mask, other=0)
        tl.store(O + offs, r * stride + c, mask=mask)


def _operands(name: str, profile: Profile, x: torch.Tensor, y: torch.Tensor, dtypes=INTS):
    check_inputs(name, profile, dtypes, x=x, y=y)
    check_same_shape(name, x=x, y=y)
    if x.dtype != y.dtype:
        raise UnsupportedDtypeError(f"{name}: operands must share one type, got "
                                    f"{x.dtype} and {y.dtype}")
    return x.contiguous(), y.contiguous()


def _launch(kernel, profile, inputs, outputs, **constexprs):
    n = outputs[0].numel()
    if n:
        grid, launch = elementwise_launch(profile, n, inputs[0].dtype)
        kernel[grid](*inputs, *outputs, n, **constexprs, **launch)
    return outputs if len(outputs) > 1 else outputs[0]


def int_divmod(x: torch.Tensor, d: torch.Tensor, *, profile: Profile):
    """(``x // d``, ``x % d``) as a Triton kernel computes them."""
    x, d = _operands("tl_int_divmod", profile, x, d)
    return _launch(_two_results_kernel, profile, (x, d),
                   (torch.empty_like(x), torch.empty_like(x)), OP="divmod")


def int_shift(x: torch.Tensor, s: torch.Tensor, *, profile: Profile):
    """(``x << s``, ``x >> s``) as a Triton kernel computes them."""
    x, s = _operands("tl_int_shift", profile, x, s)
    return _launch(_two_results_kernel, profile, (x, s),
                   (torch.empty_like(x), torch.empty_like(x)), OP="shift")


def int_wrap(x: torch.Tensor, y: torch.Tensor, *, profile: Profile):
    """(``x + y``, ``x - y``, ``x * y``) in the operands' type."""
    x, y = _operands("tl_int_wrap", profile, x, y)
    return _launch(_wrap_kernel, profile, (x, y), tuple(torch.empty_like(x) for _ in range(3)))


def umulhi(x: torch.Tensor, y: torch.Tensor, *, profile: Profile):
    """``tl.umulhi(x, y)``."""
    x, y = _operands("tl_umulhi", profile, x, y, (torch.int32, torch.uint32, torch.int64,
                                                   torch.uint64))
    if x.element_size() == 8 and profile.rng_counter_bits < 64:
        # the 64-bit multiply-high Philox needs is what such a target lacks
        raise UnsupportedDtypeError(
            f"tl_umulhi: profile {profile.name} has a 32-bit umulhi only "
            f"(target.rng_counter_bits = {profile.rng_counter_bits})")
    return _launch(_umulhi_kernel, profile, (x, y), (torch.empty_like(x),))


def int64_offsets(rows: torch.Tensor, cols: torch.Tensor, *, stride: int, profile: Profile):
    """``rows * stride + cols`` for int32 ``rows``/``cols`` and an int64 ``stride``."""
    rows, cols = _operands("tl_int64_offsets", profile, rows, cols, (torch.int32,))
    out = torch.empty(rows.shape, dtype=torch.int64, device=rows.device)
    n = out.numel()
    if n:
        grid, launch = elementwise_launch(profile, n, torch.int64)
        _offsets_kernel[grid](rows, cols, out, stride, n, **launch)
    return out
