"""The HTML page's content without a browser: the failure summary under the verdict, the
check list before the matrix, launch-coverage gaps split into expected for the target and
missing, the embedded data holding each thing once, and a Content-Security-Policy that
admits the page's own script and style only (tests/test_reports_browser.py runs it)."""
import base64
import hashlib
import html
import json
import re

from reports.html import failure_causes, render, split_gaps
from triton_cts import CHECKOUT
from triton_cts.execution.coverage import summarize
from triton_cts.results.report_io import document, load_report

PUBLISHED = CHECKOUT / "reports" / "published"


def rec(name, status, op="gelu", profile="nvidia-sm90", reason="", **kw):
    tid = f"suites/test_numerics.py::test_matches_reference[{op}-reference-{profile}-interpreter-{name}]"
    return {"test_id": tid, "status": status, "op": op, "impl": "reference", "profile": profile,
            "vendor": profile.split("-")[0], "mode": "interpreter", "suite": "test_numerics",
            "test": "test_matches_reference", "dtype": "float32", "params": {}, "reason": reason,
            "errors": [], "compile_stats": [], "quality_warnings": [], "example": None,
            "repro": f"pytest '{tid}' --vendor {profile} --mode interpreter --hypothesis-profile ci",
            "duration_s": 0.1, "properties": {}, **kw}


def data_of(page: str) -> dict:
    return json.loads(page.split('id="report-data">')[1].split("</script>")[0])


def test_failures_are_grouped_by_op_error_class_and_message_under_the_verdict():
    records = [rec("p", "pass"),
               *[rec(f"c{i}", "fail", op="tl_topk", reason="triton.compiler.errors."
                     "CompilationError: at 7:29: 'dtype' object has no attribute 'numel'")
                 for i in range(3)],
               *[rec(f"a{i}", "fail", reason=f"AssertionError: output 0 has {i + 1} of 64 "
                     f"elements out of bounds") for i in range(2)],
               rec("t", "timeout", reason="Timeout: more than 60 s"),
               rec("w", "waived", reason="waived: F24",
                   expectation={"test": "suites/", "status": "xfail", "reason": "F24, Triton 3.6",
                                "link": "", "finding": "reports/published/FINDINGS.md#f24",
                                "repro": "", "source": "expectations/triton-3.6/nvidia.toml",
                                "known": True})]
    causes, of = failure_causes(records)
    assert [(c["count"], c["op"], c["cls"], c["message"], c["variants"]) for c in causes] == [
        (3, "tl_topk", "triton.compiler.errors.CompilationError",
         "at 7:29: 'dtype' object has no attribute 'numel'", 1),
        (2, "gelu", "AssertionError", "output 0 has 1 of 64 elements out of bounds", 2),
        (1, "gelu", "Timeout", "more than 60 s", 1)]
    assert sorted(of) == [1, 2, 3, 4, 5, 6]  # the failing records, not the pass nor the waived
    page = render(document({"triton": "3.6.0"}, records))
    order = [page.index(s) for s in ('id="verdict"', 'id="failures"', 'id="known"',
                                     'id="checks"', 'id="matrix"')]
    assert order == sorted(order)  # summary, known, the list, then the matrix
    for c in causes:  # each group links to the list filtered on it; the page carries the key
        assert f'href="#cause={c["id"]}">list {c["count"]}</a>' in page
        assert [c["id"], c["op"], c["cls"], c["message"]] in data_of(page)["causes"]
    assert "known upstream defect" in page and "reports/published/FINDINGS.md#f24" in page


def launches(*constexprs):
    return [{"kernel": k, "constexprs": c, "programs": 4} for k, c in constexprs]


def test_coverage_gaps_split_into_expected_for_the_target_and_missing():
    # one target: SELECT_LOADS follows the profile field select_loads (False on NVIDIA,
    # True on the NPU profile); HAS_DROPOUT is a real gap
    records = [rec(f"r{i}", "pass", properties={"launch_coverage": launches(
        ("_ln_kernel", {"SELECT_LOADS": False, "HAS_DROPOUT": False, "BLOCK": 2 ** i}))})
        for i in range(3)]
    coverage = summarize(records)
    assert coverage["gaps"] == ["_ln_kernel: HAS_DROPOUT was always False",
                                "_ln_kernel: SELECT_LOADS was always False"]
    split = split_gaps(records, coverage)
    assert split["missing"] == ["_ln_kernel: HAS_DROPOUT was always False"]
    assert [g["gap"] for g in split["expected"]] == ["_ln_kernel: SELECT_LOADS was always False"]
    assert "select_loads is False on nvidia-sm90" in split["expected"][0]["why"]
    assert "npu-ascend910b" in split["expected"][0]["why"]
    page = render(document({"triton": "3.9.0"}, records, coverage=coverage))
    assert '<details id="gaps-missing"><summary>1 gap(s) missing' in page  # collapsed
    assert '<details id="gaps-expected"><summary>1 gap(s) expected for the target' in page


