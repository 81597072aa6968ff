"""A faulty copy of the example op's kernel (examples/rowwise_int8_quant): it truncates
x / scale toward zero instead of rounding it, so most elements come out one too small in
magnitude. The suites must catch it through the op the example's package adds."""
import torch
import triton
import triton.language as tl


@triton.jit
def _truncating_quant_kernel(X, Q, SCALE, n_rows, n_cols, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    step = tl.num_programs(0)
    for row in range(pid, n_rows, step):
        base = row * n_cols
        amax = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(X + base + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
            amax = tl.maximum(amax, tl.abs(x))
        scale = tl.max(amax, axis=0) / 127.0
        safe = tl.where(scale > 0, scale, 1.0)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n_cols
            x = tl.load(X + base + cols, mask=mask, other=0.0).to(tl.float32)
            v = tl.where(scale > 0, x / safe, 0.0)
            q = tl.floor(tl.abs(v))                 # the fault: truncates, never rounds up
            q = tl.where(v < 0, -q, q)
            tl.store(Q + base + cols, q.to(tl.int8), mask=mask)
        tl.store(SCALE + row, scale)


def quantize_truncates(x, *, profile):
    n_cols = x.shape[-1]
    x2 = x.contiguous().view(-1, n_cols) if x.numel() else x.reshape(-1, n_cols)
    q = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    scale = torch.zeros(x.shape[:-1], dtype=torch.float32, device=x.device)
    if x2.shape[0] and n_cols:
        _truncating_quant_kernel[(profile.capped_grid(x2.shape[0]),)](
            x2, q, scale, x2.shape[0], n_cols, BLOCK=profile.elementwise_block(torch.float32, n_cols))
    return q, scale
