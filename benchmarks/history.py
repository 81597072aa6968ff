"""python -m benchmarks.history append RUN.json --experiment NAME [--commit SHA] [--date DAY]
python -m benchmarks.history experiments [HISTORY.jsonl]

The results history: one JSON Lines table per device (``benchmarks/results/h200.jsonl``,
``h100.jsonl``), one measurement per line. ``append`` folds a run written by
``python -m benchmarks --json``, ``python -m benchmarks.sweep --json`` or
``python -m benchmarks.launch_overhead --json`` into the table of the device it ran on,
with the run's date, GPU, Triton, torch and commit; ``experiments`` lists what a table
holds, oldest first. ``benchmarks/results/README.md`` describes the columns."""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

RESULTS_DIR = Path(__file__).with_name("results")

#: The columns of every line, in order, and the types each may hold (None: JSON null).
COLUMNS = {
    "date": (str,),          # YYYY-MM-DD the run was recorded
    "gpu": (str,),           # the device's name as torch reports it
    "triton": (str, None),
    "torch": (str, None),
    "commit": (str, None),   # the tree measured, where the run says
    "experiment": (str,),    # the run's name; several runs of one experiment share it
    "kind": (str,),          # see KINDS
    "run": (str, None),      # which run or round of the experiment
    "op": (str,),
    "dtype": (str, None),
    "shape": (str, None),
    "impl": (str,),          # "ours", "torch" or a library's name
    "precision": (str, None),  # float32 matmul: "tf32" or "ieee"
    "setting": (str, None),  # a sweep's settings or a variant's name; null: the profile's
    "metric": (str,),
    "value": (float, None),  # a finite number; null for a text note, an error, a refusal
    "note": (str, None),
}
#: benchmark: python -m benchmarks; launch_overhead, sweep: those modules; other: a
#: measurement made by a one-off script or kept from a page (its note says how).
KINDS = ("benchmark", "launch_overhead", "sweep", "other")
#: Fields of a results record that name its cell rather than measure it.
CELL_FIELDS = ("op", "dtype", "shape", "precision", "setting", "torch_precision", "bench",
               "paired_with_torch", "libraries")


class HistoryError(ValueError):
    """A history line or run file that cannot be read; the message names file, line and
    column."""


def device_file(gpu: str, results_dir: Path = RESULTS_DIR) -> Path:
    """The table of the GPU named ``gpu`` ("NVIDIA H200" -> results/h200.jsonl)."""
    found = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b", gpu)
    if not found:
        raise HistoryError(f"cannot tell a device table from the GPU name {gpu!r}; "
                           "name the table with --history")
    return results_dir / f"{found.group(1).lower()}.jsonl"


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _setting(value) -> str | None:
    if isinstance(value, dict):
        return ", ".join(f"{k}={json.dumps(v)}" for k, v in value.items()) or None
    return str(value) if value not in (None, "") else None


def record_rows(rec: dict, base: dict, impl: str = "ours") -> list[dict]:
    """The history rows of one results record (and of the libraries timed beside it):
    one row per numeric field; an error or refusal is a row with a null value."""
    cell = dict(base, op=rec["op"], dtype=rec.get("dtype"), shape=rec.get("shape"),
                impl=impl, precision=rec.get("precision") or None,
                setting=_setting(rec.get("setting")))
    note = "paired with torch" if rec.get("paired_with_torch") else None
    rows = []
    for field, value in rec.items():
        if field in CELL_FIELDS:
            continue
        if field in ("error", "refused"):
            rows.append(dict(cell, metric=field, value=None, note=str(value)))
        elif _number(value) is not None:
            rows.append(dict(cell, metric=field, value=_number(value), note=note))
        elif isinstance(value, float):  # NaN or inf: not measured, said so
            rows.append(dict(cell, metric=field, value=None, note=f"not measured ({value})"))
        else:
            raise HistoryError(f"record {rec['op']} {rec.get('shape')}: field {field!r} "
                               f"holds {value!r}, not a number")
    for name, lib in (rec.get("libraries") or {}).items():
        rows += record_rows({**lib, "op": rec["op"], "dtype": rec.get("dtype"),
                             "shape": rec.get("shape"), "precision": rec.get("precision"),
                             "setting": rec.get("setting")}, base, impl=name)
    return rows


