"""Plausible ranges: well-typed numbers no real target has (a typo, a unit slip, a value
pasted into the wrong field) are refused. Each field declares its range
(:mod:`triton_cts.profiles.fields`); the schema's checks walk every number against it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


# Each range is wide around today's hardware; the tiny constants of derived profiles
# (suites/strategies.py) stay inside them.
@dataclass(frozen=True)
class Range:
    """The values a numeric field (every number in it, for a list or table) may take."""
    low: float
    high: float
    why: str


def _numbers(value: Any, path: str):
    """(path, number) for every number in ``value``, lists and tables included."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield path, value
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _numbers(v, f"{path}[{i}]")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _numbers(v, f"{path}.{k}")


def _fmt(x: float) -> str:
    return f"{x:,}" if isinstance(x, int) else f"{x:g}"
