"""Unit tests of the results model and the report commands: status mapping, expectation
matching, shards, merge, diff, malformed inputs."""
import json
import subprocess

import pytest

from reports.__main__ import main as reports_main
from reports.diff import diff
from reports.html import render
from reports.merge import merge
from triton_cts.results.expectations import (Expectation, expectations_toml, load_expectations,
                                             match_expectation, parse_shard, shard_of,
                                             stale_expectations)
from triton_cts.results.records import cell_text, matrix, split_properties, verdict
from triton_cts.results.report_io import (SCHEMA_VERSION, ReportError, atomic_write, document,
                                          load_report)
from triton_cts.results.status import (Status, classify_phase, falsifying_example,
                                       is_quality_warning, worst)


# ---- status mapping ----------------------------------------------------------------------
@pytest.mark.parametrize("when,outcome,message,longrepr,wasxfail,expected", [
    ("call", "passed", "", "", None, Status.PASS),
    ("setup", "skipped", "not supported: no accelerator attached", "", None, Status.NOT_SUPPORTED),
    ("setup", "skipped", "waived: known bug (https://x)", "", None, Status.WAIVED),
    ("call", "skipped", "", "", "waived: known bug", Status.WAIVED),            # xfailed
    ("call", "passed", "", "", "waived: flaky", Status.PASS),                   # flaky passed
    ("call", "failed", "", "[XPASS(strict)] waived: known bug", None, Status.UNEXPECTED_PASS),
    ("call", "failed", "AssertionError: out of tolerance", "E AssertionError", None, Status.FAIL),
    ("call", "failed", "assert 0 > 0", "", None, Status.FAIL),
    ("call", "failed", "RuntimeError: kernel", "...\nreproduce: pytest x", None, Status.FAIL),
    ("call", "failed", "triton.compiler.errors.CompilationError: at 1:2", "", None, Status.FAIL),
    ("call", "failed", "KeyError: 'op'", "E KeyError", None, Status.HARNESS_ERROR),
    # raised inside Triton's compiler (fdiv on float16, Triton 3.6, sm_90): the target's
    ("call", "failed", "RuntimeError: PassManager::run failed",
     "E RuntimeError\n/venv/lib/site-packages/triton/backends/nvidia/compiler.py:378: "
     "RuntimeError", None, Status.FAIL),
    # raised in the harness, whatever folder the checkout is in
    ("call", "failed", "RuntimeError: bad", "E RuntimeError\n/src/triton/triton_cts/results/"
     "plugin.py:12: RuntimeError", None, Status.HARNESS_ERROR),
    ("setup", "failed", "AssertionError: fixture", "", None, Status.HARNESS_ERROR),
    ("teardown", "failed", "OSError: cleanup", "", None, Status.HARNESS_ERROR),
    ("call", "failed", "TimeoutError: took too long", "", None, Status.TIMEOUT),
    ("call", "failed", "Failed: Timeout >60.0s", "", None, Status.TIMEOUT),
    ("???", "failed", "", "worker 'gw0' crashed while running 'a.py::t'", None, Status.CRASH),
    ("setup", "skipped", "no reason given", "", None, Status.HARNESS_ERROR),
])
def test_classify_phase(when, outcome, message, longrepr, wasxfail, expected):
    status, reason = classify_phase(when, outcome, message, longrepr, wasxfail)
    assert status is expected
    assert status is Status.PASS or reason


def test_conformance_and_worst_status():
    assert {s for s in Status if s.conforms} == {Status.PASS, Status.NOT_SUPPORTED,
                                                 Status.QUALITY_WARNING, Status.WAIVED}
    assert worst([Status.PASS, Status.WAIVED, Status.NOT_SUPPORTED]) is Status.WAIVED
    assert worst(["pass", "fail", "quality_warning"]) is Status.FAIL
    ok = [{"status": "pass"}, {"status": "waived"}, {"status": "quality_warning"}]
    assert verdict(ok).startswith("triton-cts: CONFORMS: 3 checks")
    assert "DOES NOT CONFORM" in verdict(ok + [{"status": "unexpected_pass"}])
    assert "NO CHECKS RAN" in verdict([])


def test_quality_warning_categories():
    from triton_cts.results.status import QualityWarning

    class CompileQualityWarning(UserWarning):  # the compile suite's, matched by name
        pass

    class Mine(QualityWarning):
        pass

    assert is_quality_warning(CompileQualityWarning) and is_quality_warning(Mine)
    assert not is_quality_warning(UserWarning) and not is_quality_warning(DeprecationWarning)


