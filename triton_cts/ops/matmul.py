"""Matrix multiplication."""
import math

import torch

from triton_cts.ops.spec import OpSpec, randn

DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _make_args(a: torch.Tensor, gen: torch.Generator):
    """x is A (M x K); B is K x N with N drawn in [1, 70) and entries of standard deviation
    1/sqrt(K), so every entry of C has about unit variance whatever K is."""
    K = a.shape[-1]
    n = int(torch.randint(1, 70, (1,), generator=gen))
    b = randn((K, n), gen, a.dtype, a.device) * (1.0 / math.sqrt(max(K, 1)))
    return (a, b), {}


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b


# Absolute errors of a dot product grow like sqrt(K) * |a| * |b|; make_args scales B by
# 1/sqrt(K), which folds that sqrt(K) into the data, so one static atol serves every K.
# fp16/bf16: the float32 accumulation errs by ~sqrt(K) * 2^-24 relative to the unit-size
# result, far below the final rounding to fp16 (2^-11) or bf16 (2^-8), which the default
# rtol covers; the atol covers results near zero (tensor-core accumulators may drop a few
# low bits per MMA step). fp32 ("ieee" dots): ~sqrt(K/6) * 2^-24 absolute, 3e-6 at K = 4096.
TOLERANCES = {
    torch.float16: (1e-3, 1e-4),
    torch.bfloat16: (1.6e-2, 1e-4),
    torch.float32: (1e-5, 5e-5),
}

#: fp32 where the profile runs tf32 dots (``dtypes.tf32 = true``): inputs are rounded to a
#: 10-bit mantissa (2^-11 relative each), so a unit-variance entry of C is off by ~1e-3,
#: several times that in the tail. Applies only to such profiles; the suite picks it by
#: reading profile["dtypes.tf32"].
TF32_TOLERANCE = (1e-2, 1e-2)

#: float32 ulps one 16-deep tensor-core MMA step may lose (no round to nearest)
#: measured: benchmarks/results/h200.jsonl, experiment "comments"
ULPS_PER_MMA_STEP = 1.0
MMA_DEPTH = 16


def _error_scale(a: torch.Tensor, b: torch.Tensor):
    """Rounding in a dot product grows with the terms, not with their (possibly
    cancelling) sum: (|A| @ |B|) / sqrt(K) is about 1 for the unit-variance data the
    tolerances above were set on, and larger where inputs carry an offset. For long K the
    accumulator's truncation per MMA step, in units of the half-precision atol, can be
    larger still (from K of about 13000 on)."""
    k = max(a.shape[-1], 1)
    terms = (a.abs() @ b.abs()) / k ** 0.5
    steps = k / MMA_DEPTH * ULPS_PER_MMA_STEP * 2.0 ** -23 / TOLERANCES[torch.float16][1]
    return terms.clamp(min=max(1.0, steps))


MATMUL = OpSpec(
    name="matmul",
    description="C = A @ B for 2-D A (M x K) and B (K x N), float32 accumulation, output in "
                "the input dtype (bf16 dots are not meaningful in the interpreter)",
    reference=reference,
    reference_kernel="kernels.matmul:matmul",
    dtypes=DTYPES,
    make_args=_make_args,
    min_ndim=2,
    max_ndim=2,
    tolerances=TOLERANCES,
    tf32_tolerance=TF32_TOLERANCE,
    error_scale=_error_scale,
    mode_gaps={("interpreter", torch.bfloat16):
               "bf16 tl.dot returns wrong values in Triton's interpreter"},
    # one aligned shape and one with ragged M and K (N is drawn by make_args)
    compile_shapes=((512, 512), (300, 77)),
    # the tensor-descriptor kernel at every size: the default runs products up to the
    # profile's tuning.matmul.pointer_max_work, all the suites draw, on the pointer kernel
    # k_chunks: the fused linear cross-entropy's weight-gradient product (transposed
    # layouts, a float32 out, the second chunk of K added into it)
    variants={"tma": "kernels.matmul:matmul_tma", "k_chunks": "kernels.matmul:matmul_k_chunks"},
)

OPS = (MATMUL,)
