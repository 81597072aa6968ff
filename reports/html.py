"""One self-contained HTML page from a report: inline CSS and JS, no network.

The records travel once, compactly, as JSON the page's script reads (``payload``): strings
that repeat (statuses, ops, profiles, reasons, bounds, compile-stat values) are kept once in
a table and referred to by index, a repro command is rebuilt from its test id and the
run's options, per-record launch coverage of passing checks is left to the aggregate
section it feeds, and compile stats are one table per target that both the compile-stats
section and a check's details read.
"""
from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import shlex
from collections import Counter, defaultdict
from pathlib import Path

import jinja2

from triton_cts.results import behaviour, input_coverage
from triton_cts.results.numbers import bound_text, read_number
from triton_cts.results.records import conforms, params_text, run_problems, verdict
from triton_cts.results.status import Status

TEMPLATES = Path(__file__).parent / "templates"
COLOURS = {  # background per status; a matrix cell takes the colour of the status it reads as
    Status.PASS: "#c8e6c9", Status.NOT_SUPPORTED: "#e0e0e0", Status.WAIVED: "#bbdefb",
    Status.QUALITY_WARNING: "#fff59d", Status.UNEXPECTED_PASS: "#ffcc80",
    Status.INTERRUPTED: "#b0bec5",
    Status.FAIL: "#ef9a9a", Status.TIMEOUT: "#ffab91", Status.CRASH: "#ce93d8",
    Status.HARNESS_ERROR: "#f48fb1",
}
#: record fields the check list reads from their own columns; the rest go in ``extra``
CORE = ("status", "op", "impl", "profile", "vendor", "mode", "dtype", "suite", "test")
SHOWN_ELSEWHERE = {"test_id", "reason", "repro", "duration_s", "compile_stats", "params", *CORE}

TOP_CAUSES = 10  # causes shown open; the rest are one click away
LAUNCH_COVERAGE = "launch_coverage"  # triton_cts.execution.coverage.PROPERTY
_EXCEPTION = re.compile(r"((?:[A-Za-z_][\w.]*)?(?:Error|Exception|Failure|Failed|Exit|Interrupt|"
                        r"Group|Warning|Timeout|Expired|Exceeded|DidNotReproduce))(?::\s*|$)(.*)", re.S)
#: hypothesis' @reproduce_failure('x.y.z', b'...'), as triton_cts.results.status reads it
_BLOB = re.compile(r"@?reproduce_failure\(\s*(['\"])([\w.+-]+)\1\s*,\s*b(['\"])([^'\"]*)\3\s*\)")
_GAP = re.compile(r"(?P<kernel>[^:]+): (?P<key>\w+) was always (?P<value>True|False)$")


def _number(error: dict, name: str):
    """An error's number as the page reads it: a number, or "inf"/"nan" as text (JSON has
    neither; report version 2 holds them as null beside ``<name>_nonfinite``)."""
    value = read_number(error, name)
    return value if value is None or math.isfinite(value) else str(value)


def _status_list() -> list[str]:
    return [s.value for s in Status]


def _conforming(status: str) -> bool:
    try:
        return Status(status).conforms
    except ValueError:  # a status this checkout does not know: never hide it as fine
        return False


class _Strings:
    """A table of distinct strings; ``ref`` gives a string's index (None stays None)."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def ref(self, value):
        if value is None:
            return None
        value = str(value)
        if value not in self.index:
            self.index[value] = len(self.index)
        return self.index[value]

    def table(self) -> list[str]:
        return list(self.index)


# ---- failures grouped by cause -----------------------------------------------------------
def cause_of(record: dict) -> tuple[str, str, str]:
    """(error class, message, the message with its numbers masked) of a check's reason:
    the exception type where the reason starts with one, else the status."""
    message = (record.get("reason") or "").strip().split("\n")[0]
    m = _EXCEPTION.match(message)
    cls, rest = (m.group(1), m.group(2).strip()) if m else (record["status"], message)
    return cls, rest, re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", rest)


def failure_causes(records: list[dict]) -> tuple[list[dict], dict[int, str]]:
    """The non-conforming checks grouped by (op, error class, masked message), most checks
    first; and each such record's group id by its index in ``records``."""
    groups: dict[tuple, dict] = {}
    of: dict[int, str] = {}
    for i, r in enumerate(records):
        if _conforming(r["status"]):
            continue
        cls, message, masked = cause_of(r)
        key = (r.get("op") or "-", cls, masked)
        g = groups.get(key)
        if g is None:
            gid = hashlib.sha1("\0".join(key).encode()).hexdigest()[:10]
            g = groups[key] = {"id": gid, "op": key[0], "cls": cls, "statuses": Counter(),
                               "messages": Counter(), "count": 0}
        g["count"] += 1
        g["statuses"][r["status"]] += 1
        g["messages"][message] += 1
        of[i] = g["id"]
    out = []
    for g in sorted(groups.values(), key=lambda g: (-g["count"], g["op"], g["cls"])):
        out.append({"id": g["id"], "op": g["op"], "cls": g["cls"], "count": g["count"],
                    "statuses": dict(g["statuses"].most_common()),
                    "message": g["messages"].most_common(1)[0][0],
                    "variants": len(g["messages"])})
    return out, of


