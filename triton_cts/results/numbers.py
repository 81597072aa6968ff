"""Numbers as the report holds them: JSON numbers, and for a value that is not finite
(inf, -inf, nan: JSON has none) null beside a ``<name>_nonfinite`` field that says which.
A measured error's bound is its ``rtol`` and ``atol`` fields, not text."""
from __future__ import annotations

import math
import re

NONFINITE = ("inf", "-inf", "nan")
_BOUND = re.compile(r"^\s*rtol=(\S+)\s+atol=(\S+)\s*$")


def as_float(value) -> float | None:
    """A number, or the text of one ("inf", "1e-3"), as a float; None for anything else."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def number_fields(name: str, value) -> dict:
    """``{name: value}`` for a finite number, ``{name: None, name_nonfinite: "inf"}`` for
    one that is not (inf, -inf, nan; also given as text), ``{name: value}`` otherwise."""
    f = as_float(value)
    if f is None:
        return {name: value}
    if math.isfinite(f):
        return {name: value if isinstance(value, (int, float)) else f}
    return {name: None, f"{name}_nonfinite": "nan" if math.isnan(f) else str(f)}


def read_number(entry: dict, name: str) -> float | None:
    """The float a report holds under ``name`` (inf or nan where ``<name>_nonfinite``
    says so; a version 1 report's "inf" text too), or None where there is none."""
    if entry.get(f"{name}_nonfinite") in NONFINITE:
        return float(entry[f"{name}_nonfinite"])
    return as_float(entry.get(name))


def bound_fields(bound) -> dict:
    """The ``rtol`` and ``atol`` of a bound recorded as ``"rtol=X atol=Y"``; a bound in
    any other form stays as it was recorded, under ``bound``; none gives nothing."""
    if bound is None:
        return {}
    m = _BOUND.match(str(bound))
    if not m or as_float(m.group(1)) is None or as_float(m.group(2)) is None:
        return {"bound": str(bound)}
    return {**number_fields("rtol", float(m.group(1))), **number_fields("atol", float(m.group(2)))}


def error_entry(output: str, max_abs_error, bound=None, ratio=None, has_ratio=False) -> dict:
    """One output's measured error as a record's ``errors`` holds it."""
    out = {"output": output, **number_fields("max_abs_error", max_abs_error), **bound_fields(bound)}
    if has_ratio:
        out.update(number_fields("ratio", ratio))
    return out


def bound_text(entry: dict) -> str | None:
    """A measured error's bound as one line (``rtol=0.01 atol=1e-05``), for display."""
    if "rtol" in entry or "atol" in entry:
        return " ".join(f"{k}={read_number(entry, k)}" for k in ("rtol", "atol"))
    return entry.get("bound")
