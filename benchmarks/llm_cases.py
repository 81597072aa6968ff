"""Benchmarks of the LLM training ops at the shapes models use: cross-entropy forward and
backward over a Llama-3 vocabulary (8192 tokens x 128256), and RoPE, SwiGLU, GEGLU and the
fused residual add + RMS norm at 16384 x 4096 (RoPE: 16384 tokens x 32 heads x 128), and
the fused linear + cross-entropy of a Llama-3 head (8192 tokens, hidden 4096, 128256
classes: three matmuls of 2 x T x H x V flops each, compute bound, timed in TFLOP/s).

Bytes count one read of every input and one write of every output (cross-entropy: the
logits read once, the gradient written once; the labels and the loss are negligible).
Libraries are called directly where their API works in place (Liger's cross-entropy
writes the gradient over the logits, its RoPE rotates q and k in place): through the
adapters, the copies those make so that checks see unchanged inputs would be timed too.
"""
from __future__ import annotations

import math
from functools import partial

import torch

from benchmarks.bench import Bench, BenchSpec, moved, randn as _randn

CE_SHAPE = (8192, 128256)
FLCE_SHAPE = (8192, 4096, 128256)   # tokens, hidden, classes
ROW_SHAPE = (16384, 4096)
ROPE_HEAD_DIM = 128
#: Shapes small enough that the GPU is never the limit, for launch-overhead timing
#: (``benchmarks.launch_overhead``): 8 tokens, a 1024-class vocabulary, 1024 wide rows.
SMALL_CE_SHAPE = (8, 1024)
SMALL_FLCE_SHAPE = (8, 256, 1024)
SMALL_ROW_SHAPE = (8, 1024)
EPS = 1e-6


def _cross_entropy(shape, dtype, profile) -> list[Bench]:
    from kernels.cross_entropy import cross_entropy
    F = torch.nn.functional
    x = _randn(shape, dtype)
    y = torch.randint(0, shape[1], shape[:1], device="cuda",
                      generator=torch.Generator(device="cuda").manual_seed(1))
    xt = x.detach().clone().requires_grad_()

    def eager():
        return torch.autograd.grad(F.cross_entropy(xt, y), xt)
    kwargs = {"ignore_index": -100, "label_smoothing": 0.0, "reduction": "mean"}
    return [Bench("cross_entropy", shape, dtype,
                  lambda: cross_entropy(x, y, **kwargs, profile=profile), eager,
                  args=(x, y), kwargs=kwargs)]


def _fused_linear_cross_entropy(shape, dtype, profile) -> list[Bench]:
    """Loss and gradients of x and the weight, against torch's unfused linear +
    cross-entropy with autograd (which holds the whole logits)."""
    from kernels.fused_linear_cross_entropy import fused_linear_cross_entropy
    F = torch.nn.functional
    t, h, v = shape
    x, w = _randn((t, h), dtype), _randn((v, h), dtype, 1) / h ** 0.5
    y = torch.randint(0, v, (t,), device="cuda",
                      generator=torch.Generator(device="cuda").manual_seed(2))
    xt, wt = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()

    def eager():
        return torch.autograd.grad(F.cross_entropy(xt @ wt.t(), y), (xt, wt))
    kwargs = {"ignore_index": -100, "label_smoothing": 0.0, "reduction": "mean"}
    return [Bench("fused_linear_cross_entropy", (t, h, v), dtype,
                  lambda: fused_linear_cross_entropy(x, w, y, **kwargs, profile=profile),
                  eager, args=(x, w, y, None), kwargs=kwargs)]


def _rope(op, shape, dtype, profile) -> list[Bench]:
    from kernels.rope import rope, rope_backward
    from triton_cts.ops.rope import make_tables
    tokens, width = shape
    heads = width // ROPE_HEAD_DIM
    x = _randn((1, tokens, heads, ROPE_HEAD_DIM), dtype)
    cos, sin = make_tables(tokens, ROPE_HEAD_DIM, torch.float32, "cuda")
    c, s = cos.to(dtype)[:, None, :], sin.to(dtype)[:, None, :]
    half = ROPE_HEAD_DIM // 2
    sign = -1.0 if op == "rope_backward" else 1.0

    def eager():
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat((x1 * c - x2 * (sign * s), x2 * c + x1 * (sign * s)), -1)
    launcher = rope_backward if op == "rope_backward" else rope
    return [Bench(op, tuple(x.shape), dtype, lambda: launcher(x, cos, sin, profile=profile),
                  eager, args=(x, cos, sin), kwargs={"offset": 0, "rotary_dim": ROPE_HEAD_DIM})]


