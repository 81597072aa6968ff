"""A sticky device error (CUDA's illegal memory access) fails its check once, and the checks
after it run in a fresh process instead of failing with the same error."""
import re
import subprocess
import sys

import pytest

from triton_cts.execution.lost_context import is_sticky

CHECKS = '''
import os
import pytest

def _check(case):
    with open(os.environ["PID_LOG"], "a") as fh:
        fh.write(f"{case} {os.getpid()}\\n")
    if case == "a-device":
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

# a device check is known by its mode (its target's, or a one-mode marker), not by its id
@pytest.mark.cts_modes("device")
@pytest.mark.parametrize("case", ["a-device", "b-device"])
def test_check(case):
    _check(case)

@pytest.mark.cts_modes("interpreter")
@pytest.mark.parametrize("case", ["c-interpreter"])
def test_other(case):
    _check(case)
'''


def _run(tmp_path, *args):
    (tmp_path / "test_checks.py").write_text(CHECKS)
    log = tmp_path / "pids.log"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "triton_cts.plugin",
         "-q", "-rA", *args, str(tmp_path / "test_checks.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "PID_LOG": str(log)})
    pids = dict(line.split() for line in log.read_text().splitlines()) if log.exists() else {}
    return result, pids


def test_under_xdist_the_checks_after_a_sticky_error_run_in_a_fresh_worker(tmp_path):
    result, pids = _run(tmp_path, "-n", "1", "--dist", "load")
    out = result.stdout
    assert result.returncode == 1, out
    assert re.search(r"\b1 failed, 2 passed\b", out), out
    assert pids.keys() == {"a-device", "b-device", "c-interpreter"}, out
    assert pids["b-device"] != pids["a-device"], out  # a fresh process after the error
    assert "worker ends after the check" in out
    assert out.count("FAILED") == 1, out


def test_without_xdist_later_device_checks_fail_naming_the_lost_check(tmp_path):
    result, pids = _run(tmp_path, "-p", "no:xdist")
    out = result.stdout
    assert result.returncode == 1, out
    assert re.search(r"\b1 failed, 1 passed, 1 error\b", out), out
    assert "b-device" not in pids and "c-interpreter" in pids
    assert "the device context was lost in" in out and "test_check[a-device]" in out


@pytest.mark.parametrize("exc, sticky", [
    (RuntimeError("CUDA error: an illegal memory access was encountered"), True),
    (RuntimeError("CUDA error: device-side assert triggered"), True),
    (RuntimeError("CUDA error: unspecified launch failure"), True),
    (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), False),
    (AssertionError("max |out - ref| = 0.5"), False),
])
def test_sticky_errors(exc, sticky):
    assert is_sticky(exc) is sticky
    try:
        try:
            raise exc
        except Exception as inner:
            raise AssertionError("wrapped") from inner
    except AssertionError as outer:
        assert is_sticky(outer) is sticky
    assert is_sticky(ExceptionGroup("hypothesis", [ValueError("x"), exc])) is sticky


class _Item:
    """A device or interpreter check, as is_device_check reads one."""
    def __init__(self, mode):
        self.mode = mode

    def get_closest_marker(self, name):
        return pytest.mark.cts_modes(self.mode).mark if name == "cts_modes" else None


@pytest.mark.parametrize("mode, charged", [("device", True), ("interpreter", False)])
def test_an_asynchronous_fault_fails_the_check_that_launched_it(monkeypatch, mode, charged):
    """A device check waits for its kernels before its call ends, so a kernel fault that
    surfaces only at the next synchronization is charged to it, not to the next check."""
    import torch
    from triton_cts.execution.lost_context import LostContext

    def faulted():
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    # an attached, started CUDA device, reached through the device layer's generic API
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *a: torch.device("cuda"))
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.accelerator, "synchronize", faulted)
    config = type("Config", (), {"stash": {}})()
    hook = LostContext(config).pytest_runtest_call(_Item(mode))
    next(hook)  # the check's body runs here and returns normally
    if charged:
        with pytest.raises(RuntimeError, match="illegal memory access"):
            hook.send(None)
    else:
        with pytest.raises(StopIteration):
            hook.send(None)
