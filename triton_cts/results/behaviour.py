"""Behaviour and ULP tables: what each target does where Triton leaves a result undefined,
and how far its math functions are from the exact result, kept as data.

A check records with :func:`record` (a named behaviour: what ``float('nan').to(int32)``
gives, what a shift by the bit width gives) and :func:`record_ulp` (the measured maximum
ULP error of a function in a dtype, and the bound it was held to). Both are stored in the
check's user properties (``record_property``), travel with its reports to wherever
records are built (the xdist controller too), and :func:`tables` gathers them from the
records into the report's ``behaviour`` table (one row per name, profile and mode) and
``ulp`` table (one row per function, dtype, profile and mode). A behaviour never fails a
check; :func:`diff` lists how two runs' behaviour (two targets, two Triton versions)
differs, which ``python -m reports diff`` prints without failing.
"""
from __future__ import annotations

import json
import math
from collections import defaultdict

#: User-property key prefixes (``"behaviour <name>"``, ``"ulp <function> <dtype>"``).
BEHAVIOUR_PREFIX = "behaviour "
ULP_PREFIX = "ulp "


def _jsonable(value):
    """``value`` as plain JSON data (non-finite floats as text: "inf", "nan")."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, int) and not isinstance(value, bool) and not -2**31 <= value < 2**31:
        return str(value)  # xdist sends only 32-bit ints (INT64_MIN from a conversion, say)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def record(record_property, name: str, value) -> None:
    """Store behaviour ``name`` = ``value`` (JSON data: numbers, text, lists, tables) on
    the running check. ``name`` says what was done, e.g. ``"float32->int32 of nan"``."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a behaviour needs a non-empty name, got {name!r}")
    record_property(BEHAVIOUR_PREFIX + name, _jsonable(value))


def record_ulp(record_property, function: str, dtype: str, measured: float,
               bound: float | str | None, source: str | None = None) -> None:
    """Store the measured maximum ULP error of ``function`` in ``dtype`` on the running
    check, with the ``bound`` the profile allows (a number, a formula as text such as
    "2 + 1.173|x|", or None: no bound) and its ``source``."""
    if " " in function or " " in dtype:
        raise ValueError(f"function and dtype names take no spaces: {function!r}, {dtype!r}")
    record_property(f"{ULP_PREFIX}{function} {dtype}",
                    {"max_ulp": _jsonable(float(measured)),
                     "bound": None if bound is None else _jsonable(
                         bound if isinstance(bound, str) else float(bound)),
                     "source": source})


class MaxUlp:
    """The running maximum ULP error per (function, dtype) over a check's hypothesis
    examples, recorded after each (a property's last value is the one a record keeps)."""

    def __init__(self, record_property):
        self._record_property = record_property
        self.worst: dict[tuple[str, str], float] = {}

    def add(self, function: str, dtype: str, measured: float, bound: float | str | None,
            source: str | None = None) -> float:
        """Record the larger of ``measured`` and the earlier maximum; return it."""
        key = (function, dtype)
        prev = self.worst.get(key)
        worst = measured if prev is None or not measured <= prev else prev  # NaN sticks
        self.worst[key] = worst
        record_ulp(self._record_property, function, dtype, worst, bound, source)
        return worst


