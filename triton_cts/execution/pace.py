"""How long a run takes, and saying so while it runs.

- :func:`default_workers`: a plain ``pytest suites/`` on a machine with pytest-xdist runs
  its checks on one worker per core (the plugin adds ``-n auto`` and gives xdist the count
  through its ``pytest_xdist_auto_num_workers`` hook), unless the command chose (``-n``,
  ``--dist``, ``-p no:xdist``), names single tests (``path::test``, a repro command), only
  collects, debugs (``--pdb``, ``--trace``, ``-s``), runs under ``--sanitize`` (which
  restarts pytest itself), or is a pytest started by a test (``PYTEST_CURRENT_TEST`` is
  set: the harness's own tests run pytest in subprocesses and read their output).
  ``TRITON_CTS_WORKERS=N`` sets the count; 0 or 1 keeps one process.
- :func:`default_dist`: a run on workers that chose no ``--dist`` lets an idle worker take
  checks queued on a busy one (``--dist worksteal``): checks take from milliseconds to
  minutes (a fused linear cross-entropy on the GPU), and with pytest-xdist's default
  ``load`` the workers that drew the slow ones ran on for minutes while the rest sat idle.
- :func:`default_hypothesis_profile`: ``ci`` (3 examples per test id) where no accelerator
  is attached, ``dev`` (30) where one is; ``--hypothesis-profile`` or
  ``TRITON_CTS_HYPOTHESIS_PROFILE`` choose another.
- :class:`Progress`: every :data:`PROGRESS_EVERY_S` seconds, a line with the checks done,
  the share of the run's work done (a check skipped at collection, a device check on a
  CPU-only machine say, counts as none), the time taken and an estimate of the time left.
- :class:`ReplaySummary`: what replaying interpreted launches saved
  (:mod:`~triton_cts.execution.launch_memo`), summed over the workers.
"""
from __future__ import annotations

import os
import re
import time

import pytest

#: Seconds between two progress lines.
PROGRESS_EVERY_S = 60.0
#: Options after which a run keeps one process.
_SINGLE_PROCESS_OPTIONS = ("-n", "--numprocesses", "--dist", "-d", "--collect-only", "--co",
                           "--pdb", "--trace", "-s", "--capture=no", "--sanitize",
                           "--reproduce-failure", "--help", "-h", "--version", "-V",
                           "--fixtures", "--markers", "--setup-plan", "--setup-only",
                           "--looponfail", "-f")


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_workers(args: list[str], env=os.environ, xdist_loaded: bool = True) -> int:
    """The workers a run gets when its command line chose no ``-n``: 0 (one process) or
    the count (see the module docstring)."""
    if not xdist_loaded or env.get("PYTEST_CURRENT_TEST") or env.get("PYTEST_XDIST_WORKER"):
        return 0
    words = [*args, *env.get("PYTEST_ADDOPTS", "").split()]
    for word in words:
        name = str(word).split("=", 1)[0]
        if name in _SINGLE_PROCESS_OPTIONS or (name.startswith("-n") and name[2:].isdigit()) \
                or "::" in str(word) or word in ("no:xdist", "-pno:xdist"):
            return 0
    raw = env.get("TRITON_CTS_WORKERS", "").strip()
    if raw:
        if not raw.isdigit():
            raise pytest.UsageError(f"TRITON_CTS_WORKERS={raw!r}: not a worker count (0 or 1: "
                                    f"one process; N: N workers)")
        count = int(raw)
    else:
        count = _cores()
    return count if count > 1 else 0


def default_dist(args: list[str], env=os.environ, workers: int = 0) -> list[str]:
    """``["--dist", "worksteal"]`` for a run on workers (``-n`` given, or ``workers`` added
    by :func:`default_workers`) whose command line chose no ``--dist``; else []."""
    if env.get("PYTEST_XDIST_WORKER"):
        return []
    words = [str(w) for w in (*args, *env.get("PYTEST_ADDOPTS", "").split())]
    if any(w.split("=", 1)[0] in ("--dist", "-d") for w in words):
        return []
    requested = _requested_workers(words)
    on_workers = workers > 0 or (requested is not None and requested != "0")
    return ["--dist", "worksteal"] if on_workers else []


