"""Planted faulty kernels must make the numerics suite fail, with a message that names
the fault; the reference kernel passes the same run."""
import pytest

from tests.helpers import run_pytest

PLANTED = "tests.planted.gelu_faults"


@pytest.mark.parametrize("fault, evidence", [
    ("gelu_wrong_coefficient", "out of tolerance"),
    ("gelu_unmasked_tail_store", "wrote past the end of a"),
    ("gelu_ignores_strides", "layout 'strided'"),
])
def test_numerics_suite_catches(fault, evidence):
    result = run_pytest("suites/test_numerics.py::test_matches_reference", "--vendor",
                        "nvidia-sm80", "--mode", "interpreter", "--impl", "reference",
                        "--impl", f"gelu={PLANTED}:{fault}", "--op", "gelu")
    assert result.returncode == 1, result.stdout
    # the reference passes for every dtype; only the planted implementation fails
    assert "4 passed" in result.stdout
    assert "FAILED suites/test_numerics.py::test_matches_reference[gelu-reference-" \
        not in result.stdout
    assert f"FAILED suites/test_numerics.py::test_matches_reference[gelu-{PLANTED}:{fault}" \
        in result.stdout
    assert evidence in result.stdout
    assert "reproduce: pytest" in result.stdout
