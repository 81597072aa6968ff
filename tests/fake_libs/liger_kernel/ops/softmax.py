import torch

from _fake_lib_fault import planted


class LigerSoftmaxFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_):
        return planted("softmax", torch.softmax(input_.double(), -1).to(input_.dtype))

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError


def _softmax_backward(dy, y, BLOCK_SIZE, num_warps, multi_block_launch):
    dyf, yf = dy.double(), y.double()
    dx = yf * (dyf - (dyf * yf).sum(-1, keepdim=True))
    return planted("_softmax_backward", dx.to(dy.dtype))
