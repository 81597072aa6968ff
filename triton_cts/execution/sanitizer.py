"""Device checks under NVIDIA's compute-sanitizer: ``--sanitize TOOL``.

The suites' guard regions catch a store just past an output. They cannot see a stray
read, a store far past the guard, a read of memory nothing wrote, a shared-memory race or
a misused barrier. ``--sanitize memcheck|racecheck|initcheck|synccheck`` runs the device
checks under compute-sanitizer with that tool, and a check during which it reports an
error fails, with each error's kind, kernel, access, address and thread in the message.

One sanitizer per process that runs device checks:

1. The first process (pytest without xdist, or the xdist controller; never a worker)
   finds ``compute-sanitizer`` (:func:`find_sanitizer`) and probes it on a one-element
   torch allocation (:data:`PROBE`). Where it is missing, cannot attach ("Device not
   supported" on some machines) or fails, every device check is skipped with
   ``not supported: compute-sanitizer TOOL: <why>``; workers read that verdict from
   :data:`ENV_UNSUPPORTED`.
2. Without xdist the process then replaces itself with the same command under the
   sanitizer (``os.execve``). Under ``-n N`` the controller stays as it is and each
   worker starts under a sanitizer of its own: every ``popen`` ``--tx`` spec gets a
   ``python=`` that runs :data:`_LAUNCHER`, which picks the worker's log file and execs
   the sanitizer with the worker's Python. A worker that xdist replaces (after a sticky
   device error, say) gets a fresh sanitizer and log. A sanitized process finds its log
   in :data:`ENV_LOG`.
3. In a sanitized process, after each check's call the plugin synchronizes the device,
   waits for the log to stop growing and parses what it gained (:func:`parse_log`).

memcheck and initcheck run with PyTorch's caching allocator off
(``PYTORCH_NO_CUDA_MEMORY_CACHING=1``): each tensor is then an allocation of its own, so a
read just past a tensor is outside any allocation (memcheck) and a new tensor is
uninitialized (initcheck) instead of recycled memory.
"""
from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass

import pytest

from triton_cts.errors import UsageError
from triton_cts.execution.lost_context import is_device_check
from triton_cts.results.status import NOT_SUPPORTED

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
NAME = "triton_cts.execution.sanitizer"
#: The compute-sanitizer executable to use, where it is not on PATH or in a CUDA folder.
ENV_BINARY = "TRITON_CTS_COMPUTE_SANITIZER"
#: Set in a process that runs under the sanitizer: the log file the sanitizer writes.
ENV_LOG = "TRITON_CTS_SANITIZER_LOG"
#: Set by the xdist controller for its workers: why device checks cannot be sanitized.
ENV_UNSUPPORTED = "TRITON_CTS_SANITIZER_UNSUPPORTED"
#: What the probe runs under the sanitizer: one allocation and kernel on the device.
PROBE = "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"
PROBE_TIMEOUT_S = 300
#: Errors a sanitizer prints over its process's life before it stops printing them.
PRINT_LIMIT = 100_000
#: After a device check, how long the log must stay the same size before it is read, and
#: the longest wait for that.
SETTLE_S, SETTLE_MAX_S = 0.06, 2.0
#: Options of one tool: memcheck leaves 64 KiB (the largest block a bundled profile lets a
#: program hold) unallocated after every allocation, so a block read or written past the
#: end of a tensor never lands in the next one, where memcheck could not tell.
TOOL_OPTIONS = {"memcheck": ("--padding", "65536")}
#: The user property holding a check's errors (one dict per error) for reports.
PROPERTY = "sanitizer_errors"
PREFIX = "========="
#: Runs each xdist worker: argv = log folder, then the sanitizer command with ``{log}``
#: where the log file goes. The log is named after this process's id, which the sanitizer
#: keeps (exec), so every sanitizer of a run writes a file of its own.
_LAUNCHER = ("import os, sys; folder, cmd = sys.argv[1], sys.argv[2:]; "
             "log = os.path.join(folder, 'worker.%d.log' % os.getpid()); "
             f"os.environ[{ENV_LOG!r}] = log; "
             "cmd = [log.replace('%', '%%') if a == '{log}' else a for a in cmd]; "
             "os.execv(cmd[0], cmd)")


