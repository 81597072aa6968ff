"""Liger-Kernel 0.8.x (``pip install liger-kernel``) on the ops' interfaces.

Liger's public API is ``torch.autograd.Function`` classes (``LigerLayerNormFunction``,
``LigerRMSNormFunction``, ``LigerSoftmaxFunction``, ``LigerGELUMulFunction``); each
forward/backward calls plain ``*_forward`` / ``*_backward`` functions, which this adapter
calls directly: they take the saved statistics (mean, rstd) our backward ops take and
return the ones our forward ops return. Like the Functions (``ensure_contiguous``), the
adapter makes inputs contiguous first; the library's functions view them as 2-D rows.

Liger computes in float32 and maps only float16, bfloat16 and float32 to Triton types:
float64 is reported as not supported rather than checked against a float64 bound.
Liger has no kernel for log-softmax, batch norm, max, prod, matmul or the prenorm
residual-dropout layer norm: those ops are not registered for it. Its RoPE is half-split
only (no interleaved layout) and its backward is the same kernel as the forward: only
``rope`` is registered. Functions that write into their inputs (the cross-entropy
gradient over the logits, RoPE over q and k, the SwiGLU/GEGLU backward over a and b) get
copies.
"""
from __future__ import annotations

import torch

from triton_cts.execution.input_checks import UnsupportedDtypeError

DTYPES = (torch.float16, torch.bfloat16, torch.float32)

OPS = {
    "gelu": "gelu",
    "gelu_backward": "gelu_backward",
    "softmax": "softmax",
    "softmax_backward": "softmax_backward",
    "layer_norm": "layer_norm",
    "layer_norm_backward": "layer_norm_backward",
    "rms_norm": "rms_norm",
    "rms_norm_backward": "rms_norm_backward",
    "cross_entropy": "cross_entropy",
    "rope": "rope",
    "swiglu": "swiglu",
    "swiglu_backward": "swiglu_backward",
    "geglu": "geglu",
    "geglu_backward": "geglu_backward",
    "fused_add_rms_norm": "fused_add_rms_norm",
    "fused_add_rms_norm_backward": "fused_add_rms_norm_backward",
    "fused_linear_cross_entropy": "fused_linear_cross_entropy",
}

# No weight offset (LigerRMSNormFunction's default), and Gemma casting: everything in
# float32, rounded once to the output dtype, which is the op as defined (y = x * rstd * w).
# LigerRMSNormFunction defaults to Llama casting, which follows Hugging Face's Llama: it
# rounds x * rstd to the input dtype before multiplying by the weight, so its y is
# w * round(x * rstd) and its dweight sum(dy * round(x * rstd)), the exact gradient of
# that forward but not of this op: for float16 rows of 32769 elements summed over 2047
# rows, dweight differs from the unrounded gradient by 7 float16 ulp.
RMS_OFFSET = 0.0
RMS_CASTING_MODE = "gemma"


# Kernels Triton's interpreter cannot run (seen with triton 3.9; TRITON_INTERPRET=1 fails
# the same way outside the suite).
_LIBDEVICE = ("Liger's kernel calls a libdevice function imported by name ({}), which "
              "Triton's interpreter does not patch (the call returns None)")
_FLOAT_ARG = ("Liger's kernel calls .to() on a float argument ({}), which Triton's "
              "interpreter passes as a Python float")
INTERPRETER_GAPS = {
    "gelu": _LIBDEVICE.format("tanh"),
    "gelu_backward": _LIBDEVICE.format("tanh"),
    "layer_norm": _FLOAT_ARG.format("eps"),
    "rms_norm": _FLOAT_ARG.format("eps, offset"),
    "rms_norm_backward": _FLOAT_ARG.format("offset"),
    "geglu": _LIBDEVICE.format("tanh"),
    "geglu_backward": _LIBDEVICE.format("tanh"),
    "swiglu": _FLOAT_ARG.format("gate_multiplier"),
    "swiglu_backward": _FLOAT_ARG.format("gate_multiplier"),
    "fused_add_rms_norm": _FLOAT_ARG.format("eps, offset"),
    "fused_add_rms_norm_backward": _FLOAT_ARG.format("offset"),
}

