import torch

from _fake_lib_fault import planted
from flag_gems.ops.rms_norm import rms_norm_backward, rms_norm_forward  # noqa: F401

F = torch.nn.functional


def _acc(x):
    return x.double()  # exact enough that only the adapter mapping is tested


def gelu(self, *, approximate="none"):
    return planted("gelu", F.gelu(_acc(self), approximate=approximate).to(self.dtype))


def gelu_backward(grad_output, self, *, approximate="none"):
    x = _acc(self).detach().requires_grad_()
    with torch.enable_grad():
        (dx,) = torch.autograd.grad(F.gelu(x, approximate=approximate), x, _acc(grad_output))
    return planted("gelu_backward", dx.to(self.dtype))


def softmax(self, dim, half_to_float=False):
    return planted("softmax", torch.softmax(_acc(self), dim).to(self.dtype))


def log_softmax(self, dim, half_to_float=False):
    return planted("log_softmax", torch.log_softmax(_acc(self), dim).to(self.dtype))


def softmax_backward(grad_output, output, dim, input_dtype):
    dy, y = _acc(grad_output), _acc(output)
    dx = y * (dy - (dy * y).sum(dim, keepdim=True))
    return planted("softmax_backward", dx.to(input_dtype))


def batch_norm(input, weight=None, bias=None, running_mean=None, running_var=None,
               training=False, momentum=0.1, eps=1e-05):
    x = _acc(input)
    dims = [d for d in range(x.dim()) if d != 1]
    shape = [1, -1] + [1] * (x.dim() - 2)
    mean = x.mean(dims)
    var = x.var(dims, unbiased=False)
    invstd = torch.rsqrt(var + eps)
    y = (x - mean.view(shape)) * invstd.view(shape) * weight.view(shape) + bias.view(shape)
    n = x.numel() // x.shape[1]
    running_mean.mul_(1 - momentum).add_(momentum * mean.to(running_mean.dtype))
    running_var.mul_(1 - momentum).add_(momentum * (var * n / (n - 1)).to(running_var.dtype))
    return planted("batch_norm", y.to(input.dtype)), mean.to(input.dtype), invstd.to(input.dtype)


def max(inp):
    return planted("max", torch.max(inp))


def max_dim(inp, dim=None, keepdim=False):
    return torch.max(inp, dim=dim, keepdim=keepdim)


def prod(inp, *, dtype=None):
    return planted("prod", torch.prod(_acc(inp)).to(inp.dtype))


def prod_dim(inp, dim=None, keepdim=False, *, dtype=None):
    return planted("prod_dim", torch.prod(_acc(inp), dim, keepdim=keepdim).to(inp.dtype))


def mm(a, b):
    return planted("mm", (_acc(a) @ _acc(b)).to(a.dtype))


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    x = _acc(input).reshape(-1, input.shape[-1])
    mean = x.mean(-1)
    rstd = torch.rsqrt(x.var(-1, unbiased=False) + eps)
    y = (x - mean[:, None]) * rstd[:, None] * weight + bias
    return (planted("layer_norm", y.to(input.dtype)).view(input.shape), mean.to(input.dtype),
            rstd.to(input.dtype))


def layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight=None, bias=None,
                        output_mask=None):
    n = input.shape[-1]
    dy = _acc(grad_out).reshape(-1, n)
    # statistics recomputed in float64: the stand-in tests the mapping, not the precision
    # of a saved float32 mean
    x = _acc(input).reshape(-1, n)
    r = torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5)
    xhat = (x - x.mean(-1, keepdim=True)) * r
    wdy = dy * _acc(weight)
    dx = (wdy - (xhat * (wdy * xhat).sum(-1, keepdim=True) + wdy.sum(-1, keepdim=True)) / n) * r
    dw = (dy * xhat).sum(0).to(weight.dtype)
    db = dy.sum(0).to(bias.dtype)
    return planted("layer_norm_backward", dx.to(input.dtype)).view(input.shape), dw, db


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    q, k, v = _acc(query), _acc(key), _acc(value)
    mask = None if attn_mask is None else _acc(attn_mask)
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal,
                                       scale=scale, enable_gqa=enable_gqa)
    return planted("scaled_dot_product_attention", o.to(query.dtype))
