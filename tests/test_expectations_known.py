"""Known upstream defects shipped as expectation files (expectations/triton-X.Y/FAMILY.toml):
what they hold, how a run picks them up, and that a recorded reference run conforms with
them while a new failure still fails. Also the fields an entry may link."""
import copy
import gzip
import json
import re
import textwrap
from pathlib import Path

import pytest

from tests.helpers import needs_interpreter, run_pytest
from triton_cts import CHECKOUT
from triton_cts.profiles import VENDOR_FAMILIES
from triton_cts.results import plugin as results_plugin
from triton_cts.results.expectations import (KNOWN_DEFECTS_DIR, apply_expectations,
                                             known_defect_files, known_waived,
                                             load_expectations, stale_expectations)
from triton_cts.results.records import outcome, verdict
from triton_cts.results.report_io import ReportError, load_report
from triton_cts.targets import SELECTION_KEY

SHIPPED = sorted(KNOWN_DEFECTS_DIR.glob("triton-*/*.toml"))
H100 = CHECKOUT / "reports/published/h100-triton3.6"
FINDINGS = (CHECKOUT / "reports/published/FINDINGS.md").read_text()


def test_shipped_files_are_per_triton_version_and_family_with_finding_and_repro():
    assert {p.relative_to(KNOWN_DEFECTS_DIR).as_posix() for p in SHIPPED} >= \
        {"triton-3.6/nvidia.toml", "triton-3.6/rocm.toml"}
    for path in SHIPPED:
        assert re.fullmatch(r"triton-\d+\.\d+", path.parent.name) and path.stem in VENDOR_FAMILIES
        entries = load_expectations(path, known=True)
        assert entries
        for e in entries:
            assert e.known and e.reason and e.repro and (CHECKOUT / e.repro).is_file()
            file, _, anchor = e.finding.partition("#")
            assert file == "reports/published/FINDINGS.md"
            # the anchor names a finding that the file lists (its table row)
            assert re.fullmatch(r"f\d+", anchor) and f"| {anchor.upper()} |" in FINDINGS
            assert e.reason.startswith(anchor.upper() + ", Triton " + path.parent.name[7:])


def test_files_are_picked_by_triton_version_and_the_selected_families(tmp_path):
    assert [p.name for p in known_defect_files("3.6.0", {"nvidia"})] == ["nvidia.toml"]
    assert [p.name for p in known_defect_files("3.6.1+git1234", {"rocm", "nvidia", "intel"})] \
        == ["nvidia.toml", "rocm.toml"]
    assert known_defect_files("3.9.0", {"nvidia"}) == []
    assert known_defect_files("3.6.0", {"npu"}) == []
    assert known_defect_files(None, {"nvidia"}) == []


class _Config:
    """What the plugin reads off pytest's config to find the known-defect files."""

    def __init__(self, vendors, off=False):
        profiles = [type("P", (), {"vendor": v})() for v in vendors]
        self.stash = {SELECTION_KEY: type("S", (), {"profiles": profiles})()}
        self.off = off

    def getoption(self, name):
        assert name == "no_known_defects"
        return self.off


def test_a_run_uses_the_files_of_its_triton_unless_told_not_to(monkeypatch):
    monkeypatch.setattr(results_plugin, "_version", lambda m: "3.6.0" if m == "triton" else None)
    files = results_plugin._known_files(_Config(["nvidia", "nvidia", "rocm"]))
    assert [f.relative_to(CHECKOUT).as_posix() for f in files] == \
        ["expectations/triton-3.6/nvidia.toml", "expectations/triton-3.6/rocm.toml"]
    assert results_plugin._known_files(_Config(["nvidia"], off=True)) == []
    monkeypatch.setattr(results_plugin, "_version", lambda m: "3.9.0")
    assert results_plugin._known_files(_Config(["nvidia"])) == []


def _as_h200(doc):
    """A recorded H100 (nvidia-sm90) run as the same run on the H200 profile."""
    doc = copy.deepcopy(doc)
    for r in doc["records"]:
        r["test_id"] = r["test_id"].replace("-nvidia-sm90-", "-nvidia-sm90-h200-")
        r["profile"] = "nvidia-sm90-h200"
    return doc


def test_the_recorded_reference_runs_conform_with_the_shipped_defects_waived():
    known = load_expectations(KNOWN_DEFECTS_DIR / "triton-3.6/nvidia.toml", known=True)
    doc = load_report(H100 / "seed16-reference.json.gz")  # F24 x 5 dtypes, F25 x 2
    for run in (doc, _as_h200(doc)):
        assert outcome(run["records"]) == "does_not_conform"
        records = apply_expectations(run["records"], known)
        assert outcome(records) == "conforms", verdict(records)
        waived = [r for r in records if r["status"] == "waived"]
        assert len(waived) == 7
        by_finding = {}
        for k in known_waived(records):
            by_finding[k["finding"]] = by_finding.get(k["finding"], 0) + len(k["checks"])
        assert by_finding == {"reports/published/FINDINGS.md#f24": 5,
                              "reports/published/FINDINGS.md#f25": 2}
    # entries for checks a selection did not collect are not stale (they are shipped)
    assert stale_expectations(known, []) == []
    # a passing tl_topk (another seed drew no [1, N] block) is a pass: F24 is flaky
    ci = apply_expectations(load_report(H100 / "ci-reference.json.gz")["records"], known)
    assert outcome(ci) == "conforms"
    assert any(r["status"] == "pass" and "tl_topk" in r["test_id"] for r in ci)


