"""``python -m reports COMMAND``: merge shards, render HTML, diff two runs, print the
summary matrix. Exit status: 0 ok, 1 does not conform / regressed / the run was
interrupted or is incomplete (merge and html write their output first), 2 bad input (and
an incomplete shard set without --allow-partial)."""
from __future__ import annotations

import argparse
import os
import sys
from collections import Counter

from tabulate import tabulate

from reports.diff import diff
from reports.merge import merge
from triton_cts.results import behaviour, input_coverage
from triton_cts.results.expectations import known_lines, known_waived
from triton_cts.results.records import conforms, outcome, run_problems, summary_table, verdict
from triton_cts.results.report_io import (ReportError, atomic_write, dump_report, load_report,
                                          unwritable)


def _bad_evidence(doc: dict) -> bool:
    """The run was interrupted, or the report is an incomplete merge."""
    return outcome(doc["records"], doc.get("run")) in ("interrupted", "incomplete")


def _print_problems(doc: dict, out=sys.stdout, limit: int = 20) -> None:
    run = doc.get("run") or {}
    for problem in run_problems(doc["records"], run):
        print(problem, file=out)
    not_run = run.get("not_run") or []
    if run.get("interrupted") and not_run:
        print(f"never ran ({len(not_run)}):", file=out)
        for tid in not_run[:limit]:
            print(f"  {tid}", file=out)
        if len(not_run) > limit:
            print(f"  ... and {len(not_run) - limit} more", file=out)


def _writable(option: str, path: str) -> None:
    """Refuse an output path that cannot be written before any work is done."""
    why = unwritable(path)
    if why:
        raise ReportError(f"{option} {path}: cannot be written: {why}")


def cmd_merge(args) -> int:
    _writable("-o", args.output)
    docs = [(path, load_report(path, any_version=args.force)) for path in args.shards]
    doc = merge(docs, force=args.force, allow_partial=args.allow_partial)
    dump_report(doc, args.output)
    print(f"merged {len(docs)} shard(s), {len(doc['records'])} records -> {args.output}")
    _print_problems(doc)
    print(verdict(doc["records"], doc.get("run")))
    return 1 if _bad_evidence(doc) else 0


def cmd_html(args) -> int:
    from reports.html import render

    _writable("-o", args.output)
    doc = load_report(args.report)
    atomic_write(args.output, render(doc))
    print(f"{len(doc['records'])} records -> {args.output}")
    if _bad_evidence(doc):
        print(verdict(doc["records"], doc.get("run")))
        return 1
    return 0


def cmd_summary(args) -> int:
    doc = load_report(args.report)
    print(summary_table(doc["records"], tablefmt=args.format))
    for tid in (doc.get("expectations") or {}).get("unexpected_passes", []):
        print(f"unexpected pass (remove its expectation entry): {tid}")
    for msg in (doc.get("expectations") or {}).get("stale", []):
        print(f"stale {msg}")
    for line in known_lines((doc.get("expectations") or {}).get("known")
                            or known_waived(doc["records"])):
        print(line)
    for line in input_coverage.summary_lines(input_coverage.of(doc)):
        print(line)
    _print_problems(doc)
    print(verdict(doc["records"], doc.get("run")))
    return 0 if conforms(doc["records"], doc.get("run")) else 1


def _ratio(d, tid) -> str:
    r = d.ratios.get(tid)
    return "-" if r is None else "inf" if r == float("inf") else f"{r:.3g}x"


