"""Gated linear units of a transformer MLP: SwiGLU and GEGLU, forward and backward.

    swiglu(a, b) = silu(a) * b,          silu(a) = a * sigmoid(a) = a / (1 + exp(-a))
    geglu(a, b)  = gelu_tanh(a) * b,     gelu_tanh(a) = a * sigmoid(2u),
                                         u = sqrt(2/pi) * (a + 0.044715 a^3)

``a`` is the gate projection, ``b`` the up projection (the two halves of the fused
gate/up matmul's output, passed as two tensors as Liger-Kernel and FlagGems take them).
The backward returns both input gradients from one read of (dy, a, b):

    da = dy * b * act'(a),   db = dy * act(a)
    silu'(a)      = s * (1 + a * (1 - s)),                    s = sigmoid(a)
    gelu_tanh'(a) = s + 2 a s (1 - s) du/da,                  s = sigmoid(2u)

Both activations are written with one exp and no tanh intrinsic (as kernels/gelu.py), so
the limits come out as torch's: silu(+inf) = +inf, silu(-inf) = NaN (-inf * 0), and the
derivatives at +-inf are NaN where torch's are. The math runs in float32 (float64 for
float64 inputs) and rounds once to the output dtype.

Like every elementwise launcher here, the grid is capped at the profile's MAX_GRID_NUM
and programs walk blocks of the profile's elementwise block in a grid-stride loop, with
int64 offsets; a size 16 does not divide still loads vectors (``grid_stride.vector_split``).
"""
import torch
import triton
import triton.language as tl

from .compute import to_compute
from .grid_stride import block_range, elementwise_plan
from .row_align import aligned
from triton_cts.execution.input_checks import (ShapeMismatchError, UnsupportedDtypeError,
                                               check_inputs)
from triton_cts.profiles import Profile
from .fast_launch import launch

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)
GELU_COEFF = tl.constexpr(0.044715)
#: the activations, as the kernels' ACT constexpr
SILU, GELU_TANH = 0, 1


@triton.jit
def _act_and_grad(a, ACT: tl.constexpr):
    """(act(a), act'(a)) in a's (compute) dtype."""
    if ACT == 0:  # silu
        s = 1.0 / (1.0 + tl.exp(-a))
        return a * s, s * (1.0 + a * (1.0 - s))
    else:         # gelu, tanh approximation
        u = SQRT_2_OVER_PI * (a + GELU_COEFF * a * a * a)
        s = 1.0 / (1.0 + tl.exp(-2.0 * u))
        du = SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_COEFF * a * a)
        return a * s, s + 2.0 * a * s * (1.0 - s) * du


@triton.jit
def _act(a, ACT: tl.constexpr):
    if ACT == 0:
        return a / (1.0 + tl.exp(-a))
    else:
        u = SQRT_2_OVER_PI * (a + GELU_COEFF * a * a * a)
        return a / (1.0 + tl.exp(-2.0 * u))


