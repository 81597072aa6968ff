"""Input coverage: which value classes, layouts and boundary row lengths the checks met.

A check can only catch a bug on inputs it runs. Every numerics and relations check records,
per case it ran, the value class of its values, the layout of its input and the boundaries
its row length sits at (``1``, ``prime``, ``fused+1``, ``block-1``, ...: ``suites/strategies.py``
names them), beside what the check offers (the classes it draws from, every layout, the
boundaries a shape within its size cap can have): the :data:`PROPERTY` user property, one
per case, merged into the record's ``inputs``. The report gathers them per op, dtype,
profile and mode (:func:`table`); a class, layout or boundary that some check of the run
offered and no check met is a gap: a quality warning of the run, not of any check.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict

from triton_cts.results.status import Status

#: The user property a suite records per case: {"met": {axis: [..]}, "offered": {axis: [..]}}.
PROPERTY = "cts_inputs"
#: What a case meets, one list per axis; the names of the axes in gap lines.
AXES = ("value_classes", "layouts", "boundaries")
AXIS_NAMES = {"value_classes": "value class", "layouts": "layout", "boundaries": "boundary"}
#: Statuses whose checks ran their cases (not skipped as not supported, not waived).
_SKIPPED = (Status.NOT_SUPPORTED.value, Status.WAIVED.value)
#: Boundary names as suites/strategies.py writes them, for the tables' order.
_BOUNDARY = re.compile(r"(fused/2|fused|block)(-1|\+1)?( \(f32\))?")
_BLOCKS, _STEPS = ("fused", "fused/2", "block"), ("-1", "", "+1")


def _order(axis: str, labels) -> list[str]:
    """Labels in the order the tables show them: boundaries 1, prime, then fused-1 ...
    block+1, then those counted in float32; other axes and unknown names as they came."""
    labels = list(dict.fromkeys(labels))
    if axis != "boundaries":
        return labels

    def key(label: str):
        if label in ("1", "prime"):
            return (0, ("1", "prime").index(label))
        m = _BOUNDARY.fullmatch(label)
        if m is None:
            return (3, labels.index(label))
        return (2 if m.group(3) else 1,
                _BLOCKS.index(m.group(1)) * 3 + _STEPS.index(m.group(2) or ""))
    return sorted(labels, key=key)


def entry(met: dict, offered: dict) -> dict:
    """One case's property value (or a record's ``inputs``): per axis, the labels it met
    and the labels its check offers, each list in order of first appearance."""
    return {part: {axis: list(dict.fromkeys(str(v) for v in (values.get(axis) or ())))
                   for axis in AXES}
            for part, values in (("met", met), ("offered", offered))}


def merge(into: dict | None, value) -> dict:
    """``into`` (a record's ``inputs`` so far, or None) with one more case's value."""
    if not isinstance(value, dict):
        return into if into is not None else entry({}, {})
    value = entry(value.get("met") or {}, value.get("offered") or {})
    if into is None:
        return value
    return entry({a: into["met"][a] + value["met"][a] for a in AXES},
                 {a: into["offered"][a] + value["offered"][a] for a in AXES})


def _key(record: dict) -> tuple:
    return tuple(record.get(k) or "-" for k in ("op", "dtype", "profile", "mode"))


def table(records: list[dict]) -> dict:
    """The coverage table: one row per op, dtype, profile and mode whose checks recorded
    inputs and ran, with how many checks met each label (``met``), the labels offered
    (``offered``) and those offered but met by none (``gaps``); and the gaps as lines."""
    rows: dict[tuple, dict] = {}
    for rec in records:
        inputs = rec.get("inputs")
        if not isinstance(inputs, dict) or rec.get("status") in _SKIPPED:
            continue
        row = rows.setdefault(_key(rec), {"checks": 0, "met": defaultdict(Counter),
                                          "offered": defaultdict(dict)})
        row["checks"] += 1
        for axis in AXES:
            row["met"][axis].update(dict.fromkeys((inputs.get("met") or {}).get(axis) or (), 1))
            row["offered"][axis].update(dict.fromkeys((inputs.get("offered") or {}).get(axis)
                                                      or ()))
    out, gaps = [], []
    for key, row in sorted(rows.items()):
        offered = {axis: _order(axis, row["offered"][axis]) for axis in AXES}
        met = {axis: {label: row["met"][axis][label]
                      for label in _order(axis, [*offered[axis], *row["met"][axis]])
                      if row["met"][axis][label]} for axis in AXES}
        missing = {axis: [label for label in offered[axis] if label not in met[axis]]
                   for axis in AXES}
        op, dtype, profile, mode = key
        out.append({"op": op, "dtype": dtype, "profile": profile, "mode": mode,
                    "checks": row["checks"], "met": met, "offered": offered,
                    "gaps": missing})
        if any(missing.values()):
            gaps.append(gap_line(out[-1]))
    return {"rows": out, "gaps": gaps}


def gap_line(row: dict) -> str:
    """``softmax float16 on nvidia-sm90 (interpreter): no check met value class
    wide_range; layout transposed``."""
    parts = [f"{AXIS_NAMES[axis]} {', '.join(labels)}"
             for axis, labels in row["gaps"].items() if labels]
    return (f"{row['op']} {row['dtype']} on {row['profile']} ({row['mode']}): no check met "
            + "; ".join(parts))


def of(doc: dict) -> dict:
    """A report's coverage table: its own, or one made from its records (a report of an
    older version has none)."""
    found = doc.get("input_coverage")
    return found if isinstance(found, dict) and "rows" in found else table(doc["records"])


def summary_lines(coverage: dict, most: int = 3) -> list[str]:
    """The terminal's lines on input coverage: nothing where no check recorded inputs; a
    line saying every class, layout and boundary offered was met; or the gaps, a quality
    warning of the run, ``most`` of them named."""
    rows, gaps = coverage.get("rows") or [], coverage.get("gaps") or []
    if not rows:
        return []
    if not gaps:
        return [f"input coverage: every value class, layout and boundary offered was met "
                f"({len(rows)} op x dtype x profile x mode rows)"]
    return [f"quality warning of the run: input coverage: {len(gaps)} of {len(rows)} op x "
            f"dtype x profile x mode rows have gaps (the report's \"input_coverage\" lists "
            f"them): " + "; ".join(gaps[:most]) + (" ..." if len(gaps) > most else "")]
