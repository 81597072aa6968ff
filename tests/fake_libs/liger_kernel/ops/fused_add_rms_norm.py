import torch

from _fake_lib_fault import planted
from liger_kernel.ops.rms_norm import rms_norm_backward, rms_norm_forward


def fused_add_rms_norm_forward(X, R, W, eps, offset, casting_mode):
    S = X + R
    y, _, rstd, block, warps, mode = rms_norm_forward(S, W, eps, offset, casting_mode, None)
    return planted("fused_add_rms_norm_forward", y), S, rstd, block, warps, 2, mode


def fused_add_rms_norm_backward(dY, dS_out, S, W, RSTD, offset, casting_mode, BLOCK_SIZE,
                                num_warps, num_stages, in_place, needs_dw=None):
    dx, dw = rms_norm_backward(dY, S, W, RSTD, offset, casting_mode, BLOCK_SIZE, num_warps,
                               False, None)
    dx = planted("fused_add_rms_norm_backward", dx + dS_out.view(dx.shape))
    return dx, dx, dw
