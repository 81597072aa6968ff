"""The HTML report in a real headless browser (Debian's chromium), at 10,000 records:
it loads without script errors, the matrix shows the right counts, filters hide rows.
A screenshot is left in .cache/report-screenshots/ (git-ignored) for a person to look at."""
import json
import re
import shutil
import subprocess
import sys
from collections import Counter

import pytest

from triton_cts import CHECKOUT
from triton_cts.results.report_io import document
from triton_cts.results.status import SHORT, Status

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                                "(apt-get install -y chromium; .ci/run installs it)")
SCREENSHOTS = CHECKOUT / ".cache" / "report-screenshots"
OPS = ["gelu", "softmax", "matmul", "max_all", "prod_dim"]
PROFILES = ["nvidia-sm90", "amd-gfx942", "npu-ascend910b", "nvidia-sm80"]
STATUSES = list(Status)


def generated_records(n=10_000):
    out = []
    for i in range(n):
        status = STATUSES[(i * 7 + i // 13) % len(STATUSES)]
        op, profile = OPS[i % len(OPS)], PROFILES[(i // len(OPS)) % len(PROFILES)]
        out.append({
            "test_id": f"suites/test_numerics.py::test_matches_reference[{op}-reference-{profile}-interpreter-{i}]",
            "status": status.value, "op": op, "impl": "reference", "profile": profile,
            "vendor": profile.split("-")[0], "mode": ("interpreter", "compile")[i % 2],
            "suite": "test_numerics", "test": "test_matches_reference", "dtype": "float32",
            "reason": "" if status is Status.PASS else f"reason {i} <b>not bold</b>",
            "errors": [{"output": "output", "max_abs_error": i / 1e6, "bound": "rtol=1e-5 atol=1e-5"}],
            "compile_stats": [{"kernel": f"k{i % 3}", "n_regs": 32 + i % 50}] if i % 500 == 0 else [],
            "repro": f"pytest 'suites/test_numerics.py::test_matches_reference[{i}]'",
            "example": "Falsifying example: test_matches_reference(...)" if status is Status.FAIL else None,
            "quality_warnings": [], "properties": {}, "duration_s": 0.1})
    return out


@pytest.fixture(scope="module")
def big_report(tmp_path_factory):
    records = generated_records()
    tmp = tmp_path_factory.mktemp("browser")
    src = tmp / "big.json"
    src.write_text(json.dumps(document({"triton": "3.9.0", "torch": "2.13.0",
                                        "profiles": PROFILES}, records)))
    page = tmp / "big.html"
    run = subprocess.run([sys.executable, "-m", "reports", "html", str(src), "-o", str(page)],
                         cwd=CHECKOUT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return records, page, tmp


def chromium(tmp, url, *flags):
    """Run headless chromium; returns (stdout, console lines from stderr)."""
    run = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                          "--disable-dev-shm-usage", f"--user-data-dir={tmp / 'profile'}",
                          "--enable-logging=stderr", "--v=0", "--virtual-time-budget=15000",
                          *flags, url], capture_output=True, text=True, timeout=180)
    console = [ln for ln in run.stderr.splitlines() if ":CONSOLE" in ln]
    return run.stdout, console


def test_page_loads_without_errors_and_matrix_counts_are_right(big_report):
    records, page, tmp = big_report
    dom, console = chromium(tmp, page.as_uri(), "--dump-dom")
    assert console == []  # the page logs nothing: any console line is an error
    assert 'data-ready="1"' in dom and 'id="js-errors" hidden' in dom
    assert re.search(r'id="shown-count">1-100 of 10000 checks, page 1 of 100<', dom)
    assert len(re.findall(r'<tr class="record"', dom)) == 100  # one page rendered, not 10,000
    for op, profile in [("gelu", "nvidia-sm90"), ("matmul", "npu-ascend910b")]:
        counts = Counter(r["status"] for r in records if r["op"] == op and r["profile"] == profile)
        cell = re.search(rf'<td class="cell" data-op="{op}" data-suite="test_numerics" '
                         rf'data-check="" data-profile="{profile}" data-worst="(\w+)"[^>]*>\w+<br><span '
                         rf'class="counts">([^<]*)</span>', dom)
        assert cell, f"no matrix cell for {op} x {profile}"
        shown = dict((c[-1], int(c[:-1])) for c in cell.group(2).split())
        assert shown == {SHORT[Status(s)]: n for s, n in counts.items()}
        assert cell.group(1) == max(counts, key=lambda s: Status(s).severity)
    assert "&lt;b&gt;not bold&lt;/b&gt;" in dom  # record text is escaped, not markup


def test_filters_hide_rows(big_report):
    records, page, tmp = big_report
    want = [r for r in records if r["status"] == "fail" and r["op"] == "gelu"
            and r["profile"] == "amd-gfx942" and r["mode"] == "compile"]
    assert 0 < len(want) < 100
    dom, console = chromium(tmp, page.as_uri() + "#status=fail&op=gelu&profile=amd-gfx942"
                            "&mode=compile&details=1", "--dump-dom")
    assert console == []
    rows = re.findall(r'<tr class="record" data-status="(\w+)"', dom)
    assert rows == ["fail"] * len(want)
    assert f"1-{len(want)} of {len(want)} checks (filtered from 10000)" in dom
    # details=1 opens each row: error vs bound, repro command and failing example
    assert dom.count('<tr class="detail">') == len(want)
    assert dom.count('<pre class="repro">') == dom.count('<pre class="example">') == len(want)
    assert all(r["repro"] in dom for r in want)
    assert "rtol=1e-5 atol=1e-5" in dom.split('<tr class="detail">')[1]


def test_screenshot(big_report):
    _, page, tmp = big_report
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / "report-10000.png"
    shot.unlink(missing_ok=True)
    _, console = chromium(tmp, page.as_uri() + "#status=fail", f"--screenshot={shot}",
                          "--window-size=1400,1600")
    assert console == [] and shot.stat().st_size > 10_000
