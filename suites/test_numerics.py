"""Numerics: every implementation matches the op's float64 reference within tolerance,
under the real profiles and under derived profiles with tiny hardware constants, and a
path chosen by hardware constants does not change the answer."""
import math

import pytest
from hypothesis import given, note, settings, strategies as st

from suites import assertions as ah
from suites import runner
from suites import strategies as hh
from triton_cts.execution import size_budget
from triton_cts.execution.modes import Mode
from triton_cts.results.status import NOT_SUPPORTED


def _draw_case(target, dtype, data, profile, record_property, max_numel=None):
    kinds = runner.value_kinds(target, dtype, record_property)
    max_numel = max_numel or size_budget.max_numel(target.mode)
    case = data.draw(hh.cases(target.op, profile, dtype, max_numel, kinds), label="case")
    note(f"case: {case.describe()}")
    runner.record_inputs(record_property, target, case, profile, kinds,
                         hh.reachable_boundaries(profile, dtype, max_numel))
    return case


def _record(record_property, records, prefix=""):
    for rec in records:
        record_property(f"{prefix}{rec['output']} max_abs_error", rec["max_abs_error"])
        record_property(f"{prefix}{rec['output']} bound", f"rtol={rec['rtol']} atol={rec['atol']}")


@pytest.mark.cts_modes("device", "interpreter")
@given(data=st.data())
def test_matches_reference(target, dtype, data, repro, record_property):
    """The outputs match the reference, and so do those of a second call on other values
    (see _assert_second_call). Every call leaves its inputs unchanged (runner.run_target)."""
    case = _draw_case(target, dtype, data, target.profile, record_property)
    with ah.context(target, case, repro):
        out = runner.run_target(target, case.args, case.kwargs)
    _record(record_property, ah.check_outputs(target, case, out, repro))
    _assert_second_call(target, case, out, repro, record_property)


def _assert_second_call(target, first, first_out, repro, record_property):
    """A second call on other values (normal ones) of the same shape, dtype and layout
    matches their reference, so an implementation that returns an earlier call's result (cached
    per shape, say) fails. In device mode it runs on a side stream and its outputs are
    read after synchronizing only that stream, so work launched on another stream fails
    too (modes.NotOnCallersStream)."""
    __tracebackhide__ = True
    case = runner.other_values(target, first)
    note(f"second call: {case.describe()}")
    side = " on a side stream" if target.mode is Mode.DEVICE else ""
    with ah.context(target, case, repro):
        out = runner.run_target(target, case.args, case.kwargs, side_stream=True)
    ref = runner.run_reference(target, case.args, case.kwargs)
    try:
        records = ah.check_outputs(target, case, out, repro, references=ref)
    except AssertionError as exc:
        stale = [i for i, (a, b) in enumerate(zip(ah.as_outputs(out), ah.as_outputs(first_out)))
                 if runner.same_bits(a, b)]
        if not stale:
            exc.add_note(f"on a second call{side}, on other values than a first call that "
                         f"matched its reference ({first.describe()})")
            raise
        which = "" if len(ah.as_outputs(out)) == 1 \
            else " (" + ", ".join(f"output {i}" for i in stale) + ")"
        raise AssertionError(
            f"{target.op.name}[{target.impl.name}] on {ah.describe_profile(target.profile)} "
            f"({target.mode}): a second call{side}, on other values ({case.describe()}), "
            f"returned the first call's result{which} bit for bit, where the first call "
            f"({first.describe()}) matched its reference: it reuses an earlier result"
            f"\nreproduce: {repro}") from exc
    _record(record_property, records, prefix="second call ")


