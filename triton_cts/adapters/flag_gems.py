"""FlagGems 5.x (``pip install flag-gems``) on the ops' interfaces.

FlagGems implements ATen ops (``flag_gems.enable()`` registers them for torch's
dispatcher); this adapter calls the same functions from ``flag_gems.ops`` with the
arguments the dispatcher would pass, and reshapes nothing but the statistics it returns
flat (mean, rstd: one value per row) to the ops' row shape.

FlagGems detects the accelerator when it is imported and raises without one, so on a
CPU-only machine every check of it is reported as not supported with that error.
FlagGems has no kernel for the prenorm residual-dropout layer norm: that op is not
registered for it.
"""
from __future__ import annotations

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
}


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