def known_failures(records: list[dict]) -> list[dict]:
    """Checks an expectation waived, grouped by the entry that waived them (a shipped
    known upstream defect, or the user's expectation file), most checks first."""
    groups: dict[tuple, dict] = {}
    for r in records:
        exp = r.get("expectation")
        if r["status"] != Status.WAIVED.value or not isinstance(exp, dict):
            continue
        fields = {k: str(exp.get(k) or "") for k in ("test", "status", "reason", "link",
                                                      "finding", "repro", "source")}
        key = (r.get("op") or "-", *fields.values())
        g = groups.setdefault(key, {"op": key[0], **fields, "known": bool(exp.get("known")),
                                    "safe_link": _safe_link(fields["link"]), "count": 0})
        g["count"] += 1
    return sorted(groups.values(), key=lambda g: (-g["count"], g["op"], g["reason"]))


def _safe_link(link: str) -> bool:
    """Only http(s) addresses become links; anything else is shown as text."""
    return bool(re.match(r"https?://", link or "", re.I))


# ---- launch-coverage gaps: expected for the target, or missing ---------------------------
def split_gaps(records: list[dict], coverage: dict) -> dict:
    """The coverage gaps as {"expected": [(gap, why)], "missing": [gap]}. A gap "K was
    always V" is expected for the target when every profile the kernel launched on fixes K
    to V: in this run's data K takes one value per profile over every kernel and differs
    between profiles, or the profile has a boolean field named like K that is V there (and
    the other value on another known profile)."""
    gaps = list(coverage.get("gaps") or [])
    per_kernel: dict[tuple, set] = defaultdict(set)      # (kernel, K) -> profiles launched
    per_profile: dict[tuple, set] = defaultdict(set)     # (K, profile) -> values
    for r in records:
        for launch in (r.get("properties") or {}).get(LAUNCH_COVERAGE) or []:
            if not isinstance(launch, dict):
                continue
            for key, value in (launch.get("constexprs") or {}).items():
                per_kernel[(launch.get("kernel"), key)].add(r.get("profile") or "-")
                per_profile[(key, r.get("profile") or "-")].add(json.dumps(value))
    follows_target = {}
    for key in {k for k, _ in per_profile}:
        values = [v for (k, _), v in per_profile.items() if k == key]
        if all(len(v) == 1 for v in values) and len(set().union(*values)) > 1:
            follows_target[key] = True
    fields = None
    expected, missing = [], []
    for gap in gaps:
        m = _GAP.match(gap)
        profiles = sorted(per_kernel.get((m.group("kernel"), m.group("key")), ())) if m else []
        why = None
        if m and profiles:
            key, value = m.group("key"), m.group("value") == "True"
            if follows_target.get(key):
                why = (f"{key} takes one value per target in this run; "
                       f"{', '.join(profiles)} launch it {value}")
            else:
                fields = _profile_fields() if fields is None else fields
                attr = key.lower()
                known = {name: flags.get(attr) for name, flags in fields.items() if name}
                if all(known.get(p) is value for p in profiles) and \
                        any(v is (not value) for v in known.values()):
                    why = (f"the profile field {attr} is {value} on {', '.join(profiles)} "
                           f"(and {not value} on " + ", ".join(
                               sorted(n for n, v in known.items() if v is (not value))) + ")")
        if why:
            expected.append({"gap": gap, "why": why})
        else:
            missing.append(gap)
    note = (fields or {}).get(None)
    return {"expected": expected, "missing": missing, **({"note": note} if note else {})}