def cmd_diff(args) -> int:
    old, new = load_report(args.old), load_report(args.new)
    shared = {r["test_id"] for r in old["records"]} & {r["test_id"] for r in new["records"]}
    if old["records"] and new["records"] and not shared:
        raise ReportError(f"diff: {args.old} ({len(old['records'])} checks) and {args.new} "
                          f"({len(new['records'])} checks) share no check: they are runs of "
                          f"unrelated selections, so there is nothing to compare")
    d = diff(old, new, allow_removed=args.allow_removed)
    if d.new_failures:
        print(f"new failures, most out of bounds first ({len(d.new_failures)}):")
        print(tabulate([(t, a or "-", b, _ratio(d, t)) for t, a, b in d.new_failures],
                       headers=["test id", "old", "new", "error/bound"]))
        print()
    if d.selection_changed:
        print("selection changed: " + "; ".join(d.selection_changed))
        print()
    sections = [("fixes", d.fixes, "new"), ("other status changes", d.changed, "new"),
                ("new checks", d.added, "new"),
                ("checks no longer run: a regression (pass --allow-removed if the selection "
                 "changed on purpose)", d.removed, "new"),
                ("checks no longer run, left out by the new selection", d.removed_accepted, "why")]
    for title, rows, last in sections:
        if rows:
            print(f"{title} ({len(rows)}):")
            print(tabulate([(t, a or "-", b or "-") for t, a, b in rows],
                           headers=["test id", "old", last]))
            print()
    if d.compile_regressions:
        print(f"compile-stat regressions ({len(d.compile_regressions)}):")
        print(tabulate(d.compile_regressions, headers=["test id", "kernel", "stat", "old", "new"]))
        print()
    changes = behaviour.diff(old, new)
    if changes:  # implementation-defined results: data, never a regression
        print(f"behaviour differences, not failures ({len(changes)}):")
        print("\n".join(behaviour.format_diff(changes)))
        print()
    if d.toolchain_changed:
        print("toolchain changed: " + "; ".join(d.toolchain_changed))
        print()
    if d.codegen_changes:  # one row per compiled kernel: its stats that changed
        kernels: dict = {}
        for tid, kernel, stat, was, now in d.codegen_changes:
            kernels.setdefault((tid, kernel), []).append(f"{stat} {was} -> {now}")
        print(f"codegen changes, better or worse ({len(d.codegen_changes)} in "
              f"{len(kernels)} compiled kernels):")
        print(tabulate([(t, k, "; ".join(c)) for (t, k), c in kernels.items()],
                       headers=["test id", "kernel", "changes"]))
        print()
    by_suite = Counter(t.split("::")[0] for t, *_ in d.new_failures + d.fixes + d.changed)
    if by_suite:
        print("status changes by suite: " + ", ".join(f"{s} {n}" for s, n in sorted(by_suite.items())))
    for problem in d.new_run_problems:
        print(f"new run: {problem}")
    print(f"{len(d.new_failures)} new failure(s), {len(d.fixes)} fix(es), "
          f"{len(d.changed)} other status change(s), "
          f"{len(d.removed)} check(s) no longer run, "
          f"{len(d.compile_regressions)} compile-stat regression(s), "
          f"{len(d.codegen_changes)} codegen change(s)"
          + (f"; the new run: {verdict(new['records'], new.get('run'))}" if d.new_run_problems
             else ""))
    return 1 if d.regressed else 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m reports", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("merge", help="join shard JSON reports into one")
    m.add_argument("shards", nargs="+", metavar="SHARD.json")
    m.add_argument("-o", "--output", required=True, metavar="OUT.json")
    m.add_argument("--force", action="store_true",
                   help="merge even if triton/torch or schema versions differ, or test ids repeat")
    m.add_argument("--allow-partial", action="store_true",
                   help="merge an incomplete shard set (a shard missing, shards of different "
                        "selections) into a report marked incomplete: it never conforms")
    m.set_defaults(run=cmd_merge)
    h = sub.add_parser("html", help="render a JSON report as one self-contained HTML file")
    h.add_argument("report", metavar="IN.json")
    h.add_argument("-o", "--output", required=True, metavar="OUT.html")
    h.set_defaults(run=cmd_html)
    d = sub.add_parser("diff", help="list transitions from OLD to NEW (exit 1 on regressions)")
    d.add_argument("old", metavar="OLD.json")
    d.add_argument("new", metavar="NEW.json")
    d.add_argument("--allow-removed", action="store_true",
                   help="checks of OLD that NEW did not run are not a regression (the "
                        "selection changed on purpose)")
    d.set_defaults(run=cmd_diff)
    s = sub.add_parser("summary", help="print the op x profile matrix and the verdict")
    s.add_argument("report", metavar="IN.json")
    s.add_argument("--format", default="simple", type=_table_format,
                   help="tabulate table format: simple (default), github, grid, ...")
    s.set_defaults(run=cmd_summary)
    from reports.scoreboard import add_subcommand  # scoreboard RUN.json ... -o DIR
    add_subcommand(sub)
    return p


def _table_format(name: str) -> str:
    from tabulate import tabulate_formats

    if name not in tabulate_formats:
        raise argparse.ArgumentTypeError(f"{name!r} is not a table format (one of: "
                                         f"{', '.join(sorted(tabulate_formats))})")
    return name


class _PipeSafe:
    """stdout that drops what it cannot write once its reader has gone (``| head``): the
    command ends with its own exit status, without a traceback or an error line."""

    def __init__(self, stream):
        self.stream, self.gone = stream, False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                self.stream.write(text)
            except BrokenPipeError:
                self._reader_gone()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._reader_gone()

    def _reader_gone(self) -> None:
        self.gone = True
        try:  # the interpreter's last flush at exit must not fail again
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.stream.fileno())
        except (OSError, ValueError):
            pass

    def __getattr__(self, name):
        return getattr(self.stream, name)


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    out = sys.stdout = _PipeSafe(sys.stdout)
    try:
        return args.run(args)
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    finally:
        out.flush()
        sys.stdout = out.stream


if __name__ == "__main__":
    sys.exit(main())
