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

from triton_cts import CHECKOUT
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
#: The fields of an ``[[expectation]]`` table; ``expectations.schema.json`` describes them.
ENTRY_FIELDS = ("test", "status", "reason", "link", "finding", "repro")
#: The known upstream defects shipped with the suite: ``triton-X.Y/FAMILY.toml`` in it.
KNOWN_DEFECTS_DIR = CHECKOUT / "expectations"


@dataclass(frozen=True)
class Expectation:
    """A test-id prefix with its expected status; the longest matching prefix wins.
    ``finding`` and ``repro`` are paths in the checkout (``FILE#anchor``): the finding that
    explains the failure and the script that reproduces it outside the suite."""

    test: str
    status: str
    reason: str
    link: str = ""
    source: str = ""
    finding: str = ""
    repro: str = ""
    #: from a shipped known-defect file (expectations/triton-X.Y/FAMILY.toml), not the user's
    known: bool = False

    @property
    def marker_reason(self) -> str:
        where = self.link or self.finding
        return WAIVED + self.reason + (f" ({where})" if where else "")


def known_defect_files(triton_version: str | None, families, root=None) -> list[Path]:
    """The shipped expectation files of known upstream defects for a Triton version and
    the selected profiles' families: ``expectations/triton-X.Y/FAMILY.toml`` where present."""
    m = re.match(r"(\d+)\.(\d+)", triton_version or "")
    if not m:
        return []
    folder = Path(root or KNOWN_DEFECTS_DIR) / f"triton-{m.group(1)}.{m.group(2)}"
    return [folder / f"{f}.toml" for f in sorted(set(families)) if (folder / f"{f}.toml").is_file()]