def test_split_properties_keeps_worst_error_with_its_bound():
    props = [("output max_abs_error", 0.1), ("output bound", "rtol=1 atol=1"),
             ("output max_abs_error", 0.5), ("output bound", "rtol=2 atol=2"),
             ("output max_abs_error", 0.2), ("output bound", "rtol=3 atol=3"),
             ("compile_stats", {"kernel": "k", "n_regs": 40}), ("compile_stats", {"kernel": "j"}),
             ("repro", "pytest x"), ("quality_warning", "spills"), ("note", "n")]
    out = split_properties(props)
    assert out["errors"] == [{"output": "output", "max_abs_error": 0.5, "rtol": 2.0, "atol": 2.0}]
    assert [s["kernel"] for s in out["compile_stats"]] == ["k", "j"]
    assert out["repro"] == "pytest x" and out["quality_warnings"] == ["spills"]
    assert out["properties"] == {"note": "n"}


def test_falsifying_example_is_cut_from_the_failure_text():
    text = ("E   AssertionError: bad\nE       Falsifying example: test_x(\nE           a=1,\n"
            "E       )\nE       Draw 1 (case): Case(shape=(3,))\n\nsuites/x.py:4: AssertionError")
    assert falsifying_example(text) == ("Falsifying example: test_x(\n    a=1,\n)\n"
                                        "Draw 1 (case): Case(shape=(3,))")
    assert falsifying_example("E AssertionError: no example") is None
    newer = text.replace("Falsifying example", "Failing test case")  # hypothesis >= 6.16x
    assert falsifying_example(newer).startswith("Failing test case: test_x(\n    a=1,")


# ---- expectations ------------------------------------------------------------------------
def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_expectations_longest_prefix_wins_and_stale_entries(tmp_path):
    path = write(tmp_path, "e.toml", """
[[expectation]]
test = "suites/test_numerics.py::test_matches_reference[matmul-"
status = "flaky"
reason = "all matmul"

[[expectation]]
test = "suites/test_numerics.py::test_matches_reference[matmul-reference-amd-gfx942-interpreter-bfloat16]"
status = "xfail"
reason = "bf16 dot"
link = "https://example.invalid/issues/1"

[[expectation]]
test = "suites/test_gone.py"
status = "skip"
reason = "removed suite"
""")
    exps = load_expectations(path)
    ids = ["suites/test_numerics.py::test_matches_reference[matmul-reference-amd-gfx942-interpreter-bfloat16]",
           "suites/test_numerics.py::test_matches_reference[matmul-reference-amd-gfx942-interpreter-float32]",
           "suites/test_numerics.py::test_matches_reference[gelu-reference-amd-gfx942-interpreter-float32]"]
    assert match_expectation(ids[0], exps).status == "xfail"
    assert match_expectation(ids[0], exps).marker_reason == \
        "waived: bf16 dot (https://example.invalid/issues/1)"
    assert match_expectation(ids[1], exps).reason == "all matmul"
    assert match_expectation(ids[2], exps) is None
    assert [e.test for e in stale_expectations(exps, ids)] == ["suites/test_gone.py"]


@pytest.mark.parametrize("body,problem", [
    ('[[expectation]]\ntest = "suites/x"\nstatus = "xfail"\n', "entry 1 ('suites/x'): missing or empty 'reason'"),
    ('[[expectation]]\ntest = "suites/x"\nstatus = "xfail"\nreason = " "\n', "missing or empty 'reason'"),
    ('[[expectation]]\ntest = "suites/x"\nstatus = "broken"\nreason = "r"\n', "status 'broken' is not one of"),
    ('[[expectation]]\ntest = "suites/x"\nstatus = "xfail"\nreason = "r"\nwhy = 1\n', "unknown field(s) why"),
    ('[[expectations]]\ntest = "x"\n', "unknown top-level key(s) expectations"),
    ('[[expectation]\n', "invalid TOML"),
])
def test_bad_expectation_file_names_file_and_entry(tmp_path, body, problem):
    path = write(tmp_path, "bad.toml", body)
    with pytest.raises(ReportError) as exc:
        load_expectations(path)
    assert str(path) in str(exc.value) and problem in str(exc.value)


