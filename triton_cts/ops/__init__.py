"""The op database: one module per op family, each exporting its OpSpec records as OPS."""
from triton_cts.ops import batch_norm, gelu, layer_norm, matmul, reductions, softmax

ALL_OPS = (*gelu.OPS, *layer_norm.OPS, *softmax.OPS, *batch_norm.OPS, *reductions.OPS,
           *matmul.OPS)