def _as_float(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _key(value) -> str:
    return json.dumps(value, sort_keys=True)


def tables(records: list[dict]) -> dict[str, list[dict]]:
    """The report's ``behaviour`` and ``ulp`` tables, from every record's properties.

    behaviour rows: ``name``, ``profile``, ``mode``, ``values`` (the distinct values the
    checks recorded, normally one) and ``checks`` (how many recorded it). ulp rows:
    ``function``, ``dtype``, ``profile``, ``mode``, ``max_ulp`` (the largest measured),
    ``bound``, ``source``, ``checks``."""
    behaviour: dict[tuple, dict] = {}
    ulp: dict[tuple, dict] = {}
    for rec in records:
        where = (rec.get("profile"), rec.get("mode"))
        for key, value in (rec.get("properties") or {}).items():
            if key.startswith(BEHAVIOUR_PREFIX):
                name = key.removeprefix(BEHAVIOUR_PREFIX)
                row = behaviour.setdefault((name, *where), {
                    "name": name, "profile": where[0], "mode": where[1], "values": [],
                    "checks": 0})
                row["checks"] += 1
                if all(_key(v) != _key(value) for v in row["values"]):
                    row["values"].append(value)
            elif key.startswith(ULP_PREFIX) and isinstance(value, dict):
                function, _, dtype = key.removeprefix(ULP_PREFIX).partition(" ")
                row = ulp.setdefault((function, dtype, *where), {
                    "function": function, "dtype": dtype, "profile": where[0],
                    "mode": where[1], "max_ulp": None, "bound": value.get("bound"),
                    "source": value.get("source"), "checks": 0})
                row["checks"] += 1
                measured = value.get("max_ulp")
                if row["max_ulp"] is None or _as_float(measured) > _as_float(row["max_ulp"]) \
                        or math.isnan(_as_float(measured)):
                    row["max_ulp"] = measured
    order = lambda row: tuple(str(v) for v in row)  # noqa: E731
    return {"behaviour": [behaviour[k] for k in sorted(behaviour, key=order)],
            "ulp": [ulp[k] for k in sorted(ulp, key=order)]}


def pivot(rows: list[dict], label: str = "name") -> tuple[list[str], list[dict]]:
    """``rows`` of :func:`tables` as a matrix for display: the columns ("profile mode") and
    one row per ``label`` (behaviour name, or "function dtype" for ulp rows) holding each
    column's text."""
    columns: list[str] = []
    matrix: dict[str, dict] = defaultdict(dict)
    for row in rows:
        col = f"{row['profile']} {row['mode']}"
        if col not in columns:
            columns.append(col)
        name = row["name"] if label == "name" else f"{row['function']} {row['dtype']}"
        if "values" in row:
            text = " | ".join(v if isinstance(v, str) else _key(v) for v in row["values"])
        else:
            text = f"{row['max_ulp']}" + (f" (<= {row['bound']})" if row["bound"] is not None
                                          else "")
        matrix[name][col] = text
    return sorted(columns), [{"name": n, "cells": matrix[n]} for n in sorted(matrix)]


def diff(old: dict, new: dict) -> list[dict]:
    """How the behaviour tables of two reports differ: one entry per behaviour whose
    values changed, appeared or disappeared, with ``where`` (profile and mode), ``old``
    and ``new`` (None where absent). Two reports of the same profiles (two Triton
    versions) are compared per profile; two of different profiles (two targets) per
    mode, naming both profiles. ULP rows are compared too (``name`` "ulp <function>
    <dtype>"), by their measured maximum."""
    def rows_of(doc):
        t = doc.get("behaviour") if isinstance(doc.get("behaviour"), list) else None
        u = doc.get("ulp") if isinstance(doc.get("ulp"), list) else None
        if t is None or u is None:
            computed = tables(doc.get("records") or [])
            t, u = (computed["behaviour"] if t is None else t), (computed["ulp"] if u is None else u)
        out = [(r["name"], r["profile"], r["mode"], r["values"]) for r in t]
        out += [(f"ulp {r['function']} {r['dtype']}", r["profile"], r["mode"], [r["max_ulp"]])
                for r in u]
        return out

    before, after = rows_of(old), rows_of(new)
    same_targets = bool({r[1] for r in before} & {r[1] for r in after})

    def index(rows):
        out = {}
        for name, profile, mode, values in rows:
            key = (name, profile, mode) if same_targets else (name, mode)
            out.setdefault(key, ([], set()))
            out[key][0].extend(values)
            out[key][1].add(profile)
        return out

    a, b = index(before), index(after)
    changes = []
    for key in sorted(set(a) | set(b), key=lambda k: tuple(map(str, k))):
        was, now = a.get(key), b.get(key)
        old_values = None if was is None else sorted({_key(v) for v in was[0]})
        new_values = None if now is None else sorted({_key(v) for v in now[0]})
        if old_values == new_values:
            continue
        where = (f"{key[1]} {key[2]}" if same_targets else
                 f"{'/'.join(sorted(map(str, was[1]))) if was else '-'} -> "
                 f"{'/'.join(sorted(map(str, now[1]))) if now else '-'} {key[1]}")
        changes.append({"name": key[0], "where": where,
                        "old": None if was is None else [json.loads(v) for v in old_values],
                        "new": None if now is None else [json.loads(v) for v in new_values]})
    return changes


def format_diff(changes: list[dict]) -> list[str]:
    """Lines for :func:`diff`'s entries (printed, never a failure): each changed value,
    then how many behaviours only one of the runs recorded (another selection)."""
    def text(values):
        return " | ".join(v if isinstance(v, str) else _key(v) for v in values)
    lines = [f"  {c['name']} [{c['where']}]: {text(c['old'])} -> {text(c['new'])}"
             for c in changes if c["old"] is not None and c["new"] is not None]
    gone = sum(c["new"] is None for c in changes)
    new = sum(c["old"] is None for c in changes)
    if gone or new:
        lines.append(f"  ({gone} recorded by the old run only, {new} by the new run only)")
    return lines
