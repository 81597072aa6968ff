"""Integer semantics of the Triton language, each a primitive op:

- ``tl_int_divmod``: ``x // d`` and ``x % d`` follow C (the quotient truncates toward
  zero, the remainder takes the dividend's sign), not Python; ``INT_MIN // -1`` is
  undefined (recorded);
- ``tl_int_shift``: ``x << s`` and ``x >> s`` (arithmetic for signed, logical for
  unsigned); shifting by the bit width or more is undefined (recorded per target);
- ``tl_int_wrap``: ``+``, ``-`` and ``*`` wrap around modulo 2^bits;
- ``tl_umulhi``: ``tl.umulhi``, the high half of the unsigned product;
- ``tl_int64_offsets``: an int32 index times an int64 stride beyond 2^31 promotes to
  int64 and is exact (index arithmetic only, no memory that large).

Expected values are computed with Python integers, exactly.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from triton_cts.ops.language import primitive_op

SUITE = "test_language_math"
SIGNED = (torch.int8, torch.int16, torch.int32, torch.int64)
UNSIGNED = (torch.uint8, torch.uint32)


@dataclass(frozen=True)
class IntegerPrimitive:
    """An integer primitive: ``kind`` is "divmod", "shift", "wrap", "umulhi" or
    "offsets"."""

    kind: str

    def __repr__(self) -> str:
        return f"IntegerPrimitive({self.kind})"


def _second(x, gen, nonzero=True):
    info = torch.iinfo(x.dtype)
    y = torch.randint(max(info.min, -100), min(info.max, 100) + 1, x.shape, generator=gen,
                      dtype=torch.int64)
    if nonzero:
        y = torch.where(y == 0, torch.ones_like(y), y)
    return y.to(x.dtype)


def _ref_pair(op):
    def ref(x, y):
        return op(x.to(torch.int64), y.to(torch.int64))
    return ref


_SPECS = (
    ("tl_int_divmod", "divmod", SIGNED + UNSIGNED, "int_divmod",
     "x // d and x % d: C semantics (truncation, the dividend's sign)",
     lambda x, gen: ((x, _second(x, gen)), {}), _ref_pair(lambda a, b: torch.div(a, b, rounding_mode="trunc"))),
    ("tl_int_shift", "shift", SIGNED + UNSIGNED, "int_shift",
     "x << s and x >> s; shifts by the bit width or more recorded",
     lambda x, gen: ((x, (_second(x, gen).to(torch.int64).abs() % (8 * x.element_size()))
                      .to(x.dtype)), {}),
     _ref_pair(lambda a, b: a << b)),
    ("tl_int_wrap", "wrap", SIGNED + UNSIGNED, "int_wrap",
     "+, - and * wrap around modulo 2^bits",
     lambda x, gen: ((x, _second(x, gen, nonzero=False)), {}), _ref_pair(lambda a, b: a + b)),
    ("tl_umulhi", "umulhi", (torch.int32, torch.uint32, torch.int64), "umulhi",
     "tl.umulhi: the high half of the unsigned product",
     lambda x, gen: ((x, _second(x, gen)), {}), _ref_pair(lambda a, b: a * b)),
    ("tl_int64_offsets", "offsets", (torch.int32,), "int64_offsets",
     "an int32 index times an int64 stride beyond 2^31: promoted, exact",
     lambda x, gen: ((x.abs(), x.abs()), {"stride": 2**31 + 11}),
     lambda r, c, stride: r.to(torch.int64) * stride + c.to(torch.int64)),
)

OPS = tuple(primitive_op(
    name=name, suite=SUITE, primitive=IntegerPrimitive(kind), description=description,
    reference=reference, reference_kernel=f"kernels.language.integers:{launcher}",
    dtypes=dtypes, make_args=make_args, min_ndim=1, max_ndim=1, compile_shapes=((4096,),),
) for name, kind, dtypes, launcher, description, make_args, reference in _SPECS)


# ---- exact expected values (Python integers) ----------------------------------------------
def bits(dtype: torch.dtype) -> int:
    return torch.iinfo(dtype).bits


def wrap(value: int, dtype: torch.dtype) -> int:
    """``value`` modulo 2^bits, as ``dtype`` holds it (two's complement for signed)."""
    info = torch.iinfo(dtype)
    span = 1 << info.bits
    value %= span
    return value - span if info.min < 0 and value > info.max else value


def c_divmod(x: int, d: int) -> tuple[int, int]:
    """C's quotient (truncated toward zero) and remainder (the dividend's sign)."""
    q = abs(x) // abs(d)
    q = q if (x >= 0) == (d > 0) else -q
    return q, x - q * d


def shifted(x: int, s: int, dtype: torch.dtype) -> tuple[int, int]:
    """``x << s`` wrapped, and ``x >> s`` (arithmetic for signed, logical for unsigned),
    for 0 <= s < bits."""
    return wrap(x << s, dtype), x >> s  # Python's >> is arithmetic; unsigned x is >= 0


def umulhi(x: int, y: int, dtype: torch.dtype) -> int:
    """The high half of the product of ``x`` and ``y`` read as unsigned, as ``dtype``."""
    n = bits(dtype)
    ux, uy = x % (1 << n), y % (1 << n)
    return wrap((ux * uy) >> n, dtype)


# ---- known interpreter gaps, probed (so a fixed Triton is checked again at once) --------
_GAPS: dict = {}


def interpreter_gap(kind: str, dtype: torch.dtype) -> str | None:
    """Why Triton's interpreter cannot be judged on the ``kind`` primitive in ``dtype``,
    or None. Probed with a kernel of its own (never the checked one): umulhi of all ones
    by 1 and of the lowest value by 2, whose unsigned high halves are 0 and 1 (Triton
    3.6's interpreter multiplies int32 operands as signed, giving -1 and -1, and raises
    on int64 ones)."""
    if kind != "umulhi":
        return None
    if dtype not in _GAPS:
        _GAPS[dtype] = _umulhi_probe(dtype)
    return _GAPS[dtype]


def _umulhi_probe(dtype: torch.dtype) -> str | None:
    import triton
    import triton.language as tl
    from triton_cts.execution import launches
    from triton_cts.execution.interpreter_defects import interpreter_failure

    @triton.jit
    def _interpreter_umulhi_probe(X, Y, H, N: tl.constexpr):
        offs = tl.arange(0, N)
        tl.store(H + offs, tl.umulhi(tl.load(X + offs), tl.load(Y + offs)))

    low = torch.iinfo(dtype).min
    pairs = [(wrap(-1, dtype), 1), (low, 2)]
    x, y = (torch.tensor(c, dtype=dtype) for c in zip(*pairs))
    h = torch.empty_like(x)
    try:
        with launches.interpreted():
            _interpreter_umulhi_probe[(1,)](x, y, h, N=len(pairs))
    except Exception as exc:  # noqa: BLE001 - the interpreter's own failure is the gap
        return interpreter_failure(exc, f"tl.umulhi on {str(dtype).removeprefix('torch.')}")
    for (a, b), got in zip(pairs, h.tolist()):
        if got != umulhi(a, b, dtype):
            return (f"the interpreter of triton {triton.__version__} computes "
                    f"{str(dtype).removeprefix('torch.')} tl.umulhi wrongly (umulhi({a}, {b}) "
                    f"gave {got}, not {umulhi(a, b, dtype)})")
    return None