def run_rows(data: dict, *, experiment: str, date: str, commit: str | None,
             run: str | None = None, source: str = "run") -> list[dict]:
    """The history rows of a run file of ``python -m benchmarks``, ``benchmarks.sweep``
    or ``benchmarks.launch_overhead`` (parsed JSON)."""
    records = data.get("results") if isinstance(data, dict) else None
    if not (isinstance(records, list) and all(isinstance(r, dict) and isinstance(
            r.get("op"), str) for r in records)):
        raise HistoryError(f"{source}: not a run of python -m benchmarks, benchmarks.sweep "
                           "or benchmarks.launch_overhead (expected \"results\": [records "
                           "with an op])")
    env = data.get("environment", data)
    gpu = env.get("device")
    if not isinstance(gpu, str):
        raise HistoryError(f"{source}: the run does not name its device "
                           "(environment.device)")
    if "environment" not in data:
        kind = "sweep"
    elif any("ours_us" in r for r in records):
        kind = "launch_overhead"
    else:
        kind = "benchmark"
    base = {"date": date, "gpu": gpu, "triton": env.get("triton"), "torch": env.get("torch"),
            "commit": commit, "experiment": experiment, "kind": kind, "run": run}
    rows = []
    for field in ("copy_gbs", "library_copy_gbs"):
        if _number(env.get(field)) is not None:
            rows.append(dict(base, op="copy", dtype=None, shape=None, impl="torch",
                             precision=None, setting=None, metric=field,
                             value=_number(env[field]), note=None))
    for rec in records:
        rows += record_rows(rec, base)
    return [{c: row.get(c) for c in COLUMNS} for row in rows]


def check_row(row, where: str) -> dict:
    """``row`` if it has every column with a value of its type; a HistoryError naming
    ``where`` and the column otherwise."""
    if not isinstance(row, dict):
        raise HistoryError(f"{where}: expected a JSON object, got {type(row).__name__}")
    missing = [c for c in COLUMNS if c not in row]
    extra = sorted(set(row) - set(COLUMNS))
    if missing or extra:
        raise HistoryError(f"{where}: " + (f"missing column {missing[0]!r}" if missing
                                           else f"unknown column {extra[0]!r}"))
    for column, types in COLUMNS.items():
        value = row[column]
        if value is None and None in types:
            continue
        if column == "value":
            if _number(value) is None:
                raise HistoryError(f"{where}: value: expected a finite number or null, "
                                   f"got {value!r}")
        elif not isinstance(value, types[0]):
            raise HistoryError(f"{where}: {column}: expected {types[0].__name__}"
                               f"{' or null' if None in types else ''}, got {value!r}")
    if row["kind"] not in KINDS:
        raise HistoryError(f"{where}: kind: unknown {row['kind']!r}; expected one of "
                           f"{', '.join(KINDS)}")
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", row["date"]):
        raise HistoryError(f"{where}: date: expected YYYY-MM-DD, got {row['date']!r}")
    return row


