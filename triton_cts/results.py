"""Result records: the status model, expectation files, and the report document.

One record per check (a suite test id). Its status is one of :class:`Status`; a run
conforms when every record is Pass, NotSupported, QualityWarning or Waived.

Everything here is plain data and pure functions, shared by the pytest plugin
(``triton_cts/reporting.py``) and the report commands (``python -m reports``).
"""
from __future__ import annotations

import enum
import hashlib
import json
import os
import re
import tempfile
import tomllib
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

SCHEMA = "triton-cts-report"
SCHEMA_VERSION = 1
NOT_SUPPORTED = "not supported: "  # the plugin's skip-reason prefix
WAIVED = "waived: "                # the reason prefix of an expectation's xfail/skip marker


class ReportError(ValueError):
    """A malformed report, shard, or expectation file; the message names the file."""


class Status(str, enum.Enum):
    PASS = "pass"
    NOT_SUPPORTED = "not_supported"
    WAIVED = "waived"
    QUALITY_WARNING = "quality_warning"
    UNEXPECTED_PASS = "unexpected_pass"
    FAIL = "fail"
    TIMEOUT = "timeout"
    CRASH = "crash"
    HARNESS_ERROR = "harness_error"

    def __str__(self) -> str:
        return self.value

    @property
    def severity(self) -> int:
        """Order for "worst status": declaration order, least to most severe."""
        return list(Status).index(self)

    @property
    def conforms(self) -> bool:
        return self in CONFORMING

    @property
    def short(self) -> str:
        return SHORT[self]


CONFORMING = frozenset({Status.PASS, Status.NOT_SUPPORTED, Status.QUALITY_WARNING, Status.WAIVED})
SHORT = {Status.PASS: "P", Status.NOT_SUPPORTED: "N", Status.WAIVED: "W",
         Status.QUALITY_WARNING: "Q", Status.UNEXPECTED_PASS: "U", Status.FAIL: "F",
         Status.TIMEOUT: "T", Status.CRASH: "C", Status.HARNESS_ERROR: "H"}


def worst(statuses) -> Status | None:
    statuses = [Status(s) for s in statuses]
    return max(statuses, key=lambda s: s.severity) if statuses else None


# ---- quality warnings --------------------------------------------------------------------
class QualityWarning(UserWarning):
    """Within spec but poor (spills, low occupancy, slow). A check that emits one (or any
    warning whose category name ends in ``QualityWarning``, such as the compile suite's
    ``CompileQualityWarning``), or records ``record_property("quality_warning", text)``,
    and otherwise passes, is reported as QualityWarning."""


def is_quality_warning(category) -> bool:
    return isinstance(category, type) and (issubclass(category, QualityWarning)
                                           or category.__name__.endswith("QualityWarning"))


class ExpectationWarning(UserWarning):
    """An expectation entry that matches no collected test."""


# ---- classifying pytest outcomes ---------------------------------------------------------
_TIMEOUT = re.compile(r"\b(Timeout|TimeoutError|TimeoutExpired|DeadlineExceeded)\b")
_CRASH = re.compile(r"worker '?\w+'? crashed while running|Fatal Python error|Segmentation fault")
_EXC_TYPE = re.compile(r"^([\w.]+(?:Error|Exception|Failure|Failed|Group|Exit|Interrupt)\b)")


def classify_phase(when: str, outcome: str, message: str = "", longrepr: str = "",
                   wasxfail: str | None = None) -> tuple[Status, str]:
    """Status and reason of one pytest phase report (setup, call, teardown, or a crash
    report made by xdist). ``message`` is the crash line ("AssertionError: ..."),
    ``longrepr`` the full failure text."""
    if outcome == "passed":
        if wasxfail is not None:  # a non-strict (flaky) expectation that passed
            return Status.PASS, f"passed; expected flaky: {wasxfail}"
        return Status.PASS, ""
    if outcome == "skipped":
        if wasxfail is not None:
            return Status.WAIVED, wasxfail
        if message.startswith(NOT_SUPPORTED):
            return Status.NOT_SUPPORTED, message.removeprefix(NOT_SUPPORTED)
        if message.startswith(WAIVED):
            return Status.WAIVED, message
        # A skip that does not say why the target cannot be checked is the suite's fault.
        return Status.HARNESS_ERROR, f"skipped without a '{NOT_SUPPORTED}' reason: {message}"
    text = longrepr or message
    if _CRASH.search(text) or when not in ("setup", "call", "teardown"):
        return Status.CRASH, first_line(text)
    if text.startswith("[XPASS(strict)]"):
        return Status.UNEXPECTED_PASS, text.removeprefix("[XPASS(strict)]").strip()
    if _TIMEOUT.search(message) or message.startswith("Failed: Timeout"):
        return Status.TIMEOUT, first_line(message)
    if when != "call":
        return Status.HARNESS_ERROR, f"error in {when}: {first_line(message or text)}"
    return (Status.FAIL if blames_the_target(message, text) else Status.HARNESS_ERROR,
            first_line(message or text))


