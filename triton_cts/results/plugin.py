"""pytest plugin for results: one record per check, expectation files, shards, and the
outputs (terminal matrix and verdict, ``--report-json``, ``--report-html``,
``--write-expectations``).

Records are collected where every report arrives: in the one process of a plain run, or
on the xdist controller (workers forward every phase report with its user_properties, and
every recorded warning). Expectations and ``--shard`` act at collection, which happens in
every worker, so they are applied as ordinary pytest markers and deselection; that also
maps Waived and UnexpectedPass into ``--junitxml`` (skipped "waived: ..." and failure).
"""
from __future__ import annotations

import datetime
import platform
import re
import shlex
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from triton_cts import CHECKOUT
from triton_cts.results.expectations import (expectations_toml, load_expectations,
                                             match_expectation, parse_shard, shard_of,
                                             stale_expectations)
from triton_cts.results.records import Record, split_properties, summary_table, verdict
from triton_cts.results.report_io import ReportError, atomic_write, document, dump_report
from triton_cts.results.status import (ExpectationWarning, Status, classify_phase, failing_shape,
                                       falsifying_example, first_line, is_quality_warning, worst)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("triton-cts-reports", "triton-cts reports")
    group.addoption("--report-json", metavar="PATH", default=None,
                    help="write the run's environment and one record per check as JSON.")
    group.addoption("--report-html", metavar="PATH", default=None,
                    help="write a self-contained HTML report.")
    group.addoption("--expectations", action="append", default=[], metavar="FILE",
                    help="expectation file (TOML) of known failures to waive. Repeatable.")
    group.addoption("--write-expectations", metavar="FILE", default=None,
                    help="write the checks that do not pass as a new expectation baseline.")
    group.addoption("--shard", metavar="I/N", default=None,
                    help="run only shard I of N (1-based), split by a stable hash of the "
                         "test id; 'python -m reports merge' joins the shards' JSON.")


def pytest_configure(config: pytest.Config) -> None:
    try:
        expectations = [e for f in config.getoption("expectations") for e in load_expectations(f)]
        shard = parse_shard(config.getoption("shard")) if config.getoption("shard") else None
    except (ReportError, ValueError) as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[EXPECTATIONS] = expectations
    config.stash[SHARD] = shard
    if not hasattr(config, "workerinput"):  # the controller, or a run without xdist
        config.pluginmanager.register(Collector(config), "triton_cts.results.plugin.collector")


EXPECTATIONS = pytest.StashKey[list]()
SHARD = pytest.StashKey[tuple]()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    expectations = config.stash[EXPECTATIONS]
    for entry in stale_expectations(expectations, (i.nodeid for i in items)):
        warnings.warn(ExpectationWarning(
            f"expectation file {entry.source}: entry {entry.test!r} matches no collected test"))
    for item in items:
        exp = match_expectation(item.nodeid, expectations)
        if exp is None:
            continue
        if exp.status == "skip":
            item.add_marker(pytest.mark.skip(reason=exp.marker_reason))
        else:  # xfail: a pass is an unexpected pass (strict); flaky: either outcome is fine
            item.add_marker(pytest.mark.xfail(reason=exp.marker_reason,
                                              strict=exp.status == "xfail"))
    shard = config.stash[SHARD]
    if shard:
        index, count = shard
        keep = [i for i in items if shard_of(i.nodeid, count) == index]
        drop = [i for i in items if shard_of(i.nodeid, count) != index]
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep


