"""Math functions of the Triton language, one elementwise kernel per arity.

Each kernel applies the function named by its ``FUNC`` constexpr to its inputs in their
own dtype (no upcast: the point is what the language does in that dtype) and stores the
result. The branch on ``FUNC`` is resolved when the kernel is specialized, so each
compiled kernel holds one function. ``tanh`` comes from ``triton.language.extra.libdevice``
(the backend's math library: CUDA's libdevice, ROCm's ocml); the rest are ``tl`` builtins.
"""
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from . import elementwise_launch
from ..grid_stride import block_range
from triton_cts.execution.input_checks import (UnsupportedDtypeError, check_inputs,
                                               check_same_shape)
from triton_cts.profiles import Profile

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


@triton.jit
def _unary_kernel(
    X,                          # pointer to the input, contiguous
    Y,                          # pointer to the output, contiguous, same dtype
    n_elements,
    FUNC: tl.constexpr,         # which function ("exp", "sqrt", ...)
    BLOCK_SIZE: tl.constexpr,
    GRID_STRIDE: tl.constexpr,  # fewer programs than blocks: each walks several
):
    pid = tl.program_id(0)
    step, stop = block_range(pid, tl.cdiv(n_elements, BLOCK_SIZE), GRID_STRIDE)
    for block in range(pid, stop, step):
        offs = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offs < n_elements
        x = tl.load(X + offs, mask=mask, other=1.0)  # 1.0: in every function's domain
        if FUNC == "exp":
            y = tl.exp(x)
        elif FUNC == "exp2":
            y = tl.exp2(x)
        elif FUNC == "log":
            y = tl.log(x)
        elif FUNC == "log2":
            y = tl.log2(x)
        elif FUNC == "sqrt":
            y = tl.sqrt(x)
        elif FUNC == "sqrt_rn":
            y = tl.sqrt_rn(x)
        elif FUNC == "rsqrt":
            y = tl.rsqrt(x)
        elif FUNC == "sin":
            y = tl.sin(x)
        elif FUNC == "cos":
            y = tl.cos(x)
        elif FUNC == "erf":
            y = tl.erf(x)
        elif FUNC == "sigmoid":
            y = tl.sigmoid(x)
        else:
            tl.static_assert(FUNC == "tanh", "unknown unary math function")
            y = libdevice.tanh(x)
        tl.store(Y + offs, y, mask=mask)


@triton.jit
def _binary_kernel(X, D, Y, n_elements, FUNC: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                   GRID_STRIDE: tl.constexpr):
    # Y = X / D, rounded as FUNC says: "fdiv" (what `/` does) or "div_rn" (IEEE)
    pid = tl.program_id(0)
    step, stop = block_range(pid, tl.cdiv(n_elements, BLOCK_SIZE), GRID_STRIDE)
    for block in range(pid, stop, step):
        offs = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offs < n_elements
        x = tl.load(X + offs, mask=mask, other=1.0)
        d = tl.load(D + offs, mask=mask, other=1.0)
        if FUNC == "fdiv":
            y = tl.fdiv(x, d)
        else:
            tl.static_assert(FUNC == "div_rn", "unknown division")
            y = tl.div_rn(x, d)
        tl.store(Y + offs, y, mask=mask)


@triton.jit
def _fma_kernel(X, M, A, Y, n_elements, BLOCK_SIZE: tl.constexpr, GRID_STRIDE: tl.constexpr):
    # Y = X * M + A with one rounding
    pid = tl.program_id(0)
    step, stop = block_range(pid, tl.cdiv(n_elements, BLOCK_SIZE), GRID_STRIDE)
    for block in range(pid, stop, step):
        offs = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offs < n_elements
        x = tl.load(X + offs, mask=mask, other=0.0)
        m = tl.load(M + offs, mask=mask, other=0.0)
        a = tl.load(A + offs, mask=mask, other=0.0)
        tl.store(Y + offs, tl.fma(x, m, a), mask=mask)


def _launch(kernel, name: str, profile: Profile, *inputs: torch.Tensor, **constexprs):
    check_inputs(name, profile, FLOATS, **{f"x{i}": t for i, t in enumerate(inputs)})
    check_same_shape(name, **{f"x{i}": t for i, t in enumerate(inputs)})
    if any(t.dtype != inputs[0].dtype for t in inputs):
        raise UnsupportedDtypeError(f"{name}: inputs must share one dtype, got "
                                    f"{[str(t.dtype) for t in inputs]}")
    inputs = tuple(t.contiguous() for t in inputs)
    y = torch.empty_like(inputs[0])
    n = y.numel()
    if n == 0:
        return y
    grid, launch = elementwise_launch(profile, n, y.dtype)
    kernel[grid](*inputs, y, n, **constexprs, **launch)
    return y


#: Functions reached through libdevice (a backend's math library): a target offers them
#: only where its profile bounds them in [math_ulp] (triton-ascend has no tanh).
LIBDEVICE = ("tanh",)


def _not_offered(profile: Profile, function: str, dtype: torch.dtype) -> str | None:
    table = profile.data.get("math_ulp")
    name = str(dtype).removeprefix("torch.")
    if function not in LIBDEVICE or table is None or name in table.get(function, {}):
        return None
    return (f"profile {profile.name} declares no libdevice {function} for {name} "
            f"([math_ulp] has no bound for it)")


def _unary(function: str):
    def launcher(x: torch.Tensor, *, profile: Profile) -> torch.Tensor:
        why = _not_offered(profile, function, x.dtype)
        if why:
            raise UnsupportedDtypeError(f"tl_{function}: {why}")
        return _launch(_unary_kernel, f"tl_{function}", profile, x, FUNC=function)
    launcher.__name__ = launcher.__qualname__ = function
    launcher.__doc__ = f"Elementwise {function} of ``x`` in its own dtype."
    return launcher


exp, exp2, log, log2 = _unary("exp"), _unary("exp2"), _unary("log"), _unary("log2")
sqrt, sqrt_rn, rsqrt = _unary("sqrt"), _unary("sqrt_rn"), _unary("rsqrt")
sin, cos, erf, sigmoid, tanh = (_unary("sin"), _unary("cos"), _unary("erf"),
                                _unary("sigmoid"), _unary("tanh"))


def fdiv(x: torch.Tensor, d: torch.Tensor, *, profile: Profile) -> torch.Tensor:
    """``tl.fdiv(x, d)``: what ``x / d`` computes in a kernel (may be approximate)."""
    return _launch(_binary_kernel, "tl_fdiv", profile, x, d, FUNC="fdiv")


def div_rn(x: torch.Tensor, d: torch.Tensor, *, profile: Profile) -> torch.Tensor:
    """``tl.div_rn(x, d)``: IEEE division, rounded to nearest even."""
    return _launch(_binary_kernel, "tl_div_rn", profile, x, d, FUNC="div_rn")


def fma(x: torch.Tensor, m: torch.Tensor, a: torch.Tensor, *, profile: Profile) -> torch.Tensor:
    """``tl.fma(x, m, a)``: x * m + a with a single rounding."""
    return _launch(_fma_kernel, "tl_fma", profile, x, m, a)