# ---- the sanitizer's report ----------------------------------------------------------
@dataclass(frozen=True)
class SanitizerError:
    """One error the sanitizer reported. ``what`` is its first line ("Invalid __global__
    read of size 4 bytes", "Uninitialized __global__ memory read of size 2 bytes", "Barrier
    error detected. Divergent thread(s) in warp"), or for racecheck "shared-memory race
    (error) between Write access at <kernel>+0x.. and Read access at <kernel>+0x..", with
    the hazard count in ``address``."""

    what: str
    kernel: str | None = None
    where: str | None = None      # offset in the kernel, source line
    thread: str | None = None
    block: str | None = None
    address: str | None = None    # the address and how it relates to allocations
    details: tuple[str, ...] = ()

    def describe(self) -> str:
        text = self.what
        if self.kernel and self.kernel not in self.what:
            text += f" in kernel {self.kernel}" + (f" ({self.where})" if self.where else "")
        if self.thread or self.block:
            text += f" by thread ({self.thread}) in block ({self.block})"
        return f"{text}: {self.address}" if self.address else text


#: First lines of what the sanitizer prints that are not errors of the program.
_NOT_ERRORS = re.compile(
    r"^(COMPUTE-SANITIZER|CUDA-MEMCHECK|\w+ SUMMARY\b|Target application|Program hit "
    r"|Warning: (?!Race reported)|This tool is deprecated|Please use|Error: Target application"
    r" terminated before first instrumented API call)")
_THREAD = re.compile(r"by thread \(([^)]*)\) in block \(([^)]*)\)")
_RACE = re.compile(r"^(Error|Warning): Race reported between (\w+) access at (.+)$")
_RACE_MORE = re.compile(r"^and (\w+) access at (.+?)(?: \[(\d+) hazards?\])?$")
_HAZARDS = re.compile(r" \[(\d+) hazards?\]$")
_BACKTRACE = re.compile(r"^(Saved host backtrace|Host Frame|Device Frame|in /|in \[)")


def parse_log(text: str) -> list[SanitizerError]:
    """The errors in compute-sanitizer output: blocks of lines that start with
    ``=========``, a report's first line after one space and its details indented."""
    blocks: list[tuple[str, list[str]]] = []
    current = None
    for raw in text.splitlines():
        line = raw.rstrip().replace("\x00", "")
        if not line.startswith(PREFIX):
            continue
        body = line[len(PREFIX):]
        if not body.strip():
            current = None
        elif body.startswith(" ") and not body.startswith("  "):
            current = (body.strip(), [])
            blocks.append(current)
        elif current is not None:
            current[1].append(body.strip())
    return [e for header, lines in blocks if (e := _error(header, lines)) is not None]


def _error(header: str, lines: list[str]) -> SanitizerError | None:
    if _NOT_ERRORS.match(header):
        return None
    race = _RACE.match(header)
    if race:
        return _race(race, lines)
    location = next((ln[3:] for ln in lines if ln.startswith("at ")), None)
    kernel, where = _location(location) if location else (None, None)
    thread = block = None
    for ln in [header, *lines]:
        m = _THREAD.search(ln)
        if m:
            thread, block = m.groups()
            break
    details = [ln for ln in lines if not ln.startswith("at ") and not _THREAD.search(ln)
               and not _BACKTRACE.match(ln)]
    address = None
    for ln in details:  # "Access to 0x.. is out of bounds" "and is 4 bytes after ..."
        address = ln if address is None else \
            f"{address}{' ' if ln.startswith('and ') else '; '}{ln}"
    return SanitizerError(header, kernel, where, thread, block, address, tuple(details))


