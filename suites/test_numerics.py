"""Numerics: every implementation matches the op's float64 reference within tolerance."""
import pytest
from hypothesis import given, note, strategies as st

from suites import assertions as ah
from suites import runner
from suites import strategies as hh
from triton_cts.plugin import NOT_SUPPORTED


@pytest.mark.cts_modes("device", "interpreter")
@given(data=st.data())
def test_matches_reference(target, data, repro, record_property):
    if not target.op.supported_dtypes(target.profile):
        pytest.skip(NOT_SUPPORTED + f"profile {target.profile.name} supports none of "
                                    f"{target.op.name}'s dtypes")
    case = data.draw(hh.cases(target.op, target.profile), label="case")
    note(f"case: {case.describe()}")
    out = runner.run_target(target, case.args, case.kwargs)
    ref = runner.run_reference(target, case.args, case.kwargs)
    records = ah.assert_matches_reference(target, case, out, ref, repro)
    for rec in records:
        record_property(f"{rec['output']} max_abs_error", rec["max_abs_error"])
