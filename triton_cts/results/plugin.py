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
from collections import Counter
import platform
import shlex
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from triton_cts import CHECKOUT
from triton_cts.execution import coverage
from triton_cts.results import behaviour, input_coverage
from triton_cts.targets import CHECK_PROPERTY, is_check, is_suite_test_id
from triton_cts.results.expectations import (expectation_record, known_defect_files,
                                             known_lines, known_waived, load_expectations,
                                             match_expectation, parse_shard, shard_of,
                                             stale_expectations, updated_expectations_toml)
from triton_cts.results.records import (Record, conforms, split_properties, summary_table,
                                        verdict)
from triton_cts.results.report_io import ReportError, atomic_write, document, dump_report
from triton_cts.results.interruption import RunWatch
from triton_cts.results.records import outcome, run_problems
from triton_cts.results.status import (MESSAGE_LIMIT, ExpectationWarning, Status, bounded,
                                       classify_phase, failing_shape, failure_message,
                                       falsifying_example, first_line, is_quality_warning,
                                       traceback_tail, worst)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("triton-cts-reports", "triton-cts reports")
    group.addoption("--report-json", metavar="PATH", default=None,
                    help="write the run's environment and one record per check as JSON.")
    group.addoption("--report-html", metavar="PATH", default=None,
                    help="write a self-contained HTML report.")
    group.addoption("--expectations", action="append", default=[], metavar="FILE",
                    help="expectation file (TOML) of known failures to waive. Repeatable.")
    group.addoption("--no-known-defects", action="store_true", default=False,
                    help="do not waive the known upstream defects the suite ships for this "
                         "Triton version and the selected profiles' families "
                         "(expectations/triton-X.Y/FAMILY.toml, used by default).")
    group.addoption("--write-expectations", metavar="FILE", default=None,
                    help="write the checks that do not pass as a new expectation baseline.")
    group.addoption("--shard", metavar="I/N", default=None,
                    help="run only shard I of N (1-based), split by a stable hash of the "
                         "test id; 'python -m reports merge' joins the shards' JSON.")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Refuse an unknown ``--hypothesis-profile`` before hypothesis' plugin loads it (its
    InvalidArgument ends the run in an INTERNALERROR)."""
    name = config.getoption("hypothesis_profile", None)
    if not name:
        return
    from hypothesis import settings
    try:
        settings.get_profile(name)
    except Exception:  # hypothesis.errors.InvalidArgument: not registered
        known = sorted(getattr(settings, "_profiles", {}) or ())
        raise pytest.UsageError(f"--hypothesis-profile {name}: no such hypothesis profile"
                                + (f" (registered: {', '.join(known)})" if known else "")) from None


@pytest.hookimpl(trylast=True)  # after the selection is built: known defects follow it
def pytest_configure(config: pytest.Config) -> None:
    from triton_cts.execution.size_budget import max_numel_override
    from triton_cts.results.report_io import check_outputs

    try:
        max_numel_override()  # a bad TRITON_CTS_MAX_NUMEL stops the run here, not in a kernel
        expectations = [e for f in config.getoption("expectations") for e in load_expectations(f)]
        config.stash[KNOWN_FILES] = _known_files(config)
        expectations += [e for f in config.stash[KNOWN_FILES]
                         for e in load_expectations(f, known=True)]
        shard = parse_shard(config.getoption("shard")) if config.getoption("shard") else None
        if not hasattr(config, "workerinput"):
            # Outputs are written when the run ends: one that cannot be is refused now.
            baseline = config.getoption("write_expectations")
            check_outputs({"--report-json": config.getoption("report_json"),
                           "--report-html": config.getoption("report_html"),
                           "--write-expectations": baseline,
                           "--junitxml": config.getoption("xmlpath", None)},
                          [("--expectations", f) for f in config.getoption("expectations")],
                          updates=("--write-expectations",))  # a baseline updated in place
            if baseline and Path(baseline).is_file():
                load_expectations(baseline)  # updated at the end, so it must read now
    except (ReportError, ValueError) as exc:  # UsageError is a ValueError
        raise pytest.UsageError(str(exc)) from None
    config.stash[EXPECTATIONS] = expectations
    config.stash[SHARD] = shard
    if not hasattr(config, "workerinput"):  # the controller, or a run without xdist
        config.pluginmanager.register(Collector(config), COLLECTOR)


EXPECTATIONS = pytest.StashKey[list]()
KNOWN_FILES = pytest.StashKey[list]()


def _known_files(config: pytest.Config) -> list:
    """The shipped known-defect files for this run's Triton and selected profiles."""
    from triton_cts.targets import SELECTION_KEY

    sel = config.stash.get(SELECTION_KEY, None)
    if sel is None or config.getoption("no_known_defects"):
        return []
    return known_defect_files(_version("triton"), {p.vendor for p in sel.profiles})
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


