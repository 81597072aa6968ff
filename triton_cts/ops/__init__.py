"""The op database: one module per op family, each defining OpSpec records."""
from triton_cts.ops.gelu import GELU

ALL_OPS = (GELU,)
