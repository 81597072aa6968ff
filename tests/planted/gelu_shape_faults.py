"""A GELU that is wrong only at some shapes: the reference launcher, except that the
second and later blocks use a wrong tanh coefficient (a fault seen only where the input
spans more than one block). Found by some examples and missed by others, so a failure
reproduces only when its exact example is replayed."""
import torch
import triton
import triton.language as tl

from kernels.gelu import DTYPES
from triton_cts.execution.input_checks import check_inputs


@triton.jit
def _gelu_later_blocks_wrong_kernel(X, Y, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    c = tl.where(pid > 0, 0.04, 0.044715)  # 0.04 instead of 0.044715 past the first block
    u = 0.7978845608028654 * (x + c * x * x * x)
    tl.store(Y + offs, (x / (1.0 + tl.exp(-2.0 * u))).to(Y.dtype.element_ty), mask=mask)


def gelu_wrong_past_first_block(x, *, profile):
    check_inputs("gelu", profile, DTYPES, x=x)
    x = x.contiguous()
    y = torch.empty_like(x)
    if x.numel():
        block = min(profile.elementwise_block(x.dtype, x.numel()), 64)
        _gelu_later_blocks_wrong_kernel[(triton.cdiv(x.numel(), block),)](
            x, y, x.numel(), BLOCK_SIZE=block)
    return y
