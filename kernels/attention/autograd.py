"""Differentiable attention: gradients flow to q, k and v (for gradcheck and training)."""
import torch

from triton_cts.profiles import Profile
from .backward import attention_backward_from_saved
from .forward import attention_forward


class AttentionFunction(torch.autograd.Function):
    """Differentiable :func:`attention`: gradients flow to q, k and v."""

    @staticmethod
    def forward(ctx, q, k, v, causal, scale, causal_offset, profile):
        o, lse = attention_forward(q, k, v, causal=causal, scale=scale,
                                   causal_offset=causal_offset, profile=profile)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.options = (causal, scale, causal_offset, profile)
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        return (*attention_backward_from_saved(q, k, v, o, lse, do, *ctx.options),
                None, None, None, None)


def attention_autograd(q, k, v, *, causal: bool = False, scale: float | None = None,
                       causal_offset: int = 0, profile: Profile):
    """:class:`AttentionFunction` with keyword options, for gradcheck."""
    return AttentionFunction.apply(q, k, v, causal, scale, causal_offset, profile)
