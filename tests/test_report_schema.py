"""The report's and the expectation files' JSON Schemas: real reports (every published one,
and fresh ones) conform, the versioning rule holds, numbers are numbers, and the field
reference page is the one generated from the schemas."""
import gzip
import hashlib
import json
import math
import textwrap
import tomllib

import pytest

from reports.__main__ import main as reports_main
from reports.merge import merge
from reports.schema import PAGE, render
from tests.helpers import run_pytest
from triton_cts import CHECKOUT
from triton_cts.results.json_schema import (SchemaError, check_schema, fields, load_schema,
                                            resolve, validate)
from triton_cts.results.numbers import bound_text, read_number
from triton_cts.results.records import error_ratio, split_properties
from triton_cts.results.report_io import (READABLE_VERSIONS, SCHEMA_VERSION, ReportError,
                                          document, load_report)

REPORT = load_schema("report")
EXPECTATIONS = load_schema("expectations")
PUBLISHED = sorted(p for p in (CHECKOUT / "reports" / "published").rglob("*")
                   if p.name.endswith((".json", ".json.gz")))
#: The fields (path and type) of each schema version: a change of the fields with the same
#: version fails here. Bump SCHEMA_VERSION, describe the change in reports/schema/__init__.py
#: (RULES), add the version to READABLE_VERSIONS and its fingerprint below.
FINGERPRINTS = {2: ("bd8d2aea57bb3f7e", "9f1ba2cd9cd2d4d3"),
                3: ("45ad9a25ad54140c", "9f1ba2cd9cd2d4d3"),
                4: ("cbe1653de6c218aa", "9f1ba2cd9cd2d4d3")}


def _fingerprint(schema) -> str:
    text = "\n".join(f"{p}:{json.dumps(resolve(s, schema).get('type'))}" for p, s in fields(schema))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_any_change_of_the_fields_bumps_the_schema_version():
    assert REPORT["x-schema-version"] == SCHEMA_VERSION
    assert REPORT["properties"]["schema_version"]["const"] == SCHEMA_VERSION
    assert SCHEMA_VERSION in FINGERPRINTS and SCHEMA_VERSION == max(READABLE_VERSIONS)
    assert (_fingerprint(REPORT), _fingerprint(EXPECTATIONS)) == FINGERPRINTS[SCHEMA_VERSION], (
        "the report's or the expectation files' fields changed: bump SCHEMA_VERSION and add "
        "the new version's fingerprint")


@pytest.mark.parametrize("path", PUBLISHED, ids=lambda p: p.relative_to(CHECKOUT).as_posix())
def test_every_published_report_reads_and_conforms(path):
    raw = json.load(gzip.open(path, "rt") if path.suffix == ".gz" else open(path))
    assert raw["schema_version"] in READABLE_VERSIONS
    doc = load_report(path)  # an older version is brought to this one's form as it loads
    assert doc["schema_version"] == raw["schema_version"]  # the version it was written in
    assert validate({**doc, "schema_version": SCHEMA_VERSION}, REPORT) == []
    assert reports_main(["summary", str(path)]) in (0, 1)  # a verdict, not a read error


def test_a_version_one_report_is_upgraded_to_numbers():
    doc = load_report(CHECKOUT / "reports/published/h100-triton3.6/seed1-libraries.json.gz")
    errors = [e for r in doc["records"] for e in r["errors"]]
    infinite = [e for e in errors if e.get("ratio_nonfinite") == "inf"]
    assert infinite and all(e["ratio"] is None for e in infinite)
    assert all(isinstance(e["rtol"], float) for e in errors if "rtol" in e)
    assert not any("bound" in e and e["bound"].startswith("rtol=") for e in errors)
    assert max(filter(None, map(error_ratio, doc["records"]))) == math.inf


def test_errors_hold_numbers_and_flag_what_json_cannot():
    props = [("out max_abs_error", float("nan")), ("out bound", "rtol=0.01 atol=inf"),
             ("out error_ratio", float("inf")), ("y max_abs_error", 0.5), ("y bound", "ulp<=2")]
    out, y = split_properties(props)["errors"]
    assert out == {"output": "out", "max_abs_error": None, "max_abs_error_nonfinite": "nan",
                   "rtol": 0.01, "atol": None, "atol_nonfinite": "inf", "ratio": None,
                   "ratio_nonfinite": "inf"}
    assert y == {"output": "y", "max_abs_error": 0.5, "bound": "ulp<=2"}
    json.dumps([out, y], allow_nan=False)  # strict JSON
    assert read_number(out, "ratio") == math.inf and math.isnan(read_number(out, "max_abs_error"))
    assert bound_text(out) == "rtol=0.01 atol=inf" and bound_text(y) == "ulp<=2"
    doc = document({"triton": "3.9.0", "torch": "2.13.0", "profiles": [], "modes": []},
                   [{"test_id": "a", "status": "fail", "errors": [out, y]}])
    assert validate(doc, REPORT) == []


