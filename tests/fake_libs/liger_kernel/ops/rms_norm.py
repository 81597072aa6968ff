import torch

from _fake_lib_fault import planted

_str_to_casting_mode = {"llama": 0, "gemma": 1, "none": -1}


def _normalised(X, rstd, casting_mode):
    """x * rstd; Llama casting rounds it to the input dtype before the weight, as the real
    one does (Gemma keeps it in float32)."""
    xhat = X.double() * rstd[:, None]
    mode = casting_mode if isinstance(casting_mode, int) else _str_to_casting_mode[casting_mode]
    return xhat.to(X.dtype).double() if mode == _str_to_casting_mode["llama"] else xhat


def rms_norm_forward(X, W, eps, offset, casting_mode, row_mode):
    shape = X.shape
    X = X.view(-1, shape[-1])
    rstd = torch.rsqrt(X.double().pow(2).mean(-1) + eps)
    y = (_normalised(X, rstd, casting_mode) * (W.double() + offset)).to(X.dtype)
    return (planted("rms_norm_forward", y).view(*shape), X, rstd.float(), 1024, 4,
            casting_mode)


def rms_norm_backward(dY, X, W, RSTD, offset, casting_mode, BLOCK_SIZE, num_warps, in_place,
                      row_mode, needs_dw=None):
    shape = dY.shape
    dy = dY.view(-1, shape[-1]).double()
    xhat = X.double() * RSTD[:, None]
    wdy = dy * (W.double() + offset)
    n = xhat.shape[-1]
    dx = (wdy - xhat * (wdy * xhat).sum(-1, keepdim=True) / n) * RSTD[:, None]
    dw = (dy * _normalised(X, RSTD.double(), casting_mode)).sum(0).to(W.dtype)
    return planted("rms_norm_backward", dx.to(X.dtype)).view(*shape), dw
