"""A portability scoreboard over many runs (``python -m reports scoreboard RUN.json ... -o
DIR``): one self-contained page, ``DIR/index.html``, with

- per target (profile) x mode x Triton version (x torch version where they differ) and
  run: the checks that ran, the pass rate of those, the counts by status, the known
  defects waived, the run's date and commit;
- per op x target: the status it reads as (status.reads_as), the failing dtypes and a
  link to the run's own report;
- between the Triton versions of one target: what changed (new failures, fixes, other
  status changes, compile-stat regressions, behaviour differences), from
  :func:`reports.diff.diff` and :func:`triton_cts.results.behaviour.diff`;
- the findings (``FINDINGS.md`` ids, ``F24``) that explain failures, named by the reason,
  link or finding of the expectation entry that waived a check, of an entry of the shipped
  known-defect files of the run's Triton version (``expectations/triton-X.Y/FAMILY.toml``)
  or of an expectation file given with ``--expectations`` (these name findings, they never
  change a status);
- a trend of the pass rate and the failures per target over the runs given.

Shards of one run (the same selection, Triton, torch, device and commit) are merged
first by :func:`reports.merge.merge`, which refuses an incomplete set. Two runs of a
target are compared only when they have the same schema version, the same selection
(``reports.selection``) and the same op set; the page says which runs could not be
compared and why, and lists every run it was built from."""
from __future__ import annotations

import base64
import hashlib
import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import jinja2

from reports.diff import diff
from reports.html import COLOURS
from reports.merge import merge
from reports.selection import normalized_command, selection_changes, selection_key
from triton_cts import CHECKOUT
from triton_cts.results import behaviour
from triton_cts.results.expectations import (Expectation, known_defect_files, load_expectations,
                                             match_expectation)
from triton_cts.results.records import ran, run_problems
from triton_cts.results.report_io import ReportError, atomic_write, load_report
from triton_cts.results.status import Status, reads_as

TEMPLATES = Path(__file__).parent / "templates"
#: The project's findings, whose ids (F1, F24, ...) expectation entries name.
FINDINGS = Path(__file__).parent / "published" / "FINDINGS.md"
#: A finding named in an expectation entry's reason or link: "F24", "FINDINGS.md#f24".
FINDING_ID = re.compile(r"\bF(\d+)\b|FINDINGS\.md#f(\d+)\b", re.I)
#: A row of the findings table: "| F24 | triton 3.6.0 | `tl.topk` | input | what | ..."
FINDING_ROW = re.compile(r"^\|\s*(F\d+)\s*\|([^|]*)\|([^|]*)\|([^|]*)\|([^|]*)\|", re.M)
#: Statuses counted as a failure in the trend: every status that does not conform.
FAILING = [s for s in Status if not s.conforms]


@dataclass
class Run:
    """One run: a whole report, or the merge of its shards."""

    name: str                   # the file, or "a + b" for merged shards
    files: list[str]
    doc: dict
    report: str | None = None   # the run's own HTML report, when known
    index: int = 0

    @property
    def env(self) -> dict:
        return self.doc["environment"]

    @property
    def started(self) -> str:
        return self.env.get("started") or self.env.get("finished") or ""


@dataclass
class Slice:
    """The records of one run for one target and mode."""

    run: Run
    target: str
    mode: str
    doc: dict                   # the run's document, restricted to this target and mode
    counts: Counter = field(default_factory=Counter)
    findings: list = field(default_factory=list)  # the finding ids that explain its failures

    @property
    def records(self) -> list[dict]:
        return self.doc["records"]

    @property
    def triton(self) -> str:
        return str(self.run.env.get("triton"))

    @property
    def torch(self) -> str:
        return str(self.run.env.get("torch"))

    @property
    def ran(self) -> int:
        return sum(n for s, n in self.counts.items() if ran(s))

    @property
    def passed(self) -> int:
        return sum(n for s, n in self.counts.items() if ran(s) and Status(s).conforms)

    @property
    def failures(self) -> int:
        return sum(self.counts[s.value] for s in FAILING)

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.ran if self.ran else None

    @property
    def implementations(self) -> list[str]:
        """The implementations checked, by family (``reference`` for reference/tiled)."""
        return sorted({r["impl"].split("/")[0] for r in self.records if r.get("impl")}) or ["-"]

    @property
    def ops(self) -> set[str]:
        return {r.get("op") or "-" for r in self.records}