def load_expectations(path, known: bool = False) -> list[Expectation]:
    """Read an expectation file: ``[[expectation]]`` tables with ``test`` (a test-id
    prefix), ``status`` (xfail, skip or flaky), ``reason`` (required), ``link`` (an http(s)
    address), ``finding`` and ``repro`` (paths in the checkout). ``known``: a shipped
    known-defect file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ReportError(f"expectation file {path}: cannot read it: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ReportError(f"expectation file {path}: not UTF-8 text: {exc}") from None
    return parse_expectations(text, path, known)


def _check_link(where: str, link: str) -> None:
    """A link becomes an address a reviewer clicks: only an absolute http(s) one."""
    if not re.fullmatch(r"https?://[^\s/?#]+[^\s]*", link):
        raise ReportError(f"{where}: 'link' {link!r} is not an http:// or https:// address")


def _check_checkout_path(where: str, key: str, value: str) -> None:
    """``finding`` and ``repro``: a file of the checkout (with an optional #anchor)."""
    file, _, anchor = value.partition("#")
    if (not file or re.match(r"[a-zA-Z][\w+.-]*:", file) or file.startswith(("/", "\\"))
            or ".." in Path(file).parts or (anchor and not re.fullmatch(r"[\w-]+", anchor))):
        raise ReportError(f"{where}: '{key}' {value!r} is not a path in the checkout "
                          f"(FILE or FILE#anchor, relative, without '..')")
    if not (CHECKOUT / file).is_file():
        raise ReportError(f"{where}: '{key}' {value!r}: no such file in the checkout")


def parse_expectations(text: str, path, known: bool = False) -> list[Expectation]:
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
        extra = set(entry) - set(ENTRY_FIELDS)
        if extra:
            raise ReportError(f"{where}: unknown field(s) {', '.join(sorted(extra))}")
        for key in ("test", "status", "reason"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise ReportError(f"{where}: missing or empty '{key}'"
                                  + (" (say why this test is expected to fail)" if key == "reason" else ""))
        if entry["status"] not in EXPECTATION_STATUSES:
            raise ReportError(f"{where}: status {entry['status']!r} is not one of "
                              f"{', '.join(EXPECTATION_STATUSES)}")
        for key in ("link", "finding", "repro"):
            if not isinstance(entry.get(key, ""), str):
                raise ReportError(f"{where}: '{key}' must be a string")
        if entry.get("link"):
            _check_link(where, entry["link"])
        for key in ("finding", "repro"):
            if entry.get(key):
                _check_checkout_path(where, key, entry[key])
        out.append(Expectation(entry["test"], entry["status"], entry["reason"].strip(),
                               entry.get("link", ""), str(path), entry.get("finding", ""),
                               entry.get("repro", ""), known))
    return out


def match_expectation(test_id: str, expectations: list[Expectation]) -> Expectation | None:
    hits = [e for e in expectations if test_id.startswith(e.test)]
    return max(hits, key=lambda e: len(e.test)) if hits else None


def stale_expectations(expectations: list[Expectation], test_ids) -> list[Expectation]:
    """The user's entries that match none of ``test_ids`` (a shipped known-defect entry
    for a test this selection did not collect is not stale)."""
    ids = list(test_ids)
    return [e for e in expectations if not e.known and not any(t.startswith(e.test) for t in ids)]


#: Statuses a failing call phase can have that an xfail or flaky marker turns into Waived.
_WAIVABLE = frozenset({Status.FAIL, Status.HARNESS_ERROR, Status.TIMEOUT})


def apply_expectations(records: list[dict], expectations: list[Expectation]) -> list[dict]:
    """What a run's records would have been with ``expectations`` in effect, for a report
    recorded without them: a check an entry covers that failed in its test (not in setup)
    is Waived, a pass under a strict xfail is UnexpectedPass, and a skip entry waives the
    check whatever it did. Every record gets the ``expectation`` that governs it (or None)."""
    out = []
    for r in records:
        r = dict(r)
        exp = match_expectation(r["test_id"], expectations)
        status = Status(r["status"])
        if exp is not None:
            if exp.status == "skip" and status is not Status.NOT_SUPPORTED:
                r["status"], r["reason"] = Status.WAIVED.value, exp.marker_reason
            elif status in _WAIVABLE and not r.get("reason", "").startswith("error in setup"):
                r["status"], r["reason"] = Status.WAIVED.value, exp.marker_reason
            elif exp.status == "xfail" and status in (Status.PASS, Status.QUALITY_WARNING):
                r["status"] = Status.UNEXPECTED_PASS.value
                r["reason"] = exp.marker_reason.removeprefix(WAIVED)
        r["expectation"] = expectation_record(exp)
        out.append(r)
    return out


def expectation_record(exp: Expectation | None) -> dict | None:
    """The record's ``expectation``: the entry that governs the check, as the report keeps it."""
    if exp is None:
        return None
    return {"test": exp.test, "status": exp.status, "reason": exp.reason, "link": exp.link,
            "finding": exp.finding, "repro": exp.repro, "source": exp.source, "known": exp.known}


def known_waived(records: list[dict]) -> list[dict]:
    """The known defects a run waived: per shipped entry, its reason, finding, link, repro
    and the waived checks' ids."""
    by_entry: dict[str, dict] = {}
    for r in records:
        exp = r.get("expectation")
        if r.get("status") == Status.WAIVED.value and isinstance(exp, dict) and exp.get("known"):
            item = by_entry.setdefault(exp["test"], {
                **{k: exp.get(k) or "" for k in ("test", "status", "reason", "finding",
                                                   "link", "repro")}, "checks": []})
            item["checks"].append(r["test_id"])
    return list(by_entry.values())


def known_lines(known: list[dict]) -> list[str]:
    """One line per known upstream defect a run waived: checks, reason, finding."""
    return [f"known defect, waived ({len(k['checks'])} check(s)): {k['reason']}"
            + "".join(f"; {k[f]}" for f in ("finding", "link") if k.get(f)) for k in known]


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
        if status is Status.WAIVED and isinstance(waiver, dict) and waiver.get("known"):
            continue  # a shipped known defect: its file applies to every run by itself
        if status is Status.WAIVED and isinstance(waiver, dict) and waiver.get("test"):
            entry = Expectation(waiver["test"], waiver["status"], waiver["reason"],
                                waiver.get("link") or "", finding=waiver.get("finding") or "",
                                repro=waiver.get("repro") or "")
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
                      *(f"link = {_toml_str(e.link)}" for _ in [1] if e.link),
                      *(f"{k} = {_toml_str(v)}" for k, v in (("finding", e.finding),
                                                             ("repro", e.repro)) if v), ""])


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
    return e.test, e.status, e.reason, e.link, e.finding, e.repro


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
