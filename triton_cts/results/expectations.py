"""Expectation files (known failures waived per test-id prefix) and shards (a stable split
of a run's checks into N disjoint parts).
"""
from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from triton_cts.results.report_io import ReportError
from triton_cts.results.status import WAIVED, Status, first_line


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
