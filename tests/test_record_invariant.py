"""Every check that ran is a record: for every suite file, the report holds one record per
collected check item, in one process and under xdist, whatever parameters follow the
dtype in the test id; records carry what the item checks, not what its id spells."""
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers import needs_interpreter, run_pytest
from triton_cts import CHECKOUT
from triton_cts.results.report_io import load_report

SUITES = sorted(p.name for p in (CHECKOUT / "suites").glob("test_*.py"))
#: One small op on one profile, every mode: each suite file collects checks, most of them
#: run on a CPU (device ones are reported as not supported).
SELECTION = ("--op", "softmax", "--vendor", "amd-gfx942", "--hypothesis-profile", "ci",
             "--op", "tl_int_wrap",  # a primitive: the language suites take no op
             "--op", "cross_entropy",  # the convergence check runs on it
             "--op", "tl_cumsum")
PLANTED = "softmax=tests.planted.relation_faults:softmax_scaled_by_row_mean"


def _collected(*args: str) -> list[str]:
    result = run_pytest("--collect-only", "-q", *args)
    assert result.returncode == 0, result.stdout + result.stderr
    return [line for line in result.stdout.splitlines() if "::" in line]


def _suite_of(test_id: str) -> str:
    return Path(test_id.split("::")[0]).name


@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["one-process", "xdist"])
def test_one_record_per_collected_check_in_every_suite(tmp_path, xdist):
    collected = _collected("suites/", *SELECTION)
    per_suite = Counter(map(_suite_of, collected))
    assert set(per_suite) == set(SUITES), f"a suite file collected nothing: {per_suite}"
    out = tmp_path / "r.json"
    result = run_pytest("suites/", *SELECTION, *xdist, "--report-json", str(out), timeout=1200)
    assert result.returncode in (0, 1), result.stdout[-3000:] + result.stderr[-3000:]
    records = load_report(out)["records"]
    assert Counter(_suite_of(r["test_id"]) for r in records) == per_suite
    assert sorted(r["test_id"] for r in records) == sorted(collected)
    relations = [r for r in records if r["suite"] == "test_relations" and r["op"] == "softmax"]
    assert relations and all(r["params"].get("relation") for r in relations)
    # the parameter after the dtype is a field, not parsed from the id
    for r in relations:
        assert r["test_id"].endswith(f"-{r['dtype']}-{r['params']['relation']}]")
        assert (r["op"], r["profile"]) == ("softmax", "amd-gfx942")
        assert r["impl"] in ("reference", "reference/online")
        assert r["mode"] in ("device", "interpreter")


@needs_interpreter
@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["one-process", "xdist"])
def test_a_failing_relation_is_recorded_and_fails_the_verdict(tmp_path, xdist):
    select = ("suites/test_relations.py", "--op", "softmax", "--vendor", "amd-gfx942",
              "--mode", "interpreter", "--hypothesis-profile", "ci", "--impl", PLANTED)
    collected = _collected(*select)
    out, page = tmp_path / "r.json", tmp_path / "r.html"
    result = run_pytest(*select, *xdist, "--report-json", str(out), "--report-html", str(page))
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "triton-cts: DOES NOT CONFORM" in result.stdout
    records = load_report(out)["records"]
    assert sorted(r["test_id"] for r in records) == sorted(collected)
    failed = [r for r in records if r["status"] == "fail"]
    assert failed and {r["params"]["relation"] for r in failed} == {"shift_invariance"}
    # the terminal matrix and the HTML page name the relation
    assert "shift_invariance" in result.stdout.split("triton-cts conformance")[-1]
    assert "shift_invariance" in page.read_text()


@needs_interpreter
def test_a_suite_test_without_a_target_is_a_harness_error_record(tmp_path):
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "test_unattributed.py").write_text(
        "def test_checks_something():\n    assert True\n\n"
        "def test_takes_target(target):\n    assert True\n")
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["triton_cts.plugin"]\n')
    out = tmp_path / "r.json"
    result = run_pytest(str(suites), "--rootdir", str(tmp_path), "--op", "gelu", "--vendor", "nvidia-sm90", "--mode",
                        "interpreter", "--report-json", str(out))
    assert result.returncode == 1, result.stdout + result.stderr
    by_test = {r["test"]: r for r in load_report(out)["records"]}
    assert by_test["test_checks_something"]["status"] == "harness_error"
    assert "cannot attribute" in by_test["test_checks_something"]["reason"]
    assert by_test["test_takes_target"]["status"] == "pass"
    assert by_test["test_takes_target"]["op"] == "gelu"
