"""Every op the suites check: each op family module's ``OPS``, in one tuple.

Add an op family here after writing ``triton_cts/ops/<family>.py``.
"""
from triton_cts.ops import batch_norm, gelu, layer_norm, matmul, reductions, softmax

ALL_OPS = (*gelu.OPS, *layer_norm.OPS, *softmax.OPS, *batch_norm.OPS, *reductions.OPS,
           *matmul.OPS)
