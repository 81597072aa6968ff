"""The status model: how one check ended (:class:`Status`), which statuses conform, and how
a pytest outcome (phase, outcome, message, traceback) maps to a status.

A run conforms when every record is Pass, NotSupported, QualityWarning or Waived (and, as a
whole, it checked something and was not interrupted: ``records.outcome``).
"""
from __future__ import annotations

import enum
import re

NOT_SUPPORTED = "not supported: "  # the plugin's skip-reason prefix
WAIVED = "waived: "                # the reason prefix of an expectation's xfail/skip marker


class Status(str, enum.Enum):
    PASS = "pass"
    NOT_SUPPORTED = "not_supported"
    WAIVED = "waived"
    QUALITY_WARNING = "quality_warning"
    UNEXPECTED_PASS = "unexpected_pass"
    INTERRUPTED = "interrupted"  # the run was stopped (a signal, a stop) before it finished
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
         Status.QUALITY_WARNING: "Q", Status.UNEXPECTED_PASS: "U", Status.INTERRUPTED: "I",
         Status.FAIL: "F",
         Status.TIMEOUT: "T", Status.CRASH: "C", Status.HARNESS_ERROR: "H"}


def worst(statuses) -> Status | None:
    statuses = [Status(s) for s in statuses]
    return max(statuses, key=lambda s: s.severity) if statuses else None


def reads_as(statuses) -> Status | None:
    """The status a group of checks (a matrix cell) reads as: the worst, not counting
    not-supported checks unless the group holds nothing else, so passes beside checks this
    machine cannot run read as passed (the HTML report's matrix reads cells the same way)."""
    statuses = [Status(s) for s in statuses]
    return worst(s for s in statuses if s is not Status.NOT_SUPPORTED) or worst(statuses)


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
        return Status.HARNESS_ERROR, f"error in {when}: {cause_line(message or text)}"
    return (Status.FAIL if blames_the_target(message, text) else Status.HARNESS_ERROR,
            cause_line(message or text))


def blames_the_target(message: str, longrepr: str) -> bool:
    """A call-phase failure is the implementation's (Fail) when it is an assertion, carries
    the check's repro line (the suites add it to any exception the implementation raises),
    or comes from Triton: a compile error, or any exception raised inside Triton's own
    code (the NVIDIA backend's "PassManager::run failed" is a RuntimeError); any other
    exception is the harness's."""
    m = _EXC_TYPE.match(message)
    exc = m.group(1) if m else ""
    return (not exc or exc.endswith(("AssertionError", "Failed", "Failure"))
            or exc.startswith("triton.") or "reproduce:" in longrepr or "reproduce:" in message
            or _raised_in_triton(longrepr))


# pytest's last location line, "path/to/file.py:LINE: ExcType", names the raising frame
_RAISED_AT = re.compile(r"^(\S+\.py):\d+: \w+", re.MULTILINE)


def _raised_in_triton(longrepr: str) -> bool:
    places = _RAISED_AT.findall(longrepr)
    return bool(places) and re.search(r"[/\\]triton[/\\](compiler|backends|runtime|language)[/\\]",
                                      places[-1]) is not None


#: What a record keeps of a failure: the whole exception message, and the last frames of
#: its traceback, each bounded (a message or traceback beyond it keeps its head or tail).
MESSAGE_LIMIT = 16000
TRACEBACK_FRAMES = 8
TRACEBACK_LIMIT = 4000
#: A reason is one line; a numeric failure's (index, values, bound) stays whole below this.
REASON_LIMIT = 2000


def first_line(text: str, limit: int = REASON_LIMIT) -> str:
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[:limit - 3] + "..."


# Triton's CompilationError: "at L:C:", the source lines, a caret line, then the error
_LOCATION_HEADER = re.compile(r"^[\w.]*CompilationError: at \d+:\d+:\s*$")
_CARET = re.compile(r"^\s*\^+\s*$")


CAUSED_BY = "caused by: "  # how a record's message introduces a chained exception's