def test_a_flag_that_follows_the_target_in_the_run_is_expected_where_it_is_fixed():
    # FLAG takes one value per profile over every kernel, and differs between them: the
    # kernel launched on amd only never sees True, as the target decides
    records = [rec("a", "pass", profile="nvidia-sm90", properties={"launch_coverage": launches(
                   ("_both", {"FLAG": True}))}),
               rec("b", "pass", profile="amd-gfx942", properties={"launch_coverage": launches(
                   ("_both", {"FLAG": False}), ("_amd_only", {"FLAG": False}))})]
    split = split_gaps(records, summarize(records))
    assert [g["gap"] for g in split["expected"]] == ["_amd_only: FLAG was always False"]
    assert split["missing"] == []


def test_select_loads_gaps_of_a_published_nvidia_run_are_expected_for_the_target():
    doc = load_report(PUBLISHED / "h100-triton3.6" / "seed19-reference.json.gz")
    split = split_gaps(doc["records"], doc["coverage"])
    select = [g for g in doc["coverage"]["gaps"] if "SELECT_LOADS" in g]
    assert len(select) == 35 and not [g for g in split["missing"] if "SELECT_LOADS" in g]
    assert {g["gap"] for g in split["expected"]} >= set(select)
    assert len(split["expected"]) + len(split["missing"]) == len(doc["coverage"]["gaps"])
    assert "every launch started one program" in " ".join(split["missing"])


def test_nothing_is_embedded_twice():
    """Per-record launch coverage of a check that conforms feeds the aggregate section only;
    a repro command is its test id plus the run's options; compile stats are one table
    per target, keys once."""
    doc = load_report(PUBLISHED / "h200-triton3.6" / "matmul-tma-norms-flce-ci.json.gz")
    page = render(doc)
    data = json.dumps(data_of(page))
    failing = [r for r in doc["records"] if r["status"] not in ("pass", "not_supported")]
    assert data.count('"launch_coverage"') == sum(
        "launch_coverage" in r["properties"] for r in failing)
    plain = [r for r in doc["records"] if r.get("repro") and not r.get("replay")]
    assert plain and not [r for r in plain if r["repro"] in page]
    assert len(page) < 0.2 * len(json.dumps(doc))  # 0.19 MB of 1.40 MB of JSON
    xpu = load_report(PUBLISHED / "cpu-triton3.9" / "xpu-compile.json.gz")
    page = render(xpu)
    data = data_of(page)
    assert page.count('"native_skipped"') == 1  # a column name, once
    assert sum(len(t["rows"]) for t in data["compile"].values()) == sum(
        len(r["compile_stats"]) for r in xpu["records"])
    assert "<table class=\"compile-stats\">" not in page  # drawn from the data when opened


def _inline(page, tag):
    return re.findall(rf"<{tag}>(.*?)</{tag}>", page, re.S)


def test_the_content_security_policy_admits_only_the_pages_own_script_and_style():
    page = render(document({"triton": "3.9.0"}, [rec("p", "pass"), rec("f", "fail", reason="x")]))
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page).group(1)
    csp = html.unescape(csp)
    rules = dict((part.split()[0], part.split()[1:]) for part in csp.split("; "))
    assert rules["default-src"] == ["'none'"] and rules["base-uri"] == ["'none'"]
    assert rules["form-action"] == ["'none'"] and "'unsafe-inline'" not in csp
    digest = lambda t: "'sha256-" + base64.b64encode(hashlib.sha256(t.encode()).digest()).decode() + "'"
    scripts, styles = _inline(page, "script"), _inline(page, "style")
    assert len(scripts) == 2 and sorted(rules["script-src"]) == sorted(map(digest, scripts))
    assert rules["style-src"] == [digest(styles[0])]
    # nothing the policy would refuse: no style attributes, no inline handlers, no URLs
    assert not re.search(r"<[^>]+\s(style|on\w+)=", page)
    assert "http://" not in page and "https://" not in page and "<link" not in page


def test_non_finite_numbers_in_the_data_are_embedded_as_text():
    page = render(document({"triton": "3.9.0"}, [rec("p", "pass", properties={
        "behaviour x": float("nan"), "limit": float("inf")})]))
    extra = data_of(page)["rows"][0][-1]
    assert extra["properties"] == {"behaviour x": "nan", "limit": "inf"}


def test_an_errors_bound_and_infinite_ratio_reach_the_page_from_report_version_2():
    # version 2 holds a bound as rtol/atol fields and an infinite ratio as null + a flag
    error = {"output": "out0", "max_abs_error": None, "max_abs_error_nonfinite": "inf",
             "rtol": 0.001, "atol": 1e-05, "ratio": None, "ratio_nonfinite": "inf"}
    page = render(document({"triton": "3.9.0"}, [rec("f", "fail", errors=[error])]))
    data = data_of(page)
    shown = data["rows"][0][-1]["errors"][0]
    strings = data["strings"]
    assert strings[shown[2]] == "rtol=0.001 atol=1e-05"
    assert shown[1] == "inf" and shown[3] == "inf"
