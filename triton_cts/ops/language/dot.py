"""``tl.dot`` as primitive ops, each held to a bound derived from K and the rounding of
its inputs and accumulator.

- ``tl_dot``: ``a @ b`` for float16, bfloat16, float32 (``input_precision="ieee"``), int8
  (int32 out) and the float8 formats a profile declares (float32 out);
- ``tl_dot_tf32`` / ``tl_dot_tf32x3``: float32 with ``input_precision`` "tf32" and
  "tf32x3", on profiles whose target runs tf32 (``dtypes.tf32``);
- ``tl_dot_acc``: ``acc + a @ b``, accumulating into an existing accumulator in its dtype
  (``out_dtype``): float16 for float16 inputs, int32 for int8, else float32.

The bound (:func:`dot_bound`), elementwise, for T = |a| @ |b| + |acc| (float64):

    (input_error + K * accumulate_unit) * T + output_unit * |exact|

- input_error: what rounding the inputs costs a product, relative: 0 where products are
  exact in the accumulator (16-bit and 8-bit inputs, float32 ``ieee``: an FMA rounds only
  the sum); tf32: 2 * 2^-10 (each operand keeps a 10-bit mantissa; truncation, not
  rounding, allowed); tf32x3: 4 * 2^-20 (big + small tf32 parts, the small x small term
  and each part's rounding dropped);
- accumulate_unit: one unit in the last place of the accumulator per addition, K of them
  (a tree or a sequential sum; tensor-core accumulators truncate instead of rounding, which
  costs up to one ulp an add: see ``triton_cts/ops/matmul.py``, ULPS_PER_MMA_STEP): 2^-23
  for float32, 2^-10 for float16, 0 for int32; float8 products on NVIDIA Hopper tensor
  cores keep about 14 bits while accumulating (DeepSeek-V3 technical report, section
  3.3.2), hence 2^-13;
- output_unit: the final rounding to the output dtype (half an ulp).

Integer dots are exact (int8 products summed in int32 cannot overflow at the K drawn).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from triton_cts.ops.language import primitive_op

SUITE = "test_language_ops"
FLOAT8 = (torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz)
DOT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.int8) + FLOAT8
ACC_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.int8)
BF16_GAP = {("interpreter", torch.bfloat16):
            "bf16 tl.dot returns wrong values in Triton's interpreter (measured with triton "
            "3.6 and 3.9: errors of 1e10 on unit-size products)"}

#: Relative error rounding the inputs costs a product, per input_precision (float32).
INPUT_ERROR = {"ieee": 0.0, "tf32": 2 * 2.0 ** -10, "tf32x3": 4 * 2.0 ** -20}
#: Error per accumulation step, relative to the terms, per accumulator dtype.
ACCUMULATE_UNIT = {torch.float32: 2.0 ** -23, torch.float16: 2.0 ** -10, torch.int32: 0.0}
#: Float8 products accumulate in about 14 bits on Hopper tensor cores.
FLOAT8_ACCUMULATE_UNIT = 2.0 ** -13


@dataclass(frozen=True)
class DotPrimitive:
    """A ``tl.dot`` form: its float32 ``precision`` and whether it accumulates into a
    given accumulator (``accumulate``: the op's third argument)."""

    precision: str = "ieee"
    accumulate: bool = False


def out_dtype_of(dtype: torch.dtype, accumulate: bool = False) -> torch.dtype:
    """The output (accumulator) dtype of a dot of ``dtype`` inputs: int32 for int8;
    with ``accumulate``, float16 for float16 (a half-precision accumulator); else float32."""
    if dtype == torch.int8:
        return torch.int32
    if accumulate and dtype == torch.float16:
        return torch.float16
    return torch.float32


def dot_bound(a, b, acc, in_dtype: torch.dtype, out_dtype: torch.dtype,
              precision: str = "ieee") -> torch.Tensor:
    """The elementwise bound on |computed - exact| for float64 ``a``, ``b`` and ``acc``
    (None: no accumulator), inputs of ``in_dtype``, see the module docstring."""
    k = a.shape[1]
    terms = a.abs() @ b.abs()
    exact = a @ b
    if acc is not None:
        terms = terms + acc.abs()
        exact = exact + acc
    if out_dtype == torch.int32:
        return torch.zeros_like(terms)
    unit = FLOAT8_ACCUMULATE_UNIT if in_dtype in FLOAT8 else ACCUMULATE_UNIT[out_dtype]
    rel = INPUT_ERROR[precision] if in_dtype == torch.float32 else 0.0
    out_unit = float(torch.finfo(out_dtype).eps) / 2
    return (rel + k * unit) * terms + out_unit * exact.abs()


def _operand(shape, dtype, gen) -> torch.Tensor:
    """Values of ``dtype``: small integers for int8 (no int32 overflow at any K drawn),
    unit normals rounded to the dtype for floats (float8 included)."""
    if dtype == torch.int8:
        return torch.randint(-8, 9, shape, generator=gen).to(dtype)
    return torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)


