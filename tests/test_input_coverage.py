"""Input coverage: every covering case set meets each value class, layout and boundary its
check offers; a record merges what its cases met; a run in which no check met a class,
layout or boundary some check offered names the gap in the report's table, the terminal
summary, ``python -m reports summary`` and the HTML page, as a quality warning of the run
(the verdict stays the checks')."""
import json
import textwrap

import pytest
import torch

from reports.__main__ import main as reports_main
from reports.html import input_tables, render
from reports.merge import merge
from suites import runner
from suites import strategies as hh
from tests.helpers import run_pytest
from triton_cts.execution.modes import Mode
from triton_cts.ops import catalog
from triton_cts.profiles import load_profiles
from triton_cts.results import input_coverage
from triton_cts.results.json_schema import load_schema, validate
from triton_cts.results.records import split_properties
from triton_cts.results.report_io import document, load_report
from triton_cts.targets import CheckTarget, default_registry

PROFILES = load_profiles()
CLASSES = list(hh.VALUE_KINDS)
NUMERICS_OPS = [op for op in catalog.ALL_OPS if op.checked_by("test_numerics")]


def _met(target, cases, profile, kinds, offered):
    """What runner.record_inputs records for ``cases``, merged as a record holds it."""
    props = []
    for case in cases:
        runner.record_inputs(lambda k, v: props.append((k, v)), target, case, profile, kinds,
                             offered)
    return split_properties(props)["inputs"]


@pytest.mark.parametrize("profile", ["nvidia-sm90", "amd-gfx942", "npu-ascend910b",
                                     "intel-pvc", "intel-bmg"])
def test_covering_cases_meet_every_class_layout_and_boundary_they_offer(profile):
    registry = default_registry()
    covering = hh.covering_profile(PROFILES[profile])
    for op in NUMERICS_OPS:
        impl = registry.implementations[op.name][0]
        target = CheckTarget(op, impl, PROFILES[profile], Mode.INTERPRETER)
        for dtype in op.dtypes:
            cases = hh.covering_cases(op, covering, dtype)
            offered = ("1", "prime") + tuple(n for n, _ in hh.named_boundaries(covering, dtype))
            inputs = _met(target, cases, covering, hh.VALUE_KINDS, offered)
            for axis in input_coverage.AXES:
                assert set(inputs["met"][axis]) == set(inputs["offered"][axis]), \
                    (op.name, dtype, axis, inputs)
            # every class but on rows of 1 too, in several rows; a row of 1 once
            longer = {hh.effective_kind(c.kind, dtype) for c in cases if c.shape[-1] > 1}
            assert longer == set(inputs["offered"]["value_classes"]), (op.name, dtype)
            assert all(c.shape[-2] == hh.COVERING_ROWS for c in cases), op.name
            assert [c.shape[-1] for c in cases].count(1) == 1
            assert len(cases) <= 10  # the cost: at most 10 cases of a few short rows


def test_the_covering_cases_are_the_same_whatever_the_target():
    """Seeds and shapes depend on the dtype alone, so identical launches under two
    targets replay (execution/launch_memo.py)."""
    softmax = next(op for op in catalog.ALL_OPS if op.name == "softmax")
    a, b = (hh.covering_cases(softmax, hh.covering_profile(PROFILES[p]), torch.float32)
            for p in ("nvidia-sm90", "intel-pvc"))
    assert [c.describe() for c in a] == [c.describe() for c in b]
    for x, y in zip(a, b):
        torch.testing.assert_close(x.args[0], y.args[0], rtol=0, atol=0, equal_nan=True)
    lengths = hh.covering_lengths(hh.covering_profile(PROFILES["nvidia-sm90"]), torch.float32)
    assert lengths == [33, 32, 31, 17, 16, 15, 1] and len(a) == 8


@pytest.mark.parametrize("shape, asked, really", [
    ((3, 5), "strided", "strided"), ((3, 5), "transposed", "transposed"),
    ((5,), "transposed", "strided"), ((1, 5), "transposed", "contiguous"),
    ((3, 1), "strided", "strided"), ((1, 1), "strided", "contiguous"), ((), "strided", "contiguous"),
    ((2, 3, 4), "contiguous", "contiguous"),
])
def test_the_layout_recorded_is_the_one_the_input_has(shape, asked, really):
    assert hh.effective_layout(shape, asked) == really
    if len(shape) >= 1:
        x = hh.with_layout(torch.zeros(shape), asked)
        assert (really == "contiguous") == x.is_contiguous()


