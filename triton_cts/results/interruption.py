"""Interrupted runs: a run cut short by a signal (SIGINT from a CI cancel or Ctrl-C,
SIGTERM from a job timeout or ``timeout``) or stopped early (``-x``, ``--maxfail``) still
writes its reports, and they say so: the checks running then are Interrupted (never a
pass), the collected checks that never ran are listed, and the verdict is INTERRUPTED.

:class:`RunWatch` holds the pytest hooks for that; the results plugin's ``Collector``
(the single process, or xdist's controller) inherits them.
"""
from __future__ import annotations

import signal
import threading
from pathlib import PurePosixPath

from triton_cts.results.records import Record
from triton_cts.results.status import Status

#: The signals that end a run through pytest's interruption path (KeyboardInterrupt).
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class RunWatch:
    """Signal handlers, and which checks are running (xdist forwards every worker's
    logstart/logfinish to the controller)."""

    _interrupt: dict | None = None      # {"signal": "SIGTERM" or None, "reason": text}
    _running: dict | None = None        # test id -> True from logstart to logfinish
    _signal_seen: str | None = None
    _saved_handlers: dict | None = None
    _quiet: bool = False                # a signal while reports are written does not raise
    _session = None

    @property
    def interrupted(self) -> bool:
        return self._interrupt is not None

    # -- hooks -----------------------------------------------------------------------------
    def pytest_sessionstart(self, session) -> None:
        """SIGTERM ends the run as SIGINT does (KeyboardInterrupt, pytest's interruption
        path): the session finishes and the reports are written."""
        self._running, self._saved_handlers, self._session = {}, {}, session
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in SIGNALS:
            try:
                self._saved_handlers[sig] = signal.signal(sig, self._on_signal)
            except (OSError, ValueError):  # not settable here
                pass

    def _on_signal(self, signum, frame) -> None:
        name = signal.Signals(signum).name
        first = self._signal_seen is None
        self._signal_seen = self._signal_seen or name
        # Only the first signal interrupts: a second one (a CI runner sends SIGINT, then
        # SIGTERM) must not cut the writing of the reports short.
        if first and not self._quiet:
            raise KeyboardInterrupt(f"{name} received")

    def restore_signals(self) -> None:
        for sig, handler in (self._saved_handlers or {}).items():
            try:
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
            except (OSError, ValueError):
                pass
        self._saved_handlers = {}

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        exc = excinfo.value
        reason = str(getattr(exc, "msg", "") or exc) or type(exc).__name__
        self._interrupt = {"signal": self._signal_seen, "reason": reason}

    def pytest_runtest_logstart(self, nodeid, location) -> None:
        if self._running is not None:
            self._running[nodeid] = True

    def pytest_runtest_logfinish(self, nodeid, location) -> None:
        if self._running is not None:
            self._running.pop(nodeid, None)

    # -- what the reports say --------------------------------------------------------------
    def run_info(self, records: list[dict], collected: list[str], session=None,
                 required_modes=()) -> dict:
        """The document's ``run`` object: whether the run was interrupted (by which signal,
        or why it stopped), how many checks were collected, which of them never ran, and
        the modes in which checks had to run (``--require-mode``)."""
        done = {r["test_id"] for r in records}
        running = self._running or {}
        not_run = [t for t in collected if t not in done and t not in running]
        interrupt = self._interrupt
        stop = session is not None and (session.shouldstop or session.shouldfail)
        if interrupt is None and stop and not_run:
            interrupt = {"signal": None, "reason": f"stopped: {stop}"}
        return {"interrupted": interrupt is not None,
                "signal": interrupt["signal"] if interrupt else None,
                "reason": interrupt["reason"] if interrupt else None,
                "collected": len(collected), "not_run": not_run,
                "required_modes": list(dict.fromkeys(required_modes))}

    def mark_interrupted(self, records: list[dict], fields_of) -> list[dict]:
        """``records`` with the checks that were running when the run was interrupted as
        Interrupted: a check cut short is no pass (a failure it had already shown stays).
        ``fields_of(test_id)`` gives what a running check without a record checks."""
        running = [t for t in (self._running or {}) if t]
        if not self.interrupted or not running:
            return records
        how = self._signal_seen or self._interrupt["reason"]
        reason = f"interrupted ({how}) before this check finished"
        by_id = {r["test_id"]: r for r in records}
        out = []
        for r in records:
            if r["test_id"] in running and Status(r["status"]).conforms:
                r = {**r, "status": Status.INTERRUPTED.value,
                     "reason": reason + (f"; so far: {r['reason']}" if r.get("reason") else "")}
            out.append(r)
        for tid in running:
            if tid not in by_id:
                fields = dict(fields_of(tid) or {})
                fields.pop("unattributed", None)
                fields.setdefault("suite", PurePosixPath(tid.split("::")[0]).stem)
                fields.setdefault("test", tid.split("::")[-1].split("[")[0])
                rec = Record(test_id=tid, status=Status.INTERRUPTED, reason=reason,
                             **{k: v for k, v in fields.items()
                                if k in Record.__dataclass_fields__})
                out.append({**rec.to_dict(), "expectation": None})
        return out
