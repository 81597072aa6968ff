"""Planted faulty kernels must make the numerics suite fail, with a message that names
the fault; the reference kernel passes the same run."""
import re

import pytest

from tests.helpers import needs_interpreter, run_pytest

PLANTED = "tests.planted.gelu_faults"


@pytest.mark.parametrize("fault, evidence", [
    ("gelu_wrong_coefficient", "out of tolerance"),
    ("gelu_unmasked_tail_store", "wrote past the end of a"),
    # any non-contiguous layout exposes it; which one hypothesis reports depends on its search
    ("gelu_ignores_strides", re.compile(r"layout '(strided|transposed|sliced)'")),
])
@needs_interpreter
def test_numerics_suite_catches(fault, evidence):
    result = run_pytest("suites/test_numerics.py::test_matches_reference", "--vendor",
                        "nvidia-sm80", "--mode", "interpreter", "--impl", "reference",
                        "--impl", f"gelu={PLANTED}:{fault}", "--op", "gelu",
                        "--hypothesis-profile", "ci")
    assert result.returncode == 1, result.stdout
    # the reference passes for every dtype; only the planted implementation fails
    assert "4 passed" in result.stdout
    assert "FAILED suites/test_numerics.py::test_matches_reference[gelu-reference-" \
        not in result.stdout
    assert f"FAILED suites/test_numerics.py::test_matches_reference[gelu-{PLANTED}:{fault}" \
        in result.stdout
    if isinstance(evidence, str):
        assert evidence in result.stdout
    else:
        assert evidence.search(result.stdout), result.stdout[-3000:]
    assert "reproduce: pytest" in result.stdout


NORM = "tests.planted.norm_faults"


@pytest.mark.parametrize("op, fault, suite, evidence", [
    # the divisor ignores the mask: the mean over the padded length
    ("layer_norm", "layer_norm_mean_over_block", "test_numerics.py::test_matches_reference",
     "out of tolerance"),
    # E[x^2] - E[x]^2: invisible on N(0, 1) rows, caught once the rows are shifted
    ("layer_norm", "layer_norm_naive_variance", "test_relations.py",
     "-shift_invariance]"),
    # masked-off lanes read as 0 instead of -inf
    ("softmax", "softmax_missing_other", "test_numerics.py::test_matches_reference",
     "out of tolerance"),
    # a block shorter than the row, and no loop over the rest
    ("softmax", "softmax_block_without_loop", "test_numerics.py::test_matches_reference",
     "out of tolerance"),
])
@needs_interpreter
def test_suites_catch_classic_reduction_bugs(op, fault, suite, evidence):
    result = run_pytest(f"suites/{suite}", "--vendor", "nvidia-sm80", "--mode", "interpreter",
                        "--impl", "reference", "--impl", f"{op}={NORM}:{fault}", "--op", op,
                        "--hypothesis-profile", "ci")
    assert result.returncode == 1, result.stdout
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAILED")]
    assert failed and all(f"{NORM}:{fault}" in line for line in failed), failed
    assert evidence in result.stdout or any(evidence in line for line in failed)
    assert "reproduce: pytest" in result.stdout


@needs_interpreter
def test_gradcheck_catches_a_wrong_backward():
    """A backward 1% off passes no gradcheck; the same run without the plant passes."""
    args = ("suites/test_gradcheck.py", "--vendor", "nvidia-sm80", "--mode", "interpreter",
            "--op", "gelu", "--hypothesis-profile", "ci")
    planted = run_pytest("-p", "tests.planted.gradcheck_faults", *args)
    assert planted.returncode == 1, planted.stdout
    assert "FAILED suites/test_gradcheck.py::test_gradients_match_finite_differences[gelu-" \
        in planted.stdout
    assert "Jacobian mismatch" in planted.stdout and "reproduce: pytest" in planted.stdout
    assert "DOES NOT CONFORM: 1 checks (1 fail)" in planted.stdout  # a failure, not a crash
    clean = run_pytest(*args)
    assert clean.returncode == 0 and "1 passed" in clean.stdout, clean.stdout
