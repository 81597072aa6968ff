"""Numerics: every implementation matches the op's float64 reference within tolerance,
under the real profiles and under derived profiles with tiny hardware constants, and a
path chosen by hardware constants does not change the answer."""
import pytest
from hypothesis import given, note, strategies as st

from suites import assertions as ah
from suites import runner
from suites import strategies as hh


def _draw_case(target, dtype, data, profile, record_property, max_numel=hh.MAX_NUMEL):
    kinds = runner.value_kinds(target, dtype, record_property)
    case = data.draw(hh.cases(target.op, profile, dtype, max_numel, kinds), label="case")
    note(f"case: {case.describe()}")
    return case


def _record(record_property, records, prefix=""):
    for rec in records:
        record_property(f"{prefix}{rec['output']} max_abs_error", rec["max_abs_error"])
        record_property(f"{prefix}{rec['output']} bound", f"rtol={rec['rtol']} atol={rec['atol']}")


@pytest.mark.cts_modes("device", "interpreter")
@given(data=st.data())
def test_matches_reference(target, dtype, data, repro, record_property):
    case = _draw_case(target, dtype, data, target.profile, record_property)
    with ah.context(target, case, repro):
        out = runner.run_target(target, case.args, case.kwargs)
    ref = runner.run_reference(target, case.args, case.kwargs)
    scales = runner.error_scales(target, case.args, case.kwargs)
    gaps = runner.allowances(target, case.args, case.kwargs)
    _record(record_property, ah.assert_matches_reference(target, case, out, ref, repro,
                                                         error_scales=scales,
                                                         ambiguities=gaps))


@pytest.mark.cts_modes("device", "interpreter")
@given(data=st.data())
def test_matches_reference_under_fuzzed_constants(target, dtype, data, repro, record_property):
    derived = data.draw(hh.derived_profiles(target.profile), label="derived profile")
    note(f"derived profile: {ah.describe_profile(derived)}")
    case = _draw_case(target, dtype, data, derived, record_property, hh.FUZZ_NUMEL)
    with ah.context(target, case, repro, derived):
        out = runner.run_target(target, case.args, case.kwargs, profile=derived)
    ref = runner.run_reference(target, case.args, case.kwargs)
    scales = runner.error_scales(target, case.args, case.kwargs)
    gaps = runner.allowances(target, case.args, case.kwargs)
    _record(record_property, ah.assert_matches_reference(target, case, out, ref, repro,
                                                         profile=derived, error_scales=scales,
                                                         ambiguities=gaps))


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
    _record(record_property, ah.assert_matches_reference(
        target, case, other, real, repro, profile=derived,
        against=f"{target.profile.name} output", scale=2.0,
        error_scales=runner.error_scales(target, case.args, case.kwargs),
        ambiguities=runner.allowances(target, case.args, case.kwargs, ambiguity=False, scale=2.0)),
        prefix="agreement ")