def read_history(path) -> list[dict]:
    """Every row of a history table, in file order, each checked by ``check_row``."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise HistoryError(f"{path}: no such history file") from None
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise HistoryError(f"{path}:{number}: not JSON: {exc}") from None
        rows.append(check_row(row, f"{path}:{number}"))
    return rows


def experiments(rows: list[dict]) -> list[str]:
    """The experiments of ``rows``, oldest first (by date, then by order in the file)."""
    first = {}
    for i, row in enumerate(rows):
        first.setdefault(row["experiment"], (row["date"], i))
    return sorted(first, key=first.get)


def results_records(rows: list[dict]) -> list[dict]:
    """The results records (as ``python -m benchmarks`` and ``benchmarks.launch_overhead``
    write them) that ``rows`` of benchmark and launch-overhead runs hold, libraries
    nested under ``libraries``; sweeps and other rows are not such records."""
    records = {}
    for row in rows:
        if row["kind"] not in ("benchmark", "launch_overhead") or row["op"] == "copy":
            continue
        key = (row["run"], row["op"], row["dtype"], row["shape"], row["precision"],
               row["setting"])
        rec = records.setdefault(key, {"op": row["op"], "dtype": row["dtype"],
                                       "shape": row["shape"]})
        if row["precision"]:
            rec["precision"] = row["precision"]
        target = rec if row["impl"] == "ours" else \
            rec.setdefault("libraries", {}).setdefault(row["impl"], {})
        target[row["metric"]] = row["value"] if row["value"] is not None else row["note"]
    return list(records.values())


def _git(*args) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=Path(__file__).parent, capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.strip()


def current_commit() -> str | None:
    """The checkout's short HEAD, "+dirty" where tracked files differ from it; None
    outside a git checkout."""
    head = _git("rev-parse", "--short", "HEAD")
    if head and _git("status", "--porcelain", "--untracked-files=no"):
        head += "+dirty"
    return head


def append(run_file, experiment: str, *, commit: str | None, date: str,
           history: Path | None = None, run: str | None = None) -> tuple[Path, int]:
    """Append the rows of ``run_file`` to ``history`` (default: its device's table);
    (the table, rows written). A run (experiment and ``run``) already in the table is
    refused: a second run of an experiment names itself with ``run``."""
    try:
        data = json.loads(Path(run_file).read_text())
    except FileNotFoundError:
        raise HistoryError(f"{run_file}: no such run file") from None
    except json.JSONDecodeError as exc:
        raise HistoryError(f"{run_file}: not JSON: {exc}") from None
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", experiment):
        raise HistoryError(f"experiment {experiment!r}: expected letters, digits, '-', "
                           "'_', '.' or '+' (it names the run in FILE.jsonl:EXPERIMENT)")
    rows = run_rows(data, experiment=experiment, date=date, commit=commit, run=run,
                    source=str(run_file))
    if not rows:
        raise HistoryError(f"{run_file}: the run holds no results")
    table = history or device_file(rows[0]["gpu"])
    if table.exists() and any(r["experiment"] == experiment and r["run"] == run
                              for r in read_history(table)):
        held = f"experiment {experiment!r}" + (f" run {run!r}" if run else "")
        raise HistoryError(f"{table}: already holds {held}; name the new run differently "
                           "(--run, or another --experiment)")
    with open(table, "a") as fh:
        for row in rows:
            fh.write(json.dumps(check_row(row, str(run_file)), allow_nan=False) + "\n")
    return table, len(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.history",
                                     description=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    add = sub.add_parser("append", help="fold a run file into its device's table")
    add.add_argument("run_file", help="JSON written by --json of a benchmark")
    add.add_argument("--experiment", required=True, help="the run's name in the table")
    add.add_argument("--commit", help="the tree measured (default: this checkout's HEAD)")
    add.add_argument("--date", help="YYYY-MM-DD (default: today, UTC)")
    add.add_argument("--run", help="which run or round of the experiment this is")
    add.add_argument("--history", type=Path, help="the table (default: by the run's GPU)")
    show = sub.add_parser("experiments", help="list the experiments of a table")
    show.add_argument("history", nargs="?", type=Path, default=RESULTS_DIR / "h200.jsonl")
    args = parser.parse_args(argv)
    try:
        if args.command == "append":
            date = args.date or datetime.datetime.now(datetime.timezone.utc).date().isoformat()
            table, n = append(args.run_file, args.experiment, date=date, run=args.run,
                              commit=args.commit or current_commit(), history=args.history)
            print(f"{table}: {n} rows of experiment {args.experiment!r} appended")
        else:
            rows = read_history(args.history)
            for name in experiments(rows):
                mine = [r for r in rows if r["experiment"] == name]
                print(f"{mine[0]['date']}  {name}  ({mine[0]['kind']}, {len(mine)} rows)")
    except HistoryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the listing piped into head: what was read is enough
        sys.stdout = open(os.devnull, "w")
    return 0


if __name__ == "__main__":
    sys.exit(main())
