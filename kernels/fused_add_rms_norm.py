"""Fused residual add + RMS norm (the pre-norm step of Llama-style decoders), forward and
backward.

    h = x + residual                  (returned: the residual stream the next layer adds to)
    y = h * rstd * weight,   rstd = 1 / sqrt(mean(h^2) + eps)

The layer-norm kernels already fuse a residual add ahead of the normalization
(``kernels/layer_norm``: FlashAttention's prenorm options, RMS mode), so this module only
names the op: one read of x and residual, one write of y and h, h held in float32
(float64 for float64 inputs) between the add and the norm, and the tiled two-pass kernel
where a row is longer than the profile's fused tile. The backward is the RMS norm
backward at h with the gradient flowing into h from the residual stream added:

    dh = rms_norm_backward(dy, h) + dh_out,   dx = dresidual = dh

returned once (dx and dresidual are the same tensor), with dweight.
"""
from __future__ import annotations

import torch

from .layer_norm import layer_norm, layer_norm_backward
from triton_cts.execution.input_checks import ShapeMismatchError
from triton_cts.profiles import Profile


def fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                       eps: float = 1e-6, *, profile: Profile):
    """``(y, h, rstd)`` for ``h = x + residual`` (in the residual's dtype) and ``y`` the
    RMS norm of h times ``weight`` (x's dtype); rstd float32 (float64 for float64 x), of
    shape ``x.shape[:-1]``."""
    if residual.shape != x.shape:
        raise ShapeMismatchError(f"fused_add_rms_norm: residual must have x's shape "
                                 f"{tuple(x.shape)}, got {tuple(residual.shape)}")
    out = layer_norm(x, weight, None, eps, residual=residual, rms=True, profile=profile)
    return out.y, out.residual_out, out.rstd


def fused_add_rms_norm_backward(dy: torch.Tensor, dh_out: torch.Tensor, h: torch.Tensor,
                                weight: torch.Tensor, rstd: torch.Tensor, *,
                                profile: Profile):
    """Gradients of :func:`fused_add_rms_norm`: ``(dh, dweight)``, where ``dh`` is the
    gradient of both x and residual (they enter only through their sum), ``dh_out`` the
    gradient flowing into the returned h, ``h`` and ``rstd`` the forward's."""
    if dh_out.shape != h.shape:
        raise ShapeMismatchError(f"fused_add_rms_norm_backward: dh_out must have h's shape "
                                 f"{tuple(h.shape)}, got {tuple(dh_out.shape)}")
    # dx and dresidual are the same tensor here (no dropout, no row scale): ask for dx alone,
    # which already holds dh_out; storing both wrote the gradient twice (5 tensors of
    # traffic for 4)
    dh, dweight, _ = layer_norm_backward(
        dy, h, weight, None, None, rstd, rms=True, dresidual_out=dh_out, has_residual=False,
        profile=profile)
    return dh, dweight


class FusedAddRMSNormFunction(torch.autograd.Function):
    """Differentiable :func:`fused_add_rms_norm` returning ``(y, h)``."""

    @staticmethod
    def forward(ctx, x, residual, weight, eps, profile):
        y, h, rstd = fused_add_rms_norm(x, residual, weight, eps, profile=profile)
        ctx.save_for_backward(h, weight, rstd)
        ctx.profile = profile
        return y, h

    @staticmethod
    def backward(ctx, dy, dh_out):
        h, weight, rstd = ctx.saved_tensors
        if dy is None:
            dy = torch.zeros_like(h)
        if dh_out is None:
            dh_out = torch.zeros_like(h)
        dh, dweight = fused_add_rms_norm_backward(dy.contiguous(), dh_out.contiguous(), h,
                                                  weight, rstd, profile=ctx.profile)
        return dh, dh, dweight, None, None


def fused_add_rms_norm_autograd(x, residual, weight, eps: float = 1e-6, *, profile: Profile):
    """Differentiable :func:`fused_add_rms_norm`: ``(y, h)`` (gradcheck checks both)."""
    return FusedAddRMSNormFunction.apply(x, residual, weight, eps, profile)
