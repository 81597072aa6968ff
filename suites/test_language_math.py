"""The Triton language's math functions, conversions, integer semantics and random
numbers, each a property over drawn inputs, per profile and mode
(primitives: ``triton_cts/ops/language/{math,conversions,integers,random}.py``).

- Math: every function runs on its special values (±0, ±1, ±inf, NaN, subnormals, the
  largest finite values, exp's overflow and underflow edges, huge sin/cos arguments) and
  on values over the dtype's whole range or the function's working range; each result is
  held to the profile's ``[math_ulp]`` bound, in ULPs from the correctly rounded result
  (NaN must give NaN, an exact infinity the same infinity). The largest error per
  function and dtype goes into the report's ulp table. Flushing subnormal inputs or
  results to zero is accepted (CUDA's ftz approximations do it) and recorded.
- Conversions: narrowing rounds to nearest even, widening is exact, float to int
  truncates, int to float rounds to nearest even; what C leaves undefined is recorded.
- Integers: C division, shifts, wrap-around, umulhi, int64 index arithmetic.
- Random: the reference Philox's bits, Box-Muller within 1e-5, uniformity.

Implementation-defined results go into the behaviour table (``behaviour.record``), never
a failure. Where Triton's interpreter is itself wrong, a probe finds it and the check is
not supported, with the reason.
"""
import numpy as np
import pytest
import torch
from hypothesis import given, note, strategies as st

from suites import language_strategies as ls
from suites import runner
from triton_cts.execution import interpreter_defects
from triton_cts.execution.modes import Mode
from triton_cts.ops.language import is_a
from triton_cts.ops.language import conversions as lc
from triton_cts.ops.language import integers as lm_int
from triton_cts.ops.language import math as lm
from triton_cts.ops.language import random as lrand
from triton_cts.results import behaviour
from triton_cts.results.status import NOT_SUPPORTED

#: Elements of the worst failures listed in a failure message.
SHOWN = 6


@pytest.fixture
def ulps(record_property) -> behaviour.MaxUlp:
    """The check's running maximum ULP error per function and dtype, over its examples."""
    return behaviour.MaxUlp(record_property)


def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _judge(fn, dtype, bound, inputs, out):
    """Per element: the ULP distance counted (after an accepted flush), whether it is
    within the bound, and which flushes the output shows."""
    expected = lm.correctly_rounded(fn.function, dtype, *inputs)
    dist = lm.ulp_distance(out, expected)
    flushed_in = tuple(ls.flush_subnormals(t) for t in inputs)
    had_subnormal = torch.zeros_like(dist, dtype=torch.bool)
    for t in inputs:
        had_subnormal |= (t != 0) & (t.abs() < torch.finfo(dtype).tiny)
    alt = lm.correctly_rounded(fn.function, dtype, *flushed_in) if had_subnormal.any() \
        else expected
    alt_dist = lm.ulp_distance(out, alt)
    tiny = torch.finfo(dtype).tiny
    out_zero = out == 0
    result_flush = out_zero & (expected != 0) & (expected.abs() < tiny)
    input_flush = had_subnormal & (alt_dist < dist)
    counted = torch.where(input_flush, alt_dist, dist)
    counted = torch.where(result_flush, torch.zeros_like(counted), counted)
    allowed = bound.at(inputs[0])
    return expected, counted, counted <= allowed, allowed, result_flush, input_flush, \
        had_subnormal


def _describe_failures(fn, dtype, inputs, out, expected, counted, allowed, ok):
    bad = torch.nonzero(~ok).flatten()
    worst = bad[torch.argsort(counted[bad], descending=True)][:SHOWN].tolist()
    lines = []
    for i in worst:
        args = ", ".join(f"{float(t[i]):.9g}" for t in inputs)
        lines.append(f"{fn.function}({args}) = {float(out[i]):.9g}, correctly rounded "
                     f"{float(expected[i]):.9g}: {float(counted[i]):g} ULP > {float(allowed[i]):g}")
    return f"{int(bad.numel())} of {out.numel()} {_dtype_name(dtype)} results out of bounds:\n  " \
        + "\n  ".join(lines)


#: What Triton's interpreter evaluates each function with: numpy, i.e. the host's libm.
_HOST = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
         "sqrt_rn": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "sin": np.sin,
         "cos": np.cos, "sigmoid": lambda x: 1 / (1 + np.exp(-x))}


