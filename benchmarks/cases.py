"""What each benchmark runs: our launcher, the torch eager equivalent, and the bytes or
flops that define its floor. Memory-bound ops count one read of every input and one write
of every output; anything else a kernel moves is overhead it should not have."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

MEMORY_SHAPES = ((32768, 1024), (16384, 4096), (4096, 16384), (1024, 65536))
MATMUL_SIZES = (4096, 8192)


@dataclass(frozen=True)
class Bench:
    op: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    ours: Callable[[], object]
    torch_eager: Callable[[], object]
    bytes: int = 0     # memory-bound: bytes of one read of inputs + one write of outputs
    flops: int = 0     # compute-bound: floating-point operations
    args: tuple = ()   # the op's arguments, as its OpSpec.make_args builds them
    kwargs: dict = field(default_factory=dict)  # and its keyword options
    precision: str = ""  # float32 dots: "tf32" or "ieee" (its % of peak is of that peak)

    @property
    def cell(self) -> dict:
        """The bench's op, dtype and shape as every results file writes them (the key
        ``python -m benchmarks.goals`` matches goals on)."""
        return {"op": self.op, "dtype": str(self.dtype).removeprefix("torch."),
                "shape": "x".join(map(str, self.shape))}


def _nbytes(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def memory_bound(op: str, shape, dtype, profile) -> Bench:
    m, n = shape
    x = torch.randn(m, n, device="cuda", dtype=dtype)
    w = torch.randn(n, device="cuda", dtype=dtype)
    b = torch.randn(n, device="cuda", dtype=dtype)
    F = torch.nn.functional
    if op == "gelu":
        from kernels.gelu import gelu
        return Bench(op, shape, dtype, lambda: gelu(x, profile=profile),
                     lambda: F.gelu(x, approximate="tanh"), _nbytes(x, x), args=(x,))
    if op == "softmax":
        from kernels.softmax import softmax
        return Bench(op, shape, dtype, lambda: softmax(x, profile=profile),
                     lambda: torch.softmax(x, -1), _nbytes(x, x), args=(x,))
    if op == "log_softmax":
        from kernels.softmax import log_softmax
        return Bench(op, shape, dtype, lambda: log_softmax(x, profile=profile),
                     lambda: torch.log_softmax(x, -1), _nbytes(x, x), args=(x,))
    if op in ("max_dim", "prod_dim"):
        from kernels import reductions
        # outputs: a value per row (and max's int64 index)
        out_bytes = m * (x.element_size() + (8 if op == "max_dim" else 0))
        ref = (lambda: torch.max(x, -1)) if op == "max_dim" else (lambda: torch.prod(x, -1))
        fn = getattr(reductions, op)
        return Bench(op, shape, dtype, lambda: fn(x, profile=profile), ref,
                     _nbytes(x) + out_bytes, args=(x,))
    if op in ("layer_norm", "rms_norm", "layer_norm_fwd_bwd"):
        from kernels.layer_norm import layer_norm, layer_norm_backward, rms_norm
    if op == "layer_norm":
        return Bench(op, shape, dtype, lambda: layer_norm(x, w, b, 1e-5, profile=profile),
                     lambda: F.layer_norm(x, (n,), w, b, 1e-5), _nbytes(x, x, w, b),
                     args=(x, w, b, 1e-5))
    if op == "rms_norm":
        return Bench(op, shape, dtype, lambda: rms_norm(x, w, 1e-6, profile=profile),
                     lambda: F.rms_norm(x, (n,), w, 1e-6), _nbytes(x, x, w), args=(x, w, 1e-6))
    if op == "layer_norm_fwd_bwd":
        dy = torch.randn_like(x)
        xt = x.detach().clone().requires_grad_()
        wt = w.detach().clone().requires_grad_()
        bt = b.detach().clone().requires_grad_()

        def ours():
            out = layer_norm(x, w, b, 1e-5, profile=profile)
            return layer_norm_backward(dy, x, w, b, out.mean, out.rstd, profile=profile)

        def eager():
            y = F.layer_norm(xt, (n,), wt, bt, 1e-5)
            return torch.autograd.grad(y, (xt, wt, bt), dy)
        # forward: read x, write y; backward: read dy and x, write dx (weights negligible)
        return Bench(op, shape, dtype, ours, eager, _nbytes(x) * 5, args=(dy, x, w, b))
    raise KeyError(op)


def matmul(size: int, dtype, profile) -> list[Bench]:
    """One bench per dtype; float32: one per input precision the profile runs ("tf32"
    where its tensor cores do, and "ieee"), torch computing in the same precision."""
    from kernels.matmul import matmul as mm
    a = torch.randn(size, size, device="cuda", dtype=dtype)
    b = torch.randn(size, size, device="cuda", dtype=dtype)
    shape, flops = (size, size, size), 2 * size ** 3
    if dtype != torch.float32:
        return [Bench("matmul", shape, dtype, lambda: mm(a, b, profile=profile),
                      lambda: torch.matmul(a, b), flops=flops, args=(a, b))]
    precisions = ("tf32", "ieee") if profile["dtypes.tf32"] else ("ieee",)
    return [Bench("matmul", shape, dtype,
                  lambda p=p: mm(a, b, profile=profile, input_precision=p),
                  lambda p=p: _torch_matmul(a, b, p), flops=flops, args=(a, b), precision=p)
            for p in precisions]


def _torch_matmul(a, b, precision: str):
    """torch.matmul with float32 inputs run as ``precision`` ("tf32" or "ieee")."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        return torch.matmul(a, b)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def library_call(lib_name: str, bench: Bench) -> Callable[[], object] | None:
    """The library's kernel for ``bench`` through its adapter (triton_cts/adapters/), called
    on the same tensors as ours; None where the library has no kernel for the op."""
    import importlib

    from triton_cts import adapters
    adapter = importlib.import_module(adapters.by_name(lib_name).adapter)
    if bench.op == "layer_norm_fwd_bwd":
        if not {"layer_norm", "layer_norm_backward"} <= adapter.OPS.keys():
            return None
        dy, x, w, b = bench.args

        def fwd_bwd():
            _, mean, rstd = adapter.layer_norm(x, w, b, 1e-5)
            return adapter.layer_norm_backward(dy, x, w, b, mean, rstd)
        return fwd_bwd
    if bench.op not in adapter.OPS:
        return None
    from benchmarks.llm_cases import direct_library_call
    direct = direct_library_call(lib_name, bench)
    if direct is not None:
        return direct
    fn = getattr(adapter, adapter.OPS[bench.op])
    return lambda: fn(*bench.args, **bench.kwargs)


MEMORY_OPS = ("gelu", "softmax", "log_softmax", "layer_norm", "rms_norm", "layer_norm_fwd_bwd",
              "max_dim", "prod_dim")
