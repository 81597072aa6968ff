"""Helpers for the harness's own tests."""
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from triton_cts import CHECKOUT, PROFILE_DIR
from triton_cts.execution.modes import interpreter_blocker

#: Why interpreter mode cannot run here (a Triton and numpy pair it is not verified with),
#: or None. Tests whose verdicts come from interpreter-mode runs are skipped with it.
INTERPRETER_BLOCKER = interpreter_blocker()
needs_interpreter = pytest.mark.skipif(
    INTERPRETER_BLOCKER is not None,
    reason=f"not supported: this test's verdicts come from interpreter mode: "
           f"{INTERPRETER_BLOCKER}")


def bundled_profile_data(name: str = "nvidia-sm90") -> dict:
    return tomllib.loads((PROFILE_DIR / f"{name}.toml").read_text())


def run_pytest(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run pytest in a fresh process from the checkout, as a user would."""
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=CHECKOUT, capture_output=True, text=True, timeout=timeout)


def write_toml(path: Path, data: dict) -> Path:
    """Minimal TOML writer for the profile shapes used in tests."""
    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return '"' + v.replace('"', '\\"') + '"'
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f'"{k}" = {value(x)}' for k, x in v.items()) + " }"
        raise TypeError(type(v))

    lines = [f"{k} = {value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for k, v in data.items():
        if isinstance(v, dict):
            lines.append(f"[{k}]")
            lines += [f'"{kk}" = {value(vv)}' for kk, vv in v.items()]
    path.write_text("\n".join(lines) + "\n")
    return path
