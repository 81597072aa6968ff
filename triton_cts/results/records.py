"""Result records, one per check (a suite test id), and what is read off a list of them:
the op x profile matrix and the verdict. Plain data and pure functions, shared by the
pytest plugin (:mod:`triton_cts.results.plugin`) and the report commands
(``python -m reports``).
"""
from __future__ import annotations

import json
import math
import shlex
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field

from triton_cts.results import input_coverage
from triton_cts.results.numbers import error_entry, read_number
from triton_cts.results.status import Status, parse_reproduce_failure, reads_as, reproduce_failure
from triton_cts.results.report_io import ReportError


# ---- records -----------------------------------------------------------------------------
#: The user property that carries the device a check ran on (``Record.device``).
DEVICE_PROPERTY = "cts_device"


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
    #: the check's other parameters (the metamorphic relation, say), by name
    params: dict = field(default_factory=dict)
    shape: str | None = None
    reason: str = ""
    #: a failure's whole exception message (bounded: ``status.MESSAGE_LIMIT``) and the last
    #: frames of its traceback (``status.TRACEBACK_FRAMES``), None where it did not fail
    message: str | None = None
    traceback: str | None = None
    errors: list[dict] = field(default_factory=list)  # output, max_abs_error, rtol, atol, ratio
    compile_stats: list[dict] = field(default_factory=list)
    quality_warnings: list[str] = field(default_factory=list)
    example: str | None = None
    repro: str | None = None
    #: hypothesis' ``@reproduce_failure('x.y.z', b'...')`` for the failing example, and the
    #: repro command that replays exactly that example with it (``--reproduce-failure``)
    reproduce_failure: str | None = None
    replay: str | None = None
    duration_s: float = 0.0
    #: the accelerator a device-mode check ran on, {"index", "name"}; None for other modes
    device: dict | None = None
    #: the value classes, layouts and boundaries its cases met and those it offers
    #: (``input_coverage``); None for a check that records none
    inputs: dict | None = None
    properties: dict = field(default_factory=dict)            # other record_property values

    def __post_init__(self) -> None:
        if self.reproduce_failure is None and self.example:
            self.reproduce_failure = reproduce_failure(self.example)
        if self.replay is None:
            self.replay = replay_command(self.repro, self.reproduce_failure)

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
    quality warnings, the device, the inputs its cases met (every case's
    ``input_coverage.PROPERTY`` merged), and the rest.

    Each "<output> max_abs_error" starts a measurement; the "<output> bound" and
    "<output> error_ratio" (how far out of bounds: the worst |error| / bound over the
    elements, recorded for failures) after it belong to it. Per output the measurement with
    the highest ratio is kept (a failure's, > 1), else the one with the largest error."""
    measured: dict[str, list[dict]] = {}
    out = {"errors": [], "compile_stats": [], "quality_warnings": [], "repro": None,
           "device": None, "inputs": None, "properties": {}}
    for key, value in props:
        if key.endswith(" max_abs_error"):
            name = key.removesuffix(" max_abs_error")
            measured.setdefault(name, []).append(
                {"output": name, "max_abs_error": value, "bound": None})
        elif key.endswith(" bound") and key.removesuffix(" bound") in measured:
            measured[key.removesuffix(" bound")][-1]["bound"] = value
        elif key.endswith(" error_ratio") and key.removesuffix(" error_ratio") in measured:
            measured[key.removesuffix(" error_ratio")][-1]["ratio"] = value
        elif key == "compile_stats":
            out["compile_stats"] += value if isinstance(value, list) else [value]
        elif key == "repro":
            out["repro"] = value
        elif key == DEVICE_PROPERTY:
            out["device"] = dict(value)
        elif key == input_coverage.PROPERTY:  # one per case: what they met, together
            out["inputs"] = input_coverage.merge(out["inputs"], value)
        elif key == "quality_warning":
            out["quality_warnings"].append(str(value))
        else:
            out["properties"][key] = value if isinstance(value, (int, float, str, bool)) \
                else json.loads(json.dumps(value, default=str))
    worst_of = [max(ms, key=lambda m: (_num(m.get("ratio")), _num(m["max_abs_error"])))
                for ms in measured.values()]
    out["errors"] = [error_entry(m["output"], m["max_abs_error"], m["bound"], m.get("ratio"),
                                 "ratio" in m) for m in worst_of]
    return out


def _num(v) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return float("-inf")
    return float("-inf") if math.isnan(f) else f


def error_ratio(record: dict) -> float | None:
    """How far out of bounds a check's worst output was (|error| / bound, > 1 for a
    failure that measured it; inf where infinite), or None when no ratio was recorded."""
    ratios = [read_number(e, "ratio") for e in record.get("errors") or []
              if "ratio" in e or "ratio_nonfinite" in e]
    ratios = [float("inf") if r is None or math.isnan(r) else r for r in ratios]
    return max(ratios) if ratios else None


def replay_command(repro: str | None, blob: str | None) -> str | None:
    """The repro command that replays exactly one failing example (hypothesis'
    ``@reproduce_failure`` blob), or None without either."""
    if not repro or not blob:
        return None
    try:
        version, data = parse_reproduce_failure(blob)
    except ValueError:
        return None
    return f"{repro} --reproduce-failure {shlex.quote(version + ':' + data.decode('ascii'))}"


# ---- the matrix and the verdict ----------------------------------------------------------
#: What a report's evidence amounts to (``outcome``); only "conforms" conforms.
OUTCOMES = ("conforms", "does_not_conform", "no_result", "interrupted", "incomplete")


def _status(r) -> Status:
    return Status(r["status"] if isinstance(r, dict) else r.status)


def ran(status) -> bool:
    """Whether a check with this status was checked: not NotSupported, not Waived (a
    skipped or expected failure says nothing either way)."""
    return Status(status) not in (Status.NOT_SUPPORTED, Status.WAIVED)


def missing_modes(records, run: dict | None) -> list[str]:
    """The run's required modes (``--require-mode``) in which no check ran."""
    modes = {r.get("mode") if isinstance(r, dict) else r.mode for r in records if ran(_status(r))}
    return [m for m in (run or {}).get("required_modes") or [] if m not in modes]


def run_problems(records, run: dict | None) -> list[str]:
    """Why a report cannot show conformance whatever its checks' statuses say, one line
    each: the run was interrupted, shards are missing, a required mode ran no check, or
    nothing was checked at all."""
    run = run or {}
    problems = []
    if run.get("interrupted"):
        how = f"by {run['signal']}" if run.get("signal") else f"({run.get('reason') or 'stopped'})"
        problems.append(f"interrupted {how}: {len(run.get('not_run') or [])} collected "
                        f"check(s) never ran")
    if run.get("incomplete"):
        problems += [f"incomplete: {m}" for m in run.get("missing") or ["shards are missing"]]
    problems += [f"required mode {m}: no check ran in it (only not supported or waived)"
                 for m in missing_modes(records, run)]
    if not any(ran(_status(r)) for r in records):
        problems.append("nothing was checked: every check was not supported or waived"
                        if records else "no checks ran")
    return problems


def outcome(records, run: dict | None = None) -> str:
    """One of ``OUTCOMES``: interrupted (the run was stopped), incomplete (a merge of
    some shards only), no_result (no check ran: all not supported or waived, or none at
    all), does_not_conform (a check does not conform, or a required mode ran no check),
    conforms."""
    run = run or {}
    if run.get("interrupted"):
        return "interrupted"
    if run.get("incomplete"):
        return "incomplete"
    if not any(ran(_status(r)) for r in records):
        return "no_result"
    if missing_modes(records, run) or not all(_status(r).conforms for r in records):
        return "does_not_conform"
    return "conforms"


def verdict(records, run: dict | None = None) -> str:
    """The one-line verdict: ``triton-cts: CONFORMS: 18 checks (18 pass)``, ``... DOES NOT
    CONFORM: ...``, ``... NO RESULT: ...``, ``... INTERRUPTED (SIGINT), DOES NOT CONFORM:
    ...`` or ``... INCOMPLETE, DOES NOT CONFORM: ...``, then the run's problems."""
    run = run or {}
    counts = Counter(_status(r) for r in records)
    total = sum(counts.values())
    listing = ", ".join(f"{n} {s}" for s, n in sorted(counts.items(), key=lambda i: i[0].severity))
    result = outcome(records, run)
    head = {"conforms": "CONFORMS", "does_not_conform": "DOES NOT CONFORM",
            "no_result": "NO RESULT", "incomplete": "INCOMPLETE, DOES NOT CONFORM",
            "interrupted": f"INTERRUPTED ({run.get('signal') or run.get('reason') or 'stopped'})"
                           f", DOES NOT CONFORM"}[result]
    detail = f"{total} checks ({listing})" if total else "NO CHECKS RAN"
    notes = [f"{len(run.get('not_run') or [])} collected check(s) never ran"
             if p.startswith("interrupted") else p
             for p in run_problems(records, run) if p != "no checks ran"]
    return f"triton-cts: {head}: {detail}" + "".join(f"; {n}" for n in notes)


def conforms(records, run: dict | None = None) -> bool:
    return outcome(records, run) == "conforms"


def matrix(records: list[dict]) -> tuple[list[str], list[dict]]:
    """Op x profile cells per suite and check parameters: ``(profiles, rows)``; each row
    has op, suite, params (the checks' other parameters, e.g. the relation, as text) and a
    ``cells`` dict profile -> {"reads_as": Status, "counts": {Status: n}} (``reads_as``:
    the worst status but for not-supported checks beside others, status.reads_as)."""
    profiles = sorted({r.get("profile") or "-" for r in records})
    cells: dict[tuple, dict] = defaultdict(lambda: defaultdict(Counter))
    for r in records:
        key = (r.get("op") or "-", r.get("suite") or "-", params_text(r.get("params")))
        cells[key][r.get("profile") or "-"][Status(r["status"])] += 1
    rows = []
    for (op, suite, params), by_profile in sorted(cells.items()):
        rows.append({"op": op, "suite": suite, "params": params, "cells": {
            p: {"reads_as": reads_as(c), "counts": dict(sorted(c.items(), key=lambda i: -i[0].severity))}
            for p, c in by_profile.items()}})
    return profiles, rows


def params_text(params: dict | None) -> str:
    """A check's extra parameters as one label: ``shift_invariance``, ``edge=max, n=3``."""
    if not params:
        return ""
    if len(params) == 1:
        return str(next(iter(params.values())))
    return ", ".join(f"{k}={v}" for k, v in sorted(params.items()))


def cell_text(cell: dict | None) -> str:
    if not cell:
        return ""
    counts = " ".join(f"{n}{s.short}" for s, n in cell["counts"].items())
    return f"{cell['reads_as'].value.upper()} {counts}"


def summary_table(records: list[dict], tablefmt: str = "simple") -> str:
    from tabulate import tabulate

    profiles, rows = matrix(records)
    with_params = any(row["params"] for row in rows)
    body = [[row["op"], row["suite"]] + ([row["params"]] if with_params else [])
            + [cell_text(row["cells"].get(p)) for p in profiles] for row in rows]
    headers = ["op", "suite"] + (["check"] if with_params else []) + profiles
    legend = "counts: " + " ".join(f"{s.short}={s.value}" for s in Status)
    return tabulate(body, headers=headers, tablefmt=tablefmt) + "\n" + legend