# ---- reading the runs --------------------------------------------------------------------
def parse_run_argument(text: str) -> tuple[str, str | None]:
    """``RUN.json`` or ``RUN.json=REPORT.html``: the run's file and its report page."""
    path, sep, report = text.partition("=")
    if not path:
        raise ReportError(f"{text!r}: no run file before '='")
    if sep and not report:
        raise ReportError(f"{text!r}: no report page after '=' (RUN.json=REPORT.html)")
    return path, (report if sep else None)


def sibling_report(path: str) -> str | None:
    """The HTML report beside a run file (``x.json`` or ``x.json.gz`` -> ``x.html``)."""
    p = Path(path)
    stem = re.sub(r"\.json(\.gz)?$", "", p.name)
    html = p.with_name(stem + ".html")
    return str(html) if html.is_file() else None


def load_runs(arguments: list[str]) -> list[Run]:
    """The runs of the files given: each read (plain or gzipped JSON), the shards of one
    run merged (an incomplete set refused, as ``merge`` refuses it)."""
    if not arguments:
        raise ReportError("scoreboard: no run files given")
    seen: dict[str, str] = {}
    loaded = []
    for text in arguments:
        path, report = parse_run_argument(text)
        key = os.path.realpath(path)
        if key in seen:
            raise ReportError(f"{path}: given twice (also as {seen[key]})")
        seen[key] = path
        if report is not None and not Path(report).is_file():
            raise ReportError(f"{text}: the report page {report} does not exist")
        doc = load_report(path, any_version=True)  # another schema version: said on the page
        loaded.append((path, doc, report or sibling_report(path)))
    groups: dict[tuple, list] = defaultdict(list)
    whole = []
    for path, doc, report in loaded:
        env = doc["environment"]
        if env.get("shard"):
            key = (selection_key(env), *(str(env.get(k)) for k in ("triton", "torch", "device",
                                                                     "git_commit")))
            groups[key].append((path, doc, report))
        else:
            whole.append(Run(path, [path], doc, report))
    for members in groups.values():
        members.sort(key=lambda m: m[1]["environment"].get("shard") or "")
        doc = merge([(p, d) for p, d, _ in members])  # ReportError for an incomplete set
        doc["schema_version"] = members[0][1].get("schema_version")
        report = next((r for _, _, r in members if r), None)
        whole.append(Run(" + ".join(p for p, _, _ in members), [p for p, _, _ in members],
                         doc, report))
    whole.sort(key=lambda r: (r.started, r.name))
    for i, run in enumerate(whole, 1):
        run.index = i
    return whole