class Collector:
    """Builds the records from the reports this process sees, and writes the outputs."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.phases: dict[str, list] = {}          # test id -> [(report, status, reason)]
        self.collect_errors: dict[str, str] = {}
        self.quality: dict[str, list[str]] = {}
        self.stale: list[str] = []
        self.started = _now()
        self._ids = None
        self._records = None

    # -- which tests are checks ------------------------------------------------------------
    def check_fields(self, nodeid: str) -> dict | None:
        """op, impl, profile, vendor, mode, dtype of a suite test id, or None for a test
        that is not a check (the harness's own tests). Parsed from the id against the
        selection's names, so crash reports made by xdist (no item, no properties) parse
        too."""
        from triton_cts.targets import selection

        if self._ids is None:
            sel = selection(self.config)
            alt = lambda names: "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
            self._vendors = {p.name: p.vendor for p in sel.profiles}
            self._ids = re.compile(
                rf"(?P<op>{alt(sel.registry.ops)})-(?P<impl>.+?)-(?P<profile>{alt(self._vendors)})"
                rf"-(?P<mode>device|interpreter|compile)(?:-(?P<dtype>\w+))?")
        m = re.fullmatch(r"(?P<path>[^:]+)::(?P<test>[^\[]+)\[(?P<params>.*)\]", nodeid)
        p = self._ids.fullmatch(m.group("params")) if m else None
        if p is None:
            return None
        return {"suite": Path(m.group("path")).stem, "test": m.group("test"), **p.groupdict(),
                "vendor": self._vendors[p.group("profile")]}

    # -- hooks -----------------------------------------------------------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.check_fields(report.nodeid) is None:
            return
        message, text = "", ""
        if report.skipped and isinstance(report.longrepr, tuple):
            message = str(report.longrepr[2]).removeprefix("Skipped: ")
        elif report.failed:
            text = report.longreprtext if not isinstance(report.longrepr, str) else report.longrepr
            crash = getattr(report.longrepr, "reprcrash", None)
            message = crash.message if crash is not None else first_line(text)
        status, reason = classify_phase(report.when, report.outcome, message, text,
                                        getattr(report, "wasxfail", None))
        self.phases.setdefault(report.nodeid, []).append((report, status, reason, text))
        self._records = None

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.collect_errors[report.nodeid] = str(report.longrepr)

    def pytest_warning_recorded(self, warning_message, when, nodeid, location) -> None:
        if issubclass(warning_message.category, ExpectationWarning) or \
                warning_message.category.__name__ == "ExpectationWarning":
            if str(warning_message.message) not in self.stale:
                self.stale.append(str(warning_message.message))
        elif nodeid and is_quality_warning(warning_message.category):
            self.quality.setdefault(nodeid, []).append(
                f"{warning_message.category.__name__}: {warning_message.message}")
            self._records = None

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session) -> None:
        cfg = self.config
        try:
            if cfg.getoption("report_json"):
                dump_report(self.document(), cfg.getoption("report_json"))
            if cfg.getoption("report_html"):
                render = _html_renderer()
                atomic_write(cfg.getoption("report_html"), render(self.document()))
            if cfg.getoption("write_expectations"):
                atomic_write(cfg.getoption("write_expectations"), expectations_toml(
                    self.records(), note=f"command: {self.environment()['command']}"))
        except OSError as exc:
            raise pytest.UsageError(f"cannot write a report: {exc}") from None

    def pytest_terminal_summary(self, terminalreporter) -> None:
        records = self.records()
        if not records:
            return
        tr = terminalreporter
        tr.section("triton-cts conformance")
        tr.write_line(summary_table(records))
        unexpected = [r["test_id"] for r in records if r["status"] == Status.UNEXPECTED_PASS]
        for tid in unexpected:
            tr.write_line(f"unexpected pass (remove its expectation entry): {tid}", yellow=True)
        for msg in self.stale:
            tr.write_line(f"stale {msg}", yellow=True)
        for opt in ("report_json", "report_html", "write_expectations"):
            if self.config.getoption(opt):
                tr.write_line(f"{opt.replace('_', '-')}: {self.config.getoption(opt)}")
        line = verdict(records)
        tr.write_line(line, bold=True, green="DOES NOT" not in line, red="DOES NOT" in line)

    # -- building the outputs --------------------------------------------------------------
    def records(self) -> list[dict]:
        if self._records is None:
            self._records = [self._record(tid, phases) for tid, phases in self.phases.items()]
            self._records += [Record(test_id=tid, status=Status.HARNESS_ERROR,
                                     suite=Path(tid.split("::")[0]).stem,
                                     reason="collection error: " + first_line(text),
                                     example=text[-4000:]).to_dict()
                              for tid, text in self.collect_errors.items()]
        return self._records

    def _record(self, nodeid: str, phases: list) -> dict:
        fields = self.check_fields(nodeid)
        status = worst(s for _, s, _, _ in phases)
        reason = next((r for _, s, r, _ in phases if s is status and r), "")
        text = "\n".join(t for _, _, _, t in phases if t)
        # Properties accumulate on the item: the last phase report carries all of them.
        split = split_properties(max((list(getattr(rep, "user_properties", []))
                                      for rep, *_ in phases), key=len))
        quality = split.pop("quality_warnings") + self.quality.get(nodeid, [])
        if status is Status.PASS and quality:
            status, reason = Status.QUALITY_WARNING, quality[0]
        exp = match_expectation(nodeid, self.config.stash[EXPECTATIONS])
        rec = Record(test_id=nodeid, status=status, reason=reason,
                     quality_warnings=list(dict.fromkeys(quality)),
                     shape=failing_shape(text) if text else None,
                     example=falsifying_example(text) if text else None,
                     duration_s=round(sum(rep.duration for rep, *_ in phases), 4),
                     **fields, **split).to_dict()
        rec["expectation"] = exp.__dict__ if exp else None
        return rec

    def environment(self) -> dict:
        from triton_cts.targets import selection

        sel = selection(self.config)
        shard = self.config.stash[SHARD]
        try:
            from hypothesis import settings
            hyp_profile = settings.get_current_profile_name()
            derandomize = settings.default.derandomize
        except Exception:  # an older hypothesis
            hyp_profile, derandomize = None, None
        return {
            "triton": _version("triton"), "torch": _version("torch"),
            "python": platform.python_version(), "platform": platform.platform(),
            "device": (f"{sel.device.name} ({sel.device.backend} {sel.device.arch})"
                       if sel.device else None),
            "device_profile": sel.device_profile, "driver": _driver(sel.device),
            "profiles": [p.name for p in sel.profiles],
            "modes": [m.value for m in sel.modes],
            "implementations": sorted({i.name for i in sel.impls}),
            "git_commit": _git_commit(),
            "command": shlex.join(["pytest", *self.config.invocation_params.args]),
            "hypothesis": {"profile": hyp_profile, "derandomize": derandomize,
                           "seed": self.config.getoption("hypothesis_seed", None)},
            "expectation_files": list(self.config.getoption("expectations")),
            "shard": f"{shard[0]}/{shard[1]}" if shard else None,
            "started": self.started, "finished": _now(),
        }

    def document(self) -> dict:
        records = self.records()
        return document(self.environment(), records,
                        expectations={"stale": self.stale, "unexpected_passes": [
                            r["test_id"] for r in records if r["status"] == Status.UNEXPECTED_PASS]})


def _html_renderer():
    """The checkout's renderer (``reports/``, beside this package; not installed)."""
    if str(CHECKOUT) not in sys.path:
        sys.path.append(str(CHECKOUT))
    from reports.html import render
    return render


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except Exception:
        return None


def _git_commit() -> str | None:
    """HEAD of the checkout, with '+dirty' when tracked files differ from it: a report
    from an uncommitted tree must not pass for one of HEAD."""
    git = ["git", "-C", str(CHECKOUT)]
    try:
        head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = head and subprocess.run([*git, "diff", "--quiet", "HEAD", "--"],
                                        capture_output=True, timeout=30).returncode == 1
    except (OSError, subprocess.SubprocessError):
        return None
    return (head + "+dirty" if dirty else head) or None


def _driver(device) -> str | None:
    """The GPU driver version where a device is attached (nvidia-smi / rocm-smi), else the
    runtime torch was built for."""
    if device is not None:
        tool = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"] \
            if device.backend == "cuda" else ["rocm-smi", "--showdriverversion"]
        if shutil.which(tool[0]):
            try:
                out = subprocess.run(tool, capture_output=True, text=True, timeout=20).stdout
                return f"{tool[0]}: {first_line(out)}"
            except (OSError, subprocess.SubprocessError):
                pass
    try:
        import torch
        if torch.version.cuda:
            return f"cuda runtime {torch.version.cuda}"
        if getattr(torch.version, "hip", None):
            return f"hip runtime {torch.version.hip}"
    except Exception:
        pass
    return None