def _requested_workers(words: list[str]) -> str | None:
    """The value of ``-n`` / ``--numprocesses`` on the command line (a count, "auto",
    "logical"), or None."""
    for i, word in enumerate(words):
        name, _, value = word.partition("=")
        if name in ("-n", "--numprocesses"):
            return value or (words[i + 1] if i + 1 < len(words) else "")
        if name.startswith("-n") and name[2:].isdigit():
            return name[2:]
    return None


def default_hypothesis_profile(accelerator: bool) -> str:
    return "dev" if accelerator else "ci"


def hypothesis_profile_chosen(config: pytest.Config) -> bool:
    return bool(config.getoption("hypothesis_profile", None)
                or os.environ.get("TRITON_CTS_HYPOTHESIS_PROFILE"))


class Progress:
    """Progress lines of a run (registered by the plugin where reports arrive: the single
    process or the xdist controller)."""

    def __init__(self, config: pytest.Config, cpu_only: bool, every: float = PROGRESS_EVERY_S):
        self.config = config
        self.cpu_only = cpu_only
        self.every = every
        self.start = time.monotonic()
        self.last = self.start
        self.weights: dict[str, float] = {}
        self.total = 0.0
        self.done_weight = 0.0
        self.done = 0

    def weight(self, nodeid: str) -> float:
        """A check's share of the work: none for a device check where no accelerator is
        attached (reported as not supported at once), one otherwise."""
        return 0.0 if self.cpu_only and _DEVICE_ID.search(nodeid) else 1.0

    def _collected(self, ids) -> None:
        self.weights = {nodeid: self.weight(nodeid) for nodeid in ids}
        self.total = sum(self.weights.values())

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self._collected(item.nodeid for item in items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids: list[str]) -> None:
        if not self.weights:  # the controller: every worker collects the same items
            self._collected(ids)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        self.done += 1
        self.done_weight += self.weights.get(report.nodeid, 0.0)
        now = time.monotonic()
        if now - self.last >= self.every and self.total:
            self.last = now
            self.write(now)

    def write(self, now: float) -> None:
        elapsed = now - self.start
        share = min(1.0, self.done_weight / self.total) if self.total else 0.0
        left = f", about {_minutes(elapsed / share - elapsed)} left" if share > 0.02 else ""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"triton-cts: progress: {self.done} of {len(self.weights)} "
                                f"checks, {share:.0%} of the work, {_minutes(elapsed)} "
                                f"elapsed{left}")


#: A device-mode test id: the mode follows the profile in every target id.
_DEVICE_ID = re.compile(r"-device(-|\])")


def _minutes(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s"


class ReplaySummary:
    """What replaying interpreted launches saved (:mod:`~triton_cts.execution.launch_memo`),
    summed over the xdist workers (each sends its own in ``workeroutput``), as one line at
    the end of the run."""

    KEY = "triton_cts_replay"

    def __init__(self):
        self.totals = [0, 0, 0.0]  # launches, replayed, seconds saved

    def _add(self, values) -> None:
        for i, v in enumerate(values):
            self.totals[i] += v

    @staticmethod
    def local() -> list:
        from triton_cts.execution import launch_memo
        stats = launch_memo.memo().stats
        return [stats.runs + stats.replays + stats.uncached, stats.replays,
                round(stats.seconds_saved, 1)]

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        out = getattr(session.config, "workeroutput", None)
        if out is not None:  # an xdist worker: the controller sums them
            out[self.KEY] = self.local()
        else:
            self._add(self.local())

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        self._add(getattr(node, "workeroutput", {}).get(self.KEY, ()))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        launches, replayed, saved = self.totals
        if replayed:
            terminalreporter.write_line(
                f"triton-cts: interpreted launches: {launches}, {replayed} replayed from an "
                f"identical earlier launch in the same process (about {saved:.0f} CPU seconds of "
                f"interpreting saved; TRITON_CTS_LAUNCH_MEMO_MB=0 turns replay off)")
