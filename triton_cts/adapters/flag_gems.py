"""FlagGems 5.x (``pip install flag-gems``) on the ops' interfaces.

FlagGems implements ATen ops (``flag_gems.enable()`` registers them for torch's
dispatcher); this adapter calls the same functions from ``flag_gems.ops`` with the
arguments the dispatcher would pass, and reshapes nothing but the statistics it returns
flat (mean, rstd: one value per row) to the ops' row shape.

FlagGems detects the accelerator when it is imported and raises without one, so on a
CPU-only machine every check of it is reported as not supported with that error.
FlagGems has no kernel for the prenorm residual-dropout layer norm: that op is not
registered for it. Its fused ops (``flag_gems.fused``: cross_entropy_loss, silu_and_mul,
gelu_and_mul, apply_rotary_pos_emb, fused_add_rms_norm) are called as their modules
export them; gradients come from their autograd Functions (cross-entropy, SwiGLU, GEGLU);
RoPE and the fused add + RMS norm have no backward.
"""
from __future__ import annotations

import torch

OPS = {
    "gelu": "gelu",
    "gelu_backward": "gelu_backward",
    "softmax": "softmax",
    "log_softmax": "log_softmax",
    "softmax_backward": "softmax_backward",
    "batch_norm_train": "batch_norm_train",
    "max_all": "max_all",
    "max_dim": "max_dim",
    "prod_all": "prod_all",
    "prod_dim": "prod_dim",
    "matmul": "matmul",
    "layer_norm": "layer_norm",
    "layer_norm_backward": "layer_norm_backward",
    "rms_norm": "rms_norm",
    "rms_norm_backward": "rms_norm_backward",
    "cross_entropy": "cross_entropy",
    "rope": "rope",
    "rope_interleaved": "rope_interleaved",
    "swiglu": "swiglu",
    "swiglu_backward": "swiglu_backward",
    "geglu": "geglu",
    "geglu_backward": "geglu_backward",
    "fused_add_rms_norm": "fused_add_rms_norm",
    "attention": "attention",
}

#: fused_add_rms_norm returns (y, h), not rstd.
OUTPUTS = {"fused_add_rms_norm": (0, 1)}


def _ops():
    from flag_gems import ops
    return ops


# ---- elementwise --------------------------------------------------------------------
def gelu(x):
    return _ops().gelu(x, approximate="tanh")


def gelu_backward(dy, x):
    return _ops().gelu_backward(dy, x, approximate="tanh")


# ---- softmax family (aten::_softmax, _log_softmax, _softmax_backward_data) ----------
def softmax(x):
    return _ops().softmax(x, -1)


def log_softmax(x):
    return _ops().log_softmax(x, -1)


def softmax_backward(dy, y):
    return _ops().softmax_backward(dy, y, -1, y.dtype)


# ---- batch norm (aten::native_batch_norm, training) ---------------------------------
def batch_norm_train(x, weight, bias, running_mean, running_var, momentum, eps):
    # updates running_mean and running_var in place, as the ATen op does
    y, mean, invstd = _ops().batch_norm(x, weight, bias, running_mean, running_var, True,
                                        momentum, eps)
    return y, mean, invstd, running_mean, running_var


# ---- reductions (aten::max, max.dim, prod, prod.dim_int) ----------------------------
def max_all(x):
    return _ops().max(x)


def max_dim(x):
    values, indices = _ops().max_dim(x, -1)
    return values, indices


def prod_all(x):
    return _ops().prod(x)


def prod_dim(x):
    return _ops().prod_dim(x, -1)


# ---- matmul (aten::mm) --------------------------------------------------------------
def matmul(a, b):
    return _ops().mm(a, b)


# ---- layer norm, RMS norm (aten::native_layer_norm[_backward], rms_norm) ------------
def layer_norm(x, weight, bias, eps):
    y, mean, rstd = _ops().layer_norm(x, (x.shape[-1],), weight, bias, eps)
    return y, mean.view(x.shape[:-1]), rstd.view(x.shape[:-1])


def layer_norm_backward(dy, x, weight, bias, mean, rstd):
    return _ops().layer_norm_backward(dy, x, (x.shape[-1],), mean, rstd, weight, bias,
                                      output_mask=[True, True, True])