#: Ops whose kernels compute in bfloat16 without upcasting, which Triton's interpreter
#: gets wrong (3.9: a bf16 x * y returns garbage); their bf16 interpreter checks are not
#: supported.
BF16_ARITHMETIC = ("softmax_backward",)


def unsupported(op: str, mode: str, profile) -> str | None:
    if mode == "interpreter" and op in INTERPRETER_GAPS:
        return INTERPRETER_GAPS[op]
    # calculate_settings picks num_warps from the host (torch.version.hip), not from the
    # target: cross-compiling from a CUDA or CPU host for a HIP profile would check
    # launches Liger never makes on that hardware.
    if mode == "compile" and profile.backend == "hip" and torch.version.hip is None:
        return ("liger-kernel picks num_warps from the host's torch build (torch.version.hip), "
                "not from the target, so its HIP launches can only be checked on a ROCm host")
    return None


def _check_dtype(op: str, *tensors: torch.Tensor) -> None:
    from triton import knobs
    for t in tensors:
        if t.dtype not in DTYPES:
            raise UnsupportedDtypeError(
                f"liger-kernel's {op} computes in float32 and takes float16, bfloat16 or "
                f"float32, not {str(t.dtype).removeprefix('torch.')}")
        if t.dtype == torch.bfloat16 and op in BF16_ARITHMETIC and knobs.runtime.interpret:
            raise UnsupportedDtypeError(
                f"liger-kernel's {op} computes in bfloat16, whose arithmetic Triton's "
                f"interpreter gets wrong")


def _contiguous(*tensors):
    return tuple(t.contiguous() for t in tensors)


def _rows(*tensors):
    """Contiguous, and a 0-d tensor as one row of one element: Liger's functions view
    their inputs as rows over the last dim, which a 0-d tensor lacks."""
    return tuple(t.contiguous().reshape(1) if t.dim() == 0 else t.contiguous()
                 for t in tensors)


# ---- GELU (tanh): Liger's only GELU kernel is GEGLU, gelu(a) * b ------------------------
# With b = 1 the product is exact (gelu(a) is rounded to b's dtype, then times 1.0), and
# the backward's da = dc * b * gelu'(a) is dc * gelu'(a): Liger's own GELU math, unchanged.
def gelu(x):
    from liger_kernel.ops.geglu import geglu_forward
    _check_dtype("gelu", x)
    (a,) = _rows(x)
    _, _, c = geglu_forward(a, torch.ones_like(a))
    return c.reshape(x.shape)


def gelu_backward(dy, x):
    from liger_kernel.ops.geglu import geglu_backward
    _check_dtype("gelu_backward", dy, x)
    # geglu_backward writes da into a and db into b: give it copies
    a, dc = _rows(x.clone(), dy)
    da, _ = geglu_backward(a, torch.ones_like(a), dc)
    return da.reshape(x.shape)


# ---- softmax ------------------------------------------------------------------------
def softmax(x):
    from liger_kernel.ops.softmax import LigerSoftmaxFunction
    _check_dtype("softmax", x)
    return LigerSoftmaxFunction.apply(*_rows(x)).reshape(x.shape)


def softmax_backward(dy, y):
    # LigerSoftmaxFunction.backward calls _softmax_backward with the settings its forward
    # chose for the row length; recompute them the same way.
    from liger_kernel.ops.softmax import _softmax_backward
    from liger_kernel.ops.utils import calculate_settings
    _check_dtype("softmax_backward", dy, y)
    dy2, y2 = _rows(dy, y)
    block_size, num_warps = calculate_settings(y2.shape[-1])
    dx = _softmax_backward(dy2, y2, block_size, num_warps, y2.shape[-1] > block_size)
    return dx.reshape(y.shape)


