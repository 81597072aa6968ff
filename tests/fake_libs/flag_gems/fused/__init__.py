"""Fake flag_gems.fused: the fused ops the adapter calls, computed with torch."""
import torch

from _fake_lib_fault import planted

F = torch.nn.functional


def cross_entropy_loss(inp, target, weight=None, reduction="mean", ignore_index=-100,
                       label_smoothing=0.0):
    """Differentiable, as the real autograd Function; the loss has inp's dtype."""
    loss = F.cross_entropy(inp.double(), target, weight, ignore_index=ignore_index,
                           reduction=reduction, label_smoothing=label_smoothing)
    return planted("cross_entropy_loss", loss).to(inp.dtype)


def apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, rotary_interleaved=False,
                         inplace=False):
    """q, k: (*, heads, D); cos, sin: (P, D / 2); position_ids: q.shape[:-2]."""
    def rotate(t):
        c = cos[position_ids].double()[..., None, :]
        s = sin[position_ids].double()[..., None, :]
        x = t.double()
        if rotary_interleaved:
            x1, x2 = x[..., 0::2], x[..., 1::2]
            return torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), -1).flatten(-2)
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1)
    return (planted("apply_rotary_pos_emb", rotate(q)).to(q.dtype), rotate(k).to(k.dtype))


def silu_and_mul(A, B):
    return planted("silu_and_mul", F.silu(A.double()) * B.double()).to(A.dtype)


def gelu_and_mul(x, y, approximate="none"):
    return planted("gelu_and_mul", F.gelu(x.double(), approximate=approximate)
                   * y.double()).to(x.dtype)


def fused_add_rms_norm(x, residual, normalized_shape, weight, eps=1e-5):
    """In place: y into x, x + residual into residual; returns (x, residual)."""
    h = x.double() + residual.double()
    rstd = torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    y = planted("fused_add_rms_norm", h * rstd * weight.double())
    residual.copy_(h.to(residual.dtype))
    x.copy_(y.to(x.dtype))
    return x, residual