def _dot_args(x: torch.Tensor, gen: torch.Generator):
    """x is A (M x K); B is K x N with N drawn in [16, 48]."""
    a = x if x.dim() == 2 else x.reshape(-1, x.shape[-1])
    n = int(torch.randint(16, 49, (1,), generator=gen))
    return (a, _operand((a.shape[1], n), a.dtype, gen)), {}


def _dot_acc_args(x: torch.Tensor, gen: torch.Generator):
    (a, b), _ = _dot_args(x, gen)
    acc = torch.randn((a.shape[0], b.shape[1]), generator=gen, dtype=torch.float64)
    acc = acc.round() if x.dtype == torch.int8 else acc
    return (a, b, acc.to(out_dtype_of(x.dtype, accumulate=True))), {}


def _reference(a, b):
    return a.double() @ b.double()


def _reference_acc(a, b, acc):
    return acc.double() + a.double() @ b.double()


# one aligned shape, one with M and K ragged (K past one 32-deep step)
COMPILE_SHAPES = ((32, 32), (24, 40))

TL_DOT = primitive_op(
    name="tl_dot", suite=SUITE, primitive=DotPrimitive(),
    description="tl.dot(a, b) of one tile per program, ragged K masked; float32 inputs with "
                "input_precision='ieee', int8 into int32, float8 into float32",
    reference=_reference, reference_kernel="kernels.language.dot:dot",
    dtypes=DOT_DTYPES, make_args=_dot_args, min_ndim=2, max_ndim=2,
    compile_shapes=COMPILE_SHAPES, mode_gaps=BF16_GAP,
)
TL_DOT_TF32 = primitive_op(
    name="tl_dot_tf32", suite=SUITE, primitive=DotPrimitive(precision="tf32"),
    description="tl.dot(a, b, input_precision='tf32') of float32 inputs",
    reference=_reference, reference_kernel="kernels.language.dot:dot_tf32",
    dtypes=(torch.float32,), make_args=_dot_args, min_ndim=2, max_ndim=2,
    compile_shapes=COMPILE_SHAPES,
)
TL_DOT_TF32X3 = primitive_op(
    name="tl_dot_tf32x3", suite=SUITE, primitive=DotPrimitive(precision="tf32x3"),
    description="tl.dot(a, b, input_precision='tf32x3') of float32 inputs",
    reference=_reference, reference_kernel="kernels.language.dot:dot_tf32x3",
    dtypes=(torch.float32,), make_args=_dot_args, min_ndim=2, max_ndim=2,
    compile_shapes=COMPILE_SHAPES,
)
TL_DOT_ACC = primitive_op(
    name="tl_dot_acc", suite=SUITE, primitive=DotPrimitive(accumulate=True),
    description="tl.dot(a, b, acc) into a loaded accumulator of out_dtype (float16 for "
                "float16 inputs, int32 for int8, else float32)",
    reference=_reference_acc, reference_kernel="kernels.language.dot:dot_acc",
    dtypes=ACC_DTYPES, make_args=_dot_acc_args, min_ndim=2, max_ndim=2,
    compile_shapes=COMPILE_SHAPES, mode_gaps=BF16_GAP,
)

OPS = (TL_DOT, TL_DOT_TF32, TL_DOT_TF32X3, TL_DOT_ACC)
