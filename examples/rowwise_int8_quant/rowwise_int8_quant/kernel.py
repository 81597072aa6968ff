"""The Triton kernel and its launcher.

One program per row, each looping over its row in blocks twice: the largest magnitude,
then the quantized values. The launcher takes the triton-cts profile when it is given one
(``profile=``): the block size and the grid cap then come from the vendor's constants,
and more rows than programs are walked by a grid-stride loop; without one it uses
defaults, so the same launcher serves a user's own code.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
#: Without a profile: elements per loop step and the most programs launched.
DEFAULT_BLOCK, DEFAULT_MAX_PROGRAMS = 1024, 65535


@triton.jit
def _rowwise_int8_quant_kernel(X, Q, SCALE, n_rows, n_cols, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)  # int64 rows: rows * n_cols may pass 2^31
    step = tl.num_programs(0)
    for row in range(pid, n_rows, step):
        base = row * n_cols
        amax = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(X + base + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
            amax = tl.maximum(amax, tl.abs(x))
        scale = tl.max(amax, axis=0) / 127.0
        inv = tl.where(scale > 0, 1.0, 0.0)
        safe = tl.where(scale > 0, scale, 1.0)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n_cols
            x = tl.load(X + base + cols, mask=mask, other=0.0).to(tl.float32)
            v = x / safe * inv
            q = tl.floor(tl.abs(v) + 0.5)           # round half away from zero
            q = tl.where(v < 0, -q, q)
            tl.store(Q + base + cols, q.to(tl.int8), mask=mask)
        tl.store(SCALE + row, scale)


def quantize(x: torch.Tensor, *, profile=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q, scale)`` of ``x`` (any shape, rows along the last dim): q int8 of x's shape,
    scale float32 of shape ``x.shape[:-1]``."""
    if x.dtype not in DTYPES:
        raise TypeError(f"rowwise_int8_quant: dtype {x.dtype} not supported; "
                        f"supported: {', '.join(str(d) for d in DTYPES)}")
    if x.dim() == 0:
        raise ValueError("rowwise_int8_quant: x needs at least one dim (its rows)")
    n_cols = x.shape[-1]
    x2 = x.contiguous().view(-1, n_cols) if x.numel() else x.reshape(-1, n_cols)
    n_rows = x2.shape[0]
    q = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    scale = torch.empty(x.shape[:-1], dtype=torch.float32, device=x.device)
    if n_rows == 0:
        return q, scale
    if n_cols == 0:
        return q, scale.zero_()  # no launch: an empty row's largest magnitude is 0
    if profile is not None:
        block = profile.elementwise_block(torch.float32, n_cols)
        programs = profile.capped_grid(n_rows)
    else:
        block = min(DEFAULT_BLOCK, triton.next_power_of_2(n_cols))
        programs = min(n_rows, DEFAULT_MAX_PROGRAMS)
    _rowwise_int8_quant_kernel[(programs,)](x2, q, scale, n_rows, n_cols, BLOCK=block)
    return q, scale
