"""The portability scoreboard (``python -m reports scoreboard``): built from the small
fixture runs of tests/fixtures/scoreboard/ (two targets, Triton 3.6 and 3.9, a run given
as two shards, one run of another op set), its content checked; bad inputs refused; the
published page is what its README's command builds; and the page in headless chromium."""
import html
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from reports.__main__ import main as reports_main
from reports.__main__ import parser
from reports.scoreboard import FINDINGS, load_findings, load_runs, model, render
from triton_cts import CHECKOUT
from triton_cts.results.expectations import load_expectations

FIXTURES = CHECKOUT / "tests" / "fixtures" / "scoreboard"
PUBLISHED = CHECKOUT / "reports" / "published" / "scoreboard"
A = FIXTURES / "run-a-triton3.6.json"
B1, B2 = FIXTURES / "run-b-triton3.9-shard1.json", FIXTURES / "run-b-triton3.9-shard2.json"
C = FIXTURES / "run-c-other-ops.json"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def build(out, *runs, extra=()):
    argv = ["scoreboard", *map(str, runs), "-o", str(out),
            "--findings", str(FIXTURES / "findings.md"),
            "--expectations", str(FIXTURES / "findings.toml"), "--no-known-defects", *extra]
    return reports_main(argv)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("scoreboard") / "board"
    assert build(out, A, B1, B2, f"{C}={FIXTURES / 'run-c-report.html'}") == 0
    return (out / "index.html").read_text()


def row(html, target, triton, run):
    m = re.search(rf'<tr class="row" data-target="{target}" data-mode="compile" '
                  rf'data-triton="{triton}" data-run="{run}">(.*?)</tr>', html, re.S)
    assert m, f"no scoreboard row for {target} {triton} run {run}"
    return {"ran": int(re.search(r'class="num ran">(\d+)<', m.group(1)).group(1)),
            "rate": re.search(r'class="num rate">([^<]+)<', m.group(1)).group(1),
            "counts": dict(re.findall(r'data-status="(\w+)">(\d+)<', m.group(1))),
            "waived": int(re.search(r'class="num waived">(\d+)<', m.group(1)).group(1)),
            "findings": re.findall(r">(F\d+)</a>", m.group(1)), "raw": m.group(1)}


def test_scoreboard_counts_pass_rates_and_waived(page):
    amd36 = row(page, "amd-gfx942", "3.6.0", 1)
    assert (amd36["ran"], amd36["rate"], amd36["waived"]) == (2, "50.0%", 1)
    assert amd36["counts"] == {"pass": "1", "fail": "1"} and amd36["findings"] == ["F2"]
    assert "2026-11-01 10:00 UTC" in amd36["raw"] and "1111111111" in amd36["raw"]
    assert '<td class="impl">reference</td>' in amd36["raw"]
    amd39 = row(page, "amd-gfx942", "3.9.0", 2)  # the merged shards
    assert (amd39["ran"], amd39["rate"], amd39["waived"]) == (3, "100.0%", 0)
    nv36 = row(page, "nvidia-sm90", "3.6.0", 1)
    assert (nv36["ran"], nv36["rate"]) == (2, "100.0%")
    assert nv36["counts"] == {"pass": "2", "not_supported": "1"}
    nv39 = row(page, "nvidia-sm90", "3.9.0", 2)
    assert (nv39["ran"], nv39["rate"], nv39["counts"]["fail"]) == (2, "50.0%", "1")
    nv39c = row(page, "nvidia-sm90", "3.9.0", 3)
    assert (nv39c["ran"], nv39c["rate"], nv39c["findings"]) == (2, "50.0%", ["F1"])
    assert "3333333333+dirty" in nv39c["raw"]
    assert len(re.findall(r'<tr class="row"', page)) == 5


def test_runs_listed_shards_merged_and_reports_linked(page):
    runs = re.findall(r'<tr class="run" data-run="(\d)">(.*?)</tr>', page, re.S)
    assert [i for i, _ in runs] == ["1", "2", "3"]
    assert str(B1) in runs[1][1] and str(B2) in runs[1][1]  # one run, from its two shards
    assert ">6</td>" in runs[1][1]                            # 3 + 3 records
    # the sibling report of run a, the report given for run c; relative to the page
    assert re.search(r'href="[./]*[^"]*run-a-triton3\.6\.html"', page)
    assert re.search(r'href="[^"]*run-c-report\.html#op=rope&amp;profile=nvidia-sm90&amp;'
                     r'mode=compile&amp;status=fail"', page)


def test_op_matrix_names_failing_dtypes(page):
    softmax = re.search(r'<tr class="op" data-op="softmax">(.*?)</tr>', page, re.S).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", softmax, re.S)[1:]
    assert len(cells) == 5  # one column per scoreboard row
    assert "fail" in cells[0] and "float16" in cells[0]      # amd 3.6
    assert "fail" in cells[3] and "float32" in cells[3]      # nvidia 3.9, run 2
    assert "pass" in cells[1] and "float" not in cells[1]
    assert cells[4] == "-"                                   # run 3 has no softmax


