"""Language ops: ``tl.dot``, atomics, scans, sorts and reductions, block pointers, tensor
descriptors and memory hints (``triton_cts/ops/language/{dot,atomics,scans,memory}.py``),
each held to its definition on small drawn inputs, in device and interpreter mode.

- dot: within a bound from K and the rounding of inputs and accumulator, per precision;
- atomics: the slots after a launch and what every lane got back come from some serial
  order of the lanes, under every (sem, scope) (one drawn per example in the
  interpreter, which runs programs one after another and ignores both); tickets of
  add and xchg are a permutation;
- scans: within the bound of any order of the operations; a non-commuting combine
  keeps its order, exactly;
- sorts, top-k, arg reductions with tie_break_left, NaN with propagate_nan=ALL,
  reductions over size-1 axes: exact;
- memory: exact bits, padding as asked, nothing written outside the tensor.

Where Triton leaves a result undefined (NaN in sorts and in tl.max, float atomic max of
-0.0 against +0.0, which index an argmax without tie_break_left picks), the result is
recorded as behaviour (``triton_cts.results.behaviour``), never failed.
"""
import functools
import math

import pytest
import torch
import triton
import triton.language as tl
from hypothesis import given, note, settings, strategies as st
from triton.runtime.errors import InterpreterError

from suites import language_op_strategies as los
from suites import runner
from triton_cts.execution import launches
from triton_cts.execution.modes import Mode
from triton_cts.ops import dtypes
from triton_cts.ops.language import is_a
from triton_cts.ops.language import atomics as la
from triton_cts.ops.language import dot as ld
from triton_cts.ops.language import memory as lmem
from triton_cts.ops.language import scans as lsc
from triton_cts.results import behaviour
from triton_cts.results.status import NOT_SUPPORTED

pytestmark = pytest.mark.cts_modes("device", "interpreter")


