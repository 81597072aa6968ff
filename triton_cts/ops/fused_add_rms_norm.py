"""Fused residual add + RMS norm (Llama's pre-norm step), forward and backward.

    h = x + residual,   y = h * rstd * weight,   rstd = 1 / sqrt(mean(h^2) + eps)

The forward returns ``(y, h, rstd)``: h is the new residual stream. The drawn tensor is x;
make_args draws the residual and the weight from standard normals. The backward takes
``(dy, dh_out, h, weight, rstd)`` (dh_out: the gradient flowing into h from the residual
stream) and returns ``(dh, dweight)``; dh is the gradient of x and of the residual alike.

Tolerances are RMS norm's (``triton_cts/ops/layer_norm.py``): RMS norm does not subtract
a mean, so it is well conditioned (y's relative error is h's), and h = x + residual is
one correctly rounded add. An implementation may normalize h as held in float32 or as
rounded to the residual's dtype (FlagGems, vLLM): the two differ by h's rounding
relative to y, within every dtype's rtol. The backward's allowances are RMS norm's: the
float32 rstd given against the exact one (``rms_norm_backward_ambiguity``), and atol 1e-3
for dweight, a sum over every row.
"""
from __future__ import annotations

import torch

from triton_cts.ops.layer_norm import (BACKWARD_TOLERANCES, FLOATS, RMS_NORM_EPS,
                                       _rms_norm_ref, _stat_dtype, rms_norm_backward_ambiguity)
from triton_cts.ops.spec import OpSpec, randn


def reference(x, residual, weight, eps=RMS_NORM_EPS):
    h = x + residual
    y, rstd = _rms_norm_ref(h, weight, eps)
    return y, h, rstd


def backward_reference(dy, dh_out, h, weight, rstd):
    h, weight = h.detach().requires_grad_(), weight.detach().requires_grad_()
    with torch.enable_grad():
        y, _ = _rms_norm_ref(h, weight, RMS_NORM_EPS)
        dh, dweight = torch.autograd.grad(y, (h, weight), dy)
    return dh + dh_out, dweight


def backward_ambiguity(dy, dh_out, h, weight, rstd):
    return rms_norm_backward_ambiguity(dy, h, weight, rstd)


def _randn(shape, gen, like):
    return randn(shape, gen, like.dtype, like.device, drawn_in=torch.float64)


def make_args(x, gen):
    return ((x, _randn(x.shape, gen, x), _randn(x.shape[-1:], gen, x)), {"eps": RMS_NORM_EPS})


def make_backward_args(x, gen):
    weight = _randn(x.shape[-1:], gen, x)
    dy, dh_out = _randn(x.shape, gen, x), _randn(x.shape, gen, x)
    _, rstd = _rms_norm_ref(x.double(), weight.double(), RMS_NORM_EPS)
    return (dy, dh_out, x, weight, rstd.to(_stat_dtype(x))), {}


COMPILE_SHAPES = ((1024, 4096), (4096, 128), (16, 65536))  # last: the tiled kernels

FUSED_ADD_RMS_NORM = OpSpec(
    name="fused_add_rms_norm",
    description="h = x + residual, RMS norm of h over the last dim: (y, h, rstd)",
    reference=reference,
    reference_kernel="kernels.fused_add_rms_norm:fused_add_rms_norm",
    autograd="kernels.fused_add_rms_norm:fused_add_rms_norm_autograd",
    dtypes=FLOATS,
    make_args=make_args,
    min_ndim=1,
    max_ndim=4,
    compile_shapes=COMPILE_SHAPES,
)

FUSED_ADD_RMS_NORM_BACKWARD = OpSpec(
    name="fused_add_rms_norm_backward",
    description="fused residual add + RMS norm, backward: (dh, dweight), dh = dx = dresidual",
    reference=backward_reference,
    ambiguity=backward_ambiguity,
    reference_kernel="kernels.fused_add_rms_norm:fused_add_rms_norm_backward",
    dtypes=FLOATS,
    make_args=make_backward_args,
    min_ndim=1,
    max_ndim=4,
    tolerances=BACKWARD_TOLERANCES,
    compile_shapes=COMPILE_SHAPES,
    deterministic=("reference",),  # layer_norm_backward's partial-sum strategy
)

OPS = (FUSED_ADD_RMS_NORM, FUSED_ADD_RMS_NORM_BACKWARD)
