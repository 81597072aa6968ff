"""Golden compile stats: registers, spills and shared memory per compiled kernel, kept per
(triton version, profile) in ``suites/golden/triton-<version>/<profile>.json``.

Codegen changes between Triton versions (the same gfx942 matmul: 166 VGPRs in 3.6, 109 in
3.9), so a file holds one version's numbers; another version has no file and says so.
A check's kernels are compared with its entry: a rise beyond :data:`THRESHOLDS` is a
regression (the suite fails with the old and new numbers); a fall beyond them is an
improvement, reported with :class:`GoldenImprovedWarning` so the file gets refreshed, never a
failure (a kernel that already spills is at the register allocator's mercy: the same
gfx942 attention backward spilled 36 registers on one machine and 34 on another); a kernel
with no entry is reported with :class:`GoldenMissingWarning`, and with
:class:`GoldenStaleWarning`, a quality warning, where its check has an entry (which went
stale).

A regression is confirmed before it fails: the check is compiled again in a new Python
process with an empty Triton cache (:func:`remeasure`). Some codegen depends on what the
process compiled before (Triton 3.9's gfx942 attention backward: the same TTGIR gave 23
spills in a fresh process and 30 after other kernels), and a fresh clone's CI run is a
fresh process per xdist worker, not per kernel. A regression the fresh process does not
reproduce is reported with :class:`GoldenUnstableWarning`, both numbers in it; one it
reproduces fails with both numbers.

Refresh after an intended change (or for a new Triton version)::

    python -m triton_cts.toolchains.golden refresh                 # every profile, every op
    python -m triton_cts.toolchains.golden refresh --op matmul     # only these checks' entries

``TRITON_CTS_GOLDEN_DIR`` points at golden files kept outside the checkout (a vendor's
fork, say). Writes are atomic (a temporary file renamed over the old one) and serialized
with a lock, so pytest-xdist workers refreshing one profile's file do not lose each
other's entries.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import triton

from triton_cts import CHECKOUT
from triton_cts.results.status import QualityWarning

GOLDEN_DIR = Path(os.environ.get("TRITON_CTS_GOLDEN_DIR") or CHECKOUT / "suites" / "golden")
#: Set (to any non-empty value) to write the stats a run measures instead of comparing.
UPDATE_ENV = "TRITON_CTS_UPDATE_GOLDEN"
#: Set to a file path: the compile check writes the stats it measured there as JSON and
#: compares nothing (how :func:`remeasure` reads a fresh process's numbers).
MEASURE_ENV = "TRITON_CTS_GOLDEN_MEASURE"
#: Seconds a fresh-process recompile may take (the gfx942 attention check, every autotune
#: config, took 18 s on two cores, start-up included).
REMEASURE_TIMEOUT_S = 900
#: Stat -> (relative, absolute) change allowed before it counts as a regression: the
#: larger of the two. 8 registers is AMD's VGPR allocation granule. A kernel that spills
#: none fails on its first spill; one that already spills may move by a tenth (the
#: allocator's choices differ between builds of the same compiler: 36 and 34 above).
THRESHOLDS: dict[str, tuple[float, int]] = {
    "registers": (0.10, 8),
    "spills": (0.10, 0),
    "shared": (0.10, 0),
}
REFRESH_COMMAND = "python -m triton_cts.toolchains.golden refresh"


class GoldenMissingWarning(UserWarning):
    """No golden stats to compare a compiled kernel with."""


class GoldenStaleWarning(GoldenMissingWarning, QualityWarning):
    """The check's golden entry (this Triton version, the profile) exists but has no stats
    for a kernel the check compiled, or keeps some for one it no longer compiles: a launch
    key changed without a refresh, and the kernel went uncompared. A quality warning, so
    the check's record shows it until the entry is refreshed. (A check with no entry at
    all, or a version with no file, was never recorded: a plain GoldenMissingWarning.)"""


class GoldenImprovedWarning(UserWarning):
    """A compiled kernel does better than its golden stats: refresh them."""


class GoldenUnstableWarning(QualityWarning):
    """A regression measured in this process that a fresh process does not reproduce: the
    check passes as a quality warning, with both numbers."""


def golden_path(profile: str, version: str | None = None) -> Path:
    return GOLDEN_DIR / f"triton-{version or triton.__version__}" / f"{profile}.json"


def has_entry(profile: str, check: str) -> bool:
    """Whether this Triton version's golden file for ``profile`` has an entry for ``check``."""
    data = load(profile)
    return data is not None and check in data["checks"]


