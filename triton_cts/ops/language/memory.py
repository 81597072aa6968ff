"""Memory primitives as ops:

- ``tl_block_ptr``: a block of a matrix through ``tl.make_block_ptr`` with
  ``boundary_check=(0, 1)``, padded with zeros and with NaN (``padding_option``), and
  stored back (twice its values) with ``boundary_check``: only the part inside the matrix
  may be written. Triton 3.9 removed block pointers: not supported there, saying so;
- ``tl_tensor_descriptor``: the same through ``tl.make_tensor_descriptor``, where the
  target has it (not supported with the reason where it has not);
- ``tl_load_hints``: a masked load with ``other=`` under every cache modifier, eviction
  policy and ``volatile``, stored under every store cache modifier: accepted on every
  target, and the values are those of the plain load.

Every result is exact: loads and stores move bits.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from triton_cts.ops.language import primitive_op

SUITE = "test_language_ops"
BLOCK_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
HINT_DTYPES = (torch.float32, torch.int32)
#: Block shape of the block-pointer and descriptor checks: the smallest a descriptor
#: takes in every dtype drawn (a row of at least 16 bytes), small for the interpreter.
BLOCK = (16, 16)


@dataclass(frozen=True)
class MemoryPrimitive:
    """A memory primitive; ``kind`` names it for the suite ("block_ptr", "descriptor",
    "hints")."""

    kind: str


def block_reference(x: torch.Tensor, row0: int, col0: int, block=BLOCK):
    """(zero-padded block, NaN-padded block, output) for :func:`kernels.language.memory.
    block_ptr`: the output holds NaN (what the suite allocates it with) outside the block
    and twice the zero-padded block inside the matrix."""
    bm, bn = block
    zero = torch.zeros(block, dtype=x.dtype)
    nan = torch.full(block, float("nan"), dtype=x.dtype)
    part = x[row0:row0 + bm, col0:col0 + bn]
    zero[:part.shape[0], :part.shape[1]] = part
    nan[:part.shape[0], :part.shape[1]] = part
    out = torch.full(x.shape, float("nan"), dtype=x.dtype)
    out[row0:row0 + bm, col0:col0 + bn] = 2 * part
    return zero, nan, out


def hints_reference(x: torch.Tensor, other=0.0, hints: int = 1):
    """Every row: ``x`` then ``other`` up to the next power of two above its length."""
    n = x.numel()
    block = 1 << n.bit_length()
    row = torch.full((block,), other, dtype=x.dtype)
    row[:n] = x
    return row.expand(hints, block).clone()


def _block_args(x, gen):
    """x (2-D) and a block origin that hangs over the bottom right corner."""
    x = x if x.dim() == 2 else x.reshape(-1, x.shape[-1])
    per_row = max(1, 16 // x.element_size())  # a descriptor's column offset: 16 bytes
    col0 = max(0, x.shape[1] - BLOCK[1] // 2) // per_row * per_row
    return (x, max(0, x.shape[0] - BLOCK[0] // 2), col0), {}


def _hints_args(x, gen):
    x = x.reshape(-1)
    return (x, -3 if not x.dtype.is_floating_point else -3.5), {}


OPS = (
    primitive_op(
        name="tl_block_ptr", suite=SUITE, primitive=MemoryPrimitive("block_ptr"),
        description="a 16x16 block through tl.make_block_ptr with boundary_check, padded "
                    "with zeros and NaN, stored back with boundary_check",
        reference=block_reference, reference_kernel="kernels.language.memory:block_ptr",
        dtypes=BLOCK_DTYPES, make_args=_block_args, min_ndim=2, max_ndim=2,
        compile_shapes=((40, 24),)),
    primitive_op(
        name="tl_tensor_descriptor", suite=SUITE, primitive=MemoryPrimitive("descriptor"),
        description="a 16x16 block through tl.make_tensor_descriptor, padded with zeros and "
                    "NaN, stored back (only inside the tensor)",
        reference=block_reference, reference_kernel="kernels.language.memory:tensor_descriptor",
        dtypes=BLOCK_DTYPES, make_args=_block_args, min_ndim=2, max_ndim=2,
        compile_shapes=((40, 24),)),
    primitive_op(
        name="tl_load_hints", suite=SUITE, primitive=MemoryPrimitive("hints"),
        description="masked tl.load with other= under every cache modifier, eviction policy "
                    "and volatile, tl.store under every store cache modifier",
        reference=hints_reference, reference_kernel="kernels.language.memory:hinted_loads",
        dtypes=HINT_DTYPES, make_args=_hints_args, min_ndim=1, max_ndim=1,
        compile_shapes=((37,),)),
)
