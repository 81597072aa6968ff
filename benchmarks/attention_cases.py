"""Benchmarks of attention at a training shape: batch 4, 32 heads, 4096 tokens, head dim
128, causal and not, against torch's scaled_dot_product_attention on its flash backend.

- ``attention``: the forward (ours: the FlashAttention-2 style kernel; a library's
  through its adapter).
- ``attention_backward``: the backward alone, from saved o and log-sum-exp (ours: the
  delta, dk/dv and dq kernels; torch: autograd through the flash backward, the graph
  kept).

FLOPs as FlashAttention counts them: 4 * B * H * Sq * Sk * D for the forward (two
products), 2.5 times that for the backward (five), half of each for causal.
"""
from __future__ import annotations

from functools import partial

import torch

from benchmarks.bench import Bench, BenchSpec

#: (batch, heads, sequence, head dim)
SHAPE = (4, 32, 4096, 128)
#: small enough that the GPU is never the limit (``benchmarks.launch_overhead``)
SMALL_SHAPE = (1, 2, 128, 64)


def _sdpa(q, k, v, causal):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


def attention_benches(op: str, shape, dtype, profile) -> list[Bench]:
    """One bench per masking (full, causal) at ``shape`` (batch, heads, sequence, head
    dim)."""
    from kernels.attention import attention, attention_backward_from_saved, attention_forward
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, do = (torch.randn(shape, device="cuda", dtype=dtype, generator=gen)
                   for _ in range(4))
    out = []
    for causal in (False, True):
        label = (*shape, "causal" if causal else "full")
        kwargs = {"causal": causal}
        if op == "attention":
            out.append(Bench(op, label, dtype,
                             lambda c=causal: attention(q, k, v, causal=c, profile=profile),
                             lambda c=causal: _sdpa(q, k, v, c), args=(q, k, v),
                             kwargs=kwargs))
            continue
        o, lse = attention_forward(q, k, v, causal=causal, profile=profile)
        leaves = tuple(t.detach().clone().requires_grad_() for t in (q, k, v))
        o_torch = _sdpa(*leaves, causal)

        def ours(o=o, lse=lse, c=causal):
            return attention_backward_from_saved(q, k, v, o, lse, do, c, None, 0, profile)

        def eager(o_torch=o_torch, leaves=leaves):
            return torch.autograd.grad(o_torch, leaves, do, retain_graph=True)
        out.append(Bench(op, label, dtype, ours, eager, args=(q, k, v, do), kwargs=kwargs))
    return out


def forward_flops(label) -> int:
    """FlashAttention's count of the forward at ``(batch, heads, sequence, head dim,
    masking)``: two products, half of each where causal."""
    b, h, s, d, masking = label
    return 4 * b * h * s * s * d // (2 if masking == "causal" else 1)


#: Attention's benches (``benchmarks.cases.BENCHES`` runs them in this order).
BENCHES = {
    "attention": BenchSpec("attention", partial(attention_benches, "attention"), shapes=(SHAPE,),
                           small_shape=SMALL_SHAPE, flops=forward_flops),
    # the backward: five products where the forward has two
    "attention_backward": BenchSpec("attention_backward",
                                    partial(attention_benches, "attention_backward"),
                                    shapes=(SHAPE,), small_shape=SMALL_SHAPE,
                                    flops=lambda label: forward_flops(label) * 5 // 2),
}
