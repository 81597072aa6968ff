"""Gated linear units: SwiGLU (silu(a) * b) and GEGLU (gelu_tanh(a) * b), forward and
backward.

The drawn tensor is the gate ``a``; make_args draws the up projection ``b`` (and the
backward's ``dy``) of the same shape from standard normals rounded to a's dtype.

Tolerances: torch's defaults hold. An output is one activation (an exp, a division, a
few products) and one product with ``b``, computed in float32 (float64 for float64) and
rounded once: a few float32 ulp, far below every default rtol; float32 outputs (rtol
1.3e-6, about 11 ulp) keep that margin too. Where act(a) or act'(a) crosses zero
(silu' at a = -1.28, gelu' at a = -0.75) the relative error of the float32 sum s * (1 +
a(1 - s)) grows, but its absolute error stays a few ulp of 1, far below atol (1e-5).
"""
import torch
import torch.nn.functional as F

from triton_cts.ops.spec import OpSpec, randn

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _swiglu_ref(a, b):
    return F.silu(a) * b


def _geglu_ref(a, b):
    return F.gelu(a, approximate="tanh") * b


def _backward_ref(forward):
    def reference(dy, a, b):
        a, b = a.detach().requires_grad_(), b.detach().requires_grad_()
        with torch.enable_grad():
            y = forward(a, b)
            return torch.autograd.grad(y, (a, b), dy)
    return reference


def _randn_like(x, gen):
    return randn(x.shape, gen, x.dtype, x.device, drawn_in=torch.float64)


def _forward_args(x, gen):
    return (x, _randn_like(x, gen)), {}


def _backward_args(x, gen):
    b = _randn_like(x, gen)
    return (_randn_like(x, gen), x, b), {}


# last: a size 16 does not divide, so the kernels' tail (TAIL) compiles too
COMPILE_SHAPES = ((4096,), (1024, 4096), (11, 2999))


def _ops(name: str, activation: str, forward) -> tuple[OpSpec, OpSpec]:
    fwd = OpSpec(
        name=name,
        description=f"{activation}(a) * b (gate a, up b), forward",
        reference=forward,
        reference_kernel=f"kernels.glu:{name}",
        autograd=f"kernels.glu:{name}_autograd",
        dtypes=FLOATS,
        make_args=_forward_args,
        min_ndim=0,
        max_ndim=4,
        compile_shapes=COMPILE_SHAPES,
        relations=("linear_in_up",),
    )
    bwd = OpSpec(
        name=f"{name}_backward",
        description=f"{activation}(a) * b, gradients (da, db) for an upstream dy",
        reference=_backward_ref(forward),
        reference_kernel=f"kernels.glu:{name}_backward",
        dtypes=FLOATS,
        make_args=_backward_args,
        min_ndim=0,
        max_ndim=4,
        compile_shapes=COMPILE_SHAPES,
    )
    return fwd, bwd


SWIGLU, SWIGLU_BACKWARD = _ops("swiglu", "silu", _swiglu_ref)
GEGLU, GEGLU_BACKWARD = _ops("geglu", "gelu_tanh", _geglu_ref)

OPS = (SWIGLU, SWIGLU_BACKWARD, GEGLU, GEGLU_BACKWARD)