def test_integers_meet_the_classes_they_can_hold():
    assert hh.effective_kind("tiny", torch.int32) == "normal"
    assert hh.effective_kind("with_specials", torch.float16) == "with_specials"


def test_a_record_merges_what_each_case_met():
    entry = input_coverage.entry
    props = [(input_coverage.PROPERTY, entry({"value_classes": ["ties"], "layouts": ["strided"],
                                              "boundaries": ["prime"]},
                                             {"value_classes": CLASSES, "layouts": ["strided"]})),
             ("output max_abs_error", 0.0),
             (input_coverage.PROPERTY, entry({"value_classes": ["normal"], "layouts": ["strided"],
                                              "boundaries": []},
                                             {"value_classes": CLASSES, "boundaries": ["1"]}))]
    inputs = split_properties(props)["inputs"]
    assert inputs["met"] == {"value_classes": ["ties", "normal"], "layouts": ["strided"],
                             "boundaries": ["prime"]}
    assert inputs["offered"] == {"value_classes": CLASSES, "layouts": ["strided"],
                                 "boundaries": ["1"]}
    assert split_properties([("output max_abs_error", 0.0)])["inputs"] is None


def rec(i, status="pass", classes=CLASSES, op="softmax", dtype="float32", **kw):
    inputs = input_coverage.entry(
        {"value_classes": classes, "layouts": ["strided", "transposed", "contiguous"],
         "boundaries": ["1", "prime", "fused+1"]},
        {"value_classes": CLASSES, "layouts": ["strided", "transposed", "contiguous"],
         "boundaries": ["1", "prime", "fused+1"]})
    tid = f"suites/test_numerics.py::test_matches_reference[{op}-reference-nvidia-sm90-interpreter-{dtype}-{i}]"
    return {"test_id": tid, "status": status, "op": op, "impl": "reference",
            "profile": "nvidia-sm90", "vendor": "nvidia", "mode": "interpreter",
            "suite": "test_numerics", "test": "test_matches_reference", "dtype": dtype,
            "inputs": inputs, **kw}


def run_missing_wide_range():
    """softmax float32: two checks that together met every class; softmax float16: two
    checks, neither met wide_range (a third that did was not supported: it never ran)."""
    without = [c for c in CLASSES if c != "wide_range"]
    return [rec(0, classes=CLASSES[:4]), rec(1, classes=CLASSES[3:]),
            rec(2, classes=without, dtype="float16"), rec(3, classes=without[:2], dtype="float16"),
            rec(4, status="not_supported", dtype="float16")]


def test_a_run_missing_a_class_reports_the_gap():
    table = input_coverage.table(run_missing_wide_range())
    rows = {r["dtype"]: r for r in table["rows"]}
    assert rows["float32"]["gaps"] == {"value_classes": [], "layouts": [], "boundaries": []}
    assert rows["float32"]["met"]["value_classes"]["tiny"] == 2  # both checks met it
    assert rows["float16"]["checks"] == 2  # the not-supported one never ran its cases
    assert rows["float16"]["gaps"]["value_classes"] == ["wide_range"]
    assert table["gaps"] == ["softmax float16 on nvidia-sm90 (interpreter): no check met "
                             "value class wide_range"]
    (line,) = input_coverage.summary_lines(table)
    assert line.startswith("quality warning of the run: input coverage: 1 of 2 op x dtype x "
                           "profile x mode rows have gaps")
    assert line.endswith("no check met value class wide_range")
    whole = input_coverage.table([rec(0), rec(1, dtype="float16")])
    assert whole["gaps"] == [] and "every value class, layout and boundary offered was met" \
        in input_coverage.summary_lines(whole)[0]
    assert input_coverage.summary_lines(input_coverage.table([{"test_id": "t",
                                                                "status": "pass"}])) == []