def _race(match: re.Match, lines: list[str]) -> SanitizerError:
    severity, first_kind, first_at = match.groups()
    accesses = [(first_kind, first_at)]
    hazards = 0
    for ln in lines:
        more = _RACE_MORE.match(ln)
        if more:
            accesses.append((more.group(1), more.group(2)))
            hazards += int(more.group(3) or 0)
    first_at, n = _HAZARDS.sub("", first_at), _HAZARDS.search(first_at)
    accesses[0] = (first_kind, first_at)
    hazards += int(n.group(1)) if n else 0
    kernel, where = _location(first_at)
    sites = " and ".join(f"{kind} access at {at}" for kind, at in accesses)
    what = f"shared-memory race ({severity.lower()}) between {sites}"
    count = f"{hazards} hazard{'s' if hazards != 1 else ''}" if hazards else None
    return SanitizerError(what, kernel, where, address=count,
                          details=tuple([match.group(0), *lines]))


def _location(text: str) -> tuple[str | None, str | None]:
    """(function, where) of a report's location: ``kernel+0x1f0 in file.py:12`` (recent
    versions) or ``0x1f0 in /path/file.py:12:kernel`` (older ones)."""
    text = text.strip()
    m = re.match(r"^(?P<fn>.+?)\+(?P<off>0x[0-9a-fA-F]+)(?: in (?P<src>.+))?$", text)
    if m:
        where = f"{m['src']}, +{m['off']}" if m["src"] else f"+{m['off']}"
        return m["fn"], where
    m = re.match(r"^(?P<off>0x[0-9a-fA-F]+) in (?P<rest>.+)$", text)
    if m:
        src = re.match(r"^(?P<src>.+?:\d+):(?P<fn>.+)$", m["rest"])
        if src:
            return src["fn"], f"{src['src']}, +{m['off']}"
        return m["rest"], f"+{m['off']}"
    return text, None


def format_errors(tool: str, errors: list[SanitizerError], limit: int = 10) -> str:
    """A failure message: the errors grouped by kind, kernel and place, each group's first
    error in full with how many more there were."""
    groups = Counter((e.what, e.kernel, e.where) for e in errors)
    first = {}
    for e in errors:
        first.setdefault((e.what, e.kernel, e.where), e)
    lines = [f"compute-sanitizer {tool} reported {len(errors)} error"
             f"{'s' if len(errors) != 1 else ''} during this check:"]
    for key, count in list(groups.items())[:limit]:
        more = f" (and {count - 1} more like it)" if count > 1 else ""
        lines.append(f"- {first[key].describe()}{more}")
    if len(groups) > limit:
        lines.append(f"- ... and {len(groups) - limit} other kinds of error")
    return "\n".join(lines)


def summary(tool: str, errors: list[SanitizerError]) -> str:
    """One line: the first error, and how many others there were."""
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"compute-sanitizer {tool}: {errors[0].describe()}{more}"


# ---- finding, probing and starting the sanitizer -------------------------------------
def find_sanitizer(environ=None) -> str | None:
    """``$TRITON_CTS_COMPUTE_SANITIZER``, else compute-sanitizer on PATH, in the CUDA
    toolkit (``$CUDA_HOME``, ``/usr/local/cuda*``) or in an NVIDIA wheel (the triton
    wheel's bundled tools, ``nvidia-cuda-sanitizer-api``)."""
    environ = os.environ if environ is None else environ
    if environ.get(ENV_BINARY):
        given = environ[ENV_BINARY]
        return given if os.sep in given else (shutil.which(given) or given)
    found = shutil.which("compute-sanitizer", path=environ.get("PATH"))
    if found:
        return found
    candidates = []
    for home in (environ.get("CUDA_HOME"), environ.get("CUDA_PATH"), "/usr/local/cuda",
                 *sorted(glob.glob("/usr/local/cuda-*"), reverse=True)):
        if home:
            candidates += [os.path.join(home, "bin", "compute-sanitizer"),
                           os.path.join(home, "compute-sanitizer", "compute-sanitizer")]
    for package in ("triton", "nvidia"):
        spec = _find_spec(package)
        for root in (spec.submodule_search_locations or []) if spec else []:
            for depth in range(1, 4):  # e.g. triton/backends/nvidia/bin/compute-sanitizer
                candidates += sorted(glob.glob(os.path.join(root, *["*"] * depth,
                                                            "compute-sanitizer")))
    return next((c for c in candidates if os.path.isfile(c) and os.access(c, os.X_OK)), None)