@triton.jit
def _glu_fwd(A, B, Y, offs, mask, ACT: tl.constexpr, COMPUTE_FP64: tl.constexpr):
    a = tl.load(A + offs, mask=mask, other=0.0)
    b = tl.load(B + offs, mask=mask, other=0.0)
    a = to_compute(a, COMPUTE_FP64)
    b = to_compute(b, COMPUTE_FP64)
    y = _act(a, ACT) * b
    tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _glu_fwd_kernel(
    A,                          # pointer to the gate input, contiguous
    B,                          # pointer to the up input, contiguous, same shape and dtype
    Y,                          # pointer to the output act(a) * b, same shape and dtype
    n_elements,                 # elements of each
    BLOCK_SIZE: tl.constexpr,   # elements per program and loop step
    ACT: tl.constexpr,          # SILU (0) or GELU_TANH (1)
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
        _glu_fwd(A, B, Y, offs, offs < n_vectors, ACT, COMPUTE_FP64)
    if TAIL:
        if pid == 0:
            offs = n_vectors + tl.arange(0, VECTOR)
            _glu_fwd(A, B, Y, offs, offs < n_elements, ACT, COMPUTE_FP64)


@triton.jit
def _glu_bwd(DY, A, B, DA, DB, offs, mask, ACT: tl.constexpr, COMPUTE_FP64: tl.constexpr):
    dy = tl.load(DY + offs, mask=mask, other=0.0)
    a = tl.load(A + offs, mask=mask, other=0.0)
    b = tl.load(B + offs, mask=mask, other=0.0)
    dy = to_compute(dy, COMPUTE_FP64)
    a = to_compute(a, COMPUTE_FP64)
    b = to_compute(b, COMPUTE_FP64)
    act, grad = _act_and_grad(a, ACT)
    tl.store(DA + offs, (dy * b * grad).to(DA.dtype.element_ty), mask=mask)
    tl.store(DB + offs, (dy * act).to(DB.dtype.element_ty), mask=mask)


@triton.jit
def _glu_bwd_kernel(
    DY,                         # pointer to the upstream gradient, contiguous
    A,                          # pointer to the forward's gate input, contiguous
    B,                          # pointer to the forward's up input, contiguous
    DA,                         # pointer to the gate gradient, like A
    DB,                         # pointer to the up gradient, like B
    n_elements,
    BLOCK_SIZE: tl.constexpr,
    ACT: tl.constexpr,
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
        _glu_bwd(DY, A, B, DA, DB, offs, offs < n_vectors, ACT, COMPUTE_FP64)
    if TAIL:
        if pid == 0:
            offs = n_vectors + tl.arange(0, VECTOR)
            _glu_bwd(DY, A, B, DA, DB, offs, offs < n_elements, ACT, COMPUTE_FP64)


# --------------------------------------------------------------------------------------
# Launchers
# --------------------------------------------------------------------------------------
def _check(op: str, profile: Profile, **tensors: torch.Tensor) -> None:
    check_inputs(op, profile, DTYPES, **tensors)
    shapes = {name: tuple(t.shape) for name, t in tensors.items()}
    if len(set(shapes.values())) > 1:
        raise ShapeMismatchError(f"{op}: the gate and up inputs (and dy) must have one shape, "
                                 f"got {', '.join(f'{n}={s}' for n, s in shapes.items())}")
    dtypes = {name: t.dtype for name, t in tensors.items()}
    if len(set(dtypes.values())) > 1:
        raise UnsupportedDtypeError(f"{op}: inputs must have one dtype, got "
                                    f"{', '.join(f'{n}={d}' for n, d in dtypes.items())}")


def _launch(kernel, act: int, profile: Profile, outs: tuple, *tensors: torch.Tensor) -> None:
    n = outs[0].numel()
    if n == 0:
        return  # no launch: a zero grid crashes some backends
    grid, meta = elementwise_plan(profile, n, outs[0].dtype)
    launch(kernel, grid, *tensors, *outs, n, ACT=act, **meta)


def _forward(op: str, act: int, a: torch.Tensor, b: torch.Tensor, profile: Profile):
    _check(op, profile, a=a, b=b)
    a, b = a.contiguous(), b.contiguous()
    y = torch.empty_like(a)
    _launch(_glu_fwd_kernel, act, profile, (y,), a, b)
    return y


def _backward(op: str, act: int, dy, a, b, profile: Profile):
    _check(op, profile, dy=dy, a=a, b=b)
    dy, a, b = dy.contiguous(), a.contiguous(), b.contiguous()
    da, db = torch.empty_like(a), torch.empty_like(b)
    _launch(_glu_bwd_kernel, act, profile, (da, db), dy, a, b)
    return da, db


def swiglu(a: torch.Tensor, b: torch.Tensor, *, profile: Profile) -> torch.Tensor:
    """``silu(a) * b`` for gate ``a`` and up ``b`` of one shape and dtype; a new
    contiguous tensor."""
    return _forward("swiglu", SILU, a, b, profile)


def swiglu_backward(dy, a, b, *, profile: Profile):
    """Gradients of :func:`swiglu`: ``(da, db)``."""
    return _backward("swiglu_backward", SILU, dy, a, b, profile)


def geglu(a: torch.Tensor, b: torch.Tensor, *, profile: Profile) -> torch.Tensor:
    """``gelu_tanh(a) * b``."""
    return _forward("geglu", GELU_TANH, a, b, profile)


def geglu_backward(dy, a, b, *, profile: Profile):
    """Gradients of :func:`geglu`: ``(da, db)``."""
    return _backward("geglu_backward", GELU_TANH, dy, a, b, profile)


class GluFunction(torch.autograd.Function):
    """Autograd wrapper over the forward and backward kernels (gradcheck, training)."""

    @staticmethod
    def forward(ctx, a, b, act, profile):
        ctx.save_for_backward(a, b)
        ctx.act, ctx.profile = act, profile
        return _forward("swiglu" if act == SILU else "geglu", act, a, b, profile)

    @staticmethod
    def backward(ctx, dy):
        a, b = ctx.saved_tensors
        op = "swiglu_backward" if ctx.act == SILU else "geglu_backward"
        da, db = _backward(op, ctx.act, dy, a, b, ctx.profile)
        return da, db, None, None


def swiglu_autograd(a: torch.Tensor, b: torch.Tensor, *, profile: Profile) -> torch.Tensor:
    """Differentiable :func:`swiglu`."""
    return GluFunction.apply(a, b, SILU, profile)


def geglu_autograd(a: torch.Tensor, b: torch.Tensor, *, profile: Profile) -> torch.Tensor:
    """Differentiable :func:`geglu`."""
    return GluFunction.apply(a, b, GELU_TANH, profile)
