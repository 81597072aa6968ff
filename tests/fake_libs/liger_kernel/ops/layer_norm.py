import torch

from _fake_lib_fault import planted


def layer_norm_forward(X, W, B, eps):
    shape = X.shape
    X = X.view(-1, shape[-1])
    xf = X.double()
    mean = xf.mean(-1)
    rstd = torch.rsqrt(xf.var(-1, unbiased=False) + eps)
    y = (xf - mean[:, None]) * rstd[:, None] * W.double() + B.double()
    return (planted("layer_norm_forward", y.to(X.dtype)).view(*shape), X, mean.float(),
            rstd.float(), 1024, 4)


def layer_norm_backward(dY, X, W, B, Mean, RSTD, needs_dw=None, needs_db=None):
    shape = dY.shape
    dy = dY.view(-1, shape[-1]).double()
    # statistics recomputed in float64: the stand-in tests the mapping, not the precision
    # of a saved float32 mean
    xd = X.double()
    RSTD = torch.rsqrt(xd.var(-1, unbiased=False) + 1e-5)
    xhat = (xd - xd.mean(-1, keepdim=True)) * RSTD[:, None]
    wdy = dy * W.double()
    n = xhat.shape[-1]
    dx = (wdy - (xhat * (wdy * xhat).sum(-1, keepdim=True) + wdy.sum(-1, keepdim=True)) / n) \
        * RSTD[:, None]
    dw = (dy * xhat).sum(0).to(W.dtype)
    db = dy.sum(0).to(B.dtype)
    return planted("layer_norm_backward", dx.to(X.dtype)).view(*shape), dw, db