def _profile_fields() -> dict[str, dict[str, bool]]:
    """Per known profile, its boolean properties (select_loads, slice_broadcast, ...)."""
    try:
        from triton_cts.profiles import Profile, load_profiles
        profiles = load_profiles()
    except Exception as exc:  # the page still renders, and says why no field explains a gap
        return {None: f"the vendor profiles could not be read ({exc}), so no profile field "
                      f"explains a gap"}
    names = [n for n, v in vars(Profile).items() if isinstance(v, property)]
    out = {}
    for name, p in profiles.items():
        flags = {}
        for n in names:
            try:
                v = getattr(p, n)
            except Exception:
                continue
            if isinstance(v, bool):
                flags[n] = v
        out[name] = flags
    return out


# ---- the embedded data -------------------------------------------------------------------
def _test_id(r: dict) -> str:
    """The test id without the prefix its suite and test name give (the page adds it)."""
    tid = r["test_id"]
    prefix = f"suites/{r.get('suite')}.py::{r.get('test')}["
    return tid[len(prefix) - 1:] if r.get("suite") and r.get("test") and tid.startswith(prefix) else tid


def _repro_tail(r: dict):
    """The repro command's options after ``pytest '<test id>'``, or None where the command
    is not of that form (it is then kept whole)."""
    repro = r.get("repro")
    head = "pytest " + shlex.quote(r["test_id"])
    if isinstance(repro, str) and (repro == head or repro.startswith(head + " ")):
        return repro[len(head):]
    return None


def _replay(r: dict):
    """The replay command as the page rebuilds it: the repro command, then
    ``--reproduce-failure VERSION:BLOB`` from the record's ``@reproduce_failure(...)``."""
    m = _BLOB.search(r.get("reproduce_failure") or "")
    if not m or not (m.group(2) + m.group(4)).isascii():
        return None
    return f"{r['repro']} --reproduce-failure {shlex.quote(m.group(2) + ':' + m.group(4))}"


def payload(records: list[dict], causes: dict[int, str], cause_list: list[dict]) -> dict:
    strings = _Strings()
    cause_index = {c["id"]: i for i, c in enumerate(cause_list)}
    rows, compile_tables = [], {}
    for i, r in enumerate(records):
        tail = _repro_tail(r)
        extra = {}
        for k, v in r.items():
            if k in SHOWN_ELSEWHERE or v in (None, "", [], {}):
                continue
            if k == "errors":
                v = [[strings.ref(e.get("output")), _number(e, "max_abs_error"),
                      strings.ref(bound_text(e)), _number(e, "ratio")]
                     for e in v if isinstance(e, dict)]
            elif k == "properties" and isinstance(v, dict) and LAUNCH_COVERAGE in v \
                    and _conforming(r["status"]):
                v = {pk: pv for pk, pv in v.items() if pk != LAUNCH_COVERAGE}
                if not v:
                    continue
            elif k == "inputs" and _conforming(r["status"]):
                continue  # a passing check's inputs: in the input coverage section only
            extra[k] = v
        if tail is None and r.get("repro"):
            extra["repro"] = r["repro"]
        if tail is not None and extra.get("replay") and extra["replay"] == _replay(r):
            del extra["replay"]  # the page rebuilds it from repro and reproduce_failure
        for stats in r.get("compile_stats") or []:
            if isinstance(stats, dict):
                t = compile_tables.setdefault(r.get("profile") or "-", {"rows": []})
                t["rows"].append((i, stats))
        row = [_test_id(r)] + [strings.ref(r.get(k)) for k in CORE] + [
            strings.ref(params_text(r.get("params"))), strings.ref(r.get("reason") or ""),
            strings.ref(tail), cause_index.get(causes.get(i)), r.get("duration_s")]
        if extra:
            row.append(extra)
        rows.append(row)
    return {"core": list(CORE), "rows": rows,
            "compile": {p: _columns(t["rows"], strings) for p, t in sorted(compile_tables.items())},
            "causes": [[c["id"], c["op"], c["cls"], c["message"]] for c in cause_list],
            "strings": strings.table()}


