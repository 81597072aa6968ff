"""``python -m reports COMMAND``: merge shards, render HTML, diff two runs, print the
summary matrix. Exit status: 0 ok, 1 does not conform / regressed, 2 bad input."""
from __future__ import annotations

import argparse
import sys

from tabulate import tabulate

from reports.diff import diff
from reports.merge import merge
from triton_cts.results.records import conforms, summary_table, verdict
from triton_cts.results.report_io import ReportError, atomic_write, dump_report, load_report


def cmd_merge(args) -> int:
    docs = [(path, load_report(path, any_version=args.force)) for path in args.shards]
    doc = merge(docs, force=args.force)
    dump_report(doc, args.output)
    print(f"merged {len(docs)} shard(s), {len(doc['records'])} records -> {args.output}")
    print(verdict(doc["records"]))
    return 0


def cmd_html(args) -> int:
    from reports.html import render

    doc = load_report(args.report)
    atomic_write(args.output, render(doc))
    print(f"{len(doc['records'])} records -> {args.output}")
    return 0


def cmd_summary(args) -> int:
    doc = load_report(args.report)
    print(summary_table(doc["records"], tablefmt=args.format))
    for tid in (doc.get("expectations") or {}).get("unexpected_passes", []):
        print(f"unexpected pass (remove its expectation entry): {tid}")
    for msg in (doc.get("expectations") or {}).get("stale", []):
        print(f"stale {msg}")
    print(verdict(doc["records"]))
    return 0 if conforms(doc["records"]) else 1


def cmd_diff(args) -> int:
    old, new = load_report(args.old), load_report(args.new)
    d = diff(old, new)
    sections = [("new failures", d.new_failures), ("fixes", d.fixes),
                ("other status changes", d.changed), ("new checks", d.added),
                ("checks no longer run", d.removed)]
    for title, rows in sections:
        if rows:
            print(f"{title} ({len(rows)}):")
            print(tabulate([(t, a or "-", b or "-") for t, a, b in rows],
                           headers=["test id", "old", "new"]))
            print()
    if d.compile_regressions:
        print(f"compile-stat regressions ({len(d.compile_regressions)}):")
        print(tabulate(d.compile_regressions, headers=["test id", "kernel", "stat", "old", "new"]))
        print()
    print(f"{len(d.new_failures)} new failure(s), {len(d.fixes)} fix(es), "
          f"{len(d.compile_regressions)} compile-stat regression(s)")
    return 1 if d.regressed else 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m reports", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("merge", help="join shard JSON reports into one")
    m.add_argument("shards", nargs="+", metavar="SHARD.json")
    m.add_argument("-o", "--output", required=True, metavar="OUT.json")
    m.add_argument("--force", action="store_true",
                   help="merge even if triton/torch or schema versions differ, or test ids repeat")
    m.set_defaults(run=cmd_merge)
    h = sub.add_parser("html", help="render a JSON report as one self-contained HTML file")
    h.add_argument("report", metavar="IN.json")
    h.add_argument("-o", "--output", required=True, metavar="OUT.html")
    h.set_defaults(run=cmd_html)
    d = sub.add_parser("diff", help="list transitions from OLD to NEW (exit 1 on regressions)")
    d.add_argument("old", metavar="OLD.json")
    d.add_argument("new", metavar="NEW.json")
    d.set_defaults(run=cmd_diff)
    s = sub.add_parser("summary", help="print the op x profile matrix and the verdict")
    s.add_argument("report", metavar="IN.json")
    s.add_argument("--format", default="simple", help="tabulate table format (default simple)")
    s.set_defaults(run=cmd_summary)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {exc.filename or ''}: {exc.strerror}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
