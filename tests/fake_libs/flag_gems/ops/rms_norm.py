import torch

from _fake_lib_fault import planted


def _acc(x):
    return x.double()  # exact enough that only the adapter mapping is tested


def rms_norm_forward(x, normalized_shape, weight, eps=1e-5):
    xf = _acc(x).reshape(-1, x.shape[-1])
    inv_rms = torch.rsqrt(xf.pow(2).mean(-1) + eps)
    y = xf * inv_rms[:, None] * _acc(weight)
    return planted("rms_norm_forward", y.to(x.dtype)).view(x.shape), inv_rms.float()


def rms_norm_backward(dy, x, inv_rms, normalized_shape, weight, eps=1e-5):
    n = x.shape[-1]
    g = _acc(dy).reshape(-1, n)
    r = _acc(inv_rms).reshape(-1, 1)
    xhat = _acc(x).reshape(-1, n) * r
    wdy = g * _acc(weight)
    dx = (wdy - xhat * (wdy * xhat).sum(-1, keepdim=True) / n) * r
    dw = (g * xhat).sum(0).to(x.dtype)
    return planted("rms_norm_backward", dx.to(x.dtype)).view(x.shape), dw
