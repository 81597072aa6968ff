"""The report document: its schema, validation on load, and atomic writes of reports and
other outputs (a temporary file renamed over the target).
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from triton_cts.results.status import Status

SCHEMA = "triton-cts-report"
SCHEMA_VERSION = 1
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
