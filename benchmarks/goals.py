"""python -m benchmarks.goals RESULTS.json [RESULTS.json ...] [--goals FILE]

Checks measured results against the performance goals in ``benchmarks/goals.toml``: the
JSON that ``python -m benchmarks --json`` writes (% of copy, speedups over torch, the
libraries timed in the same run) and that ``python -m benchmarks.launch_overhead --json``
writes (per-call time above the kernel). One row per goal, cell and metric: met, short (by
how much) or not measured. A goal no given file measured is never counted as met, and a
"best library" goal is checked only against libraries timed in the same run as ours.

Where several files hold a cell, the last file named on the command line that measured it
is the one read (name the newest last; ``FILE.json:KEY`` names a run kept under one key of
a file that holds several). A device's results history (``benchmarks/results/h200.jsonl``)
reads as its runs, oldest first, so each cell is read from the latest run that measured
it; ``HISTORY.jsonl:EXPERIMENT`` reads one experiment's runs only. Exit 0 when every goal
is met, 1 otherwise, 2 for a goals file or results file that cannot be read."""
from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

GOALS_FILE = Path(__file__).with_name("goals.toml")

#: Metrics a goal may set: the results' field it reads and whether the measured value
#: must be at least (True) or at most (False) the goal.
METRICS = {
    "pct_copy": ("pct_copy", True),            # % of the measured copy bandwidth (graph time)
    "speedup": ("speedup", True),              # over torch eager, per call
    "graph_speedup": ("graph_speedup", True),  # over torch eager, replayed from CUDA graphs
    "above_kernel_us": ("above_kernel_us", False),  # launch_overhead: per call - kernel
}
CELL_FIELDS = ("op", "dtype", "shape", "precision")
DTYPES = ("bfloat16", "float16", "float32")
PRECISIONS = ("tf32", "ieee")


class GoalsError(ValueError):
    """A goals or results file that cannot be read; the message names the file and field."""


@dataclass(frozen=True)
class Goal:
    """One cell's goal for one metric. ``metric`` is a key of METRICS or "best_library";
    ``shape`` and ``precision`` empty match every record of the op and dtype."""
    op: str
    dtype: str
    shape: str
    precision: str
    metric: str
    bound: float | None  # None for best_library


@dataclass(frozen=True)
class Verdict:
    goal: Goal
    status: str          # "met", "short" or "not measured"
    measured: float | None
    target: float | None  # the bound, or the best library's value
    detail: str          # the record's shape/precision, the library named, why not measured
    source: str          # the results file read, "" where none measured the cell


def _strings(value, where: str, choices=None) -> list[str]:
    """A string or a non-empty list of strings, each in ``choices`` if given."""
    values = [value] if isinstance(value, str) else value
    if not (isinstance(values, list) and values and all(isinstance(v, str) for v in values)):
        raise GoalsError(f"{where}: expected a string or a non-empty list of strings, "
                         f"got {value!r}")
    for v in values:
        if choices is not None and v not in choices:
            raise GoalsError(f"{where}: unknown value {v!r}; expected one of "
                             f"{', '.join(choices)}")
    return values


def _shape(value: str, where: str) -> str:
    parts = value.split("x")
    if not all(p.isdigit() and int(p) > 0 for p in parts[:2]) or len(parts) < 2:
        raise GoalsError(f"{where}: expected a shape as the results write it "
                         f"('32768x1024'), got {value!r}")
    return value


