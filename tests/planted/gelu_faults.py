"""Faulty GELU launchers. Each reuses the reference launcher's checks but breaks one thing
the suites must catch."""
import torch
import triton
import triton.language as tl

from kernels.gelu import DTYPES, _gelu_tanh_fwd_kernel
from triton_cts.execution.input_checks import check_inputs


@triton.jit
def _gelu_wrong_coefficient_kernel(X, Y, n_elements, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    u = 0.7978845608028654 * (x + 0.04 * x * x * x)  # 0.04 instead of 0.044715
    tl.store(Y + offs, (x / (1.0 + tl.exp(-2.0 * u))).to(Y.dtype.element_ty), mask=mask)


def gelu_wrong_coefficient(x, *, profile):
    check_inputs("gelu", profile, DTYPES, x=x)
    x = x.contiguous()
    y = torch.empty_like(x)
    if x.numel():
        block = profile.elementwise_block(x.dtype, x.numel())
        _gelu_wrong_coefficient_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK_SIZE=block)
    return y


def gelu_too_many_warps(x, *, profile):
    """Asks for 32 warps whatever the profile says: 2048 threads on a wave64 target."""
    check_inputs("gelu", profile, DTYPES, x=x)
    x = x.contiguous()
    y = torch.empty_like(x)
    if x.numel():
        block = profile.elementwise_block(x.dtype, x.numel())
        _gelu_tanh_fwd_kernel[(triton.cdiv(x.numel(), block),)](
            x, y, x.numel(), BLOCK_SIZE=block, COMPUTE_FP64=x.dtype == torch.float64,
            GRID_STRIDE=False, VECTOR=1, TAIL=False, num_warps=32)
    return y


@triton.jit
def _gelu_unmasked_store_kernel(X, Y, n_elements, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(X + offs, mask=offs < n_elements, other=0.0).to(tl.float32)
    u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    tl.store(Y + offs, (x / (1.0 + tl.exp(-2.0 * u))).to(Y.dtype.element_ty))  # no mask


def gelu_unmasked_tail_store(x, *, profile):
    check_inputs("gelu", profile, DTYPES, x=x)
    x = x.contiguous()
    y = torch.empty_like(x)
    if x.numel():
        block = profile.elementwise_block(x.dtype)
        _gelu_unmasked_store_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK_SIZE=block)
    return y


def gelu_ignores_strides(x, *, profile):
    """Reads the input's storage as if it were contiguous."""
    check_inputs("gelu", profile, DTYPES, x=x)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel():
        block = profile.elementwise_block(x.dtype, x.numel())
        _gelu_tanh_fwd_kernel[(triton.cdiv(x.numel(), block),)](
            x, y, x.numel(), BLOCK_SIZE=block, COMPUTE_FP64=x.dtype == torch.float64,
            GRID_STRIDE=False, VECTOR=1, TAIL=False)
    return y