def _host_libm_beyond_bound(fn, dtype, inputs, out, ok) -> torch.Tensor:
    """Elements out of bounds where the interpreter returned exactly what the host's libm
    (numpy) gives: the interpreter's math is the host's, so there it measures the host
    library, not the kernel (glibc's cos of 6381956970095103 * 2^797 is 8 ULP off)."""
    host = _HOST.get(fn.function)
    if host is None or dtype not in (torch.float32, torch.float64):
        return torch.zeros_like(ok)
    with np.errstate(all="ignore"):
        ref = torch.from_numpy(np.asarray(host(inputs[0].numpy()), dtype=inputs[0].numpy().dtype))
    return ~ok & (lm.ulp_distance(out, ref) == 0)


def _unjudgeable(target, fn, dtype, inputs, out, ok, expected, record_property) -> torch.Tensor:
    """Elements the interpreter cannot be judged on, each group recorded on the check:
    where it returned the host libm's own result beyond the bound, and where a known
    interpreter defect makes the result meaningless (bfloat16 subnormals, which it
    converts wrongly: ``interpreter_defects``)."""
    none = torch.zeros(expected.shape, dtype=torch.bool)
    if target.mode is not Mode.INTERPRETER:
        return none
    host = _host_libm_beyond_bound(fn, dtype, inputs, out, ok)
    if host.any():
        i = int(torch.nonzero(host)[0])
        record_property("values not judged (host libm)",
                        f"{int(host.sum())}: the interpreter computes {fn.function} with the "
                        f"host's numpy, itself beyond the bound (e.g. {fn.function}"
                        f"({float(inputs[0][i])!r}) = {float(out[i])!r})")
        none |= host
    why = interpreter_defects.excluded_value_kinds(dtype).get("tiny")
    if why is None:
        return none
    tiny = torch.finfo(dtype).tiny
    sub = torch.zeros_like(none)
    exact64 = target.op.reference(*inputs)  # results that underflow before rounding too
    for t in (*inputs, expected, exact64):
        sub |= (t != 0) & (t.abs() < tiny)
    if sub.any():
        record_property("values not judged (bfloat16 subnormals)",
                        f"{int(sub.sum())} with bfloat16 subnormal inputs or results: {why}")
    return none | sub


@pytest.mark.cts_modes("device", "interpreter")
@pytest.mark.cts_targets(predicate=is_a(lm.MathFunction))
@given(data=st.data())
def test_ulp_within_profile_bound(target, dtype, data, repro, record_property, ulps):
    """Every result within the profile's ULP bound of the correctly rounded one, special
    values included; the largest error goes into the ulp table."""
    fn = target.op.primitive
    bound = lm.bound(target.profile, fn.function, dtype)
    if bound is None:
        pytest.skip(f"{NOT_SUPPORTED}profile {target.profile.name} states no ULP bound for "
                    f"{fn.function} {_dtype_name(dtype)} ([math_ulp])")
    gap = lm.interpreter_gap(fn.function, dtype) if target.mode is Mode.INTERPRETER else None
    if gap:
        pytest.skip(NOT_SUPPORTED + gap)
    case = data.draw(ls.math_cases(fn, dtype), label="case")
    profile = data.draw(ls.launch_profiles(target.profile), label="launch profile")
    note(f"case: {case.describe()}; launch profile {profile.name}")
    out = runner.run_target(target, case.inputs, {}, profile=profile)
    expected, counted, ok, allowed, result_flush, input_flush, had_sub = _judge(
        fn, dtype, bound, case.inputs, out)
    unjudged = _unjudgeable(target, fn, dtype, case.inputs, out, ok, expected, record_property)
    ok |= unjudged
    counted = torch.where(unjudged, torch.zeros_like(counted), counted)
    name = _dtype_name(dtype)
    worst = ulps.add(fn.function, name, float(counted.max()), bound.ulp if not bound.per_abs_x
                     else str(bound), bound.source)
    if result_flush.any():
        behaviour.record(record_property, f"{fn.function} {name} subnormal results",
                         "flushed to zero")
    if input_flush.any():
        behaviour.record(record_property, f"{fn.function} {name} subnormal inputs",
                         "flushed to zero")
    elif had_sub.any() and bool(ok[had_sub].all()):
        behaviour.record(record_property, f"{fn.function} {name} subnormal inputs", "kept")
    if not bool(ok.all()):
        raise AssertionError(
            f"{target.op.name}[{target.impl.name}] on {profile.name} ({target.mode}): "
            + _describe_failures(fn, dtype, case.inputs, out, expected, counted, allowed, ok)
            + f"\nbound: {bound} ULP ({bound.source}); largest error over the check so far: "
              f"{worst:g} ULP; case: {case.describe()}\nreproduce: {repro}")


