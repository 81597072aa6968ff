"""Planted faulty language primitives must make the language suite fail, with a message
that names the fault; the reference primitives pass the same run (interpreter mode, one
profile, the ci hypothesis profile: a few seconds each)."""
import pytest

from tests.helpers import needs_interpreter, run_pytest

PLANTED = "tests.planted.language_faults"
SUITE = "suites/test_language_math.py"


@pytest.mark.parametrize("op, fault, test, dtype, evidence", [
    ("tl_sqrt", "sqrt_off_by_2_ulps_beyond_bound", "test_ulp_within_profile_bound", "float32",
     "ULP > 1"),
    ("tl_cast_float32_to", "cast_down_truncating", "test_narrowing_rounds_to_nearest_even",
     "float16", "results not rounded to nearest even"),
    ("tl_int_divmod", "divmod_python_style", "test_division_follows_c", "int32",
     "(Python's floor division)"),
])
@needs_interpreter
def test_language_suite_catches(op, fault, test, dtype, evidence):
    ids = [f"{SUITE}::{test}[{op}-{impl}-nvidia-sm80-interpreter-{dtype}]"
           for impl in ("reference", f"{PLANTED}:{fault}")]
    result = run_pytest(*ids, "--vendor", "nvidia-sm80", "--mode", "interpreter", "--impl",
                        "reference", "--impl", f"{op}={PLANTED}:{fault}", "--op", op,
                        "--hypothesis-profile", "ci")
    assert result.returncode == 1, result.stdout[-3000:]
    assert f"FAILED {SUITE}::{test}[{op}-reference-" not in result.stdout
    assert "1 failed, 1 passed" in result.stdout, result.stdout[-3000:]  # the reference passes
    assert f"FAILED {SUITE}::{test}[{op}-{PLANTED}:{fault}-nvidia-sm80-interpreter-{dtype}]" \
        in result.stdout, result.stdout[-3000:]
    assert evidence in result.stdout, result.stdout[-3000:]
    assert "reproduce: pytest" in result.stdout