def test_changes_between_triton_versions_come_from_diff(page):
    sections = dict(re.findall(r'<section class="version-change" data-target="([\w-]+)" '
                               r'data-mode="compile">(.*?)</section>', page, re.S))
    assert set(sections) == {"amd-gfx942", "nvidia-sm90"}
    amd, nv = sections["amd-gfx942"], sections["nvidia-sm90"]
    assert "run #1 -> run #2" in amd and "0 new failure(s), 1 fix(es), 1 other status" in amd
    assert re.search(r"softmax-reference-amd-gfx942-compile\]</code></td><td>fail</td>"
                     r"<td>pass</td>", amd)
    assert re.search(r"tl_atomic_cas-reference-amd-gfx942-compile\]</code></td><td>waived"
                     r"</td><td>pass</td>", amd)
    # nvidia: run 2 is compared with run 1 (run 3 is of another op set)
    assert "run #1 -> run #2" in nv
    assert "1 new failure(s), 0 fix(es)" in nv and "1 compile-stat regression(s)" in nv
    assert re.search(r"softmax-reference-nvidia-sm90-compile\]</code></td><td>-</td>"
                     r"<td>fail</td>", nv) is None  # it passed before: old status is pass
    assert re.search(r"softmax-reference-nvidia-sm90-compile\]</code></td><td>pass</td>"
                     r"<td>fail</td>", nv)
    assert re.search(r"<td>_gelu_kernel</td><td>n_regs</td><td[^>]*>32</td><td[^>]*>40</td>", nv)
    assert "float32-&gt;int32 of nan [nvidia-sm90 compile]: 0 -&gt; -2147483648" in nv


def test_incomparable_runs_are_said_so(page):
    notice = re.search(r'<div class="notice" id="incomparable">(.*?)</div>', page, re.S).group(1)
    items = re.findall(r'<li class="incomparable">(.*?)</li>', notice, re.S)
    assert len(items) == 1
    assert str(C) in items[0] and str(B1) in items[0]
    assert "different op set: -matmul -softmax +rope" in items[0]
    assert "different selection: command:" in items[0] and "not joined in the trend" in items[0]


def test_schema_version_makes_runs_incomparable(tmp_path):
    doc = json.loads(A.read_text())
    doc["schema_version"] = 2
    doc["environment"]["triton"] = "3.9.0"
    doc["environment"]["started"] = "2026-11-05T10:00:00+00:00"
    other = tmp_path / "a-schema2.json"
    other.write_text(json.dumps(doc))
    assert build(tmp_path / "out", A, other) == 0
    text = (tmp_path / "out" / "index.html").read_text()
    assert text.count("schema version 1 vs 2") == 2  # both targets
    assert 'id="no-version-changes"' in text      # nothing compared across versions


def test_a_target_and_mode_where_nothing_ran_is_no_row(tmp_path):
    """A CPU machine's device checks are all not supported: that run has no device row of
    its targets, and nothing is compared with it there."""
    doc = json.loads(A.read_text())
    kept = [r for r in doc["records"] if r["mode"] == "compile"]
    device = [{**r, "test_id": r["test_id"].replace("-compile", "-device"), "mode": "device",
               "status": "not_supported", "reason": "no accelerator attached"} for r in kept]
    doc["records"] = kept + device
    run = tmp_path / "cpu-run.json"
    run.write_text(json.dumps(doc))
    assert build(tmp_path / "out", run) == 0
    text = (tmp_path / "out" / "index.html").read_text()
    assert re.search(r'<tr class="row" data-target="[^"]+" data-mode="compile"', text)
    assert not re.search(r'<tr class="row" data-target="[^"]+" data-mode="device"', text)


def test_findings_are_linked_and_data_is_escaped(page):
    findings = dict(re.findall(r'<tr class="finding" data-id="(F\d+)">(.*?)</tr>', page, re.S))
    assert set(findings) == {"F1", "F2"}
    assert 'href="' in findings["F1"] and "findings.md" in findings["F1"]
    assert "1 in nvidia-sm90 compile, triton 3.9.0 (run #3)" in findings["F1"]
    assert "1 in amd-gfx942 compile, triton 3.6.0 (run #1)" in findings["F2"]
    assert "the &lt;b&gt;rope&lt;/b&gt; kernel" in findings["F1"]  # FINDINGS text escaped
    assert "<script>alert" not in page
    # self-contained: one CSP that loads nothing from anywhere, no address to fetch
    csp = html.unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"',
                                  page).group(1))
    assert csp.startswith("default-src 'none'; script-src 'sha256-")
    assert "img-src 'none'" in csp and "unsafe" not in csp
    assert not re.search(r'(src|href)="(https?:)?//', page)


def test_trend_has_a_point_per_run_and_breaks_at_incomparable_runs(page):
    trend = dict(re.findall(r'<tr class="trend" data-target="([\w-]+)" data-mode="compile">'
                            r'(.*?)</tr>', page, re.S))
    nv = trend["nvidia-sm90"]
    assert len(re.findall(r"<circle ", nv)) == 6       # 3 runs, rate and failures
    assert len(re.findall(r"<polyline ", nv)) == 2     # runs 1-2 joined, not 2-3
    assert len(re.findall(r"<polyline ", trend["amd-gfx942"])) == 2
    assert "#2 2026-11-02 10:00 UTC, triton 3.9.0: 50.0% of 2, 1 failure(s)" in nv


