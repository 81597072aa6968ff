"""What each benchmark runs: our launcher, the torch eager equivalent, and the bytes or
flops that define its floor, one :class:`~benchmarks.bench.BenchSpec` per op in
:data:`BENCHES`, in the order the benchmarks run. Memory-bound ops count one read of every
input and one write of every output; anything else a kernel moves is overhead it should
not have."""
from __future__ import annotations

from functools import partial
from typing import Callable

import torch

from benchmarks import attention_cases, llm_cases
from benchmarks.bench import Bench, BenchSpec, moved, randn

__all__ = ["BENCHES", "Bench", "BenchSpec", "benches", "library_call", "small_benches"]

MEMORY_SHAPES = ((32768, 1024), (16384, 4096), (4096, 16384), (1024, 65536))
MATMUL_SIZES = (4096, 8192)
#: Small enough that the GPU is never the limit (``benchmarks.launch_overhead``).
SMALL_SHAPE = (8, 1024)
SMALL_MATMUL_SIZE = 256


def _rows(shape, dtype):
    """x ``[M, N]`` and a weight and bias ``[N]``, each from a generator of its own
    (bench.randn: the same values whichever op runs, whatever ran before)."""
    m, n = shape
    return randn((m, n), dtype), randn((n,), dtype, 1), randn((n,), dtype, 2)


def _gelu(shape, dtype, profile) -> list[Bench]:
    from kernels.gelu import gelu
    x, _, _ = _rows(shape, dtype)
    return [Bench("gelu", shape, dtype, lambda: gelu(x, profile=profile),
                  lambda: torch.nn.functional.gelu(x, approximate="tanh"), args=(x,))]


def _softmax(op, shape, dtype, profile) -> list[Bench]:
    import kernels.softmax
    x, _, _ = _rows(shape, dtype)
    launcher, eager = getattr(kernels.softmax, op), getattr(torch, op)
    return [Bench(op, shape, dtype, lambda: launcher(x, profile=profile), lambda: eager(x, -1),
                  args=(x,))]


def _reduction(op, shape, dtype, profile) -> list[Bench]:
    from kernels import reductions
    x, _, _ = _rows(shape, dtype)
    fn, eager = getattr(reductions, op), getattr(torch, op.removesuffix("_dim"))
    return [Bench(op, shape, dtype, lambda: fn(x, profile=profile), lambda: eager(x, -1),
                  args=(x,))]


def _reduced_rows(value_bytes: int = 0):
    """Bytes of a row reduction: read x, write a value per row (and ``value_bytes`` more
    per row: max's int64 index)."""
    return lambda shape, dtype: (shape[0] * shape[1] + shape[0]) * dtype.itemsize \
        + shape[0] * value_bytes


def _layer_norm(shape, dtype, profile) -> list[Bench]:
    from kernels.layer_norm import layer_norm
    x, w, b = _rows(shape, dtype)
    n = shape[1]
    return [Bench("layer_norm", shape, dtype, lambda: layer_norm(x, w, b, 1e-5, profile=profile),
                  lambda: torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5),
                  args=(x, w, b, 1e-5))]


def _rms_norm(shape, dtype, profile) -> list[Bench]:
    from kernels.layer_norm import rms_norm
    x, w, _ = _rows(shape, dtype)
    n = shape[1]
    return [Bench("rms_norm", shape, dtype, lambda: rms_norm(x, w, 1e-6, profile=profile),
                  lambda: torch.nn.functional.rms_norm(x, (n,), w, 1e-6), args=(x, w, 1e-6))]


def _with_weights(tensors: int, weights: int):
    """Bytes of ``tensors`` ``[M, N]`` tensors and ``weights`` ``[N]`` ones."""
    return lambda shape, dtype: (tensors * shape[0] + weights) * shape[1] * dtype.itemsize


def _layer_norm_fwd_bwd(shape, dtype, profile) -> list[Bench]:
    from kernels.layer_norm import layer_norm, layer_norm_backward
    F = torch.nn.functional
    x, w, b = _rows(shape, dtype)
    n = shape[1]
    dy = randn(x.shape, x.dtype, 3)
    xt = x.detach().clone().requires_grad_()
    wt = w.detach().clone().requires_grad_()
    bt = b.detach().clone().requires_grad_()

    def ours():
        out = layer_norm(x, w, b, 1e-5, profile=profile)
        return layer_norm_backward(dy, x, w, b, out.mean, out.rstd, profile=profile)

    def eager():
        y = F.layer_norm(xt, (n,), wt, bt, 1e-5)
        return torch.autograd.grad(y, (xt, wt, bt), dy)
    return [Bench("layer_norm_fwd_bwd", shape, dtype, ours, eager, args=(dy, x, w, b))]


