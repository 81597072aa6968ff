"""GELU, tanh approximation.

    gelu(x) = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))

Since 0.5 * (1 + tanh(u)) = sigmoid(2u), the kernel computes x / (1 + exp(-2u)): one exp
and no tanh intrinsic (tanh is a libdevice call on CUDA and absent on some backends), and
the limits come out as torch's: +inf -> +inf, -inf -> nan, large negative x -> -0.

The launcher caps the grid at the profile's MAX_GRID_NUM and each program walks blocks
with a grid-stride loop, so any size runs under any grid limit; offsets are int64 so
tensors over 2^31 elements are addressed correctly. Blocks are masked by the elements that
fill whole vectors and program 0 does the rest, so a size 16 does not divide still loads
vectors (``grid_stride.vector_split``).
"""
import torch
import triton
import triton.language as tl

from .compute import to_compute
from .grid_stride import block_range, elementwise_plan
from .row_align import aligned
from triton_cts.execution.input_checks import UnsupportedDtypeError, check_inputs, check_same_shape
from triton_cts.profiles import Profile
from .fast_launch import launch

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)
GELU_COEFF = tl.constexpr(0.044715)


@triton.jit
def _gelu_tanh_fwd(X, Y, offs, mask, COMPUTE_FP64: tl.constexpr):
    x = tl.load(X + offs, mask=mask, other=0.0)
    x = to_compute(x, COMPUTE_FP64)
    u = SQRT_2_OVER_PI * (x + GELU_COEFF * x * x * x)
    y = x / (1.0 + tl.exp(-2.0 * u))
    tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _gelu_tanh_fwd_kernel(
    X,                          # pointer to the input, contiguous
    Y,                          # pointer to the output, contiguous, same dtype
    n_elements,                 # number of elements in X and Y
    BLOCK_SIZE: tl.constexpr,   # elements per program and loop step
    COMPUTE_FP64: tl.constexpr, # float64 inputs are computed in float64, others in float32
    GRID_STRIDE: tl.constexpr,  # fewer programs than blocks: each walks several
    VECTOR: tl.constexpr,       # blocks cover whole vectors of this many elements ...
    TAIL: tl.constexpr,         # ... and program 0 the rest (grid_stride.vector_split)
):
    pid = tl.program_id(0).to(tl.int64)  # int64 loop: offsets past 2^31 stay exact
    n_vectors = aligned(n_elements, VECTOR)
    step, stop = block_range(pid, tl.cdiv(n_elements, BLOCK_SIZE), GRID_STRIDE)
    for block in range(pid, stop, step):
        offs = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        _gelu_tanh_fwd(X, Y, offs, offs < n_vectors, COMPUTE_FP64)
    if TAIL:
        if pid == 0:
            offs = n_vectors + tl.arange(0, VECTOR)
            _gelu_tanh_fwd(X, Y, offs, offs < n_elements, COMPUTE_FP64)


@triton.jit
def _gelu_tanh_bwd(DY, X, DX, offs, mask, COMPUTE_FP64: tl.constexpr):
    # y = x * s with s = sigmoid(2u): dy/dx = s + 2 x s (1 - s) du/dx
    x = tl.load(X + offs, mask=mask, other=0.0)
    dy = tl.load(DY + offs, mask=mask, other=0.0)
    x = to_compute(x, COMPUTE_FP64)
    dy = to_compute(dy, COMPUTE_FP64)
    u = SQRT_2_OVER_PI * (x + GELU_COEFF * x * x * x)
    s = 1.0 / (1.0 + tl.exp(-2.0 * u))
    du = SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_COEFF * x * x)
    dx = dy * (s + 2.0 * x * s * (1.0 - s) * du)
    tl.store(DX + offs, dx.to(DX.dtype.element_ty), mask=mask)


@triton.jit
def _gelu_tanh_bwd_kernel(
    DY,                         # pointer to the upstream gradient, contiguous
    X,                          # pointer to the forward input, contiguous
    DX,                         # pointer to the input gradient, contiguous
    n_elements,
    BLOCK_SIZE: tl.constexpr,
    COMPUTE_FP64: tl.constexpr,
    GRID_STRIDE: tl.constexpr,
    VECTOR: tl.constexpr,
    TAIL: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    n_vectors = aligned(n_elements, VECTOR)
    step, stop = block_range(pid, tl.cdiv(n_elements, BLOCK_SIZE), GRID_STRIDE)
    for block in range(pid, stop, step):
        offs = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        _gelu_tanh_bwd(DY, X, DX, offs, offs < n_vectors, COMPUTE_FP64)
    if TAIL:
        if pid == 0:
            offs = n_vectors + tl.arange(0, VECTOR)
            _gelu_tanh_bwd(DY, X, DX, offs, offs < n_elements, COMPUTE_FP64)


def _launch_elementwise(kernel, profile: Profile, out: torch.Tensor, *tensors: torch.Tensor):
    n = out.numel()
    if n == 0:
        return  # no launch: a zero grid crashes some backends
    grid, meta = elementwise_plan(profile, n, out.dtype)
    launch(kernel, grid, *tensors, out, n, **meta)


def gelu(x: torch.Tensor, *, profile: Profile) -> torch.Tensor:
    """GELU (tanh approximation) of ``x``, any shape; returns a new contiguous tensor."""
    check_inputs("gelu", profile, DTYPES, x=x)
    x = x.contiguous()
    y = torch.empty_like(x)
    _launch_elementwise(_gelu_tanh_fwd_kernel, profile, y, x)
    return y


def gelu_backward(dy: torch.Tensor, x: torch.Tensor, *, profile: Profile) -> torch.Tensor:
    """Gradient of :func:`gelu` at ``x`` for the upstream gradient ``dy``."""
    check_inputs("gelu_backward", profile, DTYPES, dy=dy, x=x)
    check_same_shape("gelu_backward", dy=dy, x=x)
    if dy.dtype != x.dtype:
        raise UnsupportedDtypeError(f"gelu_backward: dy is {dy.dtype} but x is {x.dtype}")
    x, dy = x.contiguous(), dy.contiguous()
    dx = torch.empty_like(x)
    _launch_elementwise(_gelu_tanh_bwd_kernel, profile, dx, dy, x)
    return dx


class GeluFunction(torch.autograd.Function):
    """Autograd wrapper, so gradcheck can run through the kernels."""

    @staticmethod
    def forward(ctx, x, profile):
        ctx.save_for_backward(x)
        ctx.profile = profile
        return gelu(x, profile=profile)

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        return gelu_backward(dy, x, profile=ctx.profile), None


def gelu_autograd(x: torch.Tensor, *, profile: Profile) -> torch.Tensor:
    """Differentiable :func:`gelu` (forward and backward kernels)."""
    return GeluFunction.apply(x, profile)