def test_a_new_failure_still_fails_with_the_known_defects_waived():
    known = load_expectations(KNOWN_DEFECTS_DIR / "triton-3.6/nvidia.toml", known=True)
    # seed 5 also failed two attention checks: no finding covers them
    records = apply_expectations(load_report(H100 / "seed5-reference.json.gz")["records"], known)
    assert outcome(records) == "does_not_conform"
    assert sorted(r["op"] for r in records if not r["status"] in
                  ("pass", "not_supported", "waived", "quality_warning")) == \
        ["attention", "attention_backward"]
    # a strict xfail whose check passes is an unexpected pass, which does not conform
    doc = _as_h200(load_report(H100 / "seed16-reference.json.gz"))
    fdiv = next(r for r in doc["records"] if "tl_fdiv" in r["test_id"])
    fdiv["status"] = "pass"
    records = apply_expectations(doc["records"], known)
    assert outcome(records) == "does_not_conform"
    assert [r["status"] for r in records if r["test_id"] == fdiv["test_id"]] == ["unexpected_pass"]


ENTRY = '[[expectation]]\ntest = "suites/x"\nstatus = "xfail"\nreason = "r"\n'


@pytest.mark.parametrize("line,problem", [
    ('link = "javascript:alert(5)"', "'link' 'javascript:alert(5)' is not an http:// or https:// address"),
    ('link = "data:text/html,<script>alert(1)</script>"', "is not an http:// or https:// address"),
    ('link = "JAVASCRIPT:alert(5)"', "is not an http:// or https:// address"),
    ('link = "//evil.example/x"', "is not an http:// or https:// address"),
    ('link = "issues/1"', "is not an http:// or https:// address"),
    ('link = "https://"', "is not an http:// or https:// address"),
    ('link = " https://example.invalid/1"', "is not an http:// or https:// address"),
    ('finding = "javascript:alert(5)"', "'finding' 'javascript:alert(5)' is not a path in the checkout"),
    ('finding = "../../etc/passwd"', "is not a path in the checkout"),
    ('finding = "/etc/passwd"', "is not a path in the checkout"),
    ('finding = "reports/published/FINDINGS.md#f24\\"onclick"', "is not a path in the checkout"),
    ('repro = "reports/published/repro/no_such.py"', "'repro' 'reports/published/repro/no_such.py': no such file"),
    ('finding = 5', "'finding' must be a string"),
])
def test_entry_links_are_http_and_paths_stay_in_the_checkout(tmp_path, line, problem):
    path = tmp_path / "bad.toml"
    path.write_text(ENTRY + line + "\n")
    with pytest.raises(ReportError) as exc:
        load_expectations(path)
    assert f"expectation file {path}, entry 1 ('suites/x'): " in str(exc.value)
    assert problem in str(exc.value)


def test_good_links_and_paths_load(tmp_path):
    path = tmp_path / "good.toml"
    path.write_text(ENTRY + 'link = "https://github.com/triton-lang/triton/issues/1"\n'
                    'finding = "reports/published/FINDINGS.md#f24"\n'
                    'repro = "reports/published/repro/triton_language_compile_failures.py"\n')
    (e,) = load_expectations(path)
    assert (e.link, e.finding, e.known) == ("https://github.com/triton-lang/triton/issues/1",
                                            "reports/published/FINDINGS.md#f24", False)
    assert e.marker_reason == "waived: r (https://github.com/triton-lang/triton/issues/1)"


@needs_interpreter
def test_a_run_names_the_known_defects_it_waived(tmp_path):
    """A real run with a known-defect file for its Triton: the failing check is waived and
    named known in the terminal, the report and the summary; no stale warning for entries
    of checks this selection did not collect."""
    import triton

    version = re.match(r"\d+\.\d+", triton.__version__).group(0)
    known = tmp_path / "known" / f"triton-{version}"
    known.mkdir(parents=True)
    (known / "nvidia.toml").write_text(textwrap.dedent("""
        [[expectation]]
        test = "suites/test_numerics.py::test_matches_reference[gelu-tests.planted.gelu_faults:gelu_wrong_coefficient-nvidia-sm90-interpreter-"
        status = "xfail"
        reason = "F99, planted: wrong tanh coefficient"
        finding = "reports/published/FINDINGS.md#f24"

        [[expectation]]
        test = "suites/test_language_ops.py::"
        status = "xfail"
        reason = "not collected by this run"
        """))
    (tmp_path / "known_here.py").write_text(
        "import triton_cts.results.expectations as e\n"
        f"e.KNOWN_DEFECTS_DIR = e.Path({str(tmp_path / 'known')!r})\n")
    out = tmp_path / "r.json"
    import os
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{env_path}"
    try:
        result = run_pytest("-p", "known_here", "-p", "no:xdist", "suites/test_numerics.py",
                            "-k", "test_matches_reference and not fuzzed and not covering",
                            "--op", "gelu",
                            "--vendor", "nvidia-sm90", "--mode", "interpreter",
                            "--hypothesis-profile", "ci", "--impl",
                            "gelu=tests.planted.gelu_faults:gelu_wrong_coefficient",
                            "--report-json", str(out))
    finally:
        os.environ["PYTHONPATH"] = env_path
    text = result.stdout + result.stderr
    # every selected check is waived: waived conforms, but a run that checked nothing
    # has no result
    assert result.returncode == 1, text
    assert "triton-cts: NO RESULT: 4 checks (4 waived)" in text
    assert "known defect, waived (" in text and "F99, planted" in text and "stale" not in text
    doc = load_report(out)
    assert [k["reason"] for k in doc["expectations"]["known"]] == ["F99, planted: wrong tanh coefficient"]
    assert any(f.endswith(f"triton-{version}/nvidia.toml") for f in doc["environment"]["expectation_files"])
    waived = [r for r in doc["records"] if r["status"] == "waived"]
    assert waived and all(r["expectation"]["known"] for r in waived)