def _matmul(shape, dtype, profile) -> list[Bench]:
    """One bench per dtype; float32: one per input precision the profile runs ("tf32"
    where its tensor cores do, and "ieee"), torch computing in the same precision."""
    from kernels.matmul import matmul as mm
    (size,) = shape
    a, b = randn((size, size), dtype), randn((size, size), dtype, 1)
    shape = (size, size, size)
    if dtype != torch.float32:
        return [Bench("matmul", shape, dtype, lambda: mm(a, b, profile=profile),
                      lambda: torch.matmul(a, b), args=(a, b))]
    precisions = ("tf32", "ieee") if profile["dtypes.tf32"] else ("ieee",)
    return [Bench("matmul", shape, dtype,
                  lambda p=p: mm(a, b, profile=profile, input_precision=p),
                  lambda p=p: _torch_matmul(a, b, p), args=(a, b), precision=p)
            for p in precisions]


def _torch_matmul(a, b, precision: str):
    """torch.matmul with float32 inputs run as ``precision`` ("tf32" or "ieee")."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        return torch.matmul(a, b)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def _products(shape) -> int:
    """FLOPs of an M x N x K product: a multiply and an add per term."""
    m, n, k = shape
    return 2 * m * n * k


_ROWS = {"shapes": MEMORY_SHAPES, "small_shape": SMALL_SHAPE, "sweep": "rows"}

#: Every op the benchmarks time, in the order they run (an op's name is its OpSpec's,
#: but ``layer_norm_fwd_bwd``: the forward and backward of ``layer_norm_backward``).
BENCHES: dict[str, BenchSpec] = {
    "gelu": BenchSpec("gelu", _gelu, bytes=moved(1, 1), **_ROWS),
    "softmax": BenchSpec("softmax", partial(_softmax, "softmax"), bytes=moved(1, 1), **_ROWS),
    "log_softmax": BenchSpec("log_softmax", partial(_softmax, "log_softmax"),
                             bytes=moved(1, 1), **_ROWS),
    "layer_norm": BenchSpec("layer_norm", _layer_norm, bytes=_with_weights(2, 2), **_ROWS),
    "rms_norm": BenchSpec("rms_norm", _rms_norm, bytes=_with_weights(2, 1), **_ROWS),
    # forward: read x, write y; backward: read dy and x, write dx (weights negligible)
    "layer_norm_fwd_bwd": BenchSpec("layer_norm_backward", _layer_norm_fwd_bwd,
                                    bytes=moved(5), **_ROWS),
    "max_dim": BenchSpec("max_dim", partial(_reduction, "max_dim"), bytes=_reduced_rows(8),
                         **_ROWS),
    "prod_dim": BenchSpec("prod_dim", partial(_reduction, "prod_dim"), bytes=_reduced_rows(),
                          **_ROWS),
    "matmul": BenchSpec("matmul", _matmul, shapes=tuple((n,) for n in MATMUL_SIZES),
                        small_shape=(SMALL_MATMUL_SIZE,), flops=_products, sweep="sizes"),
    **llm_cases.BENCHES,
    **attention_cases.BENCHES,
}


def benches(op: str, dtype, profile, shape=None) -> list[Bench]:
    """The benches of ``op`` at its benchmark shapes (or at ``shape`` alone)."""
    spec = BENCHES[op]
    return [b for s in ((shape,) if shape is not None else spec.shapes)
            for b in spec.benches(s, dtype, profile)]


def small_benches(op: str, dtype, profile) -> list[Bench]:
    """The benches of ``op`` at its small shape (launch overhead)."""
    return BENCHES[op].benches(BENCHES[op].small_shape, dtype, profile)


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
    direct = llm_cases.direct_library_call(lib_name, bench)
    if direct is not None:
        return direct
    fn = getattr(adapter, adapter.OPS[bench.op])
    return lambda: fn(*bench.args, **bench.kwargs)