def blames_the_target(message: str, longrepr: str) -> bool:
    """A call-phase failure is the implementation's (Fail) when it is an assertion, carries
    the check's repro line (the suites add it to any exception the implementation raises),
    or comes from Triton (a compile error); any other exception is the harness's."""
    m = _EXC_TYPE.match(message)
    exc = m.group(1) if m else ""
    return (not exc or exc.endswith(("AssertionError", "Failed", "Failure"))
            or exc.startswith("triton.") or "reproduce:" in longrepr or "reproduce:" in message)


def first_line(text: str, limit: int = 300) -> str:
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[:limit - 3] + "..."


_SHAPE = re.compile(r"\bshape=(\([\d, ]*\))")


def falsifying_example(longrepr: str) -> str | None:
    """Hypothesis' "Falsifying example" block ("Failing test case" since hypothesis
    6.16x), with its Draw lines and the reproduce_failure hint, from a failure text,
    without pytest's "E   " margin."""
    out = []
    for line in longrepr.splitlines():
        in_e_block = line.startswith("E ") or line == "E"
        line = re.sub(r"^E(?: {7}| *$)", "", line) if in_e_block else line
        if not out and (line.startswith("Falsifying") and "example" in line
                        or line.startswith("Failing test case")):
            out.append(line)
        elif out:
            if not in_e_block and not line.startswith(" "):
                break
            out.append(line)
    return "\n".join(out).strip() or None


def failing_shape(longrepr: str) -> str | None:
    m = _SHAPE.search(longrepr)
    return m.group(1) if m else None


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


