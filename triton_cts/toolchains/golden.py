"""Golden compile stats: registers, spills and shared memory per compiled kernel, kept per
(triton version, profile) in ``suites/golden/triton-<version>/<profile>.json``.

Codegen changes between Triton versions (the same gfx942 matmul: 166 VGPRs in 3.6, 109 in
3.9), so a file holds one version's numbers; another version has no file and says so.
A check's kernels are compared with its entry: a rise beyond :data:`THRESHOLDS` is a
regression (the suite fails with the old and new numbers); a fall beyond them is an
improvement, reported with :class:`GoldenImprovedWarning` so the file gets refreshed, never a
failure (a kernel that already spills is at the register allocator's mercy: the same
gfx942 attention backward spilled 36 registers on one machine and 34 on another); a kernel
with no entry is reported with :class:`GoldenMissingWarning`.

Refresh after an intended change (or for a new Triton version)::

    python -m triton_cts.toolchains.golden refresh                 # every profile, every op
    python -m triton_cts.toolchains.golden refresh --op matmul     # only these checks' entries

Writes are atomic (a temporary file renamed over the old one) and serialized with a lock,
so pytest-xdist workers refreshing one profile's file do not lose each other's entries.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import triton

from triton_cts import CHECKOUT

GOLDEN_DIR = CHECKOUT / "suites" / "golden"
#: Set (to any non-empty value) to write the stats a run measures instead of comparing.
UPDATE_ENV = "TRITON_CTS_UPDATE_GOLDEN"
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


class GoldenImprovedWarning(UserWarning):
    """A compiled kernel does better than its golden stats: refresh them."""


def golden_path(profile: str, version: str | None = None) -> Path:
    return GOLDEN_DIR / f"triton-{version or triton.__version__}" / f"{profile}.json"


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
            missing.append(f"no golden entry for {key}")
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
        missing.append(f"golden entries no longer compiled: {', '.join(gone)}")
    return regressions, missing, improved


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
        data["checks"] = {k: data["checks"][k] for k in sorted(data["checks"])}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=False)
            f.write("\n")
        os.replace(tmp, path)
    return path


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
    checks' entries are replaced."""
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
    if not argv or argv[0] != "refresh":
        print(f"usage: {REFRESH_COMMAND} [pytest options: --vendor, --op, --impl, -n 2, ...]",
              file=sys.stderr)
        return 2
    return refresh(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