# ---- layer norm ---------------------------------------------------------------------
def layer_norm(x, weight, bias, eps):
    from liger_kernel.ops.layer_norm import layer_norm_forward
    _check_dtype("layer_norm", x, weight, bias)
    y, _, mean, rstd, _, _ = layer_norm_forward(*_contiguous(x, weight, bias), eps)
    return y, mean.view(x.shape[:-1]), rstd.view(x.shape[:-1])


def layer_norm_backward(dy, x, weight, bias, mean, rstd):
    from liger_kernel.ops.layer_norm import layer_norm_backward as backward
    _check_dtype("layer_norm_backward", dy, x, weight, bias)
    n = x.shape[-1]
    dy, x, weight, bias = _contiguous(dy, x, weight, bias)
    dx, dweight, dbias = backward(dy, x.view(-1, n), weight, bias,
                                  mean.contiguous().view(-1), rstd.contiguous().view(-1))
    return dx, dweight, dbias


# ---- RMS norm -----------------------------------------------------------------------
def rms_norm(x, weight, eps):
    from liger_kernel.ops.rms_norm import rms_norm_forward
    _check_dtype("rms_norm", x, weight)
    y, _, rstd, _, _, _ = rms_norm_forward(*_contiguous(x, weight), eps, RMS_OFFSET,
                                           RMS_CASTING_MODE, None)
    return y, rstd.view(x.shape[:-1])


def rms_norm_backward(dy, x, weight, rstd):
    from liger_kernel.ops.rms_norm import _str_to_casting_mode, rms_norm_backward as backward
    from liger_kernel.ops.utils import calculate_settings
    _check_dtype("rms_norm_backward", dy, x, weight)
    n = x.shape[-1]
    block_size, num_warps = calculate_settings(n)
    dy, x, weight = _contiguous(dy, x, weight)
    # in_place=False: the Function's default writes dx over dy
    return backward(dy, x.view(-1, n), weight, rstd.contiguous().view(-1), RMS_OFFSET,
                    _str_to_casting_mode[RMS_CASTING_MODE], block_size, num_warps, False, None)


# ---- cross-entropy: Liger writes the gradient over its input, when it requires grad ---
def cross_entropy(logits, labels, *, ignore_index, label_smoothing, reduction):
    from liger_kernel.ops.cross_entropy import cross_entropy_forward
    _check_dtype("cross_entropy", logits)
    n = logits.shape[-1]
    x = logits.reshape(-1, n).contiguous().clone().requires_grad_()  # becomes the gradient
    loss, _, _, _, grad = cross_entropy_forward(
        x, labels.reshape(-1).contiguous(), None, ignore_index, 0.0, label_smoothing,
        reduction, None, False)
    loss = loss.detach()
    return (loss.view(labels.shape) if reduction == "none" else loss), \
        grad.detach().view(logits.shape)


# ---- RoPE: half-split only; q is [B, H, S, D] over [B, S, H, D] storage, rotated in place
def rope(x, cos, sin, *, offset, rotary_dim):
    from liger_kernel.ops.rope import rope_forward
    _check_dtype("rope", x, cos, sin)
    seq_len, n_heads, head_dim = x.shape[-3:]
    q = x.reshape(-1, seq_len, n_heads, head_dim).clone()
    if rotary_dim == 0:  # nothing to rotate (Liger refuses a rotary dim of 0)
        return q.view(x.shape)
    k = q[:, :, :1].clone()  # Liger rotates q and k together: one head of k, discarded
    # Liger's tables are [1, S, R]: cat(freqs, freqs) rows of the batch's positions
    c = torch.cat((cos, cos), -1)[offset:offset + seq_len][None]
    s = torch.cat((sin, sin), -1)[offset:offset + seq_len][None]
    out, _, _, _ = rope_forward(q.transpose(1, 2), k.transpose(1, 2), c, s,
                                rotary_dim=rotary_dim)
    return out.transpose(1, 2).reshape(x.shape)


# ---- SwiGLU, GEGLU: the backward writes da into a and db into b ----------------------
def swiglu(a, b):
    from liger_kernel.ops.swiglu import swiglu_forward
    _check_dtype("swiglu", a, b)
    _, _, c = swiglu_forward(*_rows(a, b))
    return c.reshape(a.shape)


