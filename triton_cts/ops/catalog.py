"""Every op the suites check: each op family module's ``OPS``, in one tuple.

Add an op family here after writing ``triton_cts/ops/<family>.py``.
"""
from triton_cts.ops import batch_norm, gelu, language, layer_norm, matmul, reductions, softmax

ALL_OPS = (*gelu.OPS, *layer_norm.OPS, *softmax.OPS, *batch_norm.OPS, *reductions.OPS,
           *matmul.OPS, *language.OPS)  # language: Triton primitives (own suites)
from triton_cts.ops import cross_entropy, fused_add_rms_norm, glu, rope  # noqa: E402
ALL_OPS += (*cross_entropy.OPS, *rope.OPS, *glu.OPS, *fused_add_rms_norm.OPS)  # LLM ops
from triton_cts.ops import attention  # noqa: E402
ALL_OPS += attention.OPS
from triton_cts.ops import fused_linear_cross_entropy  # noqa: E402
ALL_OPS += fused_linear_cross_entropy.OPS
