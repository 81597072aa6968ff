"""Differentiable layer norm and RMS norm (forward and backward kernels under
torch.autograd), for gradcheck."""
from __future__ import annotations

import torch

from .backward import layer_norm_backward
from .forward import layer_norm
from triton_cts.profiles import Profile


class LayerNormFunction(torch.autograd.Function):
    """Differentiable :func:`layer_norm`: returns y, or (y, residual_out) with a residual
    (prenorm); gradients flow to x, weight, bias and residual."""

    @staticmethod
    def forward(ctx, x, weight, bias, residual, rowscale, eps, dropout_p, seed, rms, profile):
        out = layer_norm(x, weight, bias, eps, residual=residual, rowscale=rowscale,
                         dropout_p=dropout_p, seed=seed, return_dropout_mask=True, rms=rms,
                         profile=profile)
        normed = out.residual_out if out.residual_out is not None else x
        ctx.save_for_backward(normed, weight, bias, out.mean, out.rstd, rowscale,
                              out.dropout_mask)
        ctx.dropout_p, ctx.rms, ctx.profile = dropout_p, rms, profile
        ctx.has_residual = residual is not None
        if ctx.has_residual:
            return out.y, out.residual_out
        return out.y

    @staticmethod
    def backward(ctx, dy, dresidual_out=None):
        normed, weight, bias, mean, rstd, rowscale, dropout_mask = ctx.saved_tensors
        grads = layer_norm_backward(
            dy, normed, weight, bias, mean, rstd, rms=ctx.rms, rowscale=rowscale,
            dropout_mask=dropout_mask, dropout_p=ctx.dropout_p,
            dresidual_out=dresidual_out,
            has_residual=ctx.has_residual, profile=ctx.profile)
        dx, dweight, dbias = grads[:3]
        dresidual = grads[3] if ctx.has_residual else None
        return dx, dweight, dbias, dresidual, None, None, None, None, None, None


def layer_norm_autograd(x, weight, bias, eps: float = 1e-5, *, residual=None, rowscale=None,
                        dropout_p: float = 0.0, seed: int | None = None, rms: bool = False,
                        profile: Profile):
    """:class:`LayerNormFunction` with keyword options (fix ``seed`` for gradcheck)."""
    if dropout_p > 0.0 and seed is None:
        seed = int(torch.randint(0, 2**31 - 1, ()).item())
    return LayerNormFunction.apply(x, weight, bias, residual, rowscale, eps, dropout_p, seed,
                                   rms, profile)


def rms_norm_autograd(x, weight, eps: float = 1e-6, *, profile: Profile):
    """Differentiable :func:`rms_norm` (y only)."""
    return LayerNormFunction.apply(x, weight, None, None, None, eps, 0.0, None, True, profile)