# ---- interpreter gaps, found by probing ---------------------------------------------------
@triton.jit
def _double_kernel(X, Y, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(X + offs)
    tl.store(Y + offs, x + x)


@functools.cache
def _bf16_arithmetic_defect() -> str | None:
    """Why the interpreter cannot be judged on bfloat16 arithmetic, or None: it computes
    on bf16 values as on their bits (numpy has no bf16), so x + x, comparisons, maximum
    and NaN constants come out wrong."""
    x = torch.tensor([1.0, -2.0, 3.5, 0.25], dtype=torch.bfloat16)
    y = torch.empty_like(x)
    with launches.interpreted():
        _double_kernel[(1,)](x, y, x.numel())
    if torch.equal(y, x + x):
        return None
    return (f"the interpreter of triton {triton.__version__} computes bfloat16 arithmetic "
            f"wrongly (probe: x + x of {x.tolist()} gave {y.tolist()})")


def _skip_bf16_interpreter(target, dtype):
    """Not supported: a bf16 check in an interpreter that gets bf16 arithmetic wrong."""
    if target.mode is Mode.INTERPRETER and dtype == torch.bfloat16:
        why = _bf16_arithmetic_defect()
        if why:
            pytest.skip(NOT_SUPPORTED + why)


def _kind(cls, *kinds):
    """Targets whose primitive is a ``cls`` with ``kind`` (or ``op``) among ``kinds``."""
    def wanted(target):
        p = target.op.primitive
        return isinstance(p, cls) and (getattr(p, "kind", None) or getattr(p, "op")) in kinds
    return wanted


def _fail(target, what: str, case, repro: str):
    __tracebackhide__ = True
    pytest.fail(f"{target.op.name}[{target.impl.name}] on {target.profile.name} "
                f"({target.mode}): {what}\ncase: {case.describe()}\nreproduce: {repro}",
                pytrace=False)


def _same(out: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Elementwise: equal values, NaN equal to NaN."""
    out, ref = out.to(ref.dtype), ref
    both_nan = torch.isnan(out) & torch.isnan(ref) if ref.is_floating_point() else False
    return (out == ref) | both_nan


def _name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _first_bad(ok: torch.Tensor, out, ref) -> str:
    where = tuple(int(i) for i in (~ok).nonzero()[0])
    return (f"{int((~ok).sum())} of {ok.numel()} elements differ; first at {where}: got "
            f"{out[where].item()}, expected {ref[where].item()}")


@pytest.fixture
def seen() -> dict:
    """What a check saw over its hypothesis examples (a behaviour row is recorded as a
    running aggregate: a property's last value is the one its record keeps)."""
    return {}


# ---- tl.dot ------------------------------------------------------------------------------
@pytest.mark.cts_targets(predicate=is_a(ld.DotPrimitive))
@given(data=st.data())
def test_dot_within_bound(target, dtype, data, repro, record_property, seen):
    """acc + a @ b within (input_error + K * accumulate_unit) * (|a| @ |b| + |acc|) +
    the output's rounding (triton_cts/ops/language/dot.py), K ragged or not."""
    p = target.op.primitive
    acc_dtype = ld.out_dtype_of(dtype, accumulate=True) if p.accumulate else None
    case = data.draw(los.dot_cases(dtype, acc_dtype), label="case")
    note(case.describe())
    args = (case.a, case.b) + ((case.acc,) if p.accumulate else ())
    out = runner.run_target(target, args, {})
    a64, b64 = case.a.double(), case.b.double()
    acc64 = case.acc.double() if case.acc is not None else None
    exact = a64 @ b64 + (acc64 if acc64 is not None else 0)
    out_dtype = ld.out_dtype_of(dtype, p.accumulate)
    if out.dtype != out_dtype:
        _fail(target, f"result has dtype {out.dtype}, expected {out_dtype}", case, repro)
    bound = ld.dot_bound(a64, b64, acc64, dtype, out_dtype, p.precision)
    err = (out.double() - exact).abs()
    ok = err <= bound
    if not ok.all():
        worst = int(torch.argmax(torch.where(ok, 0.0, err / bound.clamp(min=1e-300))))
        r, c = divmod(worst, exact.shape[1])
        _fail(target, f"{int((~ok).sum())} of {ok.numel()} outputs out of bound; worst at "
                      f"({r}, {c}): got {out[r, c].item()}, exact {exact[r, c].item()}, error "
                      f"{err[r, c].item():.3g} > bound {bound[r, c].item():.3g} "
                      f"(precision {p.precision})", case, repro)
    worst = float((err / bound.clamp(min=1e-300)).max()) if bound.any() else 0.0
    record_property("error / bound", worst)
    if p.precision != "ieee":
        # whether the inputs were rounded at all: beyond what an IEEE float32 dot may err
        ieee = ld.dot_bound(a64, b64, acc64, dtype, out_dtype, "ieee")
        seen["rounded"] = seen.get("rounded", False) or bool((err > ieee).any())
        behaviour.record(record_property, f"tl.dot float32 input_precision={p.precision} "
                                          f"errs beyond an ieee dot", seen["rounded"])


# ---- atomics -----------------------------------------------------------------------------
def _atomic_run(target, dtype, case, orders):
    if target.mode is Mode.INTERPRETER:
        gap = la.interpreter_gap(target.op.primitive.op, dtype)
        if gap:
            pytest.skip(NOT_SUPPORTED + gap)
    args = (case.values, case.initial, case.mask, case.cmp)
    try:
        return runner.run_target(target, args, {"orders": orders})
    except InterpreterError as exc:
        # the interpreter's atomic_rmw lacks some dtypes (bf16 add, float xchg)
        if target.mode is Mode.INTERPRETER and "Unsupported data type" in str(exc):
            pytest.skip(f"{NOT_SUPPORTED}the interpreter of triton {triton.__version__} has no "
                        f"atomic {target.op.primitive.op} on {_name(dtype)} (its atomic_rmw "
                        f"raises 'Unsupported data type')")
        raise


def _slot_problems(primitive, case, final, old, dtype) -> list[str]:
    active = case.mask if case.mask is not None \
        else torch.ones(case.values.numel(), dtype=torch.bool)
    slots = case.initial.numel()
    problems = []
    for s in range(slots):
        lanes = [i for i in range(case.values.numel()) if i % slots == s and bool(active[i])]
        why = la.linearization_problem(
            primitive, case.initial[s].item(), final[s].item(),
            [case.values[i].item() for i in lanes], [old[i].item() for i in lanes],
            [case.cmp[i].item() for i in lanes] if case.cmp is not None else None, dtype)
        if why:
            problems.append(f"slot {s} ({len(lanes)} lanes): {why}")
    return problems


@pytest.mark.cts_targets(predicate=is_a(la.AtomicPrimitive))
@given(data=st.data())
def test_atomic_results_have_a_serial_order(target, dtype, data, repro, record_property):
    """Under each (sem, scope), the slots after the launch and every active lane's old
    value are those of some serial order of the lanes; masked-off lanes change nothing."""
    p = target.op.primitive
    case = data.draw(los.atomic_cases(p.op, dtype), label="case")
    orders = data.draw(los.orders(target.mode is Mode.DEVICE), label="orders")
    note(f"{case.describe()}; orders {orders}")
    finals, olds = _atomic_run(target, dtype, case, orders)
    for j, (sem, scope) in enumerate(orders):
        problems = _slot_problems(p, case, finals[j], olds[j], dtype)
        if problems:
            _fail(target, f"sem={sem} scope={scope}: no serial order of the lanes gives "
                          f"these results:\n  " + "\n  ".join(problems[:4]), case, repro)
    record_property("orders checked", len(orders))


@pytest.mark.cts_targets(predicate=_kind(la.AtomicPrimitive, "add", "xchg"))
@given(data=st.data())
def test_atomic_tickets_are_a_permutation(target, dtype, data, repro, record_property):
    """Every program on one address: atomic_add of 1 hands out each ticket 0..n-1 once;
    atomic_xchg of distinct values hands back the initial value and every value but
    the one left in the slot, once each."""
    p = target.op.primitive
    n = data.draw(st.sampled_from(los.LANES), label="lanes")
    orders = data.draw(los.orders(target.mode is Mode.DEVICE), label="orders")
    values = torch.ones(n, dtype=dtype) if p.op == "add" else torch.arange(1, n + 1).to(dtype)
    case = los.AtomicCase(values, torch.zeros(1, dtype=dtype), None, None, "tickets", 0)
    finals, olds = _atomic_run(target, dtype, case, orders)
    for j, (sem, scope) in enumerate(orders):
        final = finals[j][0].item()
        # add: tickets 0..n-1, then n left; xchg: 0 and 1..n, each handed out or left once
        handed = sorted(olds[j].tolist() + [final])
        if handed != list(range(n + 1)) or (p.op == "add" and final != n):
            _fail(target, f"sem={sem} scope={scope}: the old values and the final value are "
                          f"not a permutation of 0..{n}: old values {sorted(olds[j].tolist())[:8]}"
                          f"..., final {final}", case, repro)


@pytest.mark.cts_targets(predicate=_kind(la.AtomicPrimitive, "max", "min"))
@settings(max_examples=1)  # a behaviour row: one drawn row set says it
@given(data=st.data())
def test_float_atomic_extremes_recorded(target, dtype, data, repro, record_property):
    """Float atomic max (min) over negatives (positives), -0.0, +0.0 and NaN: the language
    leaves the zeros' order and NaN undefined, so what the target does is recorded; the
    slot must still hold one of the values (or NaN)."""
    if not dtype.is_floating_point:
        pytest.skip("not supported: integers have no -0.0 or NaN (checked by the serial "
                    "order property)")
    p = target.op.primitive
    seed = data.draw(los.seeds, label="seed")
    values = los.float_extremes(dtype, 8, torch.Generator().manual_seed(seed),
                                -1.0 if p.op == "max" else 1.0)
    start = float("-inf") if p.op == "max" else float("inf")
    runs = {}
    for label, extra in (("zeros", None), ("nan first", 0), ("nan last", -1)):
        v = values.clone()
        if extra is not None:
            v[extra] = math.nan
        case = los.AtomicCase(v, torch.full((1,), start, dtype=dtype), None, None, label, seed)
        finals, _ = _atomic_run(target, dtype, case, (la.DEFAULT_ORDER,))
        got = finals[0][0].item()
        if not (math.isnan(got) or got in v.tolist()):
            _fail(target, f"atomic_{p.op} left {got}, which no lane wrote", case, repro)
        runs[label] = ("nan" if math.isnan(got) else "a non-zero value" if got != 0
                       else "-0.0" if math.copysign(1, got) < 0 else "+0.0")
    behaviour.record(record_property, f"atomic_{p.op} {_name(dtype)} of -0.0 and +0.0",
                     runs["zeros"])
    behaviour.record(record_property, f"atomic_{p.op} {_name(dtype)} with NaN (first, last lane)",
                     [runs["nan first"], runs["nan last"]])


# ---- scans -------------------------------------------------------------------------------
@pytest.mark.cts_targets(predicate=_kind(lsc.ScanPrimitive, "cumsum", "cumprod"))
@given(data=st.data())
def test_scan_within_bound(target, dtype, data, repro, record_property):
    """tl.cumsum / tl.cumprod, forward and reverse, within the bound of any order of the
    prefix's operations (exact, wrapping, for integers)."""
    _skip_bf16_interpreter(target, dtype)
    kind = target.op.primitive.kind
    values = "factors" if kind == "cumprod" else "normal"
    case = data.draw(los.rows_cases(dtype, (values, "ties")), label="case")
    note(case.describe())
    outs = runner.run_target(target, (case.x,), {})
    wide = case.x.double() if dtype.is_floating_point else case.x.long()
    for out, reverse, ref in zip(outs, (False, True), target.op.reference(wide)):
        ref = ref if dtype.is_floating_point else ref.to(dtype)
        if dtype.is_floating_point:
            bound = lsc.scan_bound(wide, kind, dtype, reverse)
            ok = (out.double() - ref).abs() <= bound
        else:
            ok = out == ref
        if not ok.all():
            _fail(target, f"reverse={reverse}: " + _first_bad(ok, out, ref), case, repro)


@pytest.mark.cts_targets(predicate=_kind(lsc.ScanPrimitive, "affine"))
@given(data=st.data())
def test_associative_scan_keeps_combine_order(target, dtype, data, repro, record_property):
    """tl.associative_scan of affine maps (a combine that does not commute): the forward
    scan composes lane 0's map first, exactly. Reverse: Triton's documented form (flip,
    scan, flip) passes; the other order is recorded as behaviour; anything else fails."""
    case = data.draw(los.rows_cases(dtype, ("factors",)), label="case")
    seed = data.draw(los.seeds, label="seed of a")
    a = los.row_values(case.x.shape, dtype, "factors", torch.Generator().manual_seed(seed))
    note(case.describe())
    fwd, rev = runner.run_target(target, (case.x, a), {})
    want_fwd, want_rev = target.op.reference(case.x, a)
    if not torch.equal(fwd, want_fwd):
        _fail(target, "forward: " + _first_bad(fwd == want_fwd, fwd, want_fwd), case, repro)
    if torch.equal(rev, want_rev):
        behaviour.record(record_property, "associative_scan reverse order", "flip, scan, flip")
        return
    other = lsc.affine_reference(case.x.flip(1), a.flip(1), False).flip(1)
    if torch.equal(rev, other) and case.x.shape[1] > 1:
        behaviour.record(record_property, "associative_scan reverse order",
                         "lane j combines lanes j..n-1 left to right")
        return
    _fail(target, "reverse: " + _first_bad(rev == want_rev, rev, want_rev), case, repro)


@pytest.mark.cts_targets(predicate=_kind(lsc.ScanPrimitive, "sort", "topk"))
@given(data=st.data())
def test_sort_and_topk_exact(target, dtype, data, repro, record_property):
    """tl.sort (both directions) and tl.topk of rows with ties: exactly torch's values."""
    _skip_bf16_interpreter(target, dtype)
    case = data.draw(los.rows_cases(dtype, ("ties", "normal"), pow2=True), label="case")
    note(case.describe())
    if target.op.primitive.kind == "topk":
        k = data.draw(st.sampled_from([1 << i for i in range(case.x.shape[1].bit_length())]),
                      label="k")
        outs = (runner.run_target(target, (case.x, k), {}),)
        refs = (target.op.reference(case.x, k),)
    else:
        outs, refs = runner.run_target(target, (case.x,), {}), target.op.reference(case.x)
    for i, (out, ref) in enumerate(zip(outs, refs)):
        if not torch.equal(out, ref):
            _fail(target, f"output {i}: " + _first_bad(_same(out, ref), out, ref), case, repro)


@pytest.mark.cts_targets(predicate=_kind(lsc.ScanPrimitive, "sort", "topk"))
@settings(max_examples=1)  # a behaviour row: one drawn row set says it
@given(data=st.data())
def test_sort_with_nan_recorded(target, dtype, data, repro, record_property):
    """Rows holding NaN: where tl.sort and tl.topk put them, and whether every value
    survives, is recorded (the language does not say)."""
    _skip_bf16_interpreter(target, dtype)
    if not dtype.is_floating_point:
        pytest.skip("not supported: integers have no NaN")
    case = data.draw(los.rows_cases(dtype, ("nan",), pow2=True), label="case")
    x = case.x
    kind = target.op.primitive.kind
    out = runner.run_target(target, (x,) + ((x.shape[1],) if kind == "topk" else ()), {})
    out = out if kind == "topk" else out[0]
    # every value survives (NaN counted as text, so NaN == NaN)
    kept = all(sorted(map(repr, r.tolist())) == sorted(map(repr, src.tolist()))
               for r, src in zip(out, x))
    nan_at = ("start" if bool(torch.isnan(out[:, 0]).any()) else
              "end" if bool(torch.isnan(out[:, -1]).any()) else
              "inside" if bool(torch.isnan(out).any()) else "dropped")
    name = "tl.topk" if kind == "topk" else "tl.sort ascending"
    behaviour.record(record_property, f"{name} {_name(dtype)} of rows with NaN",
                     {"nan at": nan_at, "values kept": kept})


@pytest.mark.cts_targets(predicate=_kind(lsc.ScanPrimitive, "arg"))
@given(data=st.data())
def test_argmax_tie_breaking(target, dtype, data, repro, record_property):
    """tie_break_left=True: the first index of the max (min), as torch. False: an index
    holding the max (min); which one is recorded."""
    _skip_bf16_interpreter(target, dtype)
    case = data.draw(los.rows_cases(dtype, ("ties", "normal"), pow2=True), label="case")
    note(case.describe())
    out = runner.run_target(target, (case.x,), {}).long()
    ref = target.op.reference(case.x).long()
    if not torch.equal(out[:2], ref[:2]):
        _fail(target, "tie_break_left=True: " + _first_bad(out[:2] == ref[:2], out[:2], ref[:2]),
              case, repro)
    extremes = (case.x.amax(1), case.x.amin(1))
    for i, which in ((2, "argmax"), (3, "argmin")):
        idx = out[i]
        if ((idx < 0) | (idx >= case.x.shape[1])).any() or not torch.equal(
                case.x.gather(1, idx[:, None])[:, 0], extremes[i - 2]):
            _fail(target, f"{which} with tie_break_left=False picked indices {idx.tolist()} "
                          f"that do not hold the row's extreme", case, repro)
    if case.kind == "ties":
        last = case.x.shape[1] - 1 - case.x.flip(1).argmax(1)
        pick = ("first" if torch.equal(out[2], ref[2]) else
                "last" if torch.equal(out[2], last) else "other")
        behaviour.record(record_property, f"tl.argmax {_name(dtype)} "
                                          f"tie_break_left=False on ties", pick)


@pytest.mark.cts_targets(predicate=_kind(lsc.ScanPrimitive, "nan"))
@given(data=st.data())
def test_max_nan_propagation(target, dtype, data, repro, record_property):
    """tl.reduce over tl.maximum / tl.minimum with propagate_nan=ALL: NaN for every row
    holding one, the exact max (min) elsewhere. tl.max / tl.min: exact on rows without
    NaN; what they give for rows with NaN is recorded."""
    _skip_bf16_interpreter(target, dtype)
    case = data.draw(los.rows_cases(dtype, ("nan", "normal")), label="case")
    note(case.describe())
    out = runner.run_target(target, (case.x,), {})
    x = case.x.double()
    has_nan = torch.isnan(x).any(1)
    finite = torch.where(torch.isnan(x), -math.inf, x).amax(1), \
        torch.where(torch.isnan(x), math.inf, x).amin(1)
    for i, label in ((2, "max"), (3, "min")):
        want = torch.where(has_nan, math.nan, finite[i - 2])
        ok = _same(out[i].double(), want)
        if not ok.all():
            _fail(target, f"{label} with propagate_nan=ALL: " + _first_bad(ok, out[i], want),
                  case, repro)
    for i, label in ((0, "max"), (1, "min")):
        ok = _same(out[i].double(), finite[i])[~has_nan]
        if not ok.all():
            _fail(target, f"tl.{label} on rows without NaN: "
                          + _first_bad(ok, out[i][~has_nan], finite[i][~has_nan]), case, repro)
        if has_nan.any():
            got = out[i][has_nan].double()
            seen = ("nan" if torch.isnan(got).all() else
                    "ignored" if torch.equal(got, finite[i][has_nan]) else "mixed")
            behaviour.record(record_property, f"tl.{label} {_name(dtype)} of rows "
                                              f"with NaN", seen)


@pytest.mark.cts_targets(predicate=_kind(lsc.ScanPrimitive, "size1"))
@given(data=st.data())
def test_reduce_over_size1_axis(target, dtype, data, repro, record_property):
    """tl.sum, tl.max, tl.min over an axis of size 1 give the element itself, bit for bit
    (NaN included), and tl.argmax gives 0."""
    case = data.draw(los.rows_cases(dtype, ("normal", "nan") if dtype.is_floating_point
                                    else ("normal",), one_d=True), label="case")
    note(case.describe())
    out, idx = runner.run_target(target, (case.x,), {})
    ref, ref_idx = target.op.reference(case.x)
    for i, label in enumerate(("sum axis 1", "max axis 1", "min axis 1", "sum axis 0")):
        if not runner.same_bits(out[i].contiguous(), ref[i].contiguous()):
            same = dtypes.bits(out[i]) == dtypes.bits(ref[i])  # signed zeros, NaN payloads
            _fail(target, f"{label} (bit for bit): " + _first_bad(same, out[i], ref[i]),
                  case, repro)
    if not torch.equal(idx, ref_idx):
        _fail(target, "argmax over the size-1 axis: " + _first_bad(idx == ref_idx, idx, ref_idx),
              case, repro)


# ---- memory ------------------------------------------------------------------------------
@pytest.mark.cts_targets(predicate=_kind(lmem.MemoryPrimitive, "block_ptr", "descriptor"))
@given(data=st.data())
def test_block_loads_pad_and_stores_stay_inside(target, dtype, data, repro, record_property):
    """A block hanging over the matrix's edges loads its inside and the padding asked for
    (zeros, NaN); the store writes twice the block inside the matrix and nothing else."""
    _skip_bf16_interpreter(target, dtype)
    case = data.draw(los.block_cases(dtype, lmem.BLOCK), label="case")
    note(case.describe())
    outs = runner.run_target(target, (case.x, case.row0, case.col0), {})
    refs = target.op.reference(case.x, case.row0, case.col0)
    for out, ref, label in zip(outs, refs, ("zero-padded load", "NaN-padded load", "store")):
        ok = _same(out, ref)
        if not ok.all():
            _fail(target, f"{label}: " + _first_bad(ok, out, ref), case, repro)


@pytest.mark.cts_targets(predicate=_kind(lmem.MemoryPrimitive, "hints"))
@given(data=st.data())
def test_load_hints_change_nothing(target, dtype, data, repro, record_property):
    """A masked load with other= gives x then other under every cache modifier, eviction
    policy and volatile, stored under every store cache modifier."""
    x, other, seed = data.draw(los.hint_cases(dtype), label="case")
    out = runner.run_target(target, (x, other), {})
    ref = target.op.reference(x, other, out.shape[0])
    ok = _same(out, ref)
    if not ok.all():
        h = int((~ok).any(1).nonzero()[0])
        _fail(target, f"hint {h}: " + _first_bad(ok[h], out[h], ref[h]),
              los.RowsCase(x, f"other={other}", seed), repro)
