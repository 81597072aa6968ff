"""Conversions of the Triton language (``x.to(dtype)``), each a primitive op:

- ``tl_cast_float32_to``: float32 to a narrower float (float16, bfloat16, the float8
  formats): round to nearest even, subnormals kept, NaN stays NaN; values beyond the
  format's range are implementation-defined (saturate to the largest finite value, or
  infinity, or NaN): recorded per target, never a failure, unless the result is none of
  those;
- ``tl_cast_to_float32``: the narrow formats back to float32: exact;
- ``tl_cast_float_to_int``: float32 to an integer type: truncation toward zero; out of
  range and NaN are implementation-defined (recorded);
- ``tl_cast_int_to_float``: an integer type to float32: round to nearest even.

The op's dtype is the narrow side (the format converted to or from). float8 formats run
only where the profile lists them in ``[dtypes] supported``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from triton_cts.ops.dtypes import int_dtype
from triton_cts.ops.language import primitive_op

SUITE = "test_language_math"
NARROW_FLOATS = tuple(getattr(torch, n) for n in (
    "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
    "float8_e5m2fnuz") if hasattr(torch, n))
INTS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
WIDE_INTS = (torch.int32, torch.int64)  # those with values float32 cannot hold exactly


@dataclass(frozen=True)
class Conversion:
    """A conversion primitive: ``direction`` is "down" (float32 to the op's dtype), "up"
    (the op's dtype to float32), "to_int" (float32 to the op's integer dtype) or
    "from_int" (the op's integer dtype to float32)."""

    direction: str

    def __repr__(self) -> str:
        return f"Conversion({self.direction})"


def _reference(direction):
    def down(x, *, dtype):
        return x.double().to(torch.float32).to(dtype).double()

    def other(x, **_):
        return x.double()
    return down if direction in ("down", "to_int") else other


def _make_args(direction):
    def make(x, gen):
        if direction in ("down", "to_int"):
            return (x.to(torch.float32),), {"dtype": x.dtype}
        return (x,), {}
    return make


_SPECS = (
    ("tl_cast_float32_to", "down", NARROW_FLOATS, "cast_down",
     "float32 to a narrower float: round to nearest even, NaN, overflow recorded"),
    ("tl_cast_to_float32", "up", NARROW_FLOATS, "cast_up",
     "a narrower float to float32: exact"),
    ("tl_cast_float_to_int", "to_int", INTS, "cast_to_int",
     "float32 to an integer: truncation; out of range and NaN recorded"),
    ("tl_cast_int_to_float", "from_int", WIDE_INTS, "cast_from_int",
     "an integer to float32: round to nearest even"),
)

OPS = tuple(primitive_op(
    name=name, suite=SUITE, primitive=Conversion(direction),
    description=description,
    reference=_reference(direction),
    reference_kernel=f"kernels.language.conversions:{launcher}",
    dtypes=dtypes, make_args=_make_args(direction), min_ndim=1, max_ndim=1,
    compile_shapes=((4096,),),
) for name, direction, dtypes, launcher, description in _SPECS)


# ---- what a conversion must give ----------------------------------------------------------
def narrow_limits(dtype: torch.dtype) -> tuple[float, bool, bool]:
    """(largest finite value, whether the format has infinities, whether it has NaN)."""
    fi = torch.finfo(dtype)
    name = str(dtype)
    has_inf = "float8" not in name or name.endswith("e5m2")
    return float(fi.max), has_inf, True


def rounding_overflows(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Finite float32 values beyond the format's range after rounding to nearest even
    (where the format has infinities, exactly those RNE sends to infinity)."""
    largest, _, _ = narrow_limits(dtype)
    # halfway between the largest value and the next one the exponent would give
    below = torch.tensor([largest], dtype=torch.float64).to(dtype)
    step = largest - float(_prev(below, dtype))
    return torch.isfinite(x) & (x.double().abs() >= largest + step / 2)


def _next(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return (t.view(int_dtype(dtype.itemsize)) + 1).view(dtype).double()


def _prev(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return (t.view(int_dtype(dtype.itemsize)) - 1).view(dtype).double()


def expected_down(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """float32 ``x`` rounded to nearest even in ``dtype`` (torch's CPU conversion, which
    rounds so), for values in range; NaN stays NaN."""
    return x.to(dtype)


def classify_overflow(out: torch.Tensor, x: torch.Tensor, dtype: torch.dtype) -> list[str]:
    """What a target gave for out-of-range values: "saturated to the largest finite
    value", "infinity", "NaN", or "other: <value>" (a wrong result)."""
    largest, has_inf, _ = narrow_limits(dtype)
    kinds = []
    for o, v in zip(out.double().tolist(), x.double().tolist()):
        if math.isnan(o):
            kinds.append("NaN")
        elif math.isinf(o) and has_inf and math.copysign(1, o) == math.copysign(1, v):
            kinds.append("infinity")
        elif o == math.copysign(largest, v):
            kinds.append("saturated to the largest finite value")
        else:
            kinds.append(f"other: {o!r} for {v!r}")
    return kinds


def expected_int(x: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(truncated values, in-range mask) of float32 ``x`` converted to ``dtype``: C's
    conversion, defined where the truncated value fits."""
    info = torch.iinfo(dtype)
    t = torch.trunc(x.double())
    ok = torch.isfinite(t) & (t >= info.min) & (t <= info.max)
    return torch.where(ok, t, torch.zeros_like(t)).to(torch.int64), ok


def expected_from_int(x: torch.Tensor) -> torch.Tensor:
    """Integers rounded to nearest even in float32, exactly (through Python's exact
    int -> float64 -> float32 would round twice for int64)."""
    from triton_cts.ops.language.math import round_exact
    from fractions import Fraction
    return round_exact([Fraction(v) for v in x.tolist()], torch.float32)


# ---- known interpreter gaps, probed (so a fixed Triton is checked again at once) --------
_GAPS: dict = {}


def interpreter_gap(src: torch.dtype, dst: torch.dtype) -> str | None:
    """Why Triton's interpreter cannot be judged on converting ``src`` to ``dst``, or
    None: a harness kernel of its own (never the checked one) converts values every
    format holds or rounds plainly (1, -7.9, 70000 for float32 to bfloat16 and the
    float8 formats) and is compared with torch's conversion."""
    key = (src, dst)
    if key not in _GAPS:
        from triton_cts.execution import launches
        import triton
        narrow = src if src.itemsize < dst.itemsize else dst
        one = torch.tensor([1.0], dtype=narrow)
        tie = (1.0 + float(_next(one, narrow))) / 2  # halfway between 1 and the next value
        sub = float(torch.finfo(narrow).tiny) * 0.75   # a subnormal of the narrow format
        values = [1.0, -7.9, 0.3, tie, -tie, sub, 100.0, 0.0]  # a power of 2 of them
        if dst.is_floating_point and dst.itemsize >= 2:
            values[-1] = 70000.0 if dst != torch.float16 else 1000.5
        x = torch.tensor(values, dtype=torch.float32).to(src)
        if src.itemsize == 1:  # every float8 bit pattern (its NaN encodings too)
            x = torch.arange(-128, 128, dtype=torch.int16).to(torch.int8).view(src)
        want = x.to(dst)
        out = torch.empty_like(want)
        names = f"{str(src).removeprefix('torch.')} to {str(dst).removeprefix('torch.')}"
        try:
            with launches.interpreted():
                _cast_probe()[(1,)](x, out, N=x.numel())
        except Exception as exc:  # noqa: BLE001 - the interpreter's own failure is the gap
            from triton_cts.execution.interpreter_defects import interpreter_failure
            why = interpreter_failure(exc, f"converting {names}")
            if why is None:
                raise
            _GAPS[key] = why
            return why
        o, w = out.double(), want.double()
        same = bool(((o == w) | (torch.isnan(o) & torch.isnan(w))).all())
        _GAPS[key] = None if same else (
            f"the interpreter of triton {triton.__version__} converts {names} "
            f"wrongly ({_first_wrong(x, out, want)})")
    return _GAPS[key]


def _first_wrong(x, out, want) -> str:
    o, w = out.double(), want.double()
    bad = torch.nonzero(~((o == w) | (torch.isnan(o) & torch.isnan(w)))).flatten()[:3].tolist()
    return ", ".join(f"{float(x[i].double())!r} gave {float(o[i])!r}, not {float(w[i])!r}"
                     for i in bad)


def _cast_probe():
    """A harness kernel (not the checked one): OUT = X.to(OUT's type), N elements."""
    import triton
    import triton.language as tl

    @triton.jit
    def _interpreter_cast_probe(X, OUT, N: tl.constexpr):
        offs = tl.arange(0, N)
        tl.store(OUT + offs, tl.load(X + offs).to(OUT.dtype.element_ty))

    return _interpreter_cast_probe