def test_written_baseline_lists_failures_and_loads_back(tmp_path):
    records = [{"test_id": "a::t[1]", "status": "fail", "reason": 'AssertionError: "x"\n2'},
               {"test_id": "a::t[2]", "status": "pass", "reason": ""},
               {"test_id": "a::t[3]", "status": "waived", "reason": "waived: old (https://l)"},
               {"test_id": "a::t[4]", "status": "unexpected_pass", "reason": "waived: fixed"},
               {"test_id": "a::t[5]", "status": "crash", "reason": "worker crashed"}]
    path = write(tmp_path, "base.toml", expectations_toml(records))
    exps = {e.test: e for e in load_expectations(path)}
    assert set(exps) == {"a::t[1]", "a::t[3]", "a::t[5]"}
    assert exps["a::t[1]"].reason == 'fail: AssertionError: "x"'
    assert exps["a::t[3]"].reason == "old"


# ---- shards ------------------------------------------------------------------------------
def test_shards_are_disjoint_stable_and_cover_everything():
    ids = [f"suites/test_x.py::test_y[op{i}-reference-nvidia-sm90-interpreter]" for i in range(500)]
    parts = {k: {t for t in ids if shard_of(t, 4) == k} for k in range(1, 5)}
    assert set().union(*parts.values()) == set(ids)
    assert sum(len(p) for p in parts.values()) == len(ids)
    assert all(60 < len(p) < 190 for p in parts.values())  # roughly balanced
    assert shard_of(ids[0], 4) == shard_of(ids[0], 4)
    assert parse_shard("2/4") == (2, 4)
    for bad in ("0/4", "5/4", "2", "a/b", ""):
        with pytest.raises(ValueError, match="expected I/N"):
            parse_shard(bad)


# ---- merge, diff, loading ----------------------------------------------------------------
def report(records, **env):
    environment = {"triton": "3.9.0", "torch": "2.13.0", "profiles": ["nvidia-sm90"],
                   "modes": ["interpreter"], "shard": None, **env}
    return document(environment, records, expectations={"stale": [], "unexpected_passes": []})


def rec(test_id, status, **kw):
    return {"test_id": test_id, "status": status, "op": "gelu", "profile": "nvidia-sm90",
            "suite": "test_numerics", **kw}


def test_merge_joins_shards_and_refuses_disagreeing_ones():
    a = report([rec("s::t[1]", "pass")], shard="1/2")
    b = report([rec("s::t[2]", "fail")], shard="2/2", profiles=["amd-gfx942"])
    # shards of two selections, each incomplete: merged only as a partial report
    merged = merge([("a.json", a), ("b.json", b)], allow_partial=True)
    assert [r["test_id"] for r in merged["records"]] == ["s::t[1]", "s::t[2]"]
    assert [r["shard_index"] for r in merged["records"]] == [0, 1]
    assert merged["environment"]["profiles"] == ["amd-gfx942", "nvidia-sm90"]
    assert [s["shard"] for s in merged["environment"]["shards"]] == ["1/2", "2/2"]
    other = report([rec("s::t[3]", "pass")], triton="3.6.0")
    with pytest.raises(ReportError, match=r"c.json ran triton 3.6.0, a.json ran triton 3.9.0"):
        merge([("a.json", a), ("c.json", other)])
    assert len(merge([("a.json", a), ("c.json", other)], force=True,
                     allow_partial=True)["records"]) == 2
    with pytest.raises(ReportError, match=r"s::t\[1\] is in both a.json and a2.json"):
        merge([("a.json", a), ("a2.json", a)])


def test_diff_lists_transitions_and_compile_regressions():
    old = report([rec("t1", "pass"), rec("t2", "fail"), rec("t3", "pass"),
                  rec("t4", "pass", compile_stats=[{"kernel": "k", "n_regs": 40, "occupancy": 8}])])
    new = report([rec("t1", "fail"), rec("t2", "pass"), rec("t3", "waived"), rec("t5", "crash"),
                  rec("t4", "pass", compile_stats=[{"kernel": "k", "n_regs": 64, "occupancy": 4}])])
    d = diff(old, new)
    assert [t for t, *_ in d.new_failures] == ["t1", "t5"]
    assert d.fixes == [("t2", Status.FAIL, Status.PASS)]
    assert d.changed == [("t3", Status.PASS, Status.WAIVED)]
    assert sorted((s, o, n) for _, _, s, o, n in d.compile_regressions) == \
        [("n_regs", 40, 64), ("occupancy", 8, 4)]
    assert d.regressed and not diff(old, old).regressed