@pytest.mark.parametrize("version", [0, 5, "2", True, None])
def test_readers_refuse_versions_they_do_not_know(tmp_path, version, capsys):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({**document({}, []), "schema_version": version}))
    with pytest.raises(ReportError) as exc:
        load_report(path)
    assert f"schema version {version!r}, this checkout reads versions 1, 2, 3, 4" in str(exc.value)
    assert reports_main(["summary", str(path)]) == 2
    assert "this checkout reads versions 1, 2, 3, 4" in capsys.readouterr().err


def test_the_validator_names_where_a_document_breaks_the_schema():
    doc = document({"triton": "3.9.0", "torch": "2.13.0", "profiles": [], "modes": []},
                   [{"test_id": "a", "status": "fine", "errors": [{"output": 1, "rtol": "x"}],
                     "color": "red"}, {"status": "pass"}])
    problems = validate(doc, REPORT)
    assert "$.records[0].status: \"fine\" is not one of 'pass'," in problems[0]
    assert "$.records[0].errors[0].output: 1 is not string" in problems
    assert "$.records[0].errors[0].rtol: \"x\" is not number or null" in problems
    assert "$.records[0]: unknown field 'color'" in problems
    assert "$.records[1]: missing required field 'test_id'" in problems
    with pytest.raises(SchemaError, match="oneOf not supported"):
        check_schema({"properties": {"a": {"oneOf": []}}})


def test_the_expectation_files_conform_and_bad_entries_do_not():
    files = sorted((CHECKOUT / "expectations").rglob("*.toml"))
    assert len(files) >= 3
    for path in files:
        assert validate(tomllib.loads(path.read_text()), EXPECTATIONS) == [], path
    bad = {"expectation": [{"test": "a", "status": "xfail", "reason": " ",
                            "link": "javascript:alert(1)", "finding": "/etc/passwd"}]}
    problems = validate(bad, EXPECTATIONS)
    assert [p.split(":")[0] for p in problems] == ["$.expectation[0].reason",
                                                   "$.expectation[0].link",
                                                   "$.expectation[0].finding"]


def test_a_fresh_report_and_its_merge_conform(tmp_path):
    """A real run with passes, a failure with its measured error, a not-supported check and
    an expectation, written by the plugin, then merged."""
    (tmp_path / "test_fresh.py").write_text(textwrap.dedent('''
        import pytest

        def test_passes(target, record_property):
            record_property("output max_abs_error", 0.001)
            record_property("output bound", "rtol=0.01 atol=1e-05")

        def test_fails(target, record_property):
            record_property("output max_abs_error", float("inf"))
            record_property("output bound", "rtol=0.01 atol=1e-05")
            record_property("output error_ratio", float("inf"))
            raise AssertionError("output out of bounds\\nworst at index (0,)")

        def test_known(target):
            raise AssertionError("waived by the expectation file")

        def test_not_supported(target):
            pytest.skip("not supported: no such unit here")
        '''))
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["triton_cts.plugin"]\n')
    (tmp_path / "e.toml").write_text(textwrap.dedent('''
        [[expectation]]
        test = "test_fresh.py::test_known"
        status = "xfail"
        reason = "a known failure"
        link = "https://example.invalid/1"
        '''))
    out = tmp_path / "r.json"
    result = run_pytest("--rootdir", str(tmp_path), "-p", "no:xdist", str(tmp_path / "test_fresh.py"),
                        "--op", "gelu", "--vendor", "nvidia-sm90", "--mode", "interpreter",
                        "--expectations", str(tmp_path / "e.toml"), "--report-json", str(out))
    assert result.returncode == 1, result.stdout + result.stderr
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == SCHEMA_VERSION and validate(doc, REPORT) == []
    by_test = {r["test"]: r for r in doc["records"]}
    assert by_test["test_fails"]["errors"][0]["ratio_nonfinite"] == "inf"
    assert by_test["test_fails"]["message"].endswith("worst at index (0,)")
    # a waived failure keeps the cause it was waived for
    assert by_test["test_known"]["status"] == "waived"
    assert "waived by the expectation file" in by_test["test_known"]["message"]
    merged = merge([("r.json", load_report(out))])
    assert validate(merged, REPORT) == []


def test_the_field_reference_page_is_generated_from_the_schemas():
    assert PAGE.read_text(encoding="utf-8") == render(), \
        "docs/report-format.md is out of date: run python -m reports.schema"
    page = render()
    for path, schema in fields(REPORT) + fields(EXPECTATIONS):
        assert f"`{path.rsplit('.', 1)[-1].removesuffix('[]')}`" in page, path
    assert "`ratio_nonfinite`" in page and "`message`" in page and "`traceback`" in page