def _rope_bytes(shape, dtype) -> int:
    """Read x, write the result; read the float32 cos and sin tables [tokens, head dim / 2]."""
    _, tokens, _, head_dim = shape
    return 2 * math.prod(shape) * dtype.itemsize + 2 * tokens * (head_dim // 2) * 4


def _glu(op, shape, dtype, profile) -> list[Bench]:
    import kernels.glu as glu
    F = torch.nn.functional
    a, b = _randn(shape, dtype), _randn(shape, dtype, 1)
    act = (lambda t: F.silu(t)) if op.startswith("swiglu") else \
        (lambda t: F.gelu(t, approximate="tanh"))
    launcher = getattr(glu, op)
    if not op.endswith("_backward"):
        return [Bench(op, shape, dtype, lambda: launcher(a, b, profile=profile),
                      lambda: act(a) * b, args=(a, b))]
    dy = _randn(shape, dtype, 2)
    at, bt = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()

    def eager():
        return torch.autograd.grad(act(at) * bt, (at, bt), dy)
    return [Bench(op, shape, dtype, lambda: launcher(dy, a, b, profile=profile), eager,
                  args=(dy, a, b))]


def _fused_add_rms_norm(op, shape, dtype, profile) -> list[Bench]:
    from kernels.fused_add_rms_norm import fused_add_rms_norm, fused_add_rms_norm_backward
    F = torch.nn.functional
    n = shape[1]
    x = _randn(shape, dtype)
    r, w = _randn(shape, dtype, 1), _randn((n,), dtype, 3)
    if op == "fused_add_rms_norm":
        def eager():
            h = x + r
            return F.rms_norm(h, (n,), w, EPS), h
        return [Bench(op, shape, dtype,
                      lambda: fused_add_rms_norm(x, r, w, EPS, profile=profile), eager,
                      args=(x, r, w, EPS))]
    _, h, rstd = fused_add_rms_norm(x, r, w, EPS, profile=profile)
    dy, dh_out = _randn(shape, dtype, 1), _randn(shape, dtype, 2)
    ht, wt = h.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()

    def eager():
        dh, dw = torch.autograd.grad(F.rms_norm(ht, (n,), wt, EPS), (ht, wt), dy)
        return dh + dh_out, dw
    return [Bench(op, shape, dtype,
                  lambda: fused_add_rms_norm_backward(dy, dh_out, h, w, rstd, profile=profile),
                  eager, args=(dy, dh_out, h, w, rstd))]


def _linear_cross_entropy_flops(shape) -> int:
    """Three matmuls of 2 x T x H x V flops each: the logits, dx and dweight."""
    t, h, v = shape
    return 3 * 2 * t * h * v


_ROWS = {"shapes": (ROW_SHAPE,), "small_shape": SMALL_ROW_SHAPE}
_SWEPT_ROWS = {**_ROWS, "sweep": "rows"}  # the sweep may time them at any MxN

#: The LLM ops' benches (``benchmarks.cases.BENCHES`` runs them in this order).
BENCHES = {
    # the logits read once, the gradient written once (labels and loss negligible)
    "cross_entropy": BenchSpec("cross_entropy", _cross_entropy, shapes=(CE_SHAPE,),
                               small_shape=SMALL_CE_SHAPE, bytes=moved(1, 1)),
    "rope": BenchSpec("rope", partial(_rope, "rope"), bytes=_rope_bytes, **_ROWS),
    "rope_backward": BenchSpec("rope_backward", partial(_rope, "rope_backward"),
                               bytes=_rope_bytes, **_ROWS),
    "swiglu": BenchSpec("swiglu", partial(_glu, "swiglu"), bytes=moved(1, 1, 1),
                        **_SWEPT_ROWS),
    "swiglu_backward": BenchSpec("swiglu_backward", partial(_glu, "swiglu_backward"),
                                 bytes=moved(1, 1, 1, 1, 1), **_SWEPT_ROWS),
    "geglu": BenchSpec("geglu", partial(_glu, "geglu"), bytes=moved(1, 1, 1),
                       **_SWEPT_ROWS),
    "geglu_backward": BenchSpec("geglu_backward", partial(_glu, "geglu_backward"),
                                bytes=moved(1, 1, 1, 1, 1), **_SWEPT_ROWS),
    "fused_add_rms_norm": BenchSpec("fused_add_rms_norm",
                                    partial(_fused_add_rms_norm, "fused_add_rms_norm"),
                                    bytes=moved(1, 1, 1, 1), **_SWEPT_ROWS),
    # read dy, dh_out and h, write dh (dx and dresidual are one tensor)
    "fused_add_rms_norm_backward": BenchSpec(
        "fused_add_rms_norm_backward", partial(_fused_add_rms_norm, "fused_add_rms_norm_backward"),
        bytes=moved(1, 1, 1, 1), **_SWEPT_ROWS),
    "fused_linear_cross_entropy": BenchSpec(
        "fused_linear_cross_entropy", _fused_linear_cross_entropy, shapes=(FLCE_SHAPE,),
        small_shape=SMALL_FLCE_SHAPE, flops=_linear_cross_entropy_flops),
}


def direct_library_call(lib_name: str, bench: Bench):
    """The library's own in-place call where its adapter would copy (see the module
    docstring), else None (the adapter is used)."""
    if lib_name == "liger" and bench.op == "cross_entropy":
        from liger_kernel.ops.cross_entropy import cross_entropy_forward
        x, y = bench.args
        logits = x.detach().clone().requires_grad_()  # overwritten by the gradient
        return lambda: cross_entropy_forward(logits, y, None, -100, 0.0, 0.0, "mean", None,
                                             False)
    if lib_name == "liger" and bench.op == "rope":
        from liger_kernel.ops.rope import rope_forward
        x, cos, sin = bench.args
        q = x.detach().clone()           # rotated in place on every call
        k = q[:, :, :1].clone()          # Liger rotates q and k together: one head of k
        c, s = torch.cat((cos, cos), -1)[None], torch.cat((sin, sin), -1)[None]
        return lambda: rope_forward(q.transpose(1, 2), k.transpose(1, 2), c, s)
    if lib_name == "flag_gems" and bench.op == "rope":
        from flag_gems import fused
        x, cos, sin = bench.args
        k = x[:, :, :1].contiguous()
        positions = torch.arange(x.shape[1], device=x.device)[None]
        return lambda: fused.apply_rotary_pos_emb(x, k, cos, sin, positions)
    return None
