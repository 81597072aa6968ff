"""Faulty launchers for the grid-limit suite: each breaks one grid rule and is otherwise
correct."""
import torch
import triton
import triton.language as tl

from kernels.gelu import DTYPES as GELU_DTYPES
from kernels.softmax import DTYPES as SOFTMAX_DTYPES
from triton_cts.execution.input_checks import check_inputs
from triton_cts.profiles import next_power_of_2


@triton.jit
def _softmax_row_per_program_y_kernel(X, Y, n_cols, BLOCK_N: tl.constexpr):
    row = tl.program_id(1).to(tl.int64)  # one program per row, on axis y
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(Y + row * n_cols + cols, (e / tl.sum(e, axis=0)).to(Y.dtype.element_ty), mask=mask)


def softmax_rows_on_axis_y(x, *, profile):
    """Launches grid (1, rows): past 65535 rows (limits.grid_max[1]) a GPU refuses it,
    and it ignores launch.max_grid_num."""
    check_inputs("softmax_rows_on_axis_y", profile, SOFTMAX_DTYPES, x=x)
    x2 = x.contiguous().reshape(-1, x.shape[-1]) if x.dim() else x.reshape(1, 1)
    y = torch.empty_like(x2)
    if x2.numel():
        _softmax_row_per_program_y_kernel[(1, x2.shape[0])](
            x2, y, x2.shape[1], BLOCK_N=next_power_of_2(x2.shape[1]))
    return y.reshape(x.shape)


@triton.jit
def _gelu_skips_tail_kernel(X, Y, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    # floor instead of cdiv: the last, partial block is never visited
    for block in range(pid, n_elements // BLOCK_SIZE, tl.num_programs(0)):
        offs = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offs < n_elements
        x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
        u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        tl.store(Y + offs, (x / (1.0 + tl.exp(-2.0 * u))).to(Y.dtype.element_ty), mask=mask)


def gelu_grid_stride_skips_tail(x, *, profile):
    """A capped grid whose grid-stride loop stops before the tail block."""
    check_inputs("gelu_grid_stride_skips_tail", profile, GELU_DTYPES, x=x)
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    if n:
        block = profile.elementwise_block(x.dtype, n)
        grid = (profile.capped_grid(triton.cdiv(n, block)),)
        _gelu_skips_tail_kernel[grid](x, y, n, BLOCK_SIZE=block)
    return y


@triton.jit
def _softmax_row_kernel(X, Y, n_cols, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(Y + row * n_cols + cols, (e / tl.sum(e, axis=0)).to(Y.dtype.element_ty), mask=mask)


def softmax_launches_empty_grid(x, *, profile):
    """Correct, but launches one program per row even when there are no rows: an empty
    grid, which Triton's CUDA and HIP launchers and its interpreter skip (a quality
    warning, not a failure). Uncapped, so only for the empty-tensor check."""
    check_inputs("softmax_launches_empty_grid", profile, SOFTMAX_DTYPES, x=x)
    x2 = x.contiguous().reshape(-1, x.shape[-1]) if x.dim() else x.reshape(1, 1)
    y = torch.empty_like(x2)
    _softmax_row_kernel[(x2.shape[0],)](x2, y, x2.shape[1],
                                        BLOCK_N=next_power_of_2(max(x2.shape[1], 1)))
    return y.reshape(x.shape)


def softmax_without_profile(x):
    """Correct, one program per row, and no profile argument, like a third-party library:
    the interpreter's derived profiles with a grid limit of 1 say nothing about it."""
    if x.dim() == 0 or x.numel() == 0:
        return torch.softmax(x, -1)
    x2 = x.contiguous().reshape(-1, x.shape[-1])
    y = torch.empty_like(x2)
    _softmax_row_kernel[(x2.shape[0],)](x2, y, x2.shape[1],
                                        BLOCK_N=next_power_of_2(x2.shape[1]))
    return y.reshape(x.shape)