# ---- shards ------------------------------------------------------------------------------
def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` with 1 <= I <= N."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not m or not (1 <= int(m.group(1)) <= int(m.group(2))):
        raise ValueError(f"--shard {text!r}: expected I/N with 1 <= I <= N (e.g. 2/4)")
    return int(m.group(1)), int(m.group(2))


def shard_of(test_id: str, count: int) -> int:
    """The 1-based shard a test id belongs to: a stable hash, the same on every machine
    and Python (unlike ``hash()``)."""
    return int.from_bytes(hashlib.sha256(test_id.encode()).digest()[:8], "big") % count + 1


# ---- expectation files -------------------------------------------------------------------
EXPECTATION_STATUSES = ("xfail", "skip", "flaky")


@dataclass(frozen=True)
class Expectation:
    """A test-id prefix with its expected status; the longest matching prefix wins."""

    test: str
    status: str
    reason: str
    link: str = ""
    source: str = ""

    @property
    def marker_reason(self) -> str:
        return WAIVED + self.reason + (f" ({self.link})" if self.link else "")


def load_expectations(path) -> list[Expectation]:
    """Read an expectation file: ``[[expectation]]`` tables with ``test`` (a test-id
    prefix), ``status`` (xfail, skip or flaky), ``reason`` (required) and ``link``."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise ReportError(f"expectation file {path}: cannot read it: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ReportError(f"expectation file {path}: invalid TOML: {exc}") from None
    unknown = set(data) - {"expectation"}
    if unknown:
        raise ReportError(f"expectation file {path}: unknown top-level key(s) "
                          f"{', '.join(sorted(unknown))}; entries go in [[expectation]] tables")
    out = []
    for i, entry in enumerate(data.get("expectation", []), 1):
        where = f"expectation file {path}, entry {i} ({entry.get('test', 'no test')!r})"
        extra = set(entry) - {"test", "status", "reason", "link"}
        if extra:
            raise ReportError(f"{where}: unknown field(s) {', '.join(sorted(extra))}")
        for key in ("test", "status", "reason"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise ReportError(f"{where}: missing or empty '{key}'"
                                  + (" (say why this test is expected to fail)" if key == "reason" else ""))
        if entry["status"] not in EXPECTATION_STATUSES:
            raise ReportError(f"{where}: status {entry['status']!r} is not one of "
                              f"{', '.join(EXPECTATION_STATUSES)}")
        if not isinstance(entry.get("link", ""), str):
            raise ReportError(f"{where}: 'link' must be a string")
        out.append(Expectation(entry["test"], entry["status"], entry["reason"].strip(),
                               entry.get("link", ""), str(path)))
    return out


def match_expectation(test_id: str, expectations: list[Expectation]) -> Expectation | None:
    hits = [e for e in expectations if test_id.startswith(e.test)]
    return max(hits, key=lambda e: len(e.test)) if hits else None


def stale_expectations(expectations: list[Expectation], test_ids) -> list[Expectation]:
    ids = list(test_ids)
    return [e for e in expectations if not any(t.startswith(e.test) for t in ids)]


def expectations_toml(records: list[dict], note: str = "") -> str:
    """A baseline expectation file listing every check that does not pass now."""
    lines = ["# triton-cts expectation baseline: checks that failed in the run below.",
             "# Replace each reason with the real cause and add a link to its issue.",
             *(f"# {ln}" for ln in note.splitlines()), ""]
    for r in sorted(records, key=lambda r: r["test_id"]):
        status = Status(r["status"])
        if status.conforms and status is not Status.WAIVED or status is Status.UNEXPECTED_PASS:
            continue
        reason = r.get("reason") or status.value
        if status is Status.WAIVED:  # keep the reason the current file gives
            reason = re.sub(r" \(https?://\S+\)$", "", reason.removeprefix(WAIVED))
        else:
            reason = f"{status.value}: {reason}"
        lines += ["[[expectation]]", f"test = {_toml_str(r['test_id'])}",
                  f'status = "{"xfail" if status is not Status.TIMEOUT else "skip"}"',
                  f"reason = {_toml_str(first_line(reason, 200))}", 'link = ""', ""]
    return "\n".join(lines)


def _toml_str(s: str) -> str:
    # JSON string escapes are valid TOML basic-string escapes.
    return json.dumps(s, ensure_ascii=False)


# ---- the report document -----------------------------------------------------------------
def document(environment: dict, records: list[dict], **extra) -> dict:
    return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "environment": environment,
            **extra, "records": records}


def validate_document(doc, source: str, any_version: bool = False) -> dict:
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ReportError(f"{source}: not a triton-cts report (no \"schema\": \"{SCHEMA}\")")
    if doc.get("schema_version") != SCHEMA_VERSION and not any_version:
        raise ReportError(f"{source}: schema version {doc.get('schema_version')!r}, this "
                          f"checkout reads version {SCHEMA_VERSION}; regenerate the report "
                          f"with this checkout")
    if not isinstance(doc.get("environment"), dict) or not isinstance(doc.get("records"), list):
        raise ReportError(f"{source}: missing \"environment\" object or \"records\" list")
    for i, r in enumerate(doc["records"]):
        if not isinstance(r, dict) or "test_id" not in r or r.get("status") not in Status._value2member_map_:
            raise ReportError(f"{source}: record {i} has no test_id or an unknown status "
                              f"{r.get('status') if isinstance(r, dict) else r!r}")
    return doc


def load_report(path, any_version: bool = False) -> dict:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ReportError(f"{path}: cannot read it: {exc.strerror}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        # Unclosed brackets: the writer stopped half way (or the file was cut in transfer).
        unclosed = text.count("{") + text.count("[") > text.count("}") + text.count("]")
        hint = " (the file ends early: truncated?)" if unclosed or not text.strip() else ""
        raise ReportError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: "
                          f"{exc.msg}{hint}") from None
    return validate_document(doc, str(path), any_version)


def atomic_write(path, text: str) -> Path:
    """Write to a temporary file beside ``path``, then rename it over ``path``: a reader
    sees the old file or the new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give it a normal file's mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def dump_report(doc: dict, path) -> Path:
    return atomic_write(path, json.dumps(doc, indent=1, default=str) + "\n")
