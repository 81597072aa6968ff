"""Result records, one per check (a suite test id), and what is read off a list of them:
the op x profile matrix and the verdict. Plain data and pure functions, shared by the
pytest plugin (:mod:`triton_cts.results.plugin`) and the report commands
(``python -m reports``).
"""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field

from triton_cts.results.status import Status, worst
from triton_cts.results.report_io import ReportError


# ---- records -----------------------------------------------------------------------------
@dataclass
class Record:
    """One check's outcome: what was checked, how it ended, and the evidence."""

    test_id: str
    status: Status
    suite: str = ""
    test: str = ""
    op: str | None = None
    impl: str | None = None
    profile: str | None = None
    vendor: str | None = None
    mode: str | None = None
    dtype: str | None = None
    shape: str | None = None
    reason: str = ""
    errors: list[dict] = field(default_factory=list)          # output, max_abs_error, bound
    compile_stats: list[dict] = field(default_factory=list)
    quality_warnings: list[str] = field(default_factory=list)
    example: str | None = None
    repro: str | None = None
    duration_s: float = 0.0
    properties: dict = field(default_factory=dict)            # other record_property values

    def to_dict(self) -> dict:
        d = asdict(self)
        d["status"] = self.status.value
        return d

    @classmethod
    def from_dict(cls, d: dict, source: str = "<record>") -> "Record":
        try:
            d = dict(d)
            d["status"] = Status(d["status"])
            return cls(**d)
        except (KeyError, TypeError, ValueError) as exc:
            raise ReportError(f"{source}: malformed record {d.get('test_id', '?')!r}: {exc}") from None


def split_properties(props) -> dict:
    """Sort a check's record_property pairs into record fields: errors (the worst
    "<output> max_abs_error" per output with its "<output> bound"), compile_stats, repro,
    quality warnings, and the rest."""
    errors: dict[str, dict] = {}
    fresh: dict[str, bool] = {}  # the output's worst error so far was the last one recorded
    out = {"errors": [], "compile_stats": [], "quality_warnings": [], "repro": None,
           "properties": {}}
    for key, value in props:
        if key.endswith(" max_abs_error"):
            name = key.removesuffix(" max_abs_error")
            cur = errors.get(name)
            fresh[name] = cur is None or _num(value) > _num(cur["max_abs_error"])
            if fresh[name]:
                errors[name] = {"output": name, "max_abs_error": value, "bound": None}
        elif key.endswith(" bound") and key.removesuffix(" bound") in errors:
            # Tests record each error followed by its bound: keep the worst error's.
            name = key.removesuffix(" bound")
            if fresh.pop(name, False):
                errors[name]["bound"] = value
        elif key == "compile_stats":
            out["compile_stats"] += value if isinstance(value, list) else [value]
        elif key == "repro":
            out["repro"] = value
        elif key == "quality_warning":
            out["quality_warnings"].append(str(value))
        else:
            out["properties"][key] = value if isinstance(value, (int, float, str, bool)) \
                else json.loads(json.dumps(value, default=str))
    out["errors"] = list(errors.values())
    return out


def _num(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("-inf")


# ---- the matrix and the verdict ----------------------------------------------------------
def verdict(records) -> str:
    counts = Counter(Status(r["status"] if isinstance(r, dict) else r.status) for r in records)
    total = sum(counts.values())
    bad = {s: n for s, n in counts.items() if not s.conforms}
    listing = ", ".join(f"{n} {s}" for s, n in sorted(counts.items(), key=lambda i: i[0].severity))
    if not total:
        return "triton-cts: NO CHECKS RAN"
    word = "CONFORMS" if not bad else "DOES NOT CONFORM"
    return f"triton-cts: {word}: {total} checks ({listing})"


def conforms(records) -> bool:
    return bool(records) and all(Status(r["status"]).conforms for r in records)


def matrix(records: list[dict]) -> tuple[list[str], list[dict]]:
    """Op x profile cells per suite: ``(profiles, rows)``; each row has op, suite and a
    ``cells`` dict profile -> {"worst": Status, "counts": {Status: n}}."""
    profiles = sorted({r.get("profile") or "-" for r in records})
    cells: dict[tuple, dict] = defaultdict(lambda: defaultdict(Counter))
    for r in records:
        cells[(r.get("op") or "-", r.get("suite") or "-")][r.get("profile") or "-"][Status(r["status"])] += 1
    rows = []
    for (op, suite), by_profile in sorted(cells.items()):
        rows.append({"op": op, "suite": suite, "cells": {
            p: {"worst": worst(c), "counts": dict(sorted(c.items(), key=lambda i: -i[0].severity))}
            for p, c in by_profile.items()}})
    return profiles, rows


def cell_text(cell: dict | None) -> str:
    if not cell:
        return ""
    counts = " ".join(f"{n}{s.short}" for s, n in cell["counts"].items())
    return f"{cell['worst'].value.upper()} {counts}"


def summary_table(records: list[dict], tablefmt: str = "simple") -> str:
    from tabulate import tabulate

    profiles, rows = matrix(records)
    body = [[row["op"], row["suite"]] + [cell_text(row["cells"].get(p)) for p in profiles]
            for row in rows]
    legend = "counts: " + " ".join(f"{s.short}={s.value}" for s in Status)
    return tabulate(body, headers=["op", "suite"] + profiles, tablefmt=tablefmt) + "\n" + legend