def parse_goals(data: dict, source: str, ops) -> list[Goal]:
    """The goals of a parsed goals file, each table expanded over its lists of ops,
    dtypes and shapes."""
    tables = data.get("goal")
    extra = set(data) - {"goal"}
    if extra:
        raise GoalsError(f"{source}: unknown top-level key {sorted(extra)[0]!r}; "
                         "expected [[goal]] tables only")
    if not (isinstance(tables, list) and tables and all(isinstance(t, dict) for t in tables)):
        raise GoalsError(f"{source}: goal: expected a non-empty list of [[goal]] tables")
    goals = []
    for i, table in enumerate(tables):
        where = f"{source}: goal[{i}]"
        unknown = set(table) - {*CELL_FIELDS, *METRICS, "best_library"}
        if unknown:
            raise GoalsError(f"{where}.{sorted(unknown)[0]}: unknown field; expected "
                             f"{', '.join((*CELL_FIELDS, *METRICS, 'best_library'))}")
        for field in ("op", "dtype"):
            if field not in table:
                raise GoalsError(f"{where}.{field}: missing")
        op_names = _strings(table["op"], f"{where}.op", ops)
        dtypes = _strings(table["dtype"], f"{where}.dtype", DTYPES)
        shapes = [_shape(s, f"{where}.shape") for s in _strings(table["shape"],
                                                                  f"{where}.shape")] \
            if "shape" in table else [""]
        precision = table.get("precision", "")
        if precision:
            _strings(precision, f"{where}.precision", PRECISIONS)
            if not isinstance(precision, str):
                raise GoalsError(f"{where}.precision: expected one string")
        metrics = []
        for name in METRICS:
            if name in table:
                bound = table[name]
                if isinstance(bound, bool) or not isinstance(bound, (int, float)) \
                        or not math.isfinite(bound) or bound < 0:
                    raise GoalsError(f"{where}.{name}: expected a non-negative number, "
                                     f"got {bound!r}")
                metrics.append((name, float(bound)))
        if "best_library" in table:
            if not isinstance(table["best_library"], bool):
                raise GoalsError(f"{where}.best_library: expected true or false, "
                                 f"got {table['best_library']!r}")
            if table["best_library"]:
                metrics.append(("best_library", None))
        if not metrics:
            raise GoalsError(f"{where}: no metric; expected at least one of "
                             f"{', '.join((*METRICS, 'best_library'))}")
        for op, dtype, shape, (metric, bound) in itertools.product(op_names, dtypes, shapes,
                                                                   metrics):
            goals.append(Goal(op, dtype, shape, precision, metric, bound))
    return goals


def _read(path, kind: str, parse, error, format_name: str):
    """``parse`` of the text of ``path``, a goals or results file (``kind``); a missing
    file or one ``parse`` refuses with ``error`` is a GoalsError naming it."""
    try:
        return parse(Path(path).read_text())
    except FileNotFoundError:
        raise GoalsError(f"{path}: no such {kind} file") from None
    except error as exc:
        raise GoalsError(f"{path}: not {format_name}: {exc}") from None


def load_goals(path: Path = GOALS_FILE) -> list[Goal]:
    from benchmarks import all_ops
    data = _read(path, "goals", tomllib.loads, tomllib.TOMLDecodeError, "valid TOML")
    return parse_goals(data, str(path), all_ops())


def load_results(path) -> list[dict]:
    """The records of one results file (``{"environment": ..., "results": [...]}``);
    ``FILE.json:KEY`` reads such a run kept under ``KEY`` of a file that holds several."""
    file, key = str(path), ""
    head, _, tail = file.rpartition(":")
    if head and tail.isidentifier() and not Path(file).exists():
        file, key = head, tail
    data = _read(file, "results", json.loads, json.JSONDecodeError, "JSON")
    if key:
        if not (isinstance(data, dict) and key in data):
            held = ", ".join(map(repr, data)) if isinstance(data, dict) else "no keys"
            raise GoalsError(f"{file}: no key {key!r}; the file holds {held}")
        data = data[key]
    records = data.get("results") if isinstance(data, dict) else None
    if not (isinstance(records, list) and all(isinstance(r, dict) for r in records)):
        raise GoalsError(f"{path}: not a results file of python -m benchmarks or "
                         "benchmarks.launch_overhead (expected {\"environment\": ..., "
                         "\"results\": [records]})")
    for i, rec in enumerate(records):
        for field in ("op", "dtype", "shape"):
            if not isinstance(rec.get(field), str):
                raise GoalsError(f"{path}: results[{i}].{field}: expected a string")
    return records


def load_history(path) -> list[tuple[str, list[dict]]]:
    """(source, records) of each benchmark or launch-overhead run a results history holds,
    oldest first; ``HISTORY.jsonl:EXPERIMENT`` keeps that experiment's runs only."""
    from benchmarks.history import HistoryError, experiments, read_history, results_records
    file, _, experiment = str(path).partition(".jsonl")
    file += ".jsonl"
    experiment = experiment.removeprefix(":")
    try:
        rows = read_history(file)
    except HistoryError as exc:
        raise GoalsError(str(exc)) from None
    names = experiments(rows)
    if experiment and experiment not in names:
        raise GoalsError(f"{file}: no experiment {experiment!r}; "
                         "python -m benchmarks.history experiments lists them")
    runs = []
    for name in [experiment] if experiment else names:
        mine = [r for r in rows if r["experiment"] == name]
        for run in dict.fromkeys(r["run"] for r in mine):
            records = results_records([r for r in mine if r["run"] == run])
            if records:
                runs.append((f"{file}:{name}" + (f" ({run})" if run else ""), records))
    return runs


def load_sources(path) -> list[tuple[str, list[dict]]]:
    """(source, records) of a results file, or of each run of a results history."""
    if ".jsonl" in str(path):
        return load_history(path)
    return [(str(path), load_results(path))]