def rms_norm(x, weight, eps):
    from flag_gems.ops.rms_norm import rms_norm_forward
    y, inv_rms = rms_norm_forward(x, (x.shape[-1],), weight, eps)
    return y, inv_rms.view(x.shape[:-1])


def rms_norm_backward(dy, x, weight, rstd):
    from flag_gems.ops.rms_norm import rms_norm_backward as backward
    from triton_cts.ops.layer_norm import RMS_NORM_EPS
    # eps is unused once rstd is given; passed because the signature asks for it
    return backward(dy, x, rstd.contiguous(), (x.shape[-1],), weight, RMS_NORM_EPS)


# ---- fused LLM ops (flag_gems.fused) ------------------------------------------------
def _fused():
    from flag_gems import fused
    return fused


def _grads(outputs, inputs, upstream):
    return torch.autograd.grad(outputs, inputs, upstream)


def cross_entropy(logits, labels, *, ignore_index, label_smoothing, reduction):
    x = logits.detach().clone().requires_grad_()
    n = x.shape[-1]
    with torch.enable_grad():
        loss = _fused().cross_entropy_loss(x.reshape(-1, n), labels.reshape(-1), None, reduction,
                                           ignore_index, label_smoothing)
        (grad,) = _grads(loss, x, torch.ones_like(loss))
    loss = loss.detach()
    return (loss.view(labels.shape) if reduction == "none" else loss), grad


def _rope(x, cos, sin, offset, rotary_dim, interleaved):
    """apply_rotary_pos_emb rotates the whole head (cos is [P, D / 2]): the rotary columns
    go through it, the others are copied back beside them."""
    seq_len, n_heads, head_dim = x.shape[-3:]
    if rotary_dim == 0:
        return x.clone()
    q = x[..., :rotary_dim].contiguous()
    k = q[..., :1, :].contiguous()  # q and k are rotated together: one head of k, discarded
    positions = torch.arange(offset, offset + seq_len, device=x.device)
    positions = positions.expand(*x.shape[:-3], seq_len).contiguous()
    out, _ = _fused().apply_rotary_pos_emb(q, k, cos.contiguous(), sin.contiguous(),
                                           positions, rotary_interleaved=interleaved)
    return torch.cat((out, x[..., rotary_dim:]), dim=-1)


def rope(x, cos, sin, *, offset, rotary_dim):
    return _rope(x, cos, sin, offset, rotary_dim, False)


def rope_interleaved(x, cos, sin, *, offset, rotary_dim):
    return _rope(x, cos, sin, offset, rotary_dim, True)


def _glu_backward(fn, dy, a, b, **options):
    a, b = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    with torch.enable_grad():
        return _grads(fn(a, b, **options), (a, b), dy)


def swiglu(a, b):
    return _fused().silu_and_mul(a, b)


def swiglu_backward(dy, a, b):
    return _glu_backward(_fused().silu_and_mul, dy, a, b)


def geglu(a, b):
    return _fused().gelu_and_mul(a, b, approximate="tanh")


def geglu_backward(dy, a, b):
    return _glu_backward(_fused().gelu_and_mul, dy, a, b, approximate="tanh")


def fused_add_rms_norm(x, residual, weight, eps):
    # in place: y over x, h over the residual; give it copies
    y, h = _fused().fused_add_rms_norm(x.clone(), residual.clone(), (x.shape[-1],), weight,
                                       eps)
    return y, h


# ---- attention (aten::scaled_dot_product_attention; FlagGems has no backward for it) --
def attention(q, k, v, causal=False, scale=None, causal_offset=0):
    """is_causal for torch's top-left mask (offset 0); any other causal offset as an
    additive attn_mask of 0 and -inf, broadcast over batch and heads."""
    mask = None
    if causal and causal_offset:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool,
                          device=q.device).tril(diagonal=causal_offset)
        mask = torch.zeros(keep.shape, dtype=q.dtype, device=q.device) \
            .masked_fill(~keep, float("-inf")).expand(q.shape[0], q.shape[1], *keep.shape)
    return _ops().scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=bool(causal and not causal_offset), scale=scale,
        enable_gqa=q.shape[1] != k.shape[1])