def updating() -> bool:
    return bool(os.environ.get(UPDATE_ENV))


def load(profile: str, version: str | None = None) -> dict | None:
    path = golden_path(profile, version)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc}); rerun `{REFRESH_COMMAND}`") from exc
    if not isinstance(data, dict) or not isinstance(data.get("checks"), dict):
        raise ValueError(f"{path}: expected an object with a 'checks' table; "
                         f"rerun `{REFRESH_COMMAND}`")
    return data


def compare(profile: str, check: str,
            measured: dict[str, dict]) -> tuple[list[str], list[str], list[str]]:
    """(regressions, missing, improved) of ``measured`` (kernel key -> stats) against the
    golden entry of ``check`` for ``profile`` under this Triton version."""
    data = load(profile)
    if data is None:
        return [], [f"no golden compile stats for triton {triton.__version__} and profile "
                    f"{profile} ({_rel(golden_path(profile))} does not exist); "
                    f"create them with `{REFRESH_COMMAND}`"], []
    golden = data["checks"].get(check)
    if golden is None:
        return [], [f"{_rel(golden_path(profile))} has no entry for {check}; "
                    f"add it with `{REFRESH_COMMAND}`"], []
    regressions, missing, improved = [], [], []
    for key, new in measured.items():
        old = golden.get(key)
        if old is None:
            missing.append(f"no golden entry for {key}; refresh with `{REFRESH_COMMAND}`")
            continue
        for stat, (rel, slack) in THRESHOLDS.items():
            before, after = old.get(stat), new.get(stat)
            if before is None or after is None:
                continue
            change = f"{key}: {stat} {before} -> {after} (allowed change " \
                     f"max({slack}, {rel:.0%} of {before}))"
            if after - before > max(slack, rel * before):
                regressions.append(change)
            elif before - after > max(slack, rel * before):
                improved.append(f"{change}; better than the golden file, refresh it with "
                                f"`{REFRESH_COMMAND}`")
    gone = sorted(set(golden) - set(measured))
    if gone:
        missing.append(f"golden entries no longer compiled: {', '.join(gone)}; refresh "
                       f"with `{REFRESH_COMMAND}`")
    return regressions, missing, improved


def confirm(profile: str, check: str, measured: dict[str, dict], regressions: list[str],
            fresh: dict[str, dict] | str) -> tuple[list[str], list[str]]:
    """(confirmed, unstable): ``regressions`` of ``measured`` judged against ``fresh``, the
    same check's stats from a fresh process (:func:`remeasure`), or the reason there are
    none. Regressions the fresh process reproduces are confirmed and name both processes'
    numbers; those it does not are unstable. Without fresh numbers every regression stands."""
    if isinstance(fresh, str):
        return [f"{r}; not rechecked in a fresh process: {fresh}" for r in regressions], []
    fresh_regressions = compare(profile, check, fresh)[0]
    here = {_where(r): r for r in regressions}
    confirmed = [f"{r} (a fresh process measured the same)" if r in regressions
                 else f"{r} in a fresh process ({_stat(measured, r)} in this one)"
                 for r in fresh_regressions]
    reproduced = {_where(r) for r in fresh_regressions}
    unstable = [f"{r} in this process, but a fresh process with an empty Triton cache "
                f"measured {_stat(fresh, r)}: codegen depends on what the process compiled "
                f"before" for where, r in here.items() if where not in reproduced]
    return confirmed, unstable


def _where(regression: str) -> str:
    """``KERNEL KEY: STAT`` of a regression line."""
    return regression.split(" -> ", 1)[0].rsplit(" ", 1)[0]


def _stat(measured: dict[str, dict], regression: str) -> str:
    """The stat a regression line names, as ``measured`` has it."""
    key, _, stat = _where(regression).rpartition(": ")
    value = measured.get(key, {}).get(stat)
    return f"{stat} {value}" if value is not None else f"no {stat} for {key}"


