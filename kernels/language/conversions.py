"""Conversions of the Triton language: ``x.to(dtype)`` between float32 and the narrow
floats (float16, bfloat16, float8) both ways, float32 to integers and integers to float32.

One kernel serves them all: it loads X, converts to Y's element type with Triton's
default rounding (round to nearest even for a narrowing float conversion, truncation
toward zero for float to integer) and stores.
"""
import torch
import triton
import triton.language as tl

from . import elementwise_launch
from ..grid_stride import block_range
from triton_cts.execution.input_checks import UnsupportedDtypeError, check_inputs
from triton_cts.profiles import Profile

NARROW = tuple(getattr(torch, n) for n in (
    "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
    "float8_e5m2fnuz") if hasattr(torch, n))
INTS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


@triton.jit
def _cast_kernel(
    X,                          # pointer to the input, contiguous
    Y,                          # pointer to the output, contiguous, the target dtype
    n_elements,
    BLOCK_SIZE: tl.constexpr,
    GRID_STRIDE: tl.constexpr,
):
    pid = tl.program_id(0)
    step, stop = block_range(pid, tl.cdiv(n_elements, BLOCK_SIZE), GRID_STRIDE)
    for block in range(pid, stop, step):
        offs = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offs < n_elements
        x = tl.load(X + offs, mask=mask)  # masked lanes are never stored
        tl.store(Y + offs, x.to(Y.dtype.element_ty), mask=mask)


def _cast(name: str, x: torch.Tensor, dtype: torch.dtype, profile: Profile) -> torch.Tensor:
    if not profile.supports_dtype(dtype):
        raise UnsupportedDtypeError(f"{name}: profile {profile.name} does not support "
                                    f"{str(dtype).removeprefix('torch.')} (dtypes.supported)")
    x = x.contiguous()
    y = torch.empty(x.shape, dtype=dtype, device=x.device)
    n = x.numel()
    if n == 0:
        return y
    grid, launch = elementwise_launch(profile, n, max(x.dtype, dtype, key=lambda d: d.itemsize))
    _cast_kernel[grid](x, y, n, **launch)
    return y


def cast_down(x: torch.Tensor, *, dtype: torch.dtype, profile: Profile) -> torch.Tensor:
    """float32 ``x`` converted to the narrower float ``dtype``."""
    check_inputs("tl_cast_float32_to", profile, (torch.float32,), x=x)
    if dtype not in NARROW:
        raise UnsupportedDtypeError(f"tl_cast_float32_to: {dtype} is not a narrow float")
    return _cast("tl_cast_float32_to", x, dtype, profile)


def cast_up(x: torch.Tensor, *, profile: Profile) -> torch.Tensor:
    """A narrow float ``x`` converted to float32."""
    check_inputs("tl_cast_to_float32", profile, NARROW, x=x)
    return _cast("tl_cast_to_float32", x, torch.float32, profile)


def cast_to_int(x: torch.Tensor, *, dtype: torch.dtype, profile: Profile) -> torch.Tensor:
    """float32 ``x`` converted to the integer ``dtype``."""
    check_inputs("tl_cast_float_to_int", profile, (torch.float32,), x=x)
    if dtype not in INTS:
        raise UnsupportedDtypeError(f"tl_cast_float_to_int: {dtype} is not an integer type")
    return _cast("tl_cast_float_to_int", x, dtype, profile)


def cast_from_int(x: torch.Tensor, *, profile: Profile) -> torch.Tensor:
    """The integers ``x`` converted to float32."""
    check_inputs("tl_cast_int_to_float", profile, INTS, x=x)
    return _cast("tl_cast_int_to_float", x, torch.float32, profile)
