"""Reports end to end: real pytest runs (with xdist) write the JSON, JUnit and HTML a
vendor reviews; expectation files and shards act on real test ids."""
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

from tests.helpers import needs_interpreter, run_pytest
from triton_cts import CHECKOUT
from triton_cts.results.expectations import load_expectations
from triton_cts.results.report_io import load_report

GELU = ("--op", "gelu", "--vendor", "nvidia-sm90", "--hypothesis-profile", "ci")
PLANTED = "gelu=tests.planted.gelu_faults:gelu_wrong_coefficient"
NUMERICS = "suites/test_numerics.py::test_matches_reference"
USAGE_ERROR = 4


@needs_interpreter
def test_clean_run_writes_json_and_html_and_conforms(tmp_path):
    out, page = tmp_path / "r.json", tmp_path / "r.html"
    result = run_pytest("suites/test_numerics.py", *GELU, "--mode", "interpreter",
                        "--report-json", str(out), "--report-html", str(page))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "triton-cts: CONFORMS: 16 checks (16 pass)" in result.stdout
    assert "gelu  test_numerics  PASS 16P" in result.stdout  # the terminal matrix
    doc = load_report(out)
    env = doc["environment"]
    assert env["triton"] and env["torch"] and env["profiles"] == ["nvidia-sm90"]
    assert env["hypothesis"]["profile"] == "ci" and "--report-json" in env["command"]
    assert len(doc["records"]) == 16
    for r in doc["records"]:
        assert (r["op"], r["impl"], r["profile"], r["mode"], r["suite"]) == \
            ("gelu", "reference", "nvidia-sm90", "interpreter", "test_numerics")
        assert r["dtype"] in {"float16", "bfloat16", "float32", "float64"}
        assert r["status"] == "pass" and r["repro"].startswith("pytest 'suites/test_numerics.py::")
        assert r["errors"] and all(isinstance(e["rtol"], float) for e in r["errors"])
    assert "triton-cts: CONFORMS: 16 checks" in page.read_text()


@needs_interpreter
def test_failures_expectations_and_junit(tmp_path):
    expect = tmp_path / "nvidia-sm90.toml"
    expect.write_text(textwrap.dedent(f"""
        [[expectation]]
        test = "{NUMERICS}[gelu-tests.planted.gelu_faults:gelu_wrong_coefficient-nvidia-sm90-interpreter-float32]"
        status = "xfail"
        reason = "wrong tanh coefficient"
        link = "https://example.invalid/issues/7"

        [[expectation]]
        test = "{NUMERICS}[gelu-reference-nvidia-sm90-interpreter-float64]"
        status = "xfail"
        reason = "believed broken"

        [[expectation]]
        test = "suites/test_no_such_suite.py"
        status = "skip"
        reason = "gone"
    """))
    out, junit, base = tmp_path / "r.json", tmp_path / "j.xml", tmp_path / "base.toml"
    result = run_pytest(NUMERICS, *GELU, "--mode", "interpreter", "--impl", "reference",
                        "--impl", PLANTED, "-n", "2", "--expectations", str(expect),
                        "--report-json", str(out), "--junitxml", str(junit),
                        "--write-expectations", str(base))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "DOES NOT CONFORM: 8 checks (3 pass, 1 waived, 1 unexpected_pass, 3 fail)" in result.stdout
    assert "entry 'suites/test_no_such_suite.py' matches no collected test" in result.stdout
    doc = load_report(out)
    status = {r["test_id"].split("[")[1].rstrip("]"): r for r in doc["records"]}
    planted = "gelu-tests.planted.gelu_faults:gelu_wrong_coefficient-nvidia-sm90-interpreter-"
    waived = status[planted + "float32"]
    assert waived["status"] == "waived" and "wrong tanh coefficient" in waived["reason"]
    assert waived["expectation"]["link"] == "https://example.invalid/issues/7"
    assert status["gelu-reference-nvidia-sm90-interpreter-float64"]["status"] == "unexpected_pass"
    assert doc["expectations"]["unexpected_passes"] == [
        f"{NUMERICS}[gelu-reference-nvidia-sm90-interpreter-float64]"]
    failed = status[planted + "float64"]
    assert failed["status"] == "fail" and "out of tolerance" in failed["reason"]
    # hypothesis < 6.160 says "Falsifying example", later versions "Failing test case"
    assert failed["example"] and re.match(r"(Falsifying example|Failing test case): "
                                          r"test_matches_reference\(", failed["example"])
    assert "Draw 1 (case): Case(shape=" in failed["example"] and failed["shape"]
    assert failed["repro"] in failed["example"]  # the repro the failure message carries
    # JUnit: NotSupported/Waived -> skipped with the reason, UnexpectedPass -> failure.
    cases = {c.get("name").split("[")[1].rstrip("]"): c for c in ET.parse(junit).iter("testcase")}
    assert cases[planted + "float32"].find("skipped").get("message").startswith(
        "waived: wrong tanh coefficient")
    assert cases["gelu-reference-nvidia-sm90-interpreter-float64"].find("failure") is not None
    assert cases[planted + "float16"].find("failure") is not None
    # The written baseline lists exactly the checks that do not pass now.
    entries = {e.test: e for e in load_expectations(base)}
    assert set(entries) == {f"{NUMERICS}[{planted}{d}]"
                            for d in ("float16", "bfloat16", "float32", "float64")}
    assert entries[f"{NUMERICS}[{planted}float32]"].reason == "wrong tanh coefficient"


