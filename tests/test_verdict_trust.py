"""A verdict must not claim more than the evidence shows: an interrupted run (SIGINT,
SIGTERM, also under xdist), a merge of some shards only, a run that checked nothing or
no check of a required mode, and a diff in which checks went missing never pass; failing
checks carry their measured error and bound, and are sorted by how far out of bounds."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from reports.__main__ import main as reports_main
from reports.diff import diff
from reports.html import render
from reports.merge import merge
from tests.helpers import needs_interpreter, run_pytest
from triton_cts import CHECKOUT
from triton_cts.results.records import (conforms, outcome, run_problems, split_properties,
                                        verdict)
from triton_cts.results.report_io import ReportError, document, load_report
from triton_cts.results.status import Status

NUMERICS = "suites/test_numerics.py::test_matches_reference"
SLOW = "gelu=tests.planted.slow:gelu_slow"
SHAPE_FAULT = "gelu=tests.planted.gelu_shape_faults:gelu_wrong_past_first_block"
BASE = "pytest suites/test_numerics.py --vendor nvidia-sm90 --mode interpreter"


def rec(test_id, status, **kw):
    return {"test_id": test_id, "status": status, "op": "gelu", "impl": "reference",
            "profile": "nvidia-sm90", "mode": "interpreter", "suite": "test_numerics", **kw}


def report(records, run=None, **env):
    environment = {"triton": "3.9.0", "torch": "2.13.0", "profiles": ["nvidia-sm90"],
                   "modes": ["interpreter"], "implementations": ["reference"], "shard": None,
                   "command": BASE, **env}
    extra = {"run": run} if run is not None else {}
    return document(environment, records, expectations={"stale": [], "unexpected_passes": []},
                    **extra)


def write(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


# ---- the verdict ---------------------------------------------------------------------------
def test_an_interrupted_run_never_conforms():
    assert not Status.INTERRUPTED.conforms
    records = [rec(f"t{i}", "pass") for i in range(17)] + [rec("t17", "interrupted")]
    run = {"interrupted": True, "signal": "SIGINT", "not_run": ["t18", "t19"]}
    line = verdict(records, run)
    assert line.startswith("triton-cts: INTERRUPTED (SIGINT), DOES NOT CONFORM: 18 checks "
                           "(17 pass, 1 interrupted)") and "2 collected check(s) never ran" in line
    assert not conforms(records, run) and outcome(records, run) == "interrupted"
    # even when every check that reported passed
    assert not conforms(records[:17], run) and "INTERRUPTED" in verdict(records[:17], run)


def test_a_run_that_checked_nothing_is_no_result(tmp_path, capsys):
    records = [rec(f"t{i}", "not_supported") for i in range(12)]
    assert verdict(records).startswith("triton-cts: NO RESULT: 12 checks (12 not_supported)")
    assert outcome(records) == "no_result" and not conforms(records)
    assert outcome([]) == "no_result" and "NO CHECKS RAN" in verdict([])
    assert reports_main(["summary", write(tmp_path, "r.json", report(records))]) == 1
    assert "NO RESULT" in capsys.readouterr().out
    # one check that ran is a result
    assert conforms(records + [rec("t12", "pass")])


def test_required_mode_without_a_check_that_ran_does_not_conform(tmp_path, capsys):
    records = [rec("a", "pass"), rec("b", "not_supported", mode="device")]
    run = {"interrupted": False, "required_modes": ["device"]}
    assert outcome(records, run) == "does_not_conform"
    assert "required mode device: no check ran in it" in verdict(records, run)
    assert conforms(records + [rec("c", "pass", mode="device")], run)
    assert reports_main(["summary", write(tmp_path, "r.json", report(records, run))]) == 1
    assert "required mode device" in capsys.readouterr().out


# ---- merge ---------------------------------------------------------------------------------
def shard(i, n, records, **env):
    env = {"command": f"{BASE} --shard {i}/{n} --report-json s{i}.json -n 2", **env}
    return report(records, {"interrupted": False, "collected": len(records), "not_run": []},
                  shard=f"{i}/{n}", **env)


def test_merge_refuses_a_missing_shard_or_marks_the_merge_incomplete(tmp_path, capsys):
    one = write(tmp_path, "s1.json", shard(1, 2, [rec("t1", "pass")]))
    out = str(tmp_path / "m.json")
    assert reports_main(["merge", one, "-o", out]) == 2
    err = capsys.readouterr().err
    assert "missing shard 2/2" in err and "--allow-partial" in err and not os.path.exists(out)
    assert reports_main(["merge", one, "-o", out, "--allow-partial"]) == 1
    assert "INCOMPLETE, DOES NOT CONFORM" in capsys.readouterr().out
    merged = load_report(out)
    assert merged["run"]["incomplete"] and "missing shard 2/2" in merged["run"]["missing"][0]
    assert reports_main(["summary", out]) == 1
    assert "incomplete: missing shard 2/2" in capsys.readouterr().out
    page = render(merged)
    assert "INCOMPLETE, DOES NOT CONFORM" in page and 'id="run-problems"' in page


def test_merge_needs_every_shard_of_the_same_selection():
    s1, s2 = shard(1, 2, [rec("t1", "pass")]), shard(2, 2, [rec("t2", "pass")])
    merged = merge([("s1.json", s1), ("s2.json", s2)])  # output paths and -n may differ
    assert conforms(merged["records"], merged["run"]) and not merged["run"]["incomplete"]
    other = shard(2, 2, [rec("t2", "pass")], command=f"{BASE} --op gelu --shard 2/2")
    with pytest.raises(ReportError, match=r"missing shard 2/2 of `pytest suites/test_numerics.py"):
        merge([("s1.json", s1), ("o2.json", other)])
    with pytest.raises(ReportError, match=r"missing shard 3/3"):
        merge([("a.json", shard(1, 3, [rec("t1", "pass")])),
               ("b.json", shard(2, 3, [rec("t2", "pass")]))])
    with pytest.raises(ReportError, match=r"shards of different counts"):
        merge([("a.json", s1), ("b.json", shard(2, 3, [rec("t2", "pass")]))])
    # each vendor's selection complete: one report of all of them
    amd = [shard(i, 2, [rec(f"a{i}", "pass", profile="amd-gfx942")], profiles=["amd-gfx942"],
                 command=f"{BASE.replace('nvidia-sm90', 'amd-gfx942')} --shard {i}/2")
           for i in (1, 2)]
    both = merge([("s1", s1), ("s2", s2), ("a1", amd[0]), ("a2", amd[1])])
    assert len(both["records"]) == 4 and not both["run"]["incomplete"]


def test_merging_an_interrupted_shard_is_interrupted(tmp_path, capsys):
    s1 = shard(1, 2, [rec("t1", "pass")])
    s2 = shard(2, 2, [rec("t2", "interrupted")])
    s2["run"] = {"interrupted": True, "signal": "SIGTERM", "collected": 3, "not_run": ["t3"]}
    out = str(tmp_path / "m.json")
    assert reports_main(["merge", write(tmp_path, "s1.json", s1), write(tmp_path, "s2.json", s2),
                         "-o", out]) == 1
    assert "INTERRUPTED (SIGTERM)" in capsys.readouterr().out
    merged = load_report(out)
    assert merged["run"]["interrupted"] and merged["run"]["not_run"] == ["t3"]
    assert reports_main(["summary", out]) == 1


# ---- diff ----------------------------------------------------------------------------------
def test_diff_checks_that_no_longer_ran_are_a_regression(tmp_path, capsys):
    old = report([rec(f"{NUMERICS}[{i}]", "pass") for i in range(10)])
    new = report([rec(f"{NUMERICS}[{i}]", "pass") for i in range(5)])
    d = diff(old, new)
    assert d.regressed and [t for t, *_ in d.removed] == [f"{NUMERICS}[{i}]" for i in range(5, 10)]
    paths = write(tmp_path, "old.json", old), write(tmp_path, "new.json", new)
    assert reports_main(["diff", *paths]) == 1
    out = capsys.readouterr().out
    assert "checks no longer run: a regression" in out and f"{NUMERICS}[7]" in out
    assert reports_main(["diff", *paths, "--allow-removed"]) == 0


def test_diff_accepts_checks_a_changed_selection_leaves_out(tmp_path, capsys):
    old = report([rec("a", "pass"), rec("b", "pass", profile="amd-gfx942")],
                 profiles=["amd-gfx942", "nvidia-sm90"])
    new = report([rec("a", "pass")])
    paths = write(tmp_path, "old.json", old), write(tmp_path, "new.json", new)
    assert reports_main(["diff", *paths]) == 0
    out = capsys.readouterr().out
    assert "selection changed: profiles: -amd-gfx942" in out
    assert "profile amd-gfx942 not selected" in out
    # another --op: checks of the other ops are left out, the rest must still run
    g, s, g2 = (f"{NUMERICS}[{i}]" for i in ("g", "s", "g2"))
    old = report([rec(g, "pass"), rec(s, "pass", op="softmax"), rec(g2, "pass")])
    new = report([rec(g, "pass")], command=f"{BASE} --op gelu")
    d = diff(old, new)
    assert [t for t, *_ in d.removed] == [g2] and [t for t, *_ in d.removed_accepted] == [s]
    assert d.removed_accepted[0][2] == "not selected by the new command"
    # another test path
    new = report([rec(g, "pass")], command=f"{BASE.replace('test_numerics', 'test_relations')}")
    assert not diff(old, new).removed


def test_diff_of_an_interrupted_or_empty_new_run_fails(tmp_path, capsys):
    old = report([rec("a", "pass")])
    new = report([rec("a", "pass")], {"interrupted": True, "signal": "SIGINT", "not_run": []})
    assert reports_main(["diff", write(tmp_path, "o.json", old), write(tmp_path, "n.json", new)]) == 1
    assert "new run: interrupted by SIGINT" in capsys.readouterr().out
    empty = report([rec("a", "not_supported")])
    assert diff(old, empty).regressed


# ---- structured errors, sorted by how far out of bounds ------------------------------------
def test_a_failures_measurement_is_kept_over_passing_examples():
    props = [("output max_abs_error", 0.5), ("output bound", "rtol=1 atol=1"),
             ("output max_abs_error", 0.01), ("output bound", "rtol=0.001 atol=0"),
             ("output error_ratio", 10.0), ("x max_abs_error", 1.0), ("x bound", "b"),
             ("x error_ratio", float("inf"))]
    errors = {e["output"]: e for e in split_properties(props)["errors"]}
    assert errors["output"] == {"output": "output", "max_abs_error": 0.01,
                                "rtol": 0.001, "atol": 0.0, "ratio": 10.0}
    assert errors["x"]["ratio"] is None and errors["x"]["ratio_nonfinite"] == "inf"  # JSON has no infinity
    json.loads(json.dumps(errors, allow_nan=False))


def failing(tid, ratio):
    return rec(tid, "fail", errors=[{"output": "output", "max_abs_error": 1.0,
                                     "bound": "rtol=0 atol=0.1", "ratio": ratio}])


def test_diff_lists_new_failures_most_out_of_bounds_first(tmp_path, capsys):
    old = report([rec(t, "pass") for t in "abcd"])
    new = report([failing("a", 2.0), rec("b", "fail"), failing("c", "inf"), failing("d", 500.0)])
    assert [t for t, *_ in diff(old, new).new_failures] == ["c", "d", "a", "b"]
    assert reports_main(["diff", write(tmp_path, "o.json", old), write(tmp_path, "n.json", new)]) == 1
    out = capsys.readouterr().out
    assert "error/bound" in out and re.search(r"\bd\s+pass\s+fail\s+500x", out)


def test_html_shows_the_interruption_and_sorts_failures_by_error_over_bound(tmp_path):
    doc = report([rec("p", "pass"), failing("f2", 2.0), failing("f500", 500.0),
                  rec("i", "interrupted")],
                 {"interrupted": True, "signal": "SIGTERM", "reason": "SIGTERM received",
                  "collected": 6, "not_run": ["never-1", "never-2"]})
    page = render(doc)
    assert "INTERRUPTED (SIGTERM), DOES NOT CONFORM" in page and 'class="verdict bad"' in page
    assert "interrupted by SIGTERM: 2 collected check(s) never ran" in page
    assert "never-1\nnever-2" in page
    assert "ratioOf(b) - ratioOf(a)" in page  # the check list's order
    src, out = write(tmp_path, "r.json", doc), tmp_path / "r.html"
    assert reports_main(["html", src, "-o", str(out)]) == 1 and out.exists()


def test_html_check_list_puts_the_furthest_out_of_bounds_first(tmp_path):
    from tests.test_reports_browser import CHROMIUM, chromium

    if CHROMIUM is None:
        pytest.skip("chromium is not installed")
    doc = report([rec("p", "pass"), failing("f-2", 2.0), rec("f-none", "fail"),
                  failing("f-inf", "inf"), failing("f-500", 500.0)])
    page = tmp_path / "r.html"
    page.write_text(render(doc))
    dom, console = chromium(tmp_path, page.as_uri() + "#details=1", "--dump-dom")
    assert console == []
    rows = re.findall(r'<tr class="record".*?</tr>', dom)
    order = [re.search(r"test_numerics / ([^<]*)<", row).group(1) for row in rows]
    assert order == ["f-inf", "f-500", "f-2", "f-none", "p"], order
    assert '<td class="ratio">500x</td>' in dom and '<td class="ratio">inf</td>' in dom


# ---- real runs: interrupted by a signal ----------------------------------------------------
@needs_interpreter
@pytest.mark.parametrize("sig, workers", [("SIGINT", ()), ("SIGTERM", ()),
                                          ("SIGTERM", ("-n", "2")), ("SIGINT", ("-n", "2"))])
def test_a_signal_writes_an_interrupted_report(tmp_path, sig, workers):
    """The reference's checks pass, then a check of a slow implementation is running when
    the signal arrives: the reports are written (by xdist's controller too), the running
    check is Interrupted, the ones never started are listed, and nothing conforms."""
    started, out, page = tmp_path / "started", tmp_path / "r.json", tmp_path / "r.html"
    env = dict(os.environ, SLOW_GELU_STARTED=str(started), SLOW_GELU_SECONDS="120",
               PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", NUMERICS, "--op", "gelu",
         "--vendor", "nvidia-sm90", "--mode", "interpreter", "--impl", "reference", "--impl",
         SLOW, "--hypothesis-profile", "ci", "-v", "--report-json", str(out),
         "--report-html", str(page), *workers],
        cwd=CHECKOUT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 300
        while not started.exists():  # a slow check is running: the reference's have reported
            assert proc.poll() is None and time.monotonic() < deadline, "the slow check never started"
            time.sleep(0.1)
        time.sleep(0.5)
        proc.send_signal(getattr(signal, sig))
        stdout, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, stdout[-3000:]  # pytest's "interrupted"
    assert f"triton-cts: INTERRUPTED ({sig}), DOES NOT CONFORM" in stdout, stdout[-3000:]
    doc = load_report(out)
    run = doc["run"]
    assert run["interrupted"] and run["signal"] == sig and run["collected"] == 8
    status = {r["test_id"]: r["status"] for r in doc["records"]}
    slow = [t for t in status if "gelu_slow" in t]
    assert slow and all(status[t] == "interrupted" for t in slow), status
    # under xdist the other worker may be amid a reference check: interrupted too; how
    # many reference checks reported before the signal depends on the machine's load
    assert set(status.values()) <= {"pass", "interrupted"}, status
    if not workers:
        assert list(status.values()).count("pass") == 4, status
    # every collected check is reported or listed as never run, none both; in one process
    # the reference's checks come first, so those never run are the slow ones (under xdist
    # a loaded machine may not have started some of the other worker's reference checks)
    assert len(status) + len(run["not_run"]) == 8 and not set(status) & set(run["not_run"])
    if not workers:
        assert all("gelu_slow" in t for t in run["not_run"]), run["not_run"]
    assert not conforms(doc["records"], run)
    assert "INTERRUPTED" in page.read_text()
    summary = subprocess.run([sys.executable, "-m", "reports", "summary", str(out)], cwd=CHECKOUT,
                             capture_output=True, text=True)
    assert summary.returncode == 1 and f"interrupted by {sig}" in summary.stdout


# ---- real runs: nothing checked, a required mode not checked -------------------------------
def test_a_run_of_only_not_supported_checks_is_no_result(tmp_path):
    out = tmp_path / "r.json"
    result = run_pytest(NUMERICS, "--op", "gelu", "--vendor", "nvidia-sm90", "--mode", "device",
                        "--hypothesis-profile", "ci", "--report-json", str(out))
    if any(r["status"] != "not_supported" for r in load_report(out)["records"]):
        pytest.skip("a device is attached here")
    assert "triton-cts: NO RESULT: 4 checks (4 not_supported)" in result.stdout, result.stdout
    assert result.returncode == 1


def test_require_mode_fails_a_run_that_fell_back_to_the_cpu(tmp_path):
    out = tmp_path / "r.json"
    args = (NUMERICS, "--op", "gelu", "--vendor", "nvidia-sm90", "--mode", "interpreter",
            "--hypothesis-profile", "ci", "--report-json", str(out))
    result = run_pytest(*args, "--mode", "device", "--require-mode", "device")
    if any(r["mode"] == "device" and r["status"] != "not_supported"
           for r in load_report(out)["records"]):
        pytest.skip("a device is attached here")
    assert result.returncode == 1, result.stdout
    assert "required mode device: no check ran in it" in result.stdout
    assert "DOES NOT CONFORM: 8 checks (4 pass, 4 not_supported)" in result.stdout
    assert load_report(out)["run"]["required_modes"] == ["device"]
    # a mode that is not even selected is a usage error
    bad = run_pytest(*args, "--require-mode", "device")
    assert bad.returncode == 4 and "--require-mode device: not a selected mode" in bad.stderr
    # and a required mode that ran passes
    assert run_pytest(*args, "--require-mode", "interpreter").returncode == 0