def swiglu_backward(dy, a, b):
    from liger_kernel.ops.swiglu import swiglu_backward as backward
    _check_dtype("swiglu_backward", dy, a, b)
    da, db = backward(*_rows(a.clone(), b.clone(), dy))
    return da.reshape(a.shape), db.reshape(b.shape)


def geglu(a, b):
    from liger_kernel.ops.geglu import geglu_forward
    _check_dtype("geglu", a, b)
    _, _, c = geglu_forward(*_rows(a, b))
    return c.reshape(a.shape)


def geglu_backward(dy, a, b):
    from liger_kernel.ops.geglu import geglu_backward as backward
    _check_dtype("geglu_backward", dy, a, b)
    da, db = backward(*_rows(a.clone(), b.clone(), dy))
    return da.reshape(a.shape), db.reshape(b.shape)


# ---- fused residual add + RMS norm (casting and offset as rms_norm above) -------------
FUSED_ADD_RMS_NUM_STAGES = 2  # what fused_add_rms_norm_forward uses and returns


def fused_add_rms_norm(x, residual, weight, eps):
    from liger_kernel.ops.fused_add_rms_norm import fused_add_rms_norm_forward
    _check_dtype("fused_add_rms_norm", x, residual, weight)
    y, h, rstd, *_ = fused_add_rms_norm_forward(*_contiguous(x, residual, weight), eps,
                                                RMS_OFFSET, RMS_CASTING_MODE)
    return y, h, rstd.view(x.shape[:-1])


def fused_add_rms_norm_backward(dy, dh_out, h, weight, rstd):
    from liger_kernel.ops.fused_add_rms_norm import fused_add_rms_norm_backward as backward
    from liger_kernel.ops.rms_norm import _str_to_casting_mode
    from liger_kernel.ops.utils import calculate_settings
    _check_dtype("fused_add_rms_norm_backward", dy, dh_out, h, weight)
    n = h.shape[-1]
    block_size, num_warps = calculate_settings(n)
    dy, dh_out, h, weight = _contiguous(dy, dh_out, h, weight)
    dh, _, dweight = backward(dy, dh_out, h.view(-1, n), weight, rstd.contiguous().view(-1),
                              RMS_OFFSET, _str_to_casting_mode[RMS_CASTING_MODE], block_size,
                              num_warps, FUSED_ADD_RMS_NUM_STAGES, False)
    return dh.view(h.shape), dweight


# ---- fused linear + cross-entropy: the gradients computed in the forward, chunked -----
# compute_gradients / weight_requires_grad: the inputs here do not require grad, which
# would make Liger skip the gradients. accum_dtype float32: the op sums the chunks' weight
# and bias gradients in float32 (Liger's default sums them in the weight's dtype, one
# rounding per chunk; LigerFusedLinearCrossEntropyFunction takes accum_dtype too).
# reduction "none" without token_grad_output: the gradients of the sum of the losses.
FLCE_ACCUM_DTYPE = torch.float32


def fused_linear_cross_entropy(x, weight, labels, bias=None, *, ignore_index, label_smoothing,
                               reduction):
    from liger_kernel.ops.fused_linear_cross_entropy import fused_linear_cross_entropy_forward
    _check_dtype("fused_linear_cross_entropy", x, weight, *(() if bias is None else (bias,)))
    x, weight, labels = _contiguous(x, weight, labels)
    loss, _, _, _, grad_x, grad_w, grad_b = fused_linear_cross_entropy_forward(
        x, weight, labels, bias=None if bias is None else bias.contiguous(),
        ignore_index=ignore_index, label_smoothing=label_smoothing, reduction=reduction,
        accum_dtype=FLCE_ACCUM_DTYPE, compute_gradients=True, weight_requires_grad=True)
    out = (loss.detach(), grad_x, grad_w)
    return out + (grad_b,) if bias is not None else out
