"""Faulty layer-norm and softmax launchers, one classic bug each: the suites must catch
every one. Each is a plain one-row-per-program kernel (rows fit one block at the sizes the
suites draw in interpreter mode) so that the bug is the only thing wrong."""
import torch
import triton
import triton.language as tl

from triton_cts.execution.input_checks import check_inputs

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


@triton.jit
def _layer_norm_row_kernel(X, Y, W, B, MEAN, RSTD, N, eps, BLOCK_N: tl.constexpr,
                           FAULT: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    if FAULT == "mean_over_block":
        # the divisor ignores the mask: the mean over the padded length
        mean = tl.sum(x, axis=0) / BLOCK_N
        var = tl.sum(tl.where(mask, x - mean, 0.0) * tl.where(mask, x - mean, 0.0), axis=0) / N
    else:  # "naive_variance": E[x^2] - E[x]^2 cancels when |mean| >> std
        mean = tl.sum(x, axis=0) / N
        var = tl.maximum(tl.sum(x * x, axis=0) / N - mean * mean, 0.0)
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
    y = (x - mean) * rstd * w + b
    tl.store(Y + row * N + cols, y.to(Y.dtype.element_ty), mask=mask)
    tl.store(MEAN + row, mean)
    tl.store(RSTD + row, rstd)


def _layer_norm(x, weight, bias, eps, profile, fault):
    check_inputs("layer_norm", profile, FLOATS, x=x, weight=weight, bias=bias)
    n = x.shape[-1]
    rows = x.reshape(-1, n).contiguous()
    y = torch.empty_like(rows)
    mean = torch.empty(rows.shape[0], dtype=torch.float32, device=x.device)
    rstd = torch.empty_like(mean)
    if rows.numel():
        _layer_norm_row_kernel[(rows.shape[0],)](rows, y, weight, bias, mean, rstd, n, eps,
                                                 BLOCK_N=triton.next_power_of_2(n),
                                                 FAULT=fault)
    stat = torch.float64 if x.dtype == torch.float64 else torch.float32
    return y.reshape(x.shape), mean.reshape(x.shape[:-1]).to(stat), rstd.reshape(x.shape[:-1]).to(stat)


def layer_norm_mean_over_block(x, weight, bias, eps=1e-5, *, profile):
    return _layer_norm(x, weight, bias, eps, profile, "mean_over_block")


def layer_norm_naive_variance(x, weight, bias, eps=1e-5, *, profile):
    return _layer_norm(x, weight, bias, eps, profile, "naive_variance")


@triton.jit
def _softmax_row_kernel(X, Y, N, BLOCK_N: tl.constexpr, FAULT: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    if FAULT == "missing_other":
        # masked-off lanes read as 0 instead of -inf: they join the max and the sum
        x = tl.load(X + row * N + cols, mask=mask).to(tl.float32)
        x = tl.where(mask, x, 0.0)
    else:  # "block_without_loop": only the first BLOCK_N columns are ever read
        x = tl.load(X + row * N + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(Y + row * N + cols, (e / tl.sum(e, axis=0)).to(Y.dtype.element_ty), mask=mask)


def _softmax(x, profile, fault):
    check_inputs("softmax", profile, FLOATS, x=x)
    if x.dim() == 0:
        return torch.ones_like(x)
    n = x.shape[-1]
    rows = x.reshape(-1, n).contiguous()
    y = torch.empty_like(rows)
    block = triton.next_power_of_2(n)
    if fault == "block_without_loop":
        # a block of the elementwise size, without the loop a longer row needs
        block = min(block, max(1, profile.elementwise_block(x.dtype, n) // 64))
        y.fill_(0.0)  # keep the columns it never touches finite: the values must convict it
    if rows.numel():
        _softmax_row_kernel[(rows.shape[0],)](rows, y, n, BLOCK_N=block, FAULT=fault)
    return y.reshape(x.shape)


def softmax_missing_other(x, *, profile):
    return _softmax(x, profile, "missing_other")


def softmax_block_without_loop(x, *, profile):
    return _softmax(x, profile, "block_without_loop")