def _find_spec(package: str):
    import importlib.util
    try:
        return importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None


def sanitizer_command(binary: str, tool: str, log: str, target: list[str]) -> list[str]:
    """The command that runs ``target`` under ``binary --tool tool``, writing its report
    to ``log`` only (the target's own output is left alone) and leaving the exit status
    to the target: no ``--error-exitcode``, which, set to 0, made a run whose checks
    failed exit 0 wherever the tool found an error (compute-sanitizer 2025.3)."""
    return [binary, "--tool", tool, "--log-file", log,
            "--print-limit", str(PRINT_LIMIT),
            "--report-api-errors", "no", "--show-backtrace", "no",
            "--require-cuda-init", "no", *TOOL_OPTIONS.get(tool, ()), *target]


def sanitized_environment(tool: str) -> dict[str, str]:
    """What a sanitized process's environment needs for ``tool`` (see the module doc)."""
    return {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"} if tool in ("memcheck", "initcheck") else {}


def probe(binary: str, tool: str, python: str | None = None,
          timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None where ``binary --tool tool`` runs :data:`PROBE` cleanly, else why not."""
    with tempfile.TemporaryDirectory(prefix="triton-cts-probe-") as folder:
        log = os.path.join(folder, "probe.log")
        command = sanitizer_command(binary, tool, log.replace("%", "%%"),
                                    [python or sys.executable, "-c", PROBE])
        env = {**os.environ, **sanitized_environment(tool)}
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                  env=env, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return f"{binary} did not finish the probe ({PROBE}) in {timeout:.0f} s"
        except OSError as exc:
            return f"{binary} cannot be run: {exc}"
        text = open(log, errors="replace").read() if os.path.exists(log) else ""
        return probe_verdict(done.returncode, text, done.stdout + done.stderr)


def probe_verdict(returncode: int, log_text: str, output: str) -> str | None:
    """Why a probe run did not show the sanitizer working (its "Error:" or "not
    supported" line, or the probe's exit status and last line), or None."""
    said = [ln[len(PREFIX):].strip() if ln.startswith(PREFIX) else ln.strip()
            for ln in (log_text + "\n" + output).splitlines()]
    for line in said:
        if re.search(r"not supported|^(Internal Sanitizer )?Error\b|unrecogni[sz]ed option"
                     r"|unknown option|invalid option", line, re.IGNORECASE) \
                and not _NOT_ERRORS.match(line):
            return re.sub(r"^Error:\s*", "", line)
    if returncode != 0:
        tail = next((ln for ln in reversed(output.splitlines()) if ln.strip()), "")
        return f"the probe ({PROBE}) exited with status {returncode}" + \
            (f": {tail.strip()}" if tail else "")
    errors = parse_log(log_text)
    if errors:
        return f"the probe ({PROBE}) already gets {len(errors)} errors: {errors[0].describe()}"
    return None


def sanitized_specs(specs: list[str], binary: str, tool: str, log_dir: str) -> list[str]:
    """xdist ``--tx`` specs whose workers start under the sanitizer (each through
    :data:`_LAUNCHER`, with :func:`sanitized_environment`). Only local (``popen``) workers
    can be sanitized."""
    out = []
    for spec in specs:
        keys = dict(part.partition("=")[::2] for part in spec.split("//"))
        if "popen" not in keys:
            raise UsageError(f"--sanitize: the xdist worker spec '{spec}' is not local "
                             f"(popen); the sanitizer runs local workers only (-n N)")
        python = shlex.split(keys["python"]) if keys.get("python") else [sys.executable]
        command = [sys.executable, "-c", _LAUNCHER, log_dir,
                   *sanitizer_command(binary, tool, "{log}", python)]
        parts = [p for p in spec.split("//") if not p.startswith("python=")]
        parts.append("python=" + shlex.join(command))
        parts += [f"env:{k}={v}" for k, v in sanitized_environment(tool).items()]
        if any("//" in p for p in (log_dir, binary, *python)):
            raise UsageError(f"--sanitize: '//' in a path cannot go into an xdist spec: "
                             f"{log_dir}, {binary}, {' '.join(python)}")
        out.append("//".join(parts))
    return out


# ---- the pytest plugin ---------------------------------------------------------------
class Sanitizer:
    def __init__(self, config: pytest.Config, tool: str):
        self.config = config
        self.tool = tool
        self.on_worker = hasattr(config, "workerinput")
        self.unsupported: str | None = None  # why device checks cannot be sanitized
        self.note: str | None = None         # for the report header
        self.log: str | None = None          # this process's log, where it is sanitized
        self.offset = 0

    # -- deciding, in the first process ------------------------------------------------
    def start(self, sel) -> None:
        if self.on_worker:
            self.log = os.environ.pop(ENV_LOG, None)
            self.unsupported = os.environ.pop(ENV_UNSUPPORTED, None)
        elif os.environ.get(ENV_LOG):  # this process was restarted under the sanitizer
            self.log = os.environ.pop(ENV_LOG)
        else:
            self._decide(sel)
        if self.log:
            self.offset = _size(self.log)
            self.note = f"device checks run under compute-sanitizer {self.tool} " \
                        f"(log: {self.log})"

    def _decide(self, sel) -> None:
        from triton_cts.execution.modes import Mode

        tool = f"compute-sanitizer {self.tool}"
        selected = {p.name for p in sel.profiles}
        if Mode.DEVICE not in sel.modes:
            self.note = f"{tool}: device mode is not selected; nothing runs under it"
            return
        if sel.device is None or sel.device_profile not in selected:
            self.note = f"{tool}: no device check can run here; nothing runs under it"
            return
        if self.config.getoption("collectonly", False) or self.config.getoption("help", False):
            return
        distributed = self.config.getoption("dist", "no") != "no" \
            and bool(self.config.getoption("tx", None))
        binary = find_sanitizer()
        if sel.device.backend != "cuda":  # ROCm's torch says device "cuda", backend "hip"
            reason = f"it checks NVIDIA GPUs; the attached device is {sel.device.name} " \
                     f"({sel.device.backend})"
        elif binary is None:
            reason = (f"compute-sanitizer was not found on PATH, under $CUDA_HOME or "
                      f"/usr/local/cuda*, or in the triton wheel; set {ENV_BINARY} to it")
        elif not distributed and not _restartable(self.config):
            reason = ("pytest runs inside another program, which cannot be restarted under "
                      "the sanitizer: run pytest as a command, or with -n N")
        else:
            reason = probe(binary, self.tool)
        if reason:
            self.unsupported = reason
            if distributed:
                os.environ[ENV_UNSUPPORTED] = reason
            return
        log_dir = tempfile.mkdtemp(prefix=f"triton-cts-{self.tool}-")
        if distributed:
            self.config.option.tx = sanitized_specs(self.config.getoption("tx"), binary,
                                                    self.tool, log_dir)
            self.note = f"each worker runs under {binary} --tool {self.tool} " \
                        f"(logs: {log_dir}/worker.<pid>.log)"
            return
        self._restart(binary, log_dir)

    def _restart(self, binary: str, log_dir: str) -> None:
        """Replace this process with the same pytest command under the sanitizer."""
        log = os.path.join(log_dir, "sanitizer.log")
        command = sanitizer_command(binary, self.tool, log.replace("%", "%%"),
                                    [sys.executable, *sys.orig_argv[1:]])
        env = {**os.environ, **sanitized_environment(self.tool), ENV_LOG: log}
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            os.chdir(self.config.invocation_params.dir)
            os.execve(binary, command, env)
        except OSError as exc:
            self.unsupported = f"{binary} cannot be started: {exc}"

    # -- hooks ---------------------------------------------------------------------------
    def pytest_report_header(self, config):
        if self.unsupported:
            return [f"triton-cts: compute-sanitizer {self.tool}: device checks not supported: "
                    f"{self.unsupported}"]
        return [f"triton-cts: {self.note}"] if self.note else []

    def pytest_collection_modifyitems(self, config, items):
        if not self.unsupported:
            return
        mark = pytest.mark.skip(
            reason=f"{NOT_SUPPORTED}compute-sanitizer {self.tool}: {self.unsupported}")
        for item in items:
            if is_device_check(item) and item.get_closest_marker("skip") is None:
                item.add_marker(mark)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        if self.log is None or call.when != "call":
            return report
        errors = self.collect(wait=is_device_check(item))
        if errors:
            self._fail(item, report, errors)
        return report

    def collect(self, wait: bool = True) -> list[SanitizerError]:
        """The errors the log gained since the last call: after the device's work is done
        and, with ``wait``, once the log has stopped growing."""
        if wait:
            _synchronize()
            _settle(self.log)
        try:
            with open(self.log, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return []
        end = data.rfind(b"\n") + 1  # whole lines only; the rest is read next time
        self.offset += end
        return parse_log(data[:end].decode("utf-8", errors="replace"))

    def _fail(self, item, report, errors: list[SanitizerError]) -> None:
        message = format_errors(self.tool, errors)
        repro = next((v for k, v in item.user_properties if k == "repro"), None)
        if repro:  # the suites' repro command does not know about the sanitizer
            message += f"\nreproduce: {repro} --sanitize {self.tool}"
        value = [asdict(e) for e in errors[:100]]
        item.user_properties.append((PROPERTY, value))
        report.user_properties.append((PROPERTY, value))
        if hasattr(report, "wasxfail"):  # an expected failure stays expected
            report.sections.append((f"compute-sanitizer {self.tool}", message))
        elif report.failed:
            # the cause leads the section: the short summary that also carries it is cut
            # to the terminal's width, and a long check id leaves it no room
            report.sections.append((f"compute-sanitizer {self.tool}",
                                    f"{summary(self.tool, errors)}\n\n{message}"))
            crash = getattr(report.longrepr, "reprcrash", None)
            if crash is not None:
                crash.message = f"{summary(self.tool, errors)}; {crash.message}"
        else:
            report.outcome = "failed"
            report.longrepr = f"{summary(self.tool, errors)}\n\n{message}"


def _restartable(config: pytest.Config) -> bool:
    """Whether this process is pytest run as a command (so it can run again under the
    sanitizer), not pytest.main() inside another program."""
    args = list(config.invocation_params.args)
    return args == sys.argv[1:] and (not args or list(sys.orig_argv[-len(args):]) == args)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _synchronize() -> None:
    from triton_cts.execution import devices
    try:
        if devices.initialized():
            devices.synchronize()
    except Exception:  # a sticky device error: the check has already failed with it
        pass


def _settle(path: str) -> None:
    """Wait until ``path`` has kept its size for :data:`SETTLE_S` (the sanitizer writes
    its reports from its own process)."""
    deadline = time.monotonic() + SETTLE_MAX_S
    size, since = _size(path), time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - since < SETTLE_S:
        time.sleep(0.02)
        now = _size(path)
        if now != size:
            size, since = now, time.monotonic()


def register(config: pytest.Config, sel) -> None:
    """Register the plugin for ``--sanitize TOOL`` (``sel``: the run's Selection); without
    the option, nothing."""
    tool = config.getoption("sanitize", None)
    if not tool:
        return
    plugin = Sanitizer(config, tool)
    config.pluginmanager.register(plugin, NAME)
    try:
        plugin.start(sel)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
