"""A differentiable GELU whose backward kernel result is 1% off, planted as the op's
autograd launcher (load with ``-p tests.planted.gradcheck_faults``): gradcheck must fail it.
The forward is the reference kernel, so only the gradient check can see the fault."""
import dataclasses

import torch

import triton_cts.ops.catalog
from kernels.gelu import gelu, gelu_backward


class _GeluWrongBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, profile):
        ctx.save_for_backward(x)
        ctx.profile = profile
        return gelu(x, profile=profile)

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        return gelu_backward(dy, x, profile=ctx.profile) * 1.01, None


def gelu_autograd_wrong_backward(x, *, profile):
    return _GeluWrongBackward.apply(x, profile)


triton_cts.ops.catalog.ALL_OPS = type(triton_cts.ops.catalog.ALL_OPS)(
    dataclasses.replace(op, autograd=f"{__name__}:gelu_autograd_wrong_backward")
    if op.name == "gelu" else op for op in triton_cts.ops.catalog.ALL_OPS)