def cause_line(message: str) -> str:
    """The reason of a failure: the message's first line, and for a Triton
    ``CompilationError`` (whose first line is only the location, ``at 7:29:``) the error:
    the line after the source excerpt, or else the exception it was raised from."""
    head = first_line(message)
    if not _LOCATION_HEADER.match(head):
        return head
    lines = str(message).splitlines()
    chained = [ln.removeprefix(CAUSED_BY).strip() for ln in lines if ln.startswith(CAUSED_BY)]
    own = lines[:next((i for i, ln in enumerate(lines) if ln.startswith(CAUSED_BY)), len(lines))]
    carets = [i for i, ln in enumerate(own) if _CARET.match(ln)]
    after = own[carets[-1] + 1:] if carets else own[1:]
    error = next((ln.strip() for ln in after if ln.strip()), "") or next(iter(chained), "")
    return first_line(f"{head} {error}") if error else head


def failure_message(longrepr, crash_message: str) -> str:
    """The raised exception's whole message, then the message of each exception it was
    raised from or while handling, nearest first (Triton's CompilationError holds only the
    location and source: the error itself is the exception it was raised from)."""
    chain = list(getattr(longrepr, "chain", None) or ())
    causes = [getattr(c, "message", "") for _, c, _ in reversed(chain[:-1]) if c is not None]
    return crash_message + "".join(f"\n{CAUSED_BY}{m}" for m in causes if m)


def bounded(text: str | None, limit: int, keep: str = "head") -> str | None:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    if text is None or len(text) <= limit:
        return text
    cut = f"\n... ({len(text) - limit} characters left out)\n"
    return text[:limit] + cut if keep == "head" else cut.lstrip("\n") + text[-limit:]


def traceback_tail(longrepr, frames: int = TRACEBACK_FRAMES,
                   limit: int = TRACEBACK_LIMIT) -> str | None:
    """The last ``frames`` frames of a pytest failure representation, one ``path:line``
    line and its source line each (Python's own text under ``--tb=native``), or None
    where the representation has no traceback (a crash report's text, ``--tb=no``)."""
    chain = getattr(longrepr, "chain", None)
    reprtb = chain[-1][0] if chain else getattr(longrepr, "reprtraceback", None)
    entries = getattr(reprtb, "reprentries", None)
    if not entries:
        return None
    out = []
    for entry in list(entries)[-frames:]:
        loc = getattr(entry, "reprfileloc", None)
        lines = [str(ln) for ln in getattr(entry, "lines", ()) or ()]
        if loc is None:  # ReprEntryNative: already Python's traceback text
            out.append("".join(lines).rstrip("\n"))
            continue
        marked = [ln[1:].strip() for ln in lines if ln.startswith(">")]
        source = marked[0] if marked else next((ln.strip() for ln in lines
                                                if ln.strip() and not ln.startswith("E ")), "")
        where = f"{loc.path}:{loc.lineno}" + (f": {loc.message}" if loc.message else "")
        out.append(where + (f"\n    {source}" if source else ""))
    return bounded("\n".join(out), limit, keep="tail") or None


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


_BLOB = re.compile(r"@?reproduce_failure\(\s*(['\"])([\w.+-]+)\1\s*,\s*b(['\"])([^'\"]*)\3\s*\)")


def reproduce_failure(text: str | None) -> str | None:
    """The ``@reproduce_failure('x.y.z', b'...')`` decorator hypothesis prints for a failing
    example (profiles with ``print_blob=True``), from a failure text; the last one when a
    text holds several (hypothesis' final replay)."""
    found = _BLOB.findall(text or "")
    if not found:
        return None
    _, version, _, blob = found[-1]
    return f"@reproduce_failure({version!r}, b{blob!r})"


def parse_reproduce_failure(text: str) -> tuple[str, bytes]:
    """``(version, blob)`` of a ``@reproduce_failure(...)`` decorator text (the record's
    ``reproduce_failure``), or of ``VERSION:BLOB``; ValueError for anything else."""
    m = _BLOB.search(text)
    if m:
        return m.group(2), m.group(4).encode("ascii")
    version, sep, blob = text.strip().partition(":")
    if not sep or not re.fullmatch(r"[\w.+-]+", version) or not re.fullmatch(r"[\w+/=]+", blob):
        raise ValueError(f"{text!r} is not a hypothesis @reproduce_failure('x.y.z', b'...') "
                         f"decorator (as a report's \"reproduce_failure\" holds) nor VERSION:BLOB")
    return version, blob.encode("ascii")


def failing_shape(longrepr: str) -> str | None:
    m = _SHAPE.search(longrepr)
    return m.group(1) if m else None
