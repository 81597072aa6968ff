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
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ReportError(f"expectation file {path}: cannot read it: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ReportError(f"expectation file {path}: not UTF-8 text: {exc}") from None
    return parse_expectations(text, path)


def parse_expectations(text: str, path) -> list[Expectation]:
    """The entries of an expectation file's ``text``; errors name ``path``."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ReportError(f"expectation file {path}: invalid TOML: {exc}") from None
    unknown = set(data) - {"expectation"}
    if unknown:
        raise ReportError(f"expectation file {path}: unknown top-level key(s) "
                          f"{', '.join(sorted(unknown))}; entries go in [[expectation]] tables")
    entries = data.get("expectation", [])
    if not isinstance(entries, list):  # [expectation] (one table) or expectation = 5
        got = ("one [expectation] table (single brackets)" if isinstance(entries, dict)
               else f"{type(entries).__name__} {entries!r}")
        raise ReportError(f"expectation file {path}: expected entries as [[expectation]] "
                          f"tables (double brackets, one per entry), got {got}")
    out = []
    for i, entry in enumerate(entries, 1):
        if not isinstance(entry, dict):
            raise ReportError(f"expectation file {path}, entry {i}: expected an "
                              f"[[expectation]] table with test, status and reason, got "
                              f"{type(entry).__name__} {entry!r}")
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


# ---- writing a baseline ------------------------------------------------------------------
#: A check that ran and ended so passes: an entry whose checks all do is obsolete.
PASSING = frozenset({Status.PASS, Status.QUALITY_WARNING, Status.UNEXPECTED_PASS})


def _needs_entry(status: Status) -> bool:
    """Whether a baseline lists a check that ended with ``status``: it does not pass."""
    return status is Status.WAIVED or not (status.conforms or status is Status.UNEXPECTED_PASS)


def _new_entries(records: list[dict], existing: list[Expectation]) -> list[Expectation]:
    """An entry for each check that does not pass and that no ``existing`` entry covers. A
    waived check brings the entry that waived it (status, reason and link as written); a
    timeout is skipped (it would hang again); any other failure is expected to fail."""
    out: dict[str, Expectation] = {}
    for r in sorted(records, key=lambda r: r["test_id"]):
        status = Status(r["status"])
        if not _needs_entry(status) or match_expectation(r["test_id"], existing):
            continue
        waiver = r.get("expectation")
        if status is Status.WAIVED and isinstance(waiver, dict) and waiver.get("test"):
            entry = Expectation(waiver["test"], waiver["status"], waiver["reason"],
                                waiver.get("link") or "")
        else:
            reason = r.get("reason") or status.value
            if status is Status.WAIVED:  # keep the reason the current file gives
                reason = re.sub(r" \(https?://\S+\)$", "", reason.removeprefix(WAIVED))
            else:
                reason = f"{status.value}: {reason}"
            entry = Expectation(r["test_id"], "skip" if status is Status.TIMEOUT else "xfail",
                                first_line(reason, 200))
        out.setdefault(entry.test, entry)
    return list(out.values())


def _entry_toml(e: Expectation) -> str:
    return "\n".join(["[[expectation]]", f"test = {_toml_str(e.test)}",
                      f"status = {_toml_str(e.status)}", f"reason = {_toml_str(e.reason)}",
                      f"link = {_toml_str(e.link)}", ""])


def expectations_toml(records: list[dict], note: str = "") -> str:
    """A baseline expectation file listing every check that does not pass now."""
    lines = ["# triton-cts expectation baseline: checks that failed in the run below.",
             "# Replace each reason with the real cause and add a link to its issue.",
             *(f"# {ln}" for ln in note.splitlines()), ""]
    lines += [_entry_toml(e) for e in _new_entries(records, [])]
    return "\n".join(lines)


def updated_expectations_toml(path, records: list[dict], collected_ids=(),
                              note: str = "") -> str:
    """The expectation file at ``path`` brought up to date with a run, as
    ``--write-expectations`` writes it (a new file: :func:`expectations_toml`).

    An entry stays as written (status, reason, link, and the comments around it) unless
    every collected check it governs ran and passed (not merely not supported): then a
    comment saying so replaces it. Flaky entries stay: a pass is what they allow. An entry
    that governs none of ``collected_ids`` (nor the records' ids) belongs to tests this
    selection did not run, and stays. Checks that do not pass and that no entry covers are
    added at the end, as :func:`expectations_toml` lists them."""
    path = Path(path)
    if not path.exists():
        return expectations_toml(records, note)
    text = path.read_text(encoding="utf-8")
    existing = parse_expectations(text, path)
    statuses = {r["test_id"]: Status(r["status"]) for r in records}
    governed: dict[int, list[str]] = {}  # entry index -> the ids it governs
    index = {id(e): i for i, e in enumerate(existing)}
    for t in set(collected_ids) | set(statuses):
        entry = match_expectation(t, existing)
        if entry is not None:
            governed.setdefault(index[id(entry)], []).append(t)
    removed = {i for i, e in enumerate(existing)
               if e.status != "flaky" and _pass_now(governed.get(i, []), statuses)}
    kept = [e for i, e in enumerate(existing) if i not in removed]
    added = _new_entries(records, kept)
    tombstones = {i: f"# removed: {_toml_str(e.test)} passes now (was {e.status}: "
                     f"{first_line(e.reason, 120)})\n"
                  for i, e in enumerate(existing) if i in removed}
    tail = "\n".join(["# added: checks that do not pass in the run below.",
                      *(f"# {ln}" for ln in note.splitlines()), "",
                      *(_entry_toml(e) for e in added)]) if added else ""
    out = _edit_in_place(text, len(existing), tombstones, tail)
    if out is None or _keys(out, path) != [_key(e) for e in kept + added]:
        # not laid out as one [[expectation]] block per entry: keep the leading comments
        # and write the entries anew
        lines = text.splitlines(keepends=True)
        n = next((i for i, ln in enumerate(lines) if not _comment_or_blank(ln)), len(lines))
        out = "\n".join(part for part in ["".join(lines[:n]).rstrip("\n"),
                                           "".join(tombstones.values()).rstrip("\n"),
                                           *(_entry_toml(e) for e in kept), tail] if part)
    return out


def _key(e: Expectation) -> tuple:
    return e.test, e.status, e.reason, e.link


def _keys(text: str, path) -> list[tuple] | None:
    try:
        return [_key(e) for e in parse_expectations(text, path)]
    except ReportError:
        return None


def _pass_now(ids: list[str], statuses: dict[str, Status]) -> bool:
    """Whether the checks an entry governs all ran (a run cut short leaves some without a
    record) and passed, at least one of them checked (not only not supported)."""
    ran = [statuses.get(t) for t in ids]
    if not ran or None in ran:
        return False
    checked = [s for s in ran if s is not Status.NOT_SUPPORTED]
    return bool(checked) and all(s in PASSING for s in checked)


_ENTRY_HEADER = re.compile(r"^[ \t]*\[\[[ \t]*expectation[ \t]*\]\][ \t]*(?:#.*)?$", re.M)


def _edit_in_place(text: str, count: int, tombstone: dict[int, str], tail: str) -> str | None:
    """``text`` with entry i replaced by ``tombstone[i]`` and ``tail`` appended; None where
    the entries are not ``count`` [[expectation]] blocks. The comments after a removed
    entry stay: they usually introduce the next one."""
    starts = [m.start() for m in _ENTRY_HEADER.finditer(text)]
    if len(starts) != count or len(re.findall(r"^[ \t]*\[", text, re.M)) != count:
        return None
    bounds = list(zip(starts, starts[1:] + [len(text)]))
    parts = [text[:starts[0]] if starts else text]
    for i, (a, b) in enumerate(bounds):
        block = text[a:b]
        if i in tombstone:
            lines = block.splitlines(keepends=True)
            end = len(lines)
            while end > 1 and _comment_or_blank(lines[end - 1]):
                end -= 1
            block = tombstone[i] + "".join(lines[end:])
        parts.append(block)
    out = "".join(parts)
    if tail:
        out = out.rstrip("\n") + "\n\n" + tail if out.strip() else tail
    return out


def _comment_or_blank(line: str) -> bool:
    return not line.strip() or line.lstrip().startswith("#")


def _toml_str(s: str) -> str:
    # JSON string escapes are valid TOML basic-string escapes.
    return json.dumps(s, ensure_ascii=False)
