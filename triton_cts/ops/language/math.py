"""Math functions of the Triton language, each a primitive op held to the profile's ULP
bound (``[math_ulp]``): ``tl.exp``, ``tl.exp2``, ``tl.log``, ``tl.log2``, ``tl.sqrt``,
``tl.sqrt_rn``, ``tl.rsqrt``, ``tl.sin``, ``tl.cos``, ``tl.erf``, ``tl.sigmoid``,
``libdevice.tanh``, ``tl.fdiv`` (what ``/`` computes), ``tl.div_rn`` and ``tl.fma``.

Error is counted in ULPs from the correctly rounded result: the number of representable
values of the dtype between the output and the exact result rounded to nearest even (0:
correctly rounded). A bound is a number of ULPs or ``{ulp = N, per_abs_x = K}`` (N +
floor(K * |x|): exp(x) computed as exp2(x * log2(e)), where the rounded product costs up
to about |x| ULPs). A profile without ``[math_ulp]`` (one from ``--profile-dir``) is held
to :data:`OPENCL_ULP`, the OpenCL C full-profile bounds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from triton_cts.ops.dtypes import int_dtype
from triton_cts.ops.language import primitive_op

F16, BF16, F32, F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
SUITE = "test_language_math"


@dataclass(frozen=True)
class MathFunction:
    """A math primitive: ``function`` is its ``[math_ulp]`` key and ulp-table name;
    ``arity`` its float arguments; ``exact`` the function on mpmath numbers (the float64
    reference's reference); ``domain`` the values it is drawn on (``language_strategies``:
    "all", "positive", "trig", "exp"); ``libdevice`` whether kernels reach it through
    ``triton.language.extra.libdevice`` (a backend's math library)."""

    function: str
    arity: int
    exact: Callable
    domain: str = "all"
    libdevice: bool = False

    def __repr__(self) -> str:
        return f"MathFunction({self.function})"


def _mp():
    import mpmath
    return mpmath


def _sigmoid(x):
    mp = _mp()
    return 1 / (1 + mp.exp(-x))


def _rsqrt(x):
    mp = _mp()
    return 1 / mp.sqrt(x)


FUNCTIONS = {
    "exp": MathFunction("exp", 1, lambda x: _mp().exp(x), "exp"),
    "exp2": MathFunction("exp2", 1, lambda x: _mp().power(2, x), "exp"),
    "log": MathFunction("log", 1, lambda x: _mp().log(x), "positive"),
    "log2": MathFunction("log2", 1, lambda x: _mp().log(x, 2), "positive"),
    "sqrt": MathFunction("sqrt", 1, lambda x: _mp().sqrt(x), "positive"),
    "sqrt_rn": MathFunction("sqrt_rn", 1, lambda x: _mp().sqrt(x), "positive"),
    "rsqrt": MathFunction("rsqrt", 1, _rsqrt, "positive"),
    "sin": MathFunction("sin", 1, lambda x: _mp().sin(x), "trig"),
    "cos": MathFunction("cos", 1, lambda x: _mp().cos(x), "trig"),
    "erf": MathFunction("erf", 1, lambda x: _mp().erf(x), "all"),
    "sigmoid": MathFunction("sigmoid", 1, _sigmoid, "exp"),
    "tanh": MathFunction("tanh", 1, lambda x: _mp().tanh(x), "all", libdevice=True),
    "fdiv": MathFunction("fdiv", 2, lambda x, y: x / y, "all"),
    "div_rn": MathFunction("div_rn", 2, lambda x, y: x / y, "all"),
    "fma": MathFunction("fma", 3, lambda x, y, z: x * y + z, "all"),
}

#: The dtypes each function takes in Triton: ``tl.exp`` and most others accept float32
#: and float64 only (``_check_dtype`` in triton/language/math.py), ``sqrt_rn`` and
#: ``div_rn`` float32 only; ``fdiv`` and ``fma`` any float.
DTYPES = {name: (F32, F64) for name in FUNCTIONS}
DTYPES.update(sqrt_rn=(F32,), div_rn=(F32,), fdiv=(F16, BF16, F32, F64),
              fma=(F16, BF16, F32, F64))

#: OpenCL C 3.0 specification, "Relative Error as ULPs" (full profile, correctly rounded
#: divide and sqrt not required), as ULPs from the correctly rounded result: a bound of
#: b ULPs from the exact result allows floor(b + 0.5) from the correctly rounded one.
#: The bound of a profile that has no [math_ulp] table.
OPENCL_ULP = {
    "exp": {F32: 3, F64: 3}, "exp2": {F32: 3, F64: 3}, "log": {F32: 3, F64: 3},
    "log2": {F32: 3, F64: 3}, "sqrt": {F32: 3, F64: 0}, "sqrt_rn": {F32: 0},
    "rsqrt": {F32: 2, F64: 2}, "sin": {F32: 4, F64: 4}, "cos": {F32: 4, F64: 4},
    "erf": {F32: 16, F64: 16}, "tanh": {F32: 5, F64: 5},
    # sigmoid = 1 / (1 + exp(-x)) (triton/language/standard.py): exp, the add, the divide
    "sigmoid": {F32: 7, F64: 4},
    "fdiv": {F16: 1, BF16: 1, F32: 3, F64: 0}, "div_rn": {F32: 0},
    "fma": {F16: 0, BF16: 0, F32: 0, F64: 0},
}
OPENCL_SOURCE = "OpenCL C specification (profile has no [math_ulp] table)"


@dataclass(frozen=True)
class Bound:
    """ULPs allowed at argument x: ``ulp + floor(per_abs_x * |x|)``."""

    ulp: float
    per_abs_x: float = 0.0
    source: str = ""

    def at(self, x: torch.Tensor) -> torch.Tensor:
        return self.ulp + torch.floor(self.per_abs_x * x.double().abs().nan_to_num(0.0, 0.0, 0.0))

    def __str__(self) -> str:
        return f"{self.ulp:g}" + (f" + {self.per_abs_x:g}|x|" if self.per_abs_x else "")


def bound(profile, function: str, dtype: torch.dtype) -> Bound | None:
    """The profile's bound for ``function`` in ``dtype``; the OpenCL bound where the
    profile has no [math_ulp] table; None where its table states none for them."""
    name = str(dtype).removeprefix("torch.")
    table = profile.data.get("math_ulp")
    if table is None:
        b = OPENCL_ULP.get(function, {}).get(dtype)
        return None if b is None else Bound(b, 0.0, OPENCL_SOURCE)
    entry = table.get(function, {}).get(name)
    if entry is None:
        return None
    source = f"{profile.name} [math_ulp] {function}.{name}"
    if isinstance(entry, dict):
        return Bound(entry["ulp"], entry["per_abs_x"], source)
    return Bound(entry, 0.0, source)


def _torch_reference(function: str):
    """Float64 torch reference of the OpSpec (the language suite uses mpmath instead)."""
    def unary(x):
        x = x.double()
        return {"exp": torch.exp, "exp2": torch.exp2, "log": torch.log, "log2": torch.log2,
                "sqrt": torch.sqrt, "sqrt_rn": torch.sqrt, "rsqrt": torch.rsqrt,
                "sin": torch.sin, "cos": torch.cos, "erf": torch.erf,
                "sigmoid": torch.sigmoid, "tanh": torch.tanh}[function](x)

    def binary(x, y):
        return x.double() / y.double()

    def ternary(x, y, z):
        return x.double() * y.double() + z.double()

    return {1: unary, 2: binary, 3: ternary}[FUNCTIONS[function].arity]


def _make_args(arity: int):
    def make(x, gen):
        others = tuple(torch.randn(x.shape, generator=gen, dtype=torch.float64).to(x.dtype)
                       for _ in range(arity - 1))
        if arity == 2:  # a divisor away from zero
            others = (others[0].abs() + 1,)
        return (x, *others), {}
    return make


def _mode_gaps(fn: MathFunction) -> dict:
    if not fn.libdevice:
        return {}
    why = (f"Triton's interpreter has no libdevice: {fn.function} is a backend math-library "
           f"call (triton.language.extra.libdevice), which only compiled kernels link")
    return {("interpreter", dtype): why for dtype in DTYPES[fn.function]}


def _spec(fn: MathFunction):
    name = fn.function
    return primitive_op(
        name=f"tl_{name}",
        suite=SUITE,
        primitive=fn,
        description=(f"libdevice.{name}" if fn.libdevice else f"tl.{name}")
        + f" ({fn.arity} argument{'s' if fn.arity > 1 else ''}), ULPs against the exact result",
        reference=_torch_reference(name),
        reference_kernel=f"kernels.language.math:{name}",
        dtypes=DTYPES[name],
        make_args=_make_args(fn.arity),
        min_ndim=1, max_ndim=1,
        compile_shapes=((4096,),),
        mode_gaps=_mode_gaps(fn),
    )


OPS = tuple(_spec(fn) for fn in FUNCTIONS.values())


def ulp_distance(out: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    """Representable values of the dtype between ``out`` and ``expected`` (same dtype),
    per element, as float64: 0 where equal (+0 and -0 too, and NaN and NaN), inf where
    exactly one is NaN. Infinities count as one step past the largest finite value."""
    bits = int_dtype(out.dtype.itemsize)
    low_bits = (1 << (8 * out.dtype.itemsize - 1)) - 1  # all but the sign bit

    def ordinal(t):  # magnitude and sign of the bit pattern, as int64
        i = t.contiguous().view(bits).to(torch.int64)
        return i & low_bits, i < 0

    (ma, sa), (mb, sb) = ordinal(out), ordinal(expected)
    # same sign: an exact int64 difference; opposite signs: the magnitudes add (huge, so
    # float64's rounding of them no longer matters)
    dist = torch.where(sa == sb, (ma - mb).abs().double(), ma.double() + mb.double())
    nan_out, nan_exp = torch.isnan(out), torch.isnan(expected)
    dist = torch.where(nan_out & nan_exp, torch.zeros_like(dist), dist)
    return torch.where(nan_out ^ nan_exp, torch.full_like(dist, math.inf), dist)


# ---- the exact reference: each result correctly rounded to the dtype ------------------
def to_nearest(a: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """float64 ``a`` rounded to nearest even in ``dtype`` once. torch converts float64 to
    float16 and bfloat16 through float32, rounding twice: -40831.99897 becomes -40832.0 in
    float32, a halfway point, then -40960 in bfloat16 where -40704 is nearest (found on an
    H100, seed 22: a correct fma counted 1 ULP off). Rounding to float32 to odd first
    (toward zero, the last bit set where inexact) keeps the second rounding exact: float32
    has more than two bits beyond either dtype's and their exponent ranges."""
    if dtype in (torch.float64, torch.float32) or not a.dtype.is_floating_point:
        return a.to(dtype)
    a = a.double()
    y = a.to(torch.float32)
    # toward zero: a float32 rounded away from zero steps back one ulp
    over = torch.isfinite(a) & (y.double().abs() > a.abs())
    y = torch.where(over, torch.nextafter(y, torch.zeros_like(y)), y)
    inexact = torch.isfinite(a) & (y.double() != a)
    bits = y.view(torch.int32)
    y = torch.where(inexact, bits | 1, bits).view(torch.float32)
    return y.to(dtype)


def round_exact(values: list, dtype: torch.dtype) -> torch.Tensor:
    """Exact values (``Fraction``s, or mpmath numbers with enough bits) rounded to nearest
    even in ``dtype``, without the double rounding of going through float64. The float64
    rounding ``a`` of an exact ``v`` rounds to the same ``dtype`` value as ``v`` unless
    ``a`` is exactly halfway between two ``dtype`` values (no halfway point, itself a
    float64, can lie strictly between ``v`` and its nearest float64 ``a``); there the
    sign of ``v - a`` decides."""
    from fractions import Fraction
    approx = []
    for v in values:
        try:
            approx.append(float(v))
        except OverflowError:  # a Fraction beyond float64
            approx.append(math.inf if v > 0 else -math.inf)
    a = torch.tensor(approx, dtype=torch.float64)
    if dtype == torch.float64:
        return a
    r = to_nearest(a, dtype).double()
    other = 2 * a - r  # r reflected through a: a dtype value only where a is halfway
    halfway = (a != r) & torch.isfinite(r) & torch.isfinite(other) \
        & (to_nearest(other, dtype).double() == other)
    for i in torch.nonzero(halfway).flatten().tolist():
        exact = Fraction(values[i])
        if exact != Fraction(approx[i]):
            up = exact > Fraction(approx[i])
            r[i] = max(r[i], other[i]) if up else min(r[i], other[i])
    return r.to(dtype)


def correctly_rounded(function: str, dtype: torch.dtype, *inputs: torch.Tensor) -> torch.Tensor:
    """``function`` of ``inputs`` (tensors of ``dtype``) exactly, rounded to nearest even in
    ``dtype``: IEEE special cases (NaN, infinities, zeros, poles) from float64 torch, which
    gets them right; every finite result from the exact value: a ``Fraction`` for
    division and fma, mpmath at 160 bits for the transcendental functions (float64
    inputs), or float64 torch rounded once to the smaller dtype, whose error is far below
    that dtype's half ULP, for the rest."""
    from fractions import Fraction
    fn = FUNCTIONS[function]
    ref64 = _torch_reference(function)(*inputs)
    exact_args = function in ("fdiv", "div_rn", "fma")
    # float64 may overflow where the exact result does not (x * m in an fma): division
    # and fma take the exact path for every finite input (and non-zero divisor)
    finite = torch.ones_like(ref64, dtype=torch.bool) if exact_args \
        else torch.isfinite(ref64) & (ref64 != 0)
    for t in inputs:
        finite &= torch.isfinite(t)
    if function in ("fdiv", "div_rn"):
        finite &= inputs[1] != 0
    out = ref64.clone()
    if exact_args or dtype == torch.float64:
        mp = _mp()
        cols = [t.double().tolist() for t in inputs]
        index, values = [], []
        with mp.workprec(160):
            for i in torch.nonzero(finite).flatten().tolist():
                args = [c[i] for c in cols]
                if exact_args:
                    value = fn.exact(*(Fraction(a) for a in args))
                else:  # huge trig arguments: bits enough to reduce them exactly
                    extra = max(0, math.frexp(args[0])[1]) if fn.domain == "trig" else 0
                    with mp.workprec(160 + extra):
                        value = +fn.exact(*(mp.mpf(a) for a in args))
                    if isinstance(value, mp.mpc):  # outside the real domain
                        out[i] = math.nan
                        continue
                index.append(i)
                values.append(value)
        if index:
            out[torch.tensor(index)] = round_exact(values, dtype).double()
    return to_nearest(out, dtype)


# ---- known interpreter gaps, probed (so a fixed Triton is checked again at once) --------
def interpreter_gap(function: str, dtype: torch.dtype) -> str | None:
    """Why Triton's interpreter cannot be judged on ``function`` in ``dtype``, or None.
    Probed with a kernel of its own (never the checked one) on inputs whose right answer
    is exact:

    - fma: 1.5 * 2 + 0.25 and -2 * 3 + 1 (Triton 3.6 keeps bfloat16 as raw 16-bit
      integers and multiplies those), and (1 + 2^-p)^2 - (1 + 2^(1-p)), which is 2^-2p
      fused and 0 when the product is rounded first (Triton 3.6 rounds it in every
      float format);
    - fdiv: 3 / 2 and -7 / 4 (Triton 3.6 divides bfloat16's raw bits)."""
    if function not in _PROBES or dtype not in (torch.bfloat16, torch.float16, torch.float32,
                                                torch.float64):
        return None
    key = (function, dtype)
    if key not in _GAPS:
        _GAPS[key] = _probe(function, dtype)
    return _GAPS[key]


def _fma_inputs(dtype):
    p = _mantissa_bits(dtype) // 2 + 1  # (1 + 2^-p)^2's last bit lies below the format
    one_p = 1 + 2.0 ** -p
    return ([1.5, -2.0, one_p, 1.0], [2.0, 3.0, one_p, 1.0],
            [0.25, 1.0, -(1 + 2.0 ** (1 - p)), 0.0]), [3.25, -5.0, 2.0 ** (-2 * p), 1.0]


def _fdiv_inputs(dtype):
    return ([3.0, -7.0], [2.0, 4.0]), [1.5, -1.75]


def _mantissa_bits(dtype) -> int:
    return -int(math.log2(torch.finfo(dtype).eps))


_PROBES = {"fma": _fma_inputs, "fdiv": _fdiv_inputs}
_GAPS: dict = {}


def _probe(function: str, dtype: torch.dtype) -> str | None:
    import triton
    from triton_cts.execution import launches
    columns, want = _PROBES[function](dtype)
    x, m, *a = (torch.tensor(c, dtype=dtype) for c in columns)
    a = a[0] if a else torch.zeros_like(x)
    out = torch.empty_like(x)
    with launches.interpreted():
        _arith_probe()[(1,)](x, m, a, out, N=x.numel(), FMA=function == "fma")
    got = out.double().tolist()
    if got == want:
        return None
    args = list(zip(*columns))
    first = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
    return (f"the interpreter of triton {triton.__version__} computes "
            f"{str(dtype).removeprefix('torch.')} tl.{function} wrongly "
            f"({function}{tuple(args[first])} gave {got[first]!r}, not {want[first]!r})")


def _arith_probe():
    """A harness kernel (not the checked one): OUT = fma(X, M, A) or fdiv(X, M), over N
    elements (a power of two: no masked load, whose fill value Triton 3.6's interpreter
    cannot build in bfloat16)."""
    import triton
    import triton.language as tl

    @triton.jit
    def _interpreter_arith_probe(X, M, A, OUT, N: tl.constexpr, FMA: tl.constexpr):
        offs = tl.arange(0, N)
        x = tl.load(X + offs)
        m = tl.load(M + offs)
        if FMA:
            out = tl.fma(x, m, tl.load(A + offs))
        else:
            out = tl.fdiv(x, m)
        tl.store(OUT + offs, out)

    return _interpreter_arith_probe