# ---- conversions ---------------------------------------------------------------------------
def _same(out: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """Per element: equal values, or both NaN (any NaN pattern)."""
    o, w = out.double(), want.double()
    return (o == w) | (torch.isnan(o) & torch.isnan(w))


def _fail_conversion(target, profile, what, x, out, want, bad, case, repro):
    shown = torch.nonzero(bad).flatten()[:SHOWN].tolist()
    lines = [f"{float(x[i])!r} -> {float(out[i].double())!r}, expected {float(want[i].double())!r}"
             for i in shown]
    raise AssertionError(f"{target.op.name}[{target.impl.name}] on {profile.name} "
                         f"({target.mode}): {int(bad.sum())} of {x.numel()} {what}:\n  "
                         + "\n  ".join(lines) + f"\n{case}\nreproduce: {repro}")


def _conversion_gap(target, src, dst):
    if target.mode is Mode.INTERPRETER:
        gap = lc.interpreter_gap(src, dst)
        if gap:
            pytest.skip(NOT_SUPPORTED + gap)


@pytest.mark.cts_modes("device", "interpreter")
@pytest.mark.cts_targets(predicate=lambda t: getattr(t.op.primitive, "direction", "") == "down")
@given(data=st.data())
def test_narrowing_rounds_to_nearest_even(target, dtype, data, repro, record_property):
    """float32 to a narrower float: round to nearest even (ties to even, subnormals
    kept), NaN stays NaN; values beyond the range: saturate, infinity or NaN, recorded."""
    _conversion_gap(target, torch.float32, dtype)
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
    profile = data.draw(ls.launch_profiles(target.profile), label="launch profile")
    x = ls.narrowing_inputs(dtype, seed, 64)
    out = runner.run_target(target, (x,), {"dtype": dtype}, profile=profile)
    name = f"float32->{_dtype_name(dtype)}"
    over = lc.rounding_overflows(x, dtype) | torch.isinf(x)
    want = lc.expected_down(x, dtype)
    bad = ~over & ~_same(out, want)
    if bad.any():
        _fail_conversion(target, profile, "results not rounded to nearest even", x, out, want,
                         bad, f"seed {seed}", repro)
    kinds = lc.classify_overflow(out[over], x[over], dtype)
    wrong = [k for k in kinds if k.startswith("other")]
    if wrong:
        raise AssertionError(f"{target.op.name} on {profile.name} ({target.mode}): {name} "
                             f"beyond the range gave neither the largest finite value, "
                             f"infinity nor NaN: {wrong[:SHOWN]}\nreproduce: {repro}")
    finite_over = torch.isfinite(x[over])
    behaviour.record(record_property, f"{name} beyond the range",
                     sorted(set(k for k, f in zip(kinds, finite_over.tolist()) if f)))
    behaviour.record(record_property, f"{name} of infinity",
                     sorted(set(k for k, f in zip(kinds, finite_over.tolist()) if not f)))


@pytest.mark.cts_modes("device", "interpreter")
@pytest.mark.cts_targets(predicate=lambda t: getattr(t.op.primitive, "direction", "") == "up")
@given(data=st.data())
def test_widening_is_exact(target, dtype, data, repro):
    """A narrow float to float32: every value exactly, infinities kept, NaN stays NaN."""
    _conversion_gap(target, dtype, torch.float32)
    profile = data.draw(ls.launch_profiles(target.profile), label="launch profile")
    x = ls.widening_inputs(dtype)
    out = runner.run_target(target, (x,), {}, profile=profile)
    want = x.float()
    bad = ~_same(out, want)
    if bad.any():
        _fail_conversion(target, profile, "values not converted exactly", x, out, want, bad,
                         "every bit pattern", repro)


@pytest.mark.cts_modes("device", "interpreter")
@pytest.mark.cts_targets(predicate=lambda t: getattr(t.op.primitive, "direction", "") == "to_int")
@given(data=st.data())
def test_float_to_int_truncates(target, dtype, data, repro, record_property):
    """float32 to an integer truncates toward zero where the result fits; what NaN, the
    infinities and values beyond the range give is recorded (C leaves it undefined)."""
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
    profile = data.draw(ls.launch_profiles(target.profile), label="launch profile")
    x, undefined = ls.float_to_int_inputs(dtype, seed, 64)
    probe = torch.tensor(list(undefined.values()), dtype=torch.float32)
    out = runner.run_target(target, (torch.cat([x, probe]),), {"dtype": dtype}, profile=profile)
    want, fits = lc.expected_int(x, dtype)
    got = out[:x.numel()].to(torch.int64)
    bad = fits & (got != want)
    if bad.any():
        _fail_conversion(target, profile, "values not truncated toward zero", x, got, want,
                         bad, f"seed {seed}", repro)
    results = out[x.numel():].tolist()
    behaviour.record(record_property, f"float32->{_dtype_name(dtype)} undefined inputs",
                     dict(zip(undefined, results)))


@pytest.mark.cts_modes("device", "interpreter")
@pytest.mark.cts_targets(predicate=lambda t: getattr(t.op.primitive, "direction", "") == "from_int")
@given(data=st.data())
def test_int_to_float_rounds_to_nearest_even(target, dtype, data, repro):
    """An integer to float32 rounds to nearest even (2^24 + 1 gives 2^24)."""
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
    profile = data.draw(ls.launch_profiles(target.profile), label="launch profile")
    x = ls.int_to_float_inputs(dtype, seed, 64)
    out = runner.run_target(target, (x,), {}, profile=profile)
    want = lc.expected_from_int(x)
    bad = ~_same(out, want)
    if bad.any():
        _fail_conversion(target, profile, "integers not rounded to nearest even", x, out,
                         want, bad, f"seed {seed}", repro)


# ---- integers ------------------------------------------------------------------------------
def _integer(kind):
    return lambda t: getattr(t.op.primitive, "kind", "") == kind


def _fail_integers(target, profile, what, rows, repro):
    raise AssertionError(f"{target.op.name}[{target.impl.name}] on {profile.name} "
                         f"({target.mode}): {len(rows)} {what}:\n  "
                         + "\n  ".join(rows[:SHOWN]) + f"\nreproduce: {repro}")


def _int_case(data, target, dtype):
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
    profile = data.draw(ls.launch_profiles(target.profile), label="launch profile")
    x, y = ls.int_operands(dtype, seed, 64)
    return profile, x, y


@pytest.mark.cts_modes("device", "interpreter")
@pytest.mark.cts_targets(predicate=_integer("divmod"))
@given(data=st.data())
def test_division_follows_c(target, dtype, data, repro, record_property):
    """``//`` truncates toward zero and ``%`` takes the dividend's sign (C, not Python);
    what INT_MIN // -1 gives is recorded; division by zero is not tried."""
    profile, x, y = _int_case(data, target, dtype)
    keep = y != 0
    x, y = x[keep], y[keep]
    q, r = runner.run_target(target, (x, y), {}, profile=profile)
    xs, ys, qs, rs = (ls.as_python_ints(t) for t in (x, y, q, r))
    info = torch.iinfo(dtype)
    bad = []
    for a, b, got_q, got_r in zip(xs, ys, qs, rs):
        if a == info.min and b == -1 and info.min < 0:
            behaviour.record(record_property, f"{_dtype_name(dtype)} MIN // -1, MIN % -1",
                             [got_q, got_r])
            continue
        want_q, want_r = lm_int.c_divmod(a, b)
        if (got_q, got_r) != (want_q, want_r):
            python = "Python's floor division" if (got_q, got_r) == divmod(a, b) else "neither C"
            bad.append(f"{a} // {b} = {got_q}, {a} % {b} = {got_r}; C gives {want_q}, "
                       f"{want_r} ({python})")
    if bad:
        _fail_integers(target, profile, "quotients or remainders not C's", bad, repro)


@pytest.mark.cts_modes("device", "interpreter")
@pytest.mark.cts_targets(predicate=_integer("shift"))
@given(data=st.data())
def test_shifts(target, dtype, data, repro, record_property):
    """``<<`` wraps and ``>>`` is arithmetic for signed, logical for unsigned types, for
    every shift below the bit width; what shifts by the width or more give is recorded."""
    profile, x, _ = _int_case(data, target, dtype)
    n = lm_int.bits(dtype)
    amounts = list(range(n)) * (x.numel() // n + 1)
    s = ls.from_python_ints(amounts[:x.numel()], dtype)
    wide = ls.from_python_ints([n, n + 1, 2 * n - 1, 2 * n] * 2, dtype)
    probe = ls.from_python_ints([1, 1, 1, 1] + [-1 if torch.iinfo(dtype).min else
                                               torch.iinfo(dtype).max] * 4, dtype)
    left, right = runner.run_target(target, (torch.cat([x, probe]), torch.cat([s, wide])), {},
                                    profile=profile)
    xs, ss = ls.as_python_ints(x), ls.as_python_ints(s)
    ls_, rs_ = ls.as_python_ints(left), ls.as_python_ints(right)
    bad = [f"{a} << {b} = {gl}, {a} >> {b} = {gr}; expected {lm_int.shifted(a, b, dtype)}"
           for a, b, gl, gr in zip(xs, ss, ls_, rs_) if (gl, gr) != lm_int.shifted(a, b, dtype)]
    if bad:
        _fail_integers(target, profile, "shifts below the bit width wrong", bad, repro)
    k = x.numel()
    pv, wv = ls.as_python_ints(probe), ls.as_python_ints(wide)
    behaviour.record(record_property, f"{_dtype_name(dtype)} shift by >= {n} bits", {
        f"{pv[i]} {op} {wv[i]}": (ls_ if op == "<<" else rs_)[k + i]
        for i in range(len(pv)) for op in (("<<",) if i < 4 else (">>",))})


@pytest.mark.cts_modes("device", "interpreter")
@pytest.mark.cts_targets(predicate=_integer("wrap"))
@given(data=st.data())
def test_overflow_wraps_around(target, dtype, data, repro):
    """``+``, ``-`` and ``*`` wrap around modulo 2^bits (two's complement)."""
    profile, x, y = _int_case(data, target, dtype)
    outs = runner.run_target(target, (x, y), {}, profile=profile)
    xs, ys = ls.as_python_ints(x), ls.as_python_ints(y)
    bad = []
    for name, op, got in zip("+-*", (int.__add__, int.__sub__, int.__mul__), outs):
        for a, b, g in zip(xs, ys, ls.as_python_ints(got)):
            if g != lm_int.wrap(op(a, b), dtype):
                bad.append(f"{a} {name} {b} = {g}, expected {lm_int.wrap(op(a, b), dtype)}")
    if bad:
        _fail_integers(target, profile, "results not wrapped modulo 2^bits", bad, repro)


@pytest.mark.cts_modes("device", "interpreter")
@pytest.mark.cts_targets(predicate=_integer("umulhi"))
@given(data=st.data())
def test_umulhi(target, dtype, data, repro):
    """``tl.umulhi(x, y)``: the high half of the product of x and y read as unsigned."""
    gap = lm_int.interpreter_gap("umulhi", dtype) if target.mode is Mode.INTERPRETER else None
    if gap:
        pytest.skip(NOT_SUPPORTED + gap)
    profile, x, y = _int_case(data, target, dtype)
    out = runner.run_target(target, (x, y), {}, profile=profile)
    bad = [f"umulhi({a}, {b}) = {g}, expected {lm_int.umulhi(a, b, dtype)}"
           for a, b, g in zip(ls.as_python_ints(x), ls.as_python_ints(y), ls.as_python_ints(out))
           if g != lm_int.umulhi(a, b, dtype)]
    if bad:
        _fail_integers(target, profile, "high halves wrong", bad, repro)


@pytest.mark.cts_modes("device", "interpreter")
@pytest.mark.cts_targets(predicate=_integer("offsets"))
@given(data=st.data())
def test_int64_offsets_past_2_31(target, dtype, data, repro):
    """An int32 row index times an int64 stride past 2^31, plus a column, is exact: the
    product promotes to int64 (offsets of a tensor larger than 2^31 elements; index
    arithmetic only, nothing that large is allocated)."""
    stride = data.draw(st.sampled_from([2**31 + 11, 2**32 - 1, 3 * 2**31 + 5, 2**40 + 3]),
                       label="stride")
    profile, rows, cols = _int_case(data, target, dtype)
    rows, cols = rows.abs() % 4096, cols.abs()  # rows * stride stays far below 2^63
    out = runner.run_target(target, (rows, cols), {"stride": stride}, profile=profile)
    want = [r * stride + c for r, c in zip(rows.tolist(), cols.tolist())]
    bad = [f"{r} * {stride} + {c} = {g}, expected {w}"
           for r, c, g, w in zip(rows.tolist(), cols.tolist(), out.tolist(), want) if g != w]
    if bad:
        _fail_integers(target, profile, "offsets wrong (an int32 product truncated?)", bad,
                       repro)


# ---- random numbers ------------------------------------------------------------------------
def _random(kind):
    return lambda t: getattr(t.op.primitive, "kind", "") == kind


@pytest.mark.cts_modes("device", "interpreter")
@pytest.mark.cts_targets(predicate=lambda t: getattr(t.op.primitive, "kind", "") in
                         ("randint", "rand"))
@given(data=st.data())
def test_random_bits_match_philox(target, dtype, data, repro):
    """``tl.randint`` and ``tl.rand`` give the bits of the reference Philox 4x32-10 for
    the same seed and offsets: the same in every mode and on every target."""
    kind = target.op.primitive.kind
    seed, offsets = data.draw(ls.philox_inputs(dtype), label="seed and offsets")
    profile = data.draw(ls.launch_profiles(target.profile), label="launch profile")
    out = runner.run_target(target, (offsets,), {"seed": seed}, profile=profile)
    want = torch.from_numpy(lrand.reference(kind, seed, offsets))
    bits = torch.int64 if kind == "randint" else torch.int32
    bad = torch.nonzero(out.view(bits) != want.view(bits)).flatten()
    if bad.numel():
        rows = [f"offset {int(offsets[i])}: {out[i].item()!r}, Philox gives {want[i].item()!r}"
                for i in bad[:SHOWN].tolist()]
        raise AssertionError(f"tl.{kind} on {profile.name} ({target.mode}), seed {seed}: "
                             f"{bad.numel()} of {offsets.numel()} values differ from the "
                             f"reference Philox:\n  " + "\n  ".join(rows)
                             + f"\nreproduce: {repro}")


@pytest.mark.cts_modes("device", "interpreter")
@pytest.mark.cts_targets(predicate=_random("randn"))
@given(data=st.data())
def test_randn_matches_box_muller(target, dtype, data, repro, record_property):
    """``tl.randn`` is Box-Muller of the reference Philox's uniforms: within 1e-5 of it in
    float64 (log, sqrt and cos are approximations on GPUs); whether it matched the
    float32 computation bit for bit is recorded."""
    seed, offsets = data.draw(ls.philox_inputs(dtype), label="seed and offsets")
    profile = data.draw(ls.launch_profiles(target.profile), label="launch profile")
    out = runner.run_target(target, (offsets,), {"seed": seed}, profile=profile)
    want = torch.from_numpy(lrand.reference("randn", seed, offsets))
    err = (out.double() - want).abs() / (1 + want.abs())
    if not bool((err <= 1e-5).all()):
        i = int(err.argmax())
        raise AssertionError(f"tl.randn on {profile.name} ({target.mode}), seed {seed}: "
                             f"offset {int(offsets[i])} gave {float(out[i])!r}, Box-Muller of "
                             f"the Philox uniforms gives {float(want[i])!r} (error "
                             f"{float(err[i]):.3g} > 1e-5)\nreproduce: {repro}")
    exact = torch.equal(out, torch.from_numpy(lrand.randn_float32(seed, offsets)))
    behaviour.record(record_property, "randn bits equal numpy's float32 Box-Muller", exact)


@pytest.mark.cts_modes("device", "interpreter")
@pytest.mark.cts_targets(predicate=_random("rand"))
@given(data=st.data())
def test_rand_is_uniform(target, dtype, data, repro):
    """4096 consecutive offsets of ``tl.rand`` fill 16 equal bins of [0, 1) evenly: the
    chi-square statistic (15 degrees of freedom) stays below 52.6 (p = 1e-5), and every
    value lies in [0, 1)."""
    seed = data.draw(st.integers(0, 2**62), label="seed")
    offsets = torch.arange(0, 4096, dtype=dtype)
    out = runner.run_target(target, (offsets,), {"seed": seed})
    inside = bool(((out >= 0) & (out < 1)).all())
    counts = torch.bincount((out.clamp(0, 1 - 1e-7) * 16).long(), minlength=16).double()
    chi2 = float(((counts - 256) ** 2 / 256).sum())
    if not inside or chi2 > 52.6:
        raise AssertionError(f"tl.rand on {target.profile.name} ({target.mode}), seed {seed}: "
                             f"{'values outside [0, 1); ' if not inside else ''}chi-square "
                             f"{chi2:.1f} over 16 bins (limit 52.6), counts "
                             f"{counts.int().tolist()}\nreproduce: {repro}")
