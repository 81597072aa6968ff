"""GELU launchers whose kernels compute the right values with IO patterns a SIMD-style NPU
lowers badly; the IO lint must flag each on the NPU profile (and not on GPU profiles)."""
import torch
import triton
import triton.language as tl

from kernels.gelu import DTYPES
from triton_cts.execution.input_checks import check_inputs


@triton.jit
def _gelu(x):
    return x / (1.0 + tl.exp(-1.5957691216057308 * (x + 0.044715 * x * x * x)))


@triton.jit
def _gelu_discrete_mask_kernel(X, Y, n_elements, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    inside = offs < n_elements
    # even and odd lanes in two passes: each mask picks every other lane (discrete)
    for parity in range(2):
        mask = inside & (offs % 2 == parity)
        x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(Y + offs, _gelu(x).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _gelu_broadcast_pointer_kernel(X, Y, n_rows, n_cols, BLOCK_M: tl.constexpr,
                                   BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    offs = rows[:, None] * n_cols + cols[None, :]
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    # the first column, loaded through a [BLOCK_M, BLOCK_N] pointer that only varies by row
    first = tl.load(X + rows[:, None] * n_cols + 0 * cols[None, :], mask=mask, other=0.0)
    x = tl.where(cols[None, :] == 0, first.to(tl.float32), x)
    tl.store(Y + offs, _gelu(x).to(Y.dtype.element_ty), mask=mask)


def _launch_prologue(x, profile):
    check_inputs("gelu", profile, DTYPES, x=x)
    x = x.contiguous()
    return x, torch.empty_like(x)


def gelu_discrete_mask(x, *, profile):
    x, y = _launch_prologue(x, profile)
    if x.numel():
        block = profile.elementwise_block(x.dtype, x.numel())
        _gelu_discrete_mask_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(),
                                                                     BLOCK_SIZE=block)
    return y


def gelu_broadcast_pointer(x, *, profile):
    x, y = _launch_prologue(x, profile)
    if x.numel():
        flat = x.reshape(-1, x.shape[-1]) if x.dim() > 1 else x.reshape(1, -1)
        n_rows, n_cols = flat.shape
        block_n = triton.next_power_of_2(n_cols)
        block_m = max(1, min(16, profile.max_fused_elements(x.dtype) // block_n))
        _gelu_broadcast_pointer_kernel[(triton.cdiv(n_rows, block_m),)](
            flat, y, n_rows, n_cols, BLOCK_M=block_m, BLOCK_N=block_n)
    return y


# Bare kernels for the lint's other rules (launched only as captured launches in tests).
@triton.jit
def _division_offsets_kernel(X, Y, BLOCK_SIZE: tl.constexpr):
    offs = tl.arange(0, BLOCK_SIZE)
    tl.store(Y + offs, tl.load(X + offs // 4))        # each value repeated 4 times


@triton.jit
def _gather_kernel(X, IDX, Y, BLOCK_SIZE: tl.constexpr):
    offs = tl.arange(0, BLOCK_SIZE)
    tl.store(Y + offs, tl.load(X + tl.load(IDX + offs)))


@triton.jit
def _program_id_y_kernel(X, Y, BLOCK_SIZE: tl.constexpr):
    offs = (tl.program_id(0) + tl.program_id(1)) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(Y + offs, tl.load(X + offs))


@triton.jit
def _float64_kernel(X, Y, BLOCK_SIZE: tl.constexpr):
    offs = tl.arange(0, BLOCK_SIZE)
    tl.store(Y + offs, tl.load(X + offs).to(Y.dtype.element_ty))   # Y is float64