SYNTHETIC = '''
import os, warnings, pytest

class CompileQualityWarning(UserWarning):
    pass

@pytest.fixture
def broken_fixture():
    raise RuntimeError("fixture broke")

def test_passes(target):
    pass

def test_quality_by_warning(target):
    warnings.warn("2 registers spilled", CompileQualityWarning)

def test_quality_by_property(target, record_property):
    record_property("quality_warning", "occupancy 12%")

def test_harness_exception(target):
    {}["missing"]

def test_setup_error(target, broken_fixture):
    pass

def test_timeout(target):
    raise TimeoutError("kernel did not finish in 60 s")

def test_plain_skip(target):
    pytest.skip("later")

def test_crash(target):
    os._exit(3)
'''


@needs_interpreter
def test_every_status_from_a_real_run(tmp_path):
    """Each outcome a suite can have maps to its status, through xdist (where a worker
    crash is only seen by the controller)."""
    (tmp_path / "test_synthetic.py").write_text(SYNTHETIC)
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["triton_cts.plugin"]\n')
    out = tmp_path / "r.json"
    result = run_pytest(str(tmp_path / "test_synthetic.py"), "--op", "gelu", "--vendor",
                        "nvidia-sm90", "--mode", "interpreter", "-n", "2",
                        "--report-json", str(out))
    assert result.returncode == 1, result.stdout + result.stderr
    got = {r["test"]: r["status"] for r in load_report(out)["records"]}
    assert got == {"test_passes": "pass", "test_quality_by_warning": "quality_warning",
                   "test_quality_by_property": "quality_warning",
                   "test_harness_exception": "harness_error", "test_setup_error": "harness_error",
                   "test_timeout": "timeout", "test_plain_skip": "harness_error",
                   "test_crash": "crash"}


@pytest.mark.parametrize("args,message", [
    (("--shard", "4/3"), "--shard '4/3': expected I/N with 1 <= I <= N"),
    (("--expectations", "{tmp}/e.toml"), "entry 1 ('suites/'): missing or empty 'reason'"),
])
def test_bad_report_options_stop_the_run(tmp_path, args, message):
    (tmp_path / "e.toml").write_text('[[expectation]]\ntest = "suites/"\nstatus = "xfail"\n')
    result = run_pytest("suites/", *GELU, *(a.format(tmp=tmp_path) for a in args))
    assert result.returncode == USAGE_ERROR
    assert message in result.stderr and "passed" not in result.stdout


def test_shards_partition_the_run_and_merge_back(tmp_path):
    select = ("--op", "gelu", "--op", "gelu_backward", "--vendor", "nvidia-sm90",
              "--vendor", "amd-gfx942", "--mode", "compile")
    full = run_pytest("suites/test_compile.py", "--collect-only", "-q", *select)
    full_ids = {line for line in full.stdout.splitlines() if "::" in line}
    assert len(full_ids) == 4, full.stdout
    paths, shard_ids = [tmp_path / f"shard{i}.json" for i in (1, 2)], []
    for i, path in enumerate(paths, 1):
        result = run_pytest("suites/test_compile.py", *select, "--shard", f"{i}/2",
                            "--report-json", str(path))
        assert result.returncode == 0, result.stdout + result.stderr
        doc = load_report(path)
        assert doc["environment"]["shard"] == f"{i}/2"
        shard_ids.append({r["test_id"] for r in doc["records"]})
    assert all(shard_ids) and not shard_ids[0] & shard_ids[1]  # both used, disjoint
    merged = tmp_path / "merged.json"
    run = subprocess.run([sys.executable, "-m", "reports", "merge", *map(str, paths),
                          "-o", str(merged)], cwd=CHECKOUT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    records = load_report(merged)["records"]
    assert sorted(r["test_id"] for r in records) == sorted(full_ids)  # union == full run