def test_the_coverage_table_in_json_summary_merge_and_html(tmp_path, capsys):
    records = run_missing_wide_range()
    doc = document({"triton": "3.9.0", "torch": "2.13.0", "profiles": ["nvidia-sm90"],
                    "modes": ["interpreter"]}, records,
                   input_coverage=input_coverage.table(records))
    assert validate(doc, load_schema("report")) == []
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    assert reports_main(["summary", str(path)]) == 0  # a quality warning: it conforms
    out = capsys.readouterr().out
    assert "quality warning of the run: input coverage: 1 of 2" in out
    assert "softmax float16 on nvidia-sm90 (interpreter): no check met value class wide_range" in out
    merged = merge([("a.json", load_report(path))])
    assert merged["input_coverage"]["gaps"] == doc["input_coverage"]["gaps"]
    # a report without the table (version 3) shows the one its records give
    older = {k: v for k, v in doc.items() if k != "input_coverage"}
    assert input_tables(older) == input_tables(doc)
    page = render(doc)
    section = page.split('id="input-coverage"')[1].split("<h2")[0]
    assert "quality warning of the run: 1 row(s) with gaps" in section
    assert "gap: softmax float16 on nvidia-sm90 (interpreter): no check met value class " \
           "wide_range" in section
    (table,) = [g for g in input_tables(doc)["groups"]]
    assert (table["profile"], table["mode"], table["gaps"]) == ("nvidia-sm90", "interpreter", 1)
    head = section.split("<thead>")[1].split("</thead>")[0]
    assert [h for h in head.split("<th>")[4:11]] == [f"{c}</th>" for c in CLASSES]
    half = section.split("<td>float16</td>")[1].split("</tr>")[0]
    cells = half.split("<td")[2:9]  # the class columns, after the checks
    assert [("gap" if "gap-cell" in c else c.split(">")[1].split("<")[0]) for c in cells] == \
        ["2", "2", "gap", "1", "1", "1", "1"]
    assert "3 of 3" in half
    # a passing check's inputs are not repeated in the page's data
    assert '"inputs"' not in page.split('id="report-data">')[1].split("</script>")[0]
    clean = render(document({}, [rec(0)], input_coverage=input_coverage.table([rec(0)])))
    assert "No gaps: every value class, layout and boundary offered was met." in clean


SUITE = '''
from suites import runner
from suites import strategies as hh


def test_draws(target, dtype, record_property):
    """A check that met every class but wide_range (as three draws may)."""
    profile = hh.covering_profile(target.profile)
    for i, case in enumerate(hh.covering_cases(target.op, profile, dtype)):
        if case.kind != "wide_range":
            runner.record_inputs(record_property, target, case, profile, hh.VALUE_KINDS,
                                 ("1", "prime"))
'''


def test_a_run_that_missed_a_class_says_so_where_its_results_are_read(tmp_path):
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "test_draws.py").write_text(textwrap.dedent(SUITE))
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["triton_cts.plugin"]\n')
    out, page = tmp_path / "r.json", tmp_path / "r.html"
    result = run_pytest("--rootdir", str(tmp_path), "-p", "no:xdist", str(tmp_path / "suites"),
                        "--op", "softmax", "--vendor", "nvidia-sm90", "--mode", "interpreter",
                        "-k", "float32", "--report-json", str(out), "--report-html", str(page))
    text = result.stdout + result.stderr
    assert result.returncode == 0, text[-3000:]  # a quality warning of the run, not a failure
    assert ("quality warning of the run: input coverage: 1 of 1 op x dtype x profile x mode "
            "rows have gaps") in text, text[-3000:]
    assert "softmax float32 on nvidia-sm90 (interpreter): no check met value class " \
           "wide_range" in text
    doc = load_report(out)
    assert validate(doc, load_schema("report")) == []
    (row,) = doc["input_coverage"]["rows"]
    assert row["gaps"] == {"value_classes": ["wide_range"], "layouts": [], "boundaries": []}
    assert set(doc["records"][0]["inputs"]["met"]["layouts"]) == {"strided", "transposed",
                                                                  "contiguous"}
    assert "no check met value class wide_range" in page.read_text()