def test_load_report_errors_are_clear(tmp_path):
    good = json.dumps(report([rec("t1", "pass")]))
    truncated = write(tmp_path, "cut.json", good[: len(good) // 2])
    with pytest.raises(ReportError, match=r"cut.json: invalid JSON at line 1.*truncated\?\)"):
        load_report(truncated)
    future = write(tmp_path, "future.json", good.replace(f'"schema_version": {SCHEMA_VERSION}',
                                                         '"schema_version": 99'))
    with pytest.raises(ReportError, match=r"future.json: schema version 99, this checkout reads versions 1, 2"):
        load_report(future)
    with pytest.raises(ReportError, match="not a triton-cts report"):
        load_report(write(tmp_path, "other.json", "[]"))
    bad_status = write(tmp_path, "st.json", good.replace('"pass"', '"great"'))
    with pytest.raises(ReportError, match="record 0 has no test_id or an unknown status 'great'"):
        load_report(bad_status)


def test_gzipped_reports_load_as_they_are(tmp_path):
    """Published reports are kept gzip-compressed; a cut one says so."""
    import gzip
    doc = report([rec("t1", "pass"), rec("t2", "fail")])
    path = tmp_path / "run.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    assert load_report(path)["records"] == doc["records"]
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(path.read_bytes()[:20])
    with pytest.raises(ReportError, match="cut.json.gz: cannot read it"):
        load_report(cut)


def test_cli_merge_refuses_other_schema_and_reports_on_stderr(tmp_path, capsys):
    a = write(tmp_path, "a.json", json.dumps(report([rec("t1", "pass")])))
    b = write(tmp_path, "b.json", json.dumps({**report([rec("t2", "pass")]), "schema_version": 5}))
    assert reports_main(["merge", str(a), str(b), "-o", str(tmp_path / "m.json")]) == 2
    assert "b.json: schema version 5" in capsys.readouterr().err
    assert not (tmp_path / "m.json").exists()
    assert reports_main(["summary", str(a)]) == 0
    out = capsys.readouterr().out
    assert "gelu" in out and "PASS 1P" in out and "CONFORMS: 1 checks" in out


def test_atomic_write_leaves_no_partial_file(tmp_path):
    target = tmp_path / "r.json"
    atomic_write(target, "old")

    class Boom:
        def __str__(self):
            raise RuntimeError("boom")
    with pytest.raises(TypeError):
        atomic_write(target, Boom())  # the write itself fails
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_matrix_counts_and_html_is_self_contained():
    records = [rec("a", "pass"), rec("b", "fail"), rec("c", "not_supported"),
               rec("d", "pass", profile="amd-gfx942"),
               rec("e", "pass", op="matmul", suite="test_compile",
                   compile_stats=[{"kernel": "mm", "n_regs": 100, "shared": 1024}])]
    profiles, rows = matrix(records)
    assert profiles == ["amd-gfx942", "nvidia-sm90"]
    gelu = next(r for r in rows if r["op"] == "gelu")["cells"]["nvidia-sm90"]
    assert gelu["reads_as"] is Status.FAIL
    assert gelu["counts"] == {Status.FAIL: 1, Status.NOT_SUPPORTED: 1, Status.PASS: 1}
    page = render(report(records))
    assert "<script src" not in page and "<link" not in page and "http://" not in page
    assert "triton-cts: DOES NOT CONFORM: 5 checks" in page
    assert "mm" in page and "n_regs" in page  # the compile-stats table
    assert "</script>" not in page.split('id="report-data">')[1].split("</script>")[0]


def test_a_cell_of_passes_beside_not_supported_checks_reads_as_passed():
    """Not-supported checks rank above passes by severity, but a cell that holds passes
    reads as passed; one that holds only not-supported checks reads as not supported."""
    _, rows = matrix([rec("a", "pass"), rec("b", "not_supported"),
                      rec("c", "not_supported", profile="amd-gfx942")])
    cells = rows[0]["cells"]
    assert cells["nvidia-sm90"]["reads_as"] is Status.PASS
    assert cells["amd-gfx942"]["reads_as"] is Status.NOT_SUPPORTED
    assert cell_text(cells["nvidia-sm90"]).startswith("PASS ")


def test_bundled_example_expectation_file_loads():
    from triton_cts import CHECKOUT

    entries = load_expectations(CHECKOUT / "expectations" / "example.toml")
    assert entries and all(e.reason and e.link for e in entries)


def test_git_commit_marks_an_uncommitted_tree(tmp_path, monkeypatch):
    from triton_cts.results import plugin as reporting

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t",
                        *args], check=True, capture_output=True)
    git("init", "-q")
    (tmp_path / "f.txt").write_text("a")
    git("add", "f.txt")
    git("commit", "-q", "-m", "one")
    monkeypatch.setattr(reporting, "CHECKOUT", tmp_path)
    head = reporting._git_commit()
    assert head is not None and len(head) == 40 and "+" not in head
    (tmp_path / "f.txt").write_text("b")
    assert reporting._git_commit() == head + "+dirty"
