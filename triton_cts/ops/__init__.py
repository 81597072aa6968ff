"""The op database: one module per op family, each exporting its OpSpec records as OPS."""
from triton_cts.ops import gelu

ALL_OPS = (*gelu.OPS,)
