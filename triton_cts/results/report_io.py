"""The report document: its schema, validation on load, and atomic writes of reports and
other outputs (a temporary file renamed over the target).
"""
from __future__ import annotations

import gzip
import json
import os
import tempfile
from pathlib import Path

from triton_cts.results.numbers import as_float, error_entry
from triton_cts.results.status import Status

SCHEMA = "triton-cts-report"
#: The format's version (reports/schema/report.schema.json): any added field bumps it.
#: 2: records' message and traceback; errors' numbers as numbers (rtol, atol, ratio and
#: null beside *_nonfinite); expectations' known; expectation finding, repro and known.
#: 3: records' device; the environment's devices.
#: 4: records' inputs; the input coverage table.
SCHEMA_VERSION = 4
#: The versions readers accept: older ones are brought to this one as they load.
READABLE_VERSIONS = (1, 2, 3, 4)
NOT_SUPPORTED = "not supported: "  # the plugin's skip-reason prefix
WAIVED = "waived: "                # the reason prefix of an expectation's xfail/skip marker


class ReportError(ValueError):
    """A malformed report, shard, or expectation file; the message names the file."""


# ---- the report document -----------------------------------------------------------------
def document(environment: dict, records: list[dict], **extra) -> dict:
    return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "environment": environment,
            **extra, "records": records}


def validate_document(doc, source: str, any_version: bool = False) -> dict:
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ReportError(f"{source}: not a triton-cts report (no \"schema\": \"{SCHEMA}\")")
    version = doc.get("schema_version")
    if (version not in READABLE_VERSIONS or isinstance(version, bool)) and not any_version:
        raise ReportError(f"{source}: schema version {version!r}, this checkout reads "
                          f"versions {', '.join(map(str, READABLE_VERSIONS))}; read it with "
                          f"the checkout that wrote it, or regenerate it with this one")
    if not isinstance(doc.get("environment"), dict) or not isinstance(doc.get("records"), list):
        raise ReportError(f"{source}: missing \"environment\" object or \"records\" list")
    for i, r in enumerate(doc["records"]):
        if not isinstance(r, dict) or "test_id" not in r or r.get("status") not in Status._value2member_map_:
            raise ReportError(f"{source}: record {i} has no test_id or an unknown status "
                              f"{r.get('status') if isinstance(r, dict) else r!r}")
    return doc


def load_report(path, any_version: bool = False) -> dict:
    """A JSON report, read as it is or gzip-compressed (a name ending in .gz: published
    reports are kept so)."""
    path = Path(path)
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as f:
                text = f.read()
        else:
            text = path.read_text()
    except (OSError, EOFError) as exc:
        raise ReportError(f"{path}: cannot read it: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        # Unclosed brackets: the writer stopped half way (or the file was cut in transfer).
        unclosed = text.count("{") + text.count("[") > text.count("}") + text.count("]")
        hint = " (the file ends early: truncated?)" if unclosed or not text.strip() else ""
        raise ReportError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: "
                          f"{exc.msg}{hint}") from None
    return upgrade(validate_document(doc, str(path), any_version))


def upgrade(doc: dict) -> dict:
    """A report of an older readable version in this version's form, in place: version 1
    held errors' non-finite numbers as text ("inf") and the bound as "rtol=X atol=Y".
    ``schema_version`` keeps the version the file was written in (what a reader compares)."""
    if doc.get("schema_version") == 1:
        for r in doc["records"]:
            r["errors"] = [_upgrade_error(e) for e in r.get("errors") or []]
    return doc


def _upgrade_error(e) -> dict:
    if not isinstance(e, dict) or {"rtol", "atol"} & set(e) or any(
            k.endswith("_nonfinite") for k in e):
        return e  # already in this version's form
    out = error_entry(e.get("output", "-"), e.get("max_abs_error"), e.get("bound"),
                      e.get("ratio"), "ratio" in e)
    for key in ("max_abs_error", "ratio"):  # text that is not a number stays as it was
        if isinstance(e.get(key), str) and as_float(e[key]) is None:
            out.update({key: e[key]})
    return out


def atomic_write(path, text: str) -> Path:
    """Write to a temporary file beside ``path``, then rename it over ``path``: a reader
    sees the old file or the new one, never half of one. An OSError names ``path``, the
    file the user asked for, never the temporary one."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give it a normal file's mode
        os.replace(tmp, path)
    except OSError as exc:
        _discard(tmp)
        raise OSError(exc.errno, f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        _discard(tmp)
        raise
    return path


def _discard(tmp) -> None:
    if tmp is not None:
        Path(tmp).unlink(missing_ok=True)


def check_outputs(outputs: dict[str, str | None], inputs: list[tuple[str, str]] = (),
                  updates: tuple[str, ...] = ()) -> None:
    """Refuse, before a run, outputs it could not write at its end. ``outputs`` maps an
    option (``--report-json``) to the path given or None; ``inputs`` lists (option, path)
    of files the run reads; ``updates`` names the output options that may be one of those
    inputs (a file updated in place). Nothing is created: an interrupted run must not leave
    empty outputs. Raises :class:`ReportError` naming the option and the user's path."""
    seen: dict[str, tuple[str, str]] = {}
    for option, path in outputs.items():
        if not path:
            continue
        why = unwritable(path)
        if why:
            raise ReportError(f"{option} {path}: cannot be written: {why}")
        key = os.path.realpath(path)
        if key in seen:
            raise ReportError(f"{option} {path}: the same file as {seen[key][0]} "
                              f"{seen[key][1]}; give each output its own path")
        seen[key] = (option, path)
        for in_option, in_path in inputs:
            if os.path.realpath(in_path) == key and option not in updates:
                raise ReportError(f"{option} {path}: the same file as the input {in_option} "
                                  f"{in_path}; writing it would replace what this run reads")


def unwritable(path) -> str | None:
    """Why a file could not be written (by :func:`atomic_write`) at ``path``, or None.
    A missing folder is fine where it can be made: atomic_write makes it."""
    path = Path(path)
    if path.is_dir():
        return "it is a folder, not a file"
    if path.exists():
        if not path.is_file():
            return "it exists and is not a regular file"
        if not os.access(path, os.W_OK):
            return "the file exists and is not writable"
    folder = path.absolute().parent
    while not folder.exists() and not folder.is_symlink() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the folder {folder} is not writable"
    return None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def dump_report(doc: dict, path) -> Path:
    return atomic_write(path, json.dumps(doc, indent=1, default=str) + "\n")
