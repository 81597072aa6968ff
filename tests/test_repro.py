"""A failure found under a hypothesis profile reproduces with the command its record
gives: the repro names the profile and seed, and the record's hypothesis
``@reproduce_failure`` blob replays exactly the failing example (``--reproduce-failure``),
whatever profile is in effect. The planted GELU is wrong only where the input spans more
than one block, so only the failing example (not any example) shows the fault."""
import shlex

import pytest

from tests.helpers import INTERPRETER_BLOCKER, run_pytest
from triton_cts.results.records import Record
from triton_cts.results.report_io import load_report
from triton_cts.results.status import Status, parse_reproduce_failure, reproduce_failure

PLANTED = "gelu=tests.planted.gelu_shape_faults:gelu_wrong_past_first_block"
NUMERICS = "suites/test_numerics.py::test_matches_reference"


def rerun(command: str, *extra: str):
    """Run a record's pytest command line (as a user pastes it) with extra options."""
    args = shlex.split(command)
    assert args[0] == "pytest"
    return run_pytest(*args[1:], *extra)


def failed(path):
    return [r for r in load_report(path)["records"] if r["status"] == "fail"]


@pytest.fixture(scope="module")
def found_under_ci(tmp_path_factory):
    if INTERPRETER_BLOCKER is not None:
        pytest.skip(f"not supported: the failure is found in interpreter mode: "
                    f"{INTERPRETER_BLOCKER}")
    out = tmp_path_factory.mktemp("ci") / "ci.json"
    result = run_pytest(NUMERICS, "--vendor", "nvidia-sm90", "--mode", "interpreter", "--op",
                        "gelu", "--impl", PLANTED, "--hypothesis-profile", "ci",
                        "--hypothesis-seed", "3", "--report-json", str(out))
    assert result.returncode == 1, result.stdout[-3000:]
    records = failed(out)
    assert records, result.stdout[-3000:]
    return records[0]


def test_repro_names_the_hypothesis_profile_and_seed(found_under_ci):
    repro = found_under_ci["repro"]
    assert repro.startswith(f"pytest '{NUMERICS}[gelu-tests.planted.gelu_shape_faults:")
    assert repro.endswith(" --hypothesis-profile ci --hypothesis-seed 3"), repro


def test_the_recorded_repro_command_reproduces_the_same_failure(found_under_ci, tmp_path):
    out = tmp_path / "again.json"
    result = rerun(found_under_ci["repro"], "--report-json", str(out))
    assert result.returncode == 1, result.stdout[-3000:]
    (again,) = failed(out)
    assert again["test_id"] == found_under_ci["test_id"]
    assert again["shape"] == found_under_ci["shape"] and again["example"] == found_under_ci["example"]


def test_the_recorded_blob_replays_the_failing_example(found_under_ci, tmp_path):
    blob = found_under_ci["reproduce_failure"]
    assert blob and blob.startswith("@reproduce_failure(") and parse_reproduce_failure(blob)
    replay = found_under_ci["replay"]
    assert replay.startswith(found_under_ci["repro"] + " --reproduce-failure ")
    # under another profile (random examples, another count) the blob still picks the example
    out = tmp_path / "replay.json"
    result = rerun(replay.replace("--hypothesis-profile ci", "--hypothesis-profile dev"),
                   "--report-json", str(out))
    assert result.returncode == 1, result.stdout[-3000:]
    (again,) = failed(out)
    assert f"shape {found_under_ci['shape']}" in again["reason"], (again["reason"],
                                                                    found_under_ci["shape"])
    # the blob as the report holds it works too
    assert rerun(found_under_ci["repro"], f"--reproduce-failure={blob}").returncode == 1


def test_a_bad_blob_is_a_usage_error():
    result = run_pytest(NUMERICS, "--vendor", "nvidia-sm90", "--mode", "interpreter", "--op",
                        "gelu", "--reproduce-failure", "not a blob")
    assert result.returncode == 4 and "--reproduce-failure: 'not a blob' is not" in result.stderr


def test_a_failing_check_records_its_error_and_bound(found_under_ci):
    (worst,) = [e for e in found_under_ci["errors"] if "ratio" in e]
    assert worst["output"] == "output" and worst["ratio"] > 1
    assert worst["max_abs_error"] > 0 and isinstance(worst["rtol"], float)


def test_the_blob_is_parsed_from_the_failure_text():
    text = ("Failing test case: test_x(\n    a=1,\n)\n\nYou can reproduce this test case by "
            "temporarily adding @reproduce_failure('6.170.15', b'AEEAQQBBAEEA') as a decorator "
            "on your test function")
    assert reproduce_failure(text) == "@reproduce_failure('6.170.15', b'AEEAQQBBAEEA')"
    assert parse_reproduce_failure(reproduce_failure(text)) == ("6.170.15", b"AEEAQQBBAEEA")
    assert parse_reproduce_failure("6.170.15:AEEAQQBBAEEA") == ("6.170.15", b"AEEAQQBBAEEA")
    assert reproduce_failure("AssertionError: no blob") is None
    r = Record(test_id="s::t[1]", status=Status.FAIL, example=text, repro="pytest 's::t[1]'")
    assert r.reproduce_failure == "@reproduce_failure('6.170.15', b'AEEAQQBBAEEA')"
    assert r.replay == "pytest 's::t[1]' --reproduce-failure 6.170.15:AEEAQQBBAEEA"