@pytest.mark.parametrize("make,problem", [
    (lambda d: [d / "missing.json"], "missing.json: cannot read it"),
    (lambda d: [_write(d / "x.json", '{"hello": 1}')], "not a triton-cts report"),
    (lambda d: [_write(d / "x.json", '{"schema": ')], "invalid JSON"),
    (lambda d: [A, B1], "refusing an incomplete set of shards"),
    (lambda d: [A, A], "given twice"),
    (lambda d: [f"{A}={d / 'none.html'}"], "none.html does not exist"),
])
def test_bad_input_is_refused_and_nothing_written(tmp_path, capsys, make, problem):
    assert build(tmp_path / "out", *make(tmp_path)) == 2
    assert problem in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_output_folder_that_is_a_file_is_refused(tmp_path, capsys):
    out = _write(tmp_path / "board", "not a folder")
    assert build(out, A) == 2
    assert "it is a file, not a folder" in capsys.readouterr().err
    assert out.read_text() == "not a folder"


def test_shipped_known_defects_name_the_findings_of_a_run(tmp_path):
    """A run of Triton 3.6 made without expectation files: the shipped
    expectations/triton-3.6/nvidia.toml names F25 for its tl.fdiv failure."""
    doc = json.loads(A.read_text())
    tid = ("suites/test_language_math.py::test_ulp_within_profile_bound[tl_fdiv-reference-"
           "nvidia-sm90-device-float16]")
    doc["records"] = [{"test_id": tid, "status": "fail", "op": "tl_fdiv", "impl": "reference",
                       "profile": "nvidia-sm90", "vendor": "nvidia", "mode": "device",
                       "dtype": "float16", "reason": "RuntimeError: PassManager::run failed"}]
    run = _write(tmp_path / "fdiv.json", json.dumps(doc))
    assert reports_main(["scoreboard", str(run), "-o", str(tmp_path / "on")]) == 0
    page = (tmp_path / "on" / "index.html").read_text()
    assert re.findall(r'<tr class="finding" data-id="(F\d+)">', page) == ["F25"]
    assert "<code>expectations/triton-3.6/nvidia.toml</code>" in page
    assert reports_main(["scoreboard", str(run), "-o", str(tmp_path / "off"),
                         "--no-known-defects"]) == 0
    assert 'id="no-findings"' in (tmp_path / "off" / "index.html").read_text()


def test_project_findings_table_parses():
    ids = load_findings(FINDINGS)
    assert {f"F{i}" for i in range(1, 28)} <= set(ids)
    assert ids["F25"]["op"] == "tl.fdiv" and "PassManager" in ids["F25"]["what"]


def published_command() -> list[str]:
    text = (PUBLISHED / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S).group(1)
    argv = shlex.split(block.replace("\\\n", " "))
    assert argv[:4] == ["python", "-m", "reports", "scoreboard"], argv[:4]
    return argv[3:]


def test_published_scoreboard_is_what_its_readme_command_builds(monkeypatch):
    monkeypatch.chdir(CHECKOUT)
    args = parser().parse_args(published_command())
    assert Path(args.output).resolve() == PUBLISHED.resolve()
    runs = load_runs(args.runs)
    expectations = [e for f in args.expectations for e in load_expectations(f)]
    html = render(model(runs, args.output, args.findings, expectations, args.known_defects))
    assert html == (PUBLISHED / "index.html").read_text(), \
        "reports/published/scoreboard/index.html is stale: rebuild it with its README's command"


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# ---- the page in a real browser ----------------------------------------------------------
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                    "(apt-get install -y chromium; .ci/run installs it)")
def test_published_page_renders_in_chromium_without_script_errors(tmp_path):
    page = PUBLISHED / "index.html"
    shot = CHECKOUT / ".cache" / "report-screenshots" / "scoreboard.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    shot.unlink(missing_ok=True)
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
             "--virtual-time-budget=10000"]
    run = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True,
                         text=True, timeout=180)
    console = [ln for ln in run.stderr.splitlines() if ":CONSOLE" in ln]
    assert console == []  # no script error, no CSP violation: any console line is one
    dom = run.stdout
    assert 'data-ready="1"' in dom and 'id="js-errors" hidden' in dom
    source = page.read_text()
    for table in ("scoreboard", "ops", "trend", "runs"):
        assert f'id="{table}"' in dom
    assert dom.count('<tr class="row"') == source.count('<tr class="row"') > 13
    assert dom.count('<tr class="op"') == source.count('<tr class="op"') > 10
    assert dom.count("<circle ") == source.count("<circle ") > 0
    run = subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1600,2400",
                          page.as_uri()], capture_output=True, text=True, timeout=180)
    assert [ln for ln in run.stderr.splitlines() if ":CONSOLE" in ln] == []
    assert shot.stat().st_size > 10_000