@pytest.mark.cts_modes("device")
@settings(max_examples=1)
@given(data=st.data())
def test_matches_reference_at_profile_boundaries(target, dtype, boundary, data, repro,
                                                 record_property):
    """On the device, at the real profile's boundaries (size_budget.boundary_shapes): rows
    either side of MAX_FUSED_SIZE, past the elementwise block, more blocks than the grid
    cap, reductions over millions of elements. One drawn value set per boundary (the shape
    is the point); a shape larger than this worker's share of device memory is not
    supported."""
    shape = size_budget.boundary_shapes(target.op, target.profile, dtype)[boundary]
    problem = size_budget.device_memory_problem(math.prod(shape), dtype)
    if problem:
        pytest.skip(f"{NOT_SUPPORTED}{boundary} {shape}: {problem}")
    kinds = runner.value_kinds(target, dtype, record_property)
    case = data.draw(hh.cases_at(target.op, dtype, shape, kinds,
                                 device=runner.reference_device(target)), label="case")
    note(f"case: {case.describe()}")
    runner.record_inputs(record_property, target, case, target.profile, kinds,
                         hh.boundary_labels(shape[-1], target.profile, dtype))
    with ah.context(target, case, repro):
        out = runner.run_target(target, case.args, case.kwargs)
    _record(record_property, ah.check_outputs(target, case, out, repro))


@pytest.mark.cts_modes("device", "interpreter")
def test_matches_reference_on_covering_cases(target, dtype, repro, record_property):
    """Every value class the op takes, every layout and every boundary row length, in
    every run whatever the seed: the fixed cases of strategies.covering_cases (a few
    short rows each, under strategies.covering_profile: the target's own IO strategy
    with tiny blocks, so the fused, tiled, multi-program and grid-stride paths run), each
    against the float64 reference as test_matches_reference checks a drawn case. A case
    a known gap makes not supported is recorded and the others still run; the report's
    input coverage then shows what was not met."""
    profile = hh.covering_profile(target.profile)
    kinds = runner.value_kinds(target, dtype, record_property)
    cases = hh.covering_cases(target.op, profile, dtype, kinds)
    offered = ("1", "prime") + tuple(name for name, _ in hh.named_boundaries(profile, dtype))
    skipped = []
    for i, case in enumerate(cases):
        where = (f"covering case {i + 1} of {len(cases)}: row length {case.shape[-1]} "
                 f"({', '.join(hh.boundary_labels(case.shape[-1], profile, dtype)) or '-'})")
        try:
            with ah.context(target, case, repro, profile):
                out = runner.run_target(target, case.args, case.kwargs, profile=profile)
            records = ah.check_outputs(target, case, out, repro, profile=profile)
        except pytest.skip.Exception as exc:  # this case only: the others still run
            skipped.append((f"{where}, {case.describe()}", str(exc)))
            continue
        except Exception as exc:
            exc.add_note(where)
            raise
        runner.record_inputs(record_property, target, case, profile, kinds, offered)
        _record(record_property, records)
    if skipped and len(skipped) == len(cases):
        pytest.skip(skipped[0][1])
    if skipped:
        record_property("covering cases not supported",
                        "; ".join(f"{where}: {why}" for where, why in skipped))


@pytest.mark.cts_modes("device", "interpreter")
@given(data=st.data())
def test_matches_reference_under_fuzzed_constants(target, dtype, data, repro, record_property):
    derived = data.draw(hh.derived_profiles(target.profile), label="derived profile")
    note(f"derived profile: {ah.describe_profile(derived)}")
    case = _draw_case(target, dtype, data, derived, record_property, hh.FUZZ_NUMEL)
    with ah.context(target, case, repro, derived):
        out = runner.run_target(target, case.args, case.kwargs, profile=derived)
    _record(record_property, ah.check_outputs(target, case, out, repro, profile=derived))


@pytest.mark.cts_modes("device", "interpreter")
@given(data=st.data())
def test_paths_chosen_by_constants_agree(target, dtype, data, repro, record_property):
    """The real profile and a derived one (other block sizes, grid caps, IO strategy) give
    the same answer within twice the tolerance (each may sit a tolerance from the truth,
    and its conditioning allowance: OpSpec.conditioning)."""
    derived = data.draw(hh.derived_profiles(target.profile), label="derived profile")
    note(f"derived profile: {ah.describe_profile(derived)}")
    case = _draw_case(target, dtype, data, target.profile, record_property, hh.FUZZ_NUMEL)
    with ah.context(target, case, repro, derived):
        real = runner.run_target(target, case.args, case.kwargs)
        other = runner.run_target(target, case.args, case.kwargs, profile=derived)
    _record(record_property, ah.check_outputs(
        target, case, other, repro, profile=derived, references=real,
        against=f"{target.profile.name} output", scale=2.0, ambiguity=False,
        allowance_scale=2.0, oracle=False), prefix="agreement ")
