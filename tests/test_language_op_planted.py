"""Planted faults in language ops (``tests/planted/language_op_faults.py``) must make the
language-ops suite fail, naming the fault's implementation only."""
import pytest

from tests.helpers import needs_interpreter, run_pytest

PLANTED = "tests.planted.language_op_faults"


@pytest.mark.parametrize("op, fault, test, dtypes, evidence", [
    # negative values: no lane got back the slot's initial value
    ("tl_atomic_max", "atomic_max_from_zero", "test_atomic_results_have_a_serial_order",
     "interpreter-int32 or interpreter-float32", "no serial order of the lanes"),
    # the combine's operands swapped: the forward scan differs
    ("tl_associative_scan", "scan_drops_combine_order",
     "test_associative_scan_keeps_combine_order", "interpreter-int32", "forward:"),
    # the ragged tail of K dropped: far out of the dot's bound
    ("tl_dot", "dot_drops_ragged_k", "test_dot_within_bound",
     "interpreter-float16 or interpreter-float32",
     "out of bound"),
])
@needs_interpreter
def test_language_ops_suite_catches(op, fault, test, dtypes, evidence):
    result = run_pytest(f"suites/test_language_ops.py::{test}", "--vendor", "nvidia-sm80",
                        "--mode", "interpreter", "--impl", f"{op}={PLANTED}:{fault}",
                        "--op", op, "--hypothesis-profile", "ci", "-k", dtypes)
    assert result.returncode == 1, result.stdout[-3000:]
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAILED")]
    assert len(failed) == len(dtypes.split(" or ")), result.stdout[-3000:]
    assert all(f"{PLANTED}:{fault}" in line for line in failed), failed
    assert evidence in result.stdout, result.stdout[-3000:]
    assert "reproduce: pytest" in result.stdout