def _columns(rows: list[tuple[int, dict]], strings: _Strings) -> dict:
    """Compile stats of one target as columns (every key once) and rows of values; a
    column of strings holds indices into the string table."""
    columns: list[str] = []
    for _, stats in rows:
        for k in stats:
            if k not in columns:
                columns.append(k)
    text = [all(isinstance(s.get(c), str) or s.get(c) is None for _, s in rows) for c in columns]
    out = [[i] + [strings.ref(s.get(c)) if t else s.get(c) for c, t in zip(columns, text)]
           for i, s in rows]
    return {"columns": columns, "text": text, "rows": out}


def _json_for_script(data) -> str:
    """JSON that cannot end its <script> element or open a comment in it (NaN and
    infinities as text, which JSON.parse reads)."""
    try:
        text = json.dumps(data, separators=(",", ":"), default=str, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(data), separators=(",", ":"), default=str, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def render(doc: dict) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, extensions=["jinja2.ext.do"])
    records = doc["records"]
    cause_list, causes = failure_causes(records)
    coverage = doc.get("coverage") or {}
    data = payload(records, causes, cause_list)
    data["order"] = _status_list()
    data["colours"] = {s.value: c for s, c in COLOURS.items()}
    data["short"] = {s.value: s.short for s in Status}
    script = (TEMPLATES / "report.js").read_text(encoding="utf-8")
    early = (TEMPLATES / "errors.js").read_text(encoding="utf-8")
    style = env.get_template("report.css.j2").render(colours=data["colours"])
    csp = ("default-src 'none'; base-uri 'none'; form-action 'none'; "
           f"style-src '{_sha256(style)}'; script-src '{_sha256(early)}' '{_sha256(script)}'")
    counts = Counter(r["status"] for r in records)
    return env.get_template("report.html.j2").render(
        environment=doc["environment"], records=records, statuses=list(Status),
        counts=counts, verdict=verdict(records, doc.get("run")),
        conforms=conforms(records, doc.get("run")), expectations=doc.get("expectations") or {},
        run=doc.get("run") or {}, coverage=coverage,
        gaps=split_gaps(records, coverage) if coverage.get("gaps") else {"expected": [], "missing": []},
        language=_language_tables(doc), inputs=input_tables(doc),
        run_problems=run_problems(records, doc.get("run")),
        causes=cause_list, top_causes=TOP_CAUSES, known=known_failures(records), csp=csp, style=style,
        early_script=early, script=script, data=_json_for_script(data),
        compile_checks=sum(1 for r in records if r.get("compile_stats")))


def input_tables(doc: dict) -> dict:
    """The input coverage as one table per profile and mode: rows by op and dtype, a column
    per value class and per layout (the checks that met it; "gap" where offered and met by
    none; empty where not offered), and the boundaries met of those offered."""
    coverage = input_coverage.of(doc)
    rows = coverage.get("rows") or []
    columns = {}
    for axis in ("value_classes", "layouts"):  # in the order of the longest list offered
        lists = sorted(([*row["offered"][axis], *row["met"][axis]] for row in rows),
                       key=len, reverse=True)
        columns[axis] = list(dict.fromkeys(label for labels in lists for label in labels))
    groups: dict[tuple, dict] = {}
    for row in rows:
        group = groups.setdefault((row["profile"], row["mode"]),
                                  {"profile": row["profile"], "mode": row["mode"],
                                   "rows": [], "gaps": 0})
        cells = [_input_cell(row, axis, label)
                 for axis, labels in columns.items() for label in labels]
        met, offered = row["met"]["boundaries"], row["offered"]["boundaries"]
        group["rows"].append({"op": row["op"], "dtype": row["dtype"], "checks": row["checks"],
                              "cells": cells, "boundaries": f"{sum(1 for b in offered if b in met)}"
                                                            f" of {len(offered)}",
                              "missing": row["gaps"]["boundaries"],
                              "gap": any(row["gaps"].values())})
        group["gaps"] += any(row["gaps"].values())
    return {"columns": columns, "groups": list(groups.values()),
            "gaps": coverage.get("gaps") or []}


def _input_cell(row: dict, axis: str, label: str) -> dict:
    if label in row["gaps"][axis]:
        return {"text": "gap", "gap": True}
    return {"text": str(row["met"][axis].get(label, "")), "gap": False}


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