def load_findings(path) -> dict[str, dict]:
    """The findings table of ``FINDINGS.md``: id -> library, op, what goes wrong."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"findings file {path}: cannot read it: "
                          f"{getattr(exc, 'strerror', None) or exc}") from None
    out = {}
    for m in FINDING_ROW.finditer(text):
        fid, library, op, _, what = (g.strip() for g in m.groups())
        out[fid.upper()] = {"id": fid.upper(), "library": library, "op": op.replace("`", ""),
                            "what": _shorten(what.replace("`", ""), 220)}
    if not out:
        raise ReportError(f"findings file {path}: no findings table (rows \"| F1 | ...\")")
    return out


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


def finding_ids(*texts) -> list[str]:
    found = []
    for text in texts:
        for a, b in FINDING_ID.findall(text or ""):
            fid = f"F{int(a or b)}"
            if fid not in found:
                found.append(fid)
    return found


def record_findings(record: dict, expectations: list[Expectation]) -> list[str]:
    """The findings that explain a check that failed or was waived: named by the entry
    that waived it (kept in the record) or by a matching entry of ``expectations``."""
    if Status(record["status"]).conforms and record["status"] != Status.WAIVED.value:
        return []
    out = []
    waiver = record.get("expectation")
    if isinstance(waiver, dict):
        out += finding_ids(waiver.get("reason"), waiver.get("link"), waiver.get("finding"))
    elif record["status"] == Status.WAIVED.value:
        out += finding_ids(record.get("reason"))
    entry = match_expectation(record["test_id"], expectations) if expectations else None
    if entry is not None:
        out += [f for f in finding_ids(entry.reason, entry.link, getattr(entry, "finding", ""))
                if f not in out]
    return out


# ---- slicing and comparing ---------------------------------------------------------------
def slices(run: Run) -> list[Slice]:
    """The run's records per target and mode, leaving out a target and mode where no check
    ran (a CPU machine's device checks, all not supported: no run of that target there)."""
    by_key: dict[tuple, list] = defaultdict(list)
    for r in run.doc["records"]:
        by_key[(r.get("profile") or "-", r.get("mode") or "-")].append(r)
    out = []
    for (target, mode), records in sorted(by_key.items()):
        if all(r["status"] == Status.NOT_SUPPORTED.value for r in records):
            continue
        env = {**run.env, "profiles": [target], "modes": [mode]}
        doc = {k: v for k, v in run.doc.items() if k not in ("behaviour", "ulp", "records")}
        doc.update(environment=env, records=records)
        out.append(Slice(run, target, mode, doc, Counter(r["status"] for r in records)))
    return out


def incomparable(old: Slice, new: Slice) -> list[str]:
    """Why two slices of one target and mode cannot be compared, one line each: a
    different schema version, selection or op set; empty when they can."""
    why = []
    a, b = old.run.doc.get("schema_version"), new.run.doc.get("schema_version")
    if a != b:
        why.append(f"schema version {a} vs {b}")
    why += [f"different selection: {c}" for c in selection_changes(old.doc["environment"],
                                                                   new.doc["environment"])]
    if old.ops != new.ops:
        gone, added = sorted(old.ops - new.ops), sorted(new.ops - old.ops)
        why.append("different op set: " + " ".join([f"-{o}" for o in gone]
                                                    + [f"+{o}" for o in added]))
    return why


def version_key(v: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.+-]", v or ""))


def changes(old: Slice, new: Slice) -> dict:
    """What changed from ``old`` to ``new`` (comparable slices), from the diff machinery."""
    d = diff(old.doc, new.doc)
    behaviours = behaviour.diff(old.doc, new.doc)
    return {"old": old, "new": new,
            "new_failures": [(t, a, b) for t, a, b in d.new_failures],
            "fixes": d.fixes, "changed": d.changed, "added": len(d.added),
            "removed": len(d.removed) + len(d.removed_accepted),
            "compile_regressions": d.compile_regressions,
            "codegen_changes": len(d.codegen_changes),
            "behaviour": [c for c in behaviours if c["old"] is not None and c["new"] is not None],
            "behaviour_lines": behaviour.format_diff(behaviours),
            "toolchain": d.toolchain_changed, "new_run_problems": d.new_run_problems}


# ---- the page model ----------------------------------------------------------------------
def failing_dtypes(records: list[dict]) -> list[str]:
    """The dtypes of the checks that do not conform; for a compile check without one, the
    dtypes of its kernels that did not compile."""
    out = set()
    for r in records:
        if Status(r["status"]).conforms:
            continue
        if r.get("dtype"):
            out.add(str(r["dtype"]))
        for stats in r.get("compile_stats") or []:
            if isinstance(stats, dict) and stats.get("dtype") and stats.get("compile") not in (
                    None, "passed"):
                out.add(str(stats["dtype"]))
    return sorted(out)


def known_defects(run: Run) -> list[Path]:
    """The shipped known-defect files for a run's Triton version and the families of its
    records (``expectations/triton-X.Y/FAMILY.toml``), as a run of this checkout uses."""
    return known_defect_files(run.env.get("triton"),
                              {r["vendor"] for r in run.doc["records"] if r.get("vendor")})


def model(runs: list[Run], out_dir, findings_path=FINDINGS,
          expectations: list[Expectation] = (), use_known_defects: bool = True) -> dict:
    """The page's content. Findings are named by the records' own expectation entries, by
    ``expectations`` and, unless ``use_known_defects`` is off, by the shipped known-defect
    files of each run's Triton version and families."""
    out_dir = Path(out_dir)
    findings = load_findings(findings_path)
    known_files = {run.index: known_defects(run) if use_known_defects else [] for run in runs}
    naming = {run.index: list(expectations) + [e for f in known_files[run.index]
                                               for e in load_expectations(f, known=True)]
              for run in runs}
    href = lambda p: Path(os.path.relpath(Path(p).resolve(), out_dir.resolve())).as_posix()  # noqa: E731
    all_slices = [s for run in runs for s in slices(run)]
    rows = sorted(all_slices, key=lambda s: (s.target, s.mode, version_key(s.triton), s.torch,
                                             s.run.started, s.run.name))
    statuses = [s.value for s in Status
                if s is not Status.WAIVED and any(x.counts[s.value] for x in rows)]
    # findings per slice and per op cell
    used: dict[str, dict] = {}
    cell_findings: dict[tuple, list[str]] = defaultdict(list)
    for s in rows:
        for r in s.records:
            for fid in record_findings(r, naming[s.run.index]):
                if fid not in s.findings:
                    s.findings.append(fid)
                if fid not in cell_findings[(id(s), r.get("op") or "-")]:
                    cell_findings[(id(s), r.get("op") or "-")].append(fid)
                u = used.setdefault(fid, {"id": fid, "known": fid in findings,
                                          **findings.get(fid, {}), "where": Counter()})
                u["where"][f"{s.target} {s.mode}, triton {s.triton} (run #{s.run.index})"] += 1
    # the op x target matrix: a column per target x mode x Triton version x run
    columns = rows
    ops = sorted({op for s in columns for op in s.ops})
    matrix = []
    for op in ops:
        cells = []
        for s in columns:
            records = [r for r in s.records if (r.get("op") or "-") == op]
            if not records:
                cells.append(None)
                continue
            w = reads_as(r["status"] for r in records)
            link = None
            if s.run.report:
                link = (f"{href(s.run.report)}#op={op}&profile={s.target}&mode={s.mode}"
                        + ("" if w.conforms else f"&status={w.value}"))
            cells.append({"worst": w.value, "checks": len(records), "link": link,
                          "dtypes": failing_dtypes(records),
                          "failing": sum(not Status(r["status"]).conforms for r in records),
                          "findings": cell_findings.get((id(s), op), [])})
        matrix.append({"op": op, "cells": cells})
    # between Triton versions of one target and mode
    by_target: dict[tuple, list[Slice]] = defaultdict(list)
    for s in rows:
        by_target[(s.target, s.mode)].append(s)
    version_changes, notices = [], []
    for (target, mode), group in by_target.items():
        versions = sorted({s.triton for s in group}, key=version_key)
        for v_old, v_new in zip(versions, versions[1:]):
            olds = sorted((s for s in group if s.triton == v_old), key=lambda s: s.run.started,
                          reverse=True)
            news = sorted((s for s in group if s.triton == v_new), key=lambda s: s.run.started,
                          reverse=True)
            pair = next(((o, n) for n in news for o in olds if not incomparable(o, n)), None)
            if pair is None:
                o, n = olds[0], news[0]
                notices.append({"what": f"{target} {mode}: triton {v_old} vs {v_new}",
                                "target": (target, mode), "runs": [o.run.name, n.run.name], "why": incomparable(o, n),
                                "effect": "no change list between these Triton versions"})
            else:
                version_changes.append({"target": target, "mode": mode, "from": v_old,
                                        "to": v_new, **changes(*pair)})
    # the trend: per target and mode, the runs in time order
    t_all = [_time(s.run.started) for s in rows if _time(s.run.started) is not None]
    trend = []
    for (target, mode), group in sorted(by_target.items()):
        group = sorted(group, key=lambda s: (s.run.started, s.run.index))
        points, segment = [], 0
        for i, s in enumerate(group):
            if i:
                why = incomparable(group[i - 1], s)
                if why:
                    segment += 1
                    runs_ = [group[i - 1].run.name, s.run.name]
                    same = next((n for n in notices if n["target"] == (target, mode)
                                 and sorted(n["runs"]) == sorted(runs_)), None)
                    if same:
                        same["effect"] += "; not joined in the trend"
                    else:
                        notices.append({"what": f"{target} {mode}", "target": (target, mode),
                                        "runs": runs_, "why": why,
                                        "effect": "not joined in the trend"})
            points.append({"slice": s, "segment": segment, "time": _time(s.run.started)})
        trend.append({"target": target, "mode": mode, "points": points,
                      "svg": _trend_svg(points, t_all)})
    triton_versions = sorted({s.triton for s in rows}, key=version_key)
    return {"runs": runs, "rows": rows, "statuses": statuses, "colours": {
                s.value: c for s, c in COLOURS.items()},
            "show_torch": len({(s.target, s.mode, s.triton, s.torch) for s in rows})
                          > len({(s.target, s.mode, s.triton) for s in rows}),
            "columns": columns, "matrix": matrix,
            "version_changes": version_changes, "notices": notices, "trend": trend,
            "findings": sorted(used.values(), key=lambda f: version_key(f["id"][1:])),
            "findings_href": href(findings_path), "href": href,
            "targets": sorted({s.target for s in rows}), "triton_versions": triton_versions,
            "problems": {r.index: run_problems(r.doc["records"], r.doc.get("run")) for r in runs},
            "selection": {r.index: sorted({c for c in (normalized_command(s.get("command"))
                                                        for s in r.env.get("shards") or [r.env])
                                           if c}) for r in runs},
            "known_files": {i: [_checkout_path(f) for f in fs] for i, fs in known_files.items()},
            "expectation_files": sorted({e.source for e in expectations}),
            "fmt_date": _date, "fmt_commit": _commit, "fmt_rate": _rate,
            "palette": _palette(triton_versions)}


def _checkout_path(path) -> str:
    """A path in the checkout as the checkout names it (never a machine path)."""
    try:
        return Path(path).resolve().relative_to(CHECKOUT.resolve()).as_posix()
    except ValueError:
        return Path(path).name


def _time(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text).timestamp()
    except (TypeError, ValueError):
        return None


def _date(text: str) -> str:
    try:
        return datetime.fromisoformat(text).strftime("%Y-%m-%d %H:%M %Z").strip()
    except (TypeError, ValueError):
        return text or "-"


def _commit(text) -> str:
    if not text:
        return "-"
    sha, dirty = str(text).removesuffix("+dirty"), str(text).endswith("+dirty")
    return (sha[:10] if re.fullmatch(r"[0-9a-f]{11,40}", sha) else sha) + ("+dirty" if dirty else "")


def _rate(rate: float | None) -> str:
    return "-" if rate is None else f"{100 * rate:.1f}%"


PALETTE = ["#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f"]


def _palette(versions: list[str]) -> dict[str, str]:
    return {v: PALETTE[i % len(PALETTE)] for i, v in enumerate(versions)}


def _trend_svg(points: list[dict], times: list[float], width=420, height=90) -> dict:
    """Coordinates of the pass-rate and failure series of one target and mode: x by the
    run's start time (the runs without one after the rest), y by the value."""
    lo, hi = (min(times), max(times)) if times else (0.0, 0.0)
    pad = 12
    n = len(points)
    max_fail = max((p["slice"].failures for p in points), default=0) or 1
    out = []
    for i, p in enumerate(points):
        t = p["time"]
        if t is None or hi == lo:
            x = pad + (width - 2 * pad) * ((i + 0.5) / n if hi == lo or t is None else 0)
        else:
            x = pad + (width - 2 * pad) * (t - lo) / (hi - lo)
        rate = p["slice"].pass_rate
        out.append({"x": round(x, 1),
                    "y_rate": None if rate is None else round(pad + (height - 2 * pad) * (1 - rate), 1),
                    "y_fail": round(pad + (height - 2 * pad) * (1 - p["slice"].failures / max_fail), 1),
                    "segment": p["segment"], "slice": p["slice"]})
    segments: dict[int, list] = defaultdict(list)
    for p in out:
        segments[p["segment"]].append(p)
    lines = lambda key: [" ".join(f"{p['x']},{p[key]}" for p in seg if p[key] is not None)  # noqa: E731
                         for seg in segments.values() if len(seg) > 1]
    return {"width": width, "height": height, "pad": pad, "points": out,
            "rate_lines": lines("y_rate"), "fail_lines": lines("y_fail"), "max_fail": max_fail}


# ---- the page ----------------------------------------------------------------------------
def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def render(page: dict) -> str:
    """The page: inline CSS and script allowed by their hashes in a Content-Security-Policy
    that loads nothing else; every string from the runs is escaped (autoescape)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    template = env.get_template("scoreboard.html.j2")
    draft = template.render(csp="", **page)
    inline = re.findall(r"<(script|style)>(.*?)</\1>", draft, re.S)
    scripts = " ".join(_csp_hash(body) for kind, body in inline if kind == "script")
    styles = " ".join(_csp_hash(body) for kind, body in inline if kind == "style")
    csp = (f"default-src 'none'; script-src {scripts or chr(39) + 'none' + chr(39)}; "
           f"style-src {styles or chr(39) + 'none' + chr(39)}; img-src 'none'; "
           f"base-uri 'none'; form-action 'none'")
    return template.render(csp=csp, **page)


def output_path(out_dir) -> Path:
    """``DIR/index.html``; refuses a DIR that is a file (or cannot be made a folder)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ReportError(f"-o {out_dir}: it is a file, not a folder (the scoreboard is "
                          f"written as {out_dir}/index.html)")
    parent = out
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ReportError(f"-o {out_dir}: {parent} is not a folder")
    return out / "index.html"


def build(arguments: list[str], out_dir, findings_path=FINDINGS,
          expectation_files: list[str] = (), use_known_defects: bool = True) -> tuple[Path, dict]:
    """Read the runs, write ``DIR/index.html``; returns its path and the page model."""
    target = output_path(out_dir)
    expectations = [e for f in expectation_files for e in load_expectations(f)]
    runs = load_runs(arguments)
    page = model(runs, out_dir, findings_path, expectations, use_known_defects)
    html = render(page)
    atomic_write(target, html)
    return target, page


# ---- the command -------------------------------------------------------------------------
def add_subcommand(sub) -> None:
    """Register ``python -m reports scoreboard`` on the command's subparsers."""
    p = sub.add_parser("scoreboard", help="one static page over many runs: targets x modes "
                       "x Triton versions, ops, changes between versions, findings, trend")
    p.add_argument("runs", nargs="+", metavar="RUN.json[=REPORT.html]",
                   help="a run's JSON report (.json or .json.gz) or one shard of it (the "
                        "shards of one run are merged; all of them must be given), with its "
                        "HTML report after '=' (default: a .html file beside it, if any)")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="folder to write index.html into (made if missing)")
    p.add_argument("--findings", default=str(FINDINGS), metavar="FINDINGS.md",
                   help="the findings whose ids (F24) expectation entries name "
                        "(default: the project's reports/published/FINDINGS.md)")
    p.add_argument("--expectations", action="append", default=[], metavar="FILE",
                   help="an expectation file whose entries' reasons or links name the "
                        "findings that explain failures (repeatable); statuses stay as run")
    p.add_argument("--no-known-defects", dest="known_defects", action="store_false",
                   help="do not name findings from the shipped known-defect files "
                        "(expectations/triton-X.Y/FAMILY.toml of each run's Triton version)")
    p.set_defaults(run=cmd_scoreboard)


def cmd_scoreboard(args) -> int:
    path, page = build(args.runs, args.output, args.findings, args.expectations,
                       args.known_defects)
    print(f"{len(page['runs'])} run(s) from {len(args.runs)} file(s), "
          f"{len(page['targets'])} target(s), triton {', '.join(page['triton_versions'])}, "
          f"{len(page['version_changes'])} comparison(s) between Triton versions, "
          f"{len(page['notices'])} pair(s) of runs that cannot be compared -> {path}")
    for n in page["notices"]:
        print(f"cannot compare: {n['what']}: {n['runs'][0]} and {n['runs'][1]}: "
              f"{'; '.join(n['why'])}")
    return 0
