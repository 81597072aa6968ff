"""A GELU launcher whose tile does not fit the Ascend unified buffer (192 KiB): one
program computes 65536 float32 values at once (256 KiB a tile before temporaries). The
values are right; bishengir-compile must report the UB overflow for the NPU profile."""
import torch
import triton
import triton.language as tl

from kernels.gelu import DTYPES
from triton_cts.execution.input_checks import check_inputs

UB_HOG_BLOCK = 65536


@triton.jit
def _gelu_ub_hog_kernel(X, Y, n_elements, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    y = x / (1.0 + tl.exp(-1.5957691216057308 * (x + 0.044715 * x * x * x)))
    tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=mask)


def gelu_ub_hog(x, *, profile):
    check_inputs("gelu", profile, DTYPES, x=x)
    x = x.contiguous()
    y = torch.empty_like(x)
    if x.numel():
        _gelu_ub_hog_kernel[(triton.cdiv(x.numel(), UB_HOG_BLOCK),)](
            x, y, x.numel(), BLOCK_SIZE=UB_HOG_BLOCK)
    return y
