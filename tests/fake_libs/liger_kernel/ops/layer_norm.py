import torch

from _fake_lib_fault import planted


def layer_norm_forward(X, W, B, eps):
    shape = X.shape
    X = X.view(-1, shape[-1])
    xf = X.float()
    mean = xf.mean(-1)
    rstd = torch.rsqrt(xf.var(-1, unbiased=False) + eps)
    y = (xf - mean[:, None]) * rstd[:, None] * W.float() + B.float()
    return planted("layer_norm_forward", y.to(X.dtype)).view(*shape), X, mean, rstd, 1024, 4


def layer_norm_backward(dY, X, W, B, Mean, RSTD, needs_dw=None, needs_db=None):
    shape = dY.shape
    dy = dY.view(-1, shape[-1]).float()
    xhat = (X.float() - Mean[:, None]) * RSTD[:, None]
    wdy = dy * W.float()
    n = xhat.shape[-1]
    dx = (wdy - (xhat * (wdy * xhat).sum(-1, keepdim=True) + wdy.sum(-1, keepdim=True)) / n) \
        * RSTD[:, None]
    dw = (dy * xhat).sum(0).to(W.dtype)
    db = dy.sum(0).to(B.dtype)
    return planted("layer_norm_backward", dx.to(X.dtype)).view(*shape), dw, db
