"""One self-contained HTML page from a report: inline CSS and JS, no network."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import jinja2

from triton_cts.results import behaviour
from triton_cts.results.records import conforms, matrix, run_problems, verdict
from triton_cts.results.status import Status

TEMPLATES = Path(__file__).parent / "templates"
COLOURS = {  # background per status; the matrix cell takes its worst status's colour
    Status.PASS: "#c8e6c9", Status.NOT_SUPPORTED: "#e0e0e0", Status.WAIVED: "#bbdefb",
    Status.QUALITY_WARNING: "#fff59d", Status.UNEXPECTED_PASS: "#ffcc80",
    Status.INTERRUPTED: "#b0bec5",
    Status.FAIL: "#ef9a9a", Status.TIMEOUT: "#ffab91", Status.CRASH: "#ce93d8",
    Status.HARNESS_ERROR: "#f48fb1",
}


def compile_tables(records: list[dict]) -> dict[str, dict]:
    """Per profile (target): the columns and rows of every compiled kernel's stats."""
    tables: dict[str, dict] = {}
    for r in records:
        for stats in r.get("compile_stats") or []:
            if not isinstance(stats, dict):
                continue
            t = tables.setdefault(r.get("profile") or "-", {"columns": [], "rows": []})
            for k in stats:
                if k not in t["columns"]:
                    t["columns"].append(k)
            t["rows"].append({"op": r.get("op"), "impl": r.get("impl"), "status": r["status"],
                              "stats": stats})
    return dict(sorted(tables.items()))


def render(doc: dict) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    records = doc["records"]
    profiles, rows = matrix(records)
    return env.get_template("report.html.j2").render(
        environment=doc["environment"], records=records, profiles=profiles, rows=rows,
        statuses=list(Status), colours={s.value: c for s, c in COLOURS.items()},
        counts=Counter(r["status"] for r in records), verdict=verdict(records, doc.get("run")),
        conforms=conforms(records, doc.get("run")), expectations=doc.get("expectations") or {},
        compile_tables=compile_tables(records), run=doc.get("run") or {},
        coverage=doc.get("coverage") or {}, language=_language_tables(doc),
        run_problems=run_problems(records, doc.get("run")))


def _language_tables(doc: dict) -> dict:
    """The behaviour and ULP tables as matrices (rows by name, columns "profile mode"),
    from the report's tables or, in a report without them, from its records."""
    tables = {k: doc[k] for k in ("behaviour", "ulp") if isinstance(doc.get(k), list)}
    if len(tables) < 2:
        tables = behaviour.tables(doc["records"])
    out = {}
    for key, label in (("behaviour", "name"), ("ulp", "function")):
        columns, rows = behaviour.pivot(tables[key], label)
        out[key] = {"columns": columns, "rows": rows}
    return out