def _matches(goal: Goal, rec: dict) -> bool:
    return (rec["op"] == goal.op and rec["dtype"] == goal.dtype
            and (not goal.shape or rec["shape"] == goal.shape)
            and (not goal.precision or rec.get("precision", "") == goal.precision))


def _library_field(rec: dict) -> str:
    """The field ours and the libraries are compared on: % of copy for a memory-bound
    record, TFLOP/s for a compute-bound one."""
    return "pct_copy" if "pct_copy" in rec else "tflops"


def _value(rec: dict, metric: str) -> float | None:
    """The record's value of ``metric`` (for best_library: the value libraries are
    compared on), None where the record does not measure it."""
    field = _library_field(rec) if metric == "best_library" else METRICS[metric][0]
    value = rec.get(field)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _best_library(rec: dict) -> tuple[str, float] | None:
    """(name, value) of the fastest library on the record's cell, by the field ours is
    compared on; None where no library has a number there."""
    field = _library_field(rec)
    timed = [(name, lib[field]) for name, lib in (rec.get("libraries") or {}).items()
             if isinstance(lib, dict) and isinstance(lib.get(field), (int, float))
             and math.isfinite(lib[field])]
    return max(timed, key=lambda t: t[1]) if timed else None


def _measures(rec: dict, metric: str) -> bool:
    """Whether ``rec`` measured ``metric``: a best-library goal needs ours and at least
    one library timed in the same run."""
    return _value(rec, metric) is not None and (metric != "best_library"
                                                or _best_library(rec) is not None)


def _label(rec: dict) -> str:
    return " ".join(filter(None, (rec["shape"], rec.get("precision", ""))))


def evaluate(goals: list[Goal], results: list[tuple[str, list[dict]]]) -> list[Verdict]:
    """A verdict per goal and matching record of the last file (in ``results``' order)
    that measures the goal's metric on its cell (for a best-library goal: ours and a
    library in the same run); one "not measured" verdict where none does."""
    verdicts = []
    for goal in goals:
        source, recs = "", []
        for name, records in reversed(results):
            recs = [r for r in records if _matches(goal, r) and _measures(r, goal.metric)]
            if recs:
                source = name
                break
        if not recs:
            why = "no results file timed a library on this cell" \
                if goal.metric == "best_library" else "no results file has this cell"
            verdicts.append(Verdict(goal, "not measured", None, goal.bound, why, ""))
            continue
        for rec in recs:
            value = _value(rec, goal.metric)
            if goal.metric == "best_library":
                name, target = _best_library(rec)
                detail, at_least = f"{_label(rec)}: {name}", True
            else:
                target, detail, at_least = goal.bound, _label(rec), METRICS[goal.metric][1]
            met = value >= target if at_least else value <= target
            verdicts.append(Verdict(goal, "met" if met else "short", value, target, detail,
                                    source))
    return verdicts


def _goal_text(v: Verdict) -> str:
    if v.goal.metric == "best_library":
        return ">= best library" + (f" ({v.target:.1f})" if v.target is not None else "")
    sign = ">=" if METRICS[v.goal.metric][1] else "<="
    return f"{v.goal.metric} {sign} {v.goal.bound:g}"


def table_rows(verdicts: list[Verdict]) -> list[list[str]]:
    rows = []
    for v in verdicts:
        status = v.status
        if v.status == "short":
            status = f"short by {abs(v.measured - v.target):.2f}"
        rows.append([v.goal.op, v.goal.dtype, v.detail, _goal_text(v),
                     "" if v.measured is None else f"{v.measured:.2f}", status, v.source])
    return rows


def summary(verdicts: list[Verdict]) -> str:
    counts = {s: sum(v.status == s for v in verdicts) for s in ("met", "short",
                                                                 "not measured")}
    return ", ".join(f"{n} {s}" for s, n in counts.items())


def main(argv=None) -> int:
    from tabulate import tabulate
    parser = argparse.ArgumentParser(prog="python -m benchmarks.goals",
                                     description=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+",
                        help="results JSON files or histories (.jsonl), oldest first")
    parser.add_argument("--goals", default=str(GOALS_FILE),
                        help="goals file (default: benchmarks/goals.toml)")
    args = parser.parse_args(argv)
    try:
        goals = load_goals(Path(args.goals))
        results = [run for name in args.results for run in load_sources(name)]
    except GoalsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    verdicts = evaluate(goals, results)
    print(tabulate(table_rows(verdicts),
                   headers=["op", "dtype", "cell", "goal", "measured", "status", "from"]))
    print(summary(verdicts))
    return 0 if all(v.status == "met" for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