COLLECTOR = "triton_cts.results.plugin.collector"


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """A run whose records do not conform exits non-zero even where pytest counted no
    failed test (a suite test that could not be attributed to a check passes as a test,
    but is a harness error as a check): CI reads the exit status, not the report."""
    collector = session.config.pluginmanager.get_plugin(COLLECTOR)
    if collector is None or session.exitstatus != pytest.ExitCode.OK:
        return
    records = collector.records()
    if records and not conforms(records):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


class Collector(RunWatch):
    """Builds the records from the reports this process sees, and writes the outputs.
    Signals and interruptions: :class:`triton_cts.results.interruption.RunWatch`."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.phases: dict[str, list] = {}          # test id -> [(report, status, reason)]
        self.collect_errors: dict[str, str] = {}
        self.quality: dict[str, list[str]] = {}
        self.stale: list[str] = []
        self.started = _now()
        self.fields: dict[str, dict] = {}          # test id -> what it checks (CHECK_PROPERTY)
        self.collected_checks: list[str] = []     # suite test ids this run collected
        self._records = None

    # -- which tests are checks ------------------------------------------------------------
    def is_check(self, report) -> bool:
        """Whether a report is a suite check's; remembers what the check checks. Every
        suite item carries its fields (``targets.check_fields``, attached at collection);
        a report without them (xdist's report of a worker crash) is a check when an
        earlier report of the same test was, or when its file is a suite's."""
        fields = next((v for k, v in getattr(report, "user_properties", ())
                       if k == CHECK_PROPERTY), None)
        if fields is not None:
            self.fields[report.nodeid] = fields
        return report.nodeid in self.fields or is_suite_test_id(report.nodeid)

    def pytest_collection_finish(self, session) -> None:
        """The suite checks collected in this process (a run without xdist)."""
        self.collected_checks = [i.nodeid for i in session.items if is_check(i)]

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        """Under xdist every worker collects the same ids; the controller knows only ids."""
        if not self.collected_checks:
            self.collected_checks = [i for i in ids if is_suite_test_id(i)]

    # -- hooks -----------------------------------------------------------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not self.is_check(report):
            return
        message, text, cause = "", "", {}
        if report.skipped and isinstance(report.longrepr, tuple):
            message = str(report.longrepr[2]).removeprefix("Skipped: ")
        elif report.failed:
            text = report.longreprtext if not isinstance(report.longrepr, str) else report.longrepr
            crash = getattr(report.longrepr, "reprcrash", None)
            # the whole cause: Triton's multi-line CompilationError body and the error it
            # was raised from, the last frames
            message = failure_message(report.longrepr, crash.message) if crash is not None \
                else first_line(text)
            cause = {"message": bounded(message if crash is not None else text, MESSAGE_LIMIT),
                     "traceback": traceback_tail(report.longrepr)}
        elif getattr(report, "wasxfail", None) is not None and report.longrepr is not None:
            # a waived failure keeps its cause: the report shows what the known defect did
            crash = getattr(report.longrepr, "reprcrash", None)
            if crash is not None:
                cause = {"message": bounded(failure_message(report.longrepr, crash.message),
                                            MESSAGE_LIMIT),
                         "traceback": traceback_tail(report.longrepr)}
        status, reason = classify_phase(report.when, report.outcome, message, text,
                                        getattr(report, "wasxfail", None))
        self.phases.setdefault(report.nodeid, []).append((report, status, reason, text, cause))
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
        self._session, self._notes = session, []
        self._quiet = True  # a second signal must not cut the writing short
        try:
            doc = self.document()
            if cfg.getoption("report_json"):
                dump_report(doc, cfg.getoption("report_json"))
            if cfg.getoption("report_html"):
                render = _html_renderer()
                atomic_write(cfg.getoption("report_html"), render(doc))
            if cfg.getoption("write_expectations") and doc["run"]["interrupted"]:
                self._notes.append("write-expectations: not written: the run was interrupted "
                                   "(a baseline must come from a whole run)")
            elif cfg.getoption("write_expectations"):
                atomic_write(cfg.getoption("write_expectations"), updated_expectations_toml(
                    cfg.getoption("write_expectations"), doc["records"], self.collected_checks,
                    note=f"command: {doc['environment']['command']}"))
        except OSError as exc:
            raise pytest.UsageError(f"cannot write a report: {exc}") from None
        finally:
            self.restore_signals()
        # The exit status says what the verdict says: a run that checked nothing, or ran
        # no check in a --require-mode mode, fails (an interrupted run already exits 2).
        checks = doc["records"] or doc["run"]["collected"]
        if (checks and session.exitstatus == pytest.ExitCode.OK and not cfg.getoption("collectonly")
                and outcome(doc["records"], doc["run"]) != "conforms"):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    _session = None     # set at session start (RunWatch) and finish
    _notes = ()         # lines for the terminal summary (a baseline not written, say)

    def final_records(self) -> list[dict]:
        """The records, with the checks running when the run was interrupted marked
        Interrupted."""
        def fields_of(test_id):
            if test_id in self.fields:
                return self.fields[test_id]
            item = next((i for i in getattr(self._session, "items", None) or ()
                         if i.nodeid == test_id), None)
            return next((v for k, v in getattr(item, "user_properties", ())
                         if k == CHECK_PROPERTY), None)
        return self.mark_interrupted(self.records(), fields_of)

    def run(self, records: list[dict]) -> dict:
        """The document's ``run`` object (see ``RunWatch.run_info``)."""
        collected = list(getattr(self, "collected_checks", None) or [])
        if not collected and self._session is not None:
            collected = [i.nodeid for i in self._session.items if is_check(i)]
        return self.run_info(records, collected, self._session,
                             self.config.getoption("require_mode", None) or ())

    def pytest_terminal_summary(self, terminalreporter) -> None:
        records = self.final_records()
        run = self.run(records)
        if not records and not run["collected"]:  # no suite checks: the harness's own tests
            return
        tr = terminalreporter
        tr.section("triton-cts conformance")
        tr.write_line(summary_table(records))
        unexpected = [r["test_id"] for r in records if r["status"] == Status.UNEXPECTED_PASS]
        for tid in unexpected:
            tr.write_line(f"unexpected pass (remove its expectation entry): {tid}", yellow=True)
        for msg in self.stale:
            tr.write_line(f"stale {msg}", yellow=True)
        for line in known_lines(known_waived(records)):
            tr.write_line(line)
        every = self.config.getoption("verbose") > 0
        users = [r for r in records if not (r.get("expectation") or {}).get("known")]
        for line in (reason_summary(records, Status.NOT_SUPPORTED, every)
                     + reason_summary(users, Status.WAIVED, every)):  # known ones: above
            tr.write_line(line)
        gaps = coverage.summarize(records)["gaps"]
        if gaps:  # a quality warning of the run: paths no check reached
            tr.write_line(f"launch coverage: {len(gaps)} gap(s), situations no check "
                          f"reached (the report's \"coverage\" lists them): "
                          + "; ".join(gaps[:5]) + (" ..." if len(gaps) > 5 else ""),
                          yellow=True)
        inputs = input_coverage.table(records)  # a gap is a quality warning of the run
        for line in input_coverage.summary_lines(inputs):
            tr.write_line(line, yellow=bool(inputs["gaps"]))
        for opt in ("report_json", "report_html", "write_expectations"):
            if self.config.getoption(opt):
                tr.write_line(f"{opt.replace('_', '-')}: {self.config.getoption(opt)}")
        for note in self._notes:
            tr.write_line(note, yellow=True)
        for problem in run_problems(records, run):
            tr.write_line(problem, red=True)
        line = verdict(records, run)
        ok = outcome(records, run) == "conforms"
        tr.write_line(line, bold=True, green=ok, red=not ok)

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
        fields = dict(self.fields.get(nodeid) or {
            "suite": Path(nodeid.split("::")[0]).stem, "test": nodeid.split("::")[-1],
            "unattributed": f"{nodeid}: no report carried what it checks (the test never "
                            f"reached setup in a process that collected it)"})
        unattributed = fields.pop("unattributed", None)
        status = worst(s for _, s, *_ in phases)
        reason = next((r for _, s, r, *_ in phases if s is status and r), "")
        cause = next((c for _, s, _, _, c in phases if s is status and c), {})
        if unattributed:  # a record all the same, never silence
            if status in (Status.CRASH, Status.HARNESS_ERROR):
                reason = f"{reason}; {unattributed}" if reason else unattributed
            else:
                status, reason = Status.HARNESS_ERROR, unattributed
        text = "\n".join(t for _, _, _, t, _ in phases if t)
        # Properties accumulate on the item: the last phase report carries all of them.
        split = split_properties([(k, v) for k, v in max(
            (list(getattr(rep, "user_properties", [])) for rep, *_ in phases), key=len)
            if k != CHECK_PROPERTY])
        quality = split.pop("quality_warnings") + self.quality.get(nodeid, [])
        if status is Status.PASS and quality:
            status, reason = Status.QUALITY_WARNING, quality[0]
        exp = match_expectation(nodeid, self.config.stash[EXPECTATIONS])
        rec = Record(test_id=nodeid, status=status, reason=reason,
                     quality_warnings=list(dict.fromkeys(quality)),
                     shape=failing_shape(text) if text else None,
                     example=falsifying_example(text) if text else None,
                     duration_s=round(sum(rep.duration for rep, *_ in phases), 4),
                     message=cause.get("message"), traceback=cause.get("traceback"),
                     **fields, **split).to_dict()
        rec["expectation"] = expectation_record(exp)
        return rec

    def environment(self) -> dict:
        from triton_cts.execution import size_budget
        from triton_cts.targets import selection

        sel = selection(self.config)
        shard = self.config.stash[SHARD]
        # the drawn inputs' size cap in each mode that draws them
        max_numel = {mode: size_budget.max_numel(mode) for mode in ("device", "interpreter")}
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
            "devices": list(sel.devices),  # device mode's accelerators, the workers' spread
            "profiles": [p.name for p in sel.profiles],
            "modes": [m.value for m in sel.modes],
            "implementations": sorted({i.name for i in sel.impls}),
            "git_commit": _git_commit(),
            "command": shlex.join(["pytest", *self.config.invocation_params.args]),
            "hypothesis": {"profile": hyp_profile, "derandomize": derandomize,
                           "seed": self.config.getoption("hypothesis_seed", None)},
            "expectation_files": list(self.config.getoption("expectations")) + [
                _in_checkout(f) for f in self.config.stash.get(KNOWN_FILES, [])],
            "shard": f"{shard[0]}/{shard[1]}" if shard else None,
            "max_numel": max_numel,
            # a loosened bound must be visible wherever the report is read
            "tolerance_overrides": [{"profile": p.name, **o} for p in sel.profiles
                                    for o in p.tolerance_overrides()],
            "started": self.started, "finished": _now(),
        }

    def document(self) -> dict:
        records = self.final_records()
        return document(self.environment(), records,
                        expectations={"stale": self.stale, "unexpected_passes": [
                            r["test_id"] for r in records if r["status"] == Status.UNEXPECTED_PASS],
                            "known": known_waived(records)},
                        run=self.run(records), coverage=coverage.summarize(records),
                        input_coverage=input_coverage.table(records),
                        **behaviour.tables(records))  # behaviour and ulp tables


def _html_renderer():
    """The checkout's renderer (``reports/``, beside this package; not installed)."""
    if str(CHECKOUT) not in sys.path:
        sys.path.append(str(CHECKOUT))
    from reports.html import render
    return render


def reason_summary(records: list[dict], status: Status, every: bool = False,
                   most: int = 10) -> list[str]:
    """The checks of one status in a line per reason, most frequent first (``most`` of
    them unless ``every``): pytest's ``-ra`` gives three lines per check instead."""
    reasons = Counter(first_line(r.get("reason") or "-", 200) for r in records
                      if r["status"] == status.value)
    if not reasons:
        return []
    shown = reasons.most_common(None if every else most)
    lines = [f"{status.value.replace('_', ' ')}: {sum(reasons.values())} check(s), "
             f"{len(reasons)} reason(s):"] + [f"  {n:6d}  {why}" for why, n in shown]
    if len(shown) < len(reasons):
        lines.append(f"  ... and {len(reasons) - len(shown)} more reason(s) (-v lists them "
                     f"all; each record in --report-json holds its own)")
    return lines


def _in_checkout(path) -> str:
    path = Path(path)
    return str(path.relative_to(CHECKOUT)) if path.is_relative_to(CHECKOUT) else str(path)


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