def remeasure(repro: str) -> dict[str, dict] | str:
    """The stats of the check ``repro`` reruns, compiled in a new Python process with an
    empty Triton cache, or why there are none. ``repro`` is the check's repro command
    (``pytest NODEID --vendor ... --mode compile``)."""
    argv = shlex.split(repro)
    if not argv or argv[0] != "pytest":
        return f"not a pytest command: {repro!r}"
    with tempfile.TemporaryDirectory(prefix="triton-cts-remeasure-") as tmp:
        out = Path(tmp) / "measured.json"
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", UPDATE_ENV)}
        env.update({MEASURE_ENV: str(out), "TRITON_CACHE_DIR": str(Path(tmp) / "triton")})
        cmd = [sys.executable, "-m", *argv, "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
        try:
            done = subprocess.run(cmd, cwd=CHECKOUT, env=env, capture_output=True, text=True,
                                  timeout=REMEASURE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return f"the recompile took over {REMEASURE_TIMEOUT_S} s"
        if not out.exists():
            tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
            return f"`{shlex.join(cmd)}` wrote no stats (exit {done.returncode}: " \
                   f"{' / '.join(tail)})"
        return json.loads(out.read_text())


def measure_path() -> Path | None:
    """Where to write this run's measured stats instead of comparing them, if asked."""
    path = os.environ.get(MEASURE_ENV)
    return Path(path) if path else None


def golden_entry(record: dict) -> dict:
    """The part of a ``compile_stats`` record kept in the golden file."""
    keep = ("registers", "spills", "shared", "scratch", "occupancy", "num_warps", "num_stages")
    return {k: record[k] for k in keep if k in record}


def write(profile: str, target: str, check: str, measured: dict[str, dict]) -> Path:
    """Replace ``check``'s entry in ``profile``'s golden file (locked, atomic)."""
    path = golden_path(profile)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        data = load(profile) or {"triton": triton.__version__, "profile": profile,
                                 "target": target, "checks": {}}
        data["checks"][check] = {k: measured[k] for k in sorted(measured)}
        _replace(path, data)
    return path


def remove(profile: str, check: str) -> bool:
    """Drop ``check``'s entry from ``profile``'s golden file, where it has one (a refresh
    of a check that is no longer supported there: its old stats would stand for a kernel
    the check no longer compiles); whether one was dropped."""
    path = golden_path(profile)
    if not path.exists():
        return False
    with _locked(path):
        data = load(profile)
        if not data or data["checks"].pop(check, None) is None:
            return False
        _replace(path, data)
    return True


def _replace(path: Path, data: dict) -> None:
    """Write ``data`` over ``path`` atomically, its checks in sorted order."""
    data["checks"] = {k: data["checks"][k] for k in sorted(data["checks"])}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


@contextlib.contextmanager
def _locked(path: Path):
    lock_dir = CHECKOUT / ".cache"
    lock_dir.mkdir(exist_ok=True)
    with open(lock_dir / f"golden-{path.parent.name}-{path.stem}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(CHECKOUT))
    except ValueError:
        return str(path)


def refresh(pytest_args: list[str]) -> int:
    """Rerun the compile suite writing golden stats. With no selection options every
    profile's file for this Triton version is rebuilt from scratch (entries of removed
    ops disappear); with ``--vendor``, ``--op``, ``--impl`` or ``-k`` only the selected
    checks' entries are replaced (dropped for a check no longer supported there)."""
    selective = any(a.split("=")[0] in ("--vendor", "--op", "--impl", "-k") for a in pytest_args)
    if not selective:
        for old in golden_path("x").parent.glob("*.json"):
            old.unlink()
    cmd = [sys.executable, "-m", "pytest", "suites/test_compile.py", "--mode", "compile",
           "-p", "no:cacheprovider", "-q"]
    if not any(a.startswith("--vendor") for a in pytest_args):
        cmd += ["--vendor", "all"]
    env = dict(os.environ, **{UPDATE_ENV: "1"})
    print("refreshing", _rel(golden_path("x").parent), "with:", " ".join(cmd + pytest_args))
    return subprocess.call(cmd + pytest_args, cwd=CHECKOUT, env=env)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = f"usage: {REFRESH_COMMAND} [pytest options: --vendor, --op, --impl, -n 2, ...]"
    if any(a in ("-h", "--help") for a in argv[1:]):  # before refresh() deletes anything
        print(usage + "\n\n" + refresh.__doc__)
        return 0
    if not argv or argv[0] != "refresh":
        print(usage, file=sys.stderr)
        return 2
    return refresh(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
