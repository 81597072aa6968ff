"""``--sanitize``: device checks under NVIDIA's compute-sanitizer.

On any machine: the report parser on samples of compute-sanitizer's output, the probe's
verdicts, the commands and xdist specs, the option, and the whole plugin (probe, restart
under the sanitizer, one sanitizer per xdist worker, failures, not-supported verdicts)
with a stand-in sanitizer and a stand-in device. On an NVIDIA GPU with compute-sanitizer:
each planted fault in ``tests/planted/sanitizer_faults.py`` under the real tool, alone and
through the numerics suite, where the reference kernel passes under the same tool.
"""
import json
import os
import re
import shlex
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tests.helpers import run_pytest
from triton_cts import CHECKOUT
from triton_cts.errors import UsageError
from triton_cts.execution import sanitizer as san

# ---- samples of compute-sanitizer's output (recent and older formats) ---------------------
MEMCHECK_READ = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 16 bytes
=========     at _gelu_unmasked_load_kernel+0x2b0 in /home/ci/triton-cts/tests/planted/sanitizer_faults.py:50
=========     by thread (64,0,0) in block (2,0,0)
=========     Access to 0x7f3a1c000fa0 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f3a1c000000 of size 4,000 bytes
=========
========= Invalid __global__ read of size 16 bytes
=========     at _gelu_unmasked_load_kernel+0x2b0 in /home/ci/triton-cts/tests/planted/sanitizer_faults.py:50
=========     by thread (65,0,0) in block (2,0,0)
=========     Access to 0x7f3a1c000fb0 is out of bounds
=========     and is 17 bytes after the nearest allocation at 0x7f3a1c000000 of size 4,000 bytes
=========
"""
MEMCHECK_WRITE_OLD = """\
========= Invalid __global__ write of size 4 bytes
=========     at 0x1a0 in /home/ci/triton-cts/tests/planted/sanitizer_faults.py:60:_gelu_far_store_kernel
=========     by thread (103,0,0) in block (0,0,0)
=========     Address 0x7f3a20000e9c is out of bounds
=========     Saved host backtrace up to driver entry point at kernel launch time
=========     Host Frame: [0x2f26f0]
=========                in /usr/lib/x86_64-linux-gnu/libcuda.so.1
=========     Host Frame:_PyEval_EvalFrameDefault [0x1afb7e]
=========                in /usr/bin/python3
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cuStreamSynchronize.
=========
========= Target application returned an error
========= ERROR SUMMARY: 1 error
"""
MEMCHECK_MISALIGNED = """\
========= Invalid __global__ read of size 8 bytes
=========     at vec_kernel(double *)+0x90
=========     by thread (1,0,0) in block (0,0,0)
=========     Address 0x7f0000000004 is misaligned
=========
"""
RACECHECK = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at _gelu_smem_race_kernel+0x4f0 in /home/ci/triton-cts/tests/planted/sanitizer_faults.py:86
=========     and Read access at _gelu_smem_race_kernel+0x500 in /home/ci/triton-cts/tests/planted/sanitizer_faults.py:86 [384 hazards]
=========     and Write access at _gelu_smem_race_kernel+0x4f0 in /home/ci/triton-cts/tests/planted/sanitizer_faults.py:86 [96 hazards]
=========
========= Warning: Race reported between Read access at warp_scan(int *)+0x230
=========     and Write access at warp_scan(int *)+0x260 [32 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
"""
INITCHECK = """\
========= COMPUTE-SANITIZER
========= Uninitialized __global__ memory read of size 4 bytes
=========     at _gelu_workspace_kernel+0x1d0 in /home/ci/triton-cts/tests/planted/sanitizer_faults.py:71
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f3a1c200000
=========
========= Host API memory access error at host access to 0x7fb7614c4e00 of size 16,000 bytes
=========     Uninitialized access at 0x7fb7614c4e00 on access by cudaMemcpy source
=========     Saved host backtrace up to driver entry point at error
=========         Host Frame: cuMemcpyDtoH_v2 [0x2f26f0] in libcuda.so.1
=========
========= ERROR SUMMARY: 2 errors
"""
SYNCCHECK = """\
========= Barrier error detected. Divergent thread(s) in warp
=========     at 0x50 in /tmp/sync.cu:6:divergent_kernel(int *)
=========     by thread (0,0,0) in block (0,0,0)
=========
"""
QUIET = """\
========= COMPUTE-SANITIZER
========= Warning: Device has unsupported memory pools; some checks are disabled
========= Program hit cudaErrorPeerAccessUnsupported (error 217) due to "peer access is not supported between these two devices" on CUDA API call to cudaDeviceEnablePeerAccess.
========= Target application returned an error
========= ERROR SUMMARY: 0 errors
"""


def test_memcheck_reports_name_the_kernel_the_access_the_address_and_the_thread():
    errors = san.parse_log(MEMCHECK_READ)
    assert len(errors) == 2
    e = errors[0]
    assert e.what == "Invalid __global__ read of size 16 bytes"
    assert e.kernel == "_gelu_unmasked_load_kernel"
    assert e.where == "/home/ci/triton-cts/tests/planted/sanitizer_faults.py:50, +0x2b0"
    assert (e.thread, e.block) == ("64,0,0", "2,0,0")
    assert e.address == ("Access to 0x7f3a1c000fa0 is out of bounds and is 1 bytes after the "
                         "nearest allocation at 0x7f3a1c000000 of size 4,000 bytes")
    text = e.describe()
    for part in ("Invalid __global__ read of size 16 bytes", "_gelu_unmasked_load_kernel",
                 "by thread (64,0,0) in block (2,0,0)", "0x7f3a1c000fa0"):
        assert part in text


def test_older_locations_backtraces_and_what_is_not_an_error():
    (e,) = san.parse_log(MEMCHECK_WRITE_OLD)
    assert e.what == "Invalid __global__ write of size 4 bytes"
    assert e.kernel == "_gelu_far_store_kernel"
    assert e.where == "/home/ci/triton-cts/tests/planted/sanitizer_faults.py:60, +0x1a0"
    assert e.address == "Address 0x7f3a20000e9c is out of bounds"  # no host frames
    (m,) = san.parse_log(MEMCHECK_MISALIGNED)
    assert m.kernel == "vec_kernel(double *)" and m.address.endswith("is misaligned")
    assert san.parse_log(QUIET) == []


def test_racecheck_reports_both_accesses_and_the_hazards():
    error, warning = san.parse_log(RACECHECK)
    assert error.kernel == "_gelu_smem_race_kernel"
    assert error.what.startswith("shared-memory race (error) between Write access at "
                                 "_gelu_smem_race_kernel+0x4f0")
    assert "and Read access at _gelu_smem_race_kernel+0x500" in error.what
    assert error.address == "480 hazards"
    assert warning.what.startswith("shared-memory race (warning) between Read access")
    assert warning.kernel == "warp_scan(int *)" and warning.address == "32 hazards"


def test_initcheck_and_synccheck_reports():
    device, host = san.parse_log(INITCHECK)
    assert device.what == "Uninitialized __global__ memory read of size 4 bytes"
    assert device.kernel == "_gelu_workspace_kernel" and device.address == "Address 0x7f3a1c200000"
    assert host.kernel is None and host.what.startswith("Host API memory access error")
    assert host.address == "Uninitialized access at 0x7fb7614c4e00 on access by cudaMemcpy source"
    (sync,) = san.parse_log(SYNCCHECK)
    assert sync.what == "Barrier error detected. Divergent thread(s) in warp"
    assert sync.kernel == "divergent_kernel(int *)" and sync.thread == "0,0,0"


def test_a_failure_message_groups_errors_of_one_place():
    errors = san.parse_log(MEMCHECK_READ + RACECHECK)
    message = san.format_errors("memcheck", errors)
    lines = message.splitlines()
    assert lines[0] == "compute-sanitizer memcheck reported 4 errors during this check:"
    assert "(and 1 more like it)" in lines[1] and "_gelu_unmasked_load_kernel" in lines[1]
    assert len(lines) == 4
    assert san.summary("memcheck", errors).startswith(
        "compute-sanitizer memcheck: Invalid __global__ read of size 16 bytes in kernel "
        "_gelu_unmasked_load_kernel")


@pytest.mark.parametrize("returncode, log, output, verdict", [
    (1, "========= COMPUTE-SANITIZER\n========= Error: Device not supported. Please refer "
        "to the \"Supported Devices\" section of the sanitizer documentation\n"
        "========= Error: Target application terminated before first instrumented API call\n",
     "Traceback (most recent call last):\nRuntimeError: CUDA error: unknown error\n",
     "Device not supported. Please refer to the \"Supported Devices\" section of the "
     "sanitizer documentation"),
    (1, "", "Traceback (most recent call last):\n  File \"<string>\", line 1\n"
            "RuntimeError: CUDA error: unknown error\n",
     f"the probe ({san.PROBE}) exited with status 1: RuntimeError: CUDA error: unknown error"),
    (255, "", "========= Error: unrecognized option '--require-cuda-init'\n",
     "unrecognized option '--require-cuda-init'"),
    (0, QUIET, "", None),
    (0, "========= COMPUTE-SANITIZER\n" + SYNCCHECK, "",
     f"the probe ({san.PROBE}) already gets 1 errors: Barrier error detected. Divergent "
     f"thread(s) in warp in kernel divergent_kernel(int *) (/tmp/sync.cu:6, +0x50) by thread "
     f"(0,0,0) in block (0,0,0)"),
])
def test_probe_verdicts(returncode, log, output, verdict):
    assert san.probe_verdict(returncode, log, output) == verdict


def test_a_missing_sanitizer_is_a_verdict_not_a_crash(tmp_path):
    verdict = san.probe(str(tmp_path / "compute-sanitizer"), "memcheck")
    assert verdict.startswith(f"{tmp_path / 'compute-sanitizer'} cannot be run: ")


def test_finding_the_sanitizer(tmp_path):
    assert san.find_sanitizer({san.ENV_BINARY: "/opt/cs"}) == "/opt/cs"
    binary = tmp_path / "bin" / "compute-sanitizer"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    assert san.find_sanitizer({"PATH": str(binary.parent)}) == str(binary)
    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "compute-sanitizer").symlink_to(binary)
    assert san.find_sanitizer({"PATH": "", "CUDA_HOME": str(home)}) \
        == str(home / "bin" / "compute-sanitizer")


def test_the_command_leaves_the_exit_status_and_the_output_to_the_target():
    command = san.sanitizer_command("/cuda/bin/compute-sanitizer", "memcheck", "/tmp/l.log",
                                    ["python", "-m", "pytest", "-x"])
    assert command[:5] == ["/cuda/bin/compute-sanitizer", "--tool", "memcheck", "--log-file",
                           "/tmp/l.log"]
    assert command[-4:] == ["python", "-m", "pytest", "-x"]
    options = dict(zip(command[1:-4:2], command[2:-4:2]))
    # --error-exitcode replaces the target's status wherever the tool finds an error
    assert "--error-exitcode" not in command and options["--padding"] == "65536"
    assert "--padding" not in san.sanitizer_command("cs", "racecheck", "l", ["p"])
    assert san.sanitized_environment("memcheck") == {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
    assert san.sanitized_environment("racecheck") == {}


FAKE_SANITIZER = '''\
#!{python}
"""A stand-in for compute-sanitizer: records its command, starts its log and runs the
target in its place (the sanitizer's reports are written by the tests themselves)."""
import json, os, sys
args, opts = sys.argv[1:], {{}}
while args and args[0].startswith("--"):
    opts[args[0]], args = args[1], args[2:]
with open(os.environ["FAKE_SANITIZER_CALLS"], "a") as fh:
    fh.write(json.dumps({{"pid": os.getpid(), "argv": sys.argv}}) + "\\n")
with open(opts["--log-file"].replace("%%", "%"), "a") as fh:
    fh.write("========= COMPUTE-SANITIZER\\n")
    if args[1:] == ["-c", {probe!r}]:
        if os.environ.get("FAKE_SANITIZER_REFUSES"):
            fh.write("========= Error: Device not supported. Please refer to the "
                     "Supported Devices section of the documentation\\n")
        sys.exit(1 if os.environ.get("FAKE_SANITIZER_REFUSES") else 0)
os.execv(args[0], args)
'''


@pytest.fixture
def fake_sanitizer(tmp_path):
    path = tmp_path / "fake-compute-sanitizer"
    path.write_text(FAKE_SANITIZER.format(python=sys.executable, probe=san.PROBE))
    path.chmod(0o755)
    return path


def test_xdist_specs_start_each_worker_under_its_own_sanitizer(tmp_path, fake_sanitizer):
    import execnet
    from execnet.gateway_io import popen_args

    calls = tmp_path / "calls.jsonl"
    (spec,) = san.sanitized_specs(["popen//id=gw3"], str(fake_sanitizer), "memcheck",
                                  str(tmp_path))
    xspec = execnet.XSpec(spec)
    assert xspec.popen and xspec.id == "gw3"
    assert xspec.env == {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
    command = popen_args(xspec)
    assert command[-4:-2] == [sys.executable, "-u"]  # the worker's Python, as execnet runs it
    # what the worker then runs, with a program of our own in place of execnet's bootstrap
    command[-1] = f"import os; print(os.getpid(), os.environ[{san.ENV_LOG!r}])"
    done = subprocess.run(command, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "FAKE_SANITIZER_CALLS": str(calls)})
    pid, log = done.stdout.split()
    assert log == str(tmp_path / f"worker.{pid}.log")  # one log per sanitizer
    (call,) = [json.loads(line) for line in calls.read_text().splitlines()]
    assert call["argv"][1:5] == ["--tool", "memcheck", "--log-file", log]
    with pytest.raises(UsageError, match="not local"):
        san.sanitized_specs(["ssh=gpu-host"], "cs", "memcheck", str(tmp_path))


def test_only_pytest_run_as_a_command_is_restarted(monkeypatch):
    config = SimpleNamespace(invocation_params=SimpleNamespace(args=("-q", "suites")))
    monkeypatch.setattr(sys, "argv", ["/venv/bin/pytest", "-q", "suites"])
    monkeypatch.setattr(sys, "orig_argv", ["/venv/bin/python", "/venv/bin/pytest", "-q", "suites"])
    assert san._restartable(config)
    monkeypatch.setattr(sys, "argv", ["driver.py", "--fast"])  # pytest.main([...]) in a program
    assert not san._restartable(config)


# ---- the plugin, with a stand-in sanitizer and a stand-in NVIDIA device --------------------
CONFTEST = '''
import triton_cts.targets
from triton_cts.profiles.vendor_selection import DeviceInfo

triton_cts.targets.attached_device = lambda: DeviceInfo({backend!r}, {name!r}, {arch!r},
                                                       {warp!r}, 132)
'''
CHECKS = '''
import os
import pytest

REPORT = {report!r}


@pytest.mark.cts_modes("device")
@pytest.mark.parametrize("case", ["clean", "faulty", "after"])
def test_kernel(case, request):
    plugin = request.config.pluginmanager.get_plugin("triton_cts.execution.sanitizer")
    with open(os.environ["SEEN"], "a") as fh:
        fh.write(" ".join([case, str(os.getpid()), str(plugin.log),
                           os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "-"),
                           os.environ.get({env_log!r}, "-")]) + "\\n")
    if case == "faulty":  # what the sanitizer would write on a stray read in this check
        with open(plugin.log, "a") as fh:
            fh.write(REPORT)
'''


def _run_plugin(tmp_path, fake_sanitizer, *args, backend="cuda", name="NVIDIA H100 80GB HBM3",
                arch=90, warp=32, **env):
    (tmp_path / "conftest.py").write_text(
        CONFTEST.format(backend=backend, name=name, arch=arch, warp=warp))
    (tmp_path / "test_checks.py").write_text(
        CHECKS.format(report=MEMCHECK_READ.split("\n", 1)[1], env_log=san.ENV_LOG))
    seen, calls = tmp_path / "seen.txt", tmp_path / "calls.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "triton_cts.plugin",
         "-rA", "--sanitize", "memcheck", *args, "test_checks.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, san.ENV_BINARY: str(fake_sanitizer), "SEEN": str(seen),
             "FAKE_SANITIZER_CALLS": str(calls), "TMPDIR": str(tmp_path), **env})
    rows = [line.split() for line in seen.read_text().splitlines()] if seen.exists() else []
    calls = [json.loads(line)["argv"] for line in calls.read_text().splitlines()] \
        if calls.exists() else []
    return result, {row[0]: row[1:] for row in rows}, calls


def _assert_the_faulty_check_fails_naming_the_kernel(out):
    assert re.search(r"\b1 failed, 2 passed\b", out), out
    assert out.count("FAILED") == 1 and "FAILED test_checks.py::test_kernel[faulty]" in out
    assert "compute-sanitizer memcheck reported 2 errors during this check:" in out
    assert ("- Invalid __global__ read of size 16 bytes in kernel _gelu_unmasked_load_kernel "
            "(/home/ci/triton-cts/tests/planted/sanitizer_faults.py:50, +0x2b0) by thread (64,0,0) in "
            "block (2,0,0): Access to 0x7f3a1c000fa0 is out of bounds and is 1 bytes after the "
            "nearest allocation at 0x7f3a1c000000 of size 4,000 bytes (and 1 more like it)") in out


def test_without_xdist_pytest_restarts_under_the_sanitizer(tmp_path, fake_sanitizer):
    result, seen, calls = _run_plugin(tmp_path, fake_sanitizer, "-p", "no:xdist")
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    _assert_the_faulty_check_fails_naming_the_kernel(out)
    probe, restart = calls
    assert probe[-2:] == ["-c", san.PROBE]
    assert restart[1:3] == ["--tool", "memcheck"]
    assert restart[restart.index(sys.executable):] == [  # the same command, as it was run
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "triton_cts.plugin",
        "-rA", "--sanitize", "memcheck", "-p", "no:xdist", "test_checks.py"]
    log = restart[restart.index("--log-file") + 1]
    assert {row[1] for row in seen.values()} == {log}  # one process, one log
    assert {row[2] for row in seen.values()} == {"1"}  # PyTorch's caching allocator is off
    assert {row[3] for row in seen.values()} == {"-"}  # not handed on to subprocesses
    assert f"device checks run under compute-sanitizer memcheck (log: {log})" in out


def test_under_xdist_each_worker_runs_under_its_own_sanitizer(tmp_path, fake_sanitizer):
    result, seen, calls = _run_plugin(tmp_path, fake_sanitizer, "-n", "2", "--dist", "load")
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    _assert_the_faulty_check_fails_naming_the_kernel(out)
    probe, *workers = calls
    assert probe[-2:] == ["-c", san.PROBE] and len(workers) == 2
    assert all(w[1:3] == ["--tool", "memcheck"] and w[-2] == "-c" for w in workers)
    for pid, log, caching, _ in seen.values():  # the stand-in runs the worker in its place
        assert os.path.basename(log) == f"worker.{pid}.log"
        assert caching == "1"
    assert "each worker runs under" in out


@pytest.mark.parametrize("workers", [("-p", "no:xdist"), ("-n", "2")])
def test_where_the_sanitizer_cannot_attach_device_checks_are_not_supported(
        tmp_path, fake_sanitizer, workers):
    result, seen, calls = _run_plugin(tmp_path, fake_sanitizer, *workers,
                                      FAKE_SANITIZER_REFUSES="1")
    out = result.stdout
    assert "failed" not in out and re.search(r"\b3 skipped\b", out), out
    reason = ("not supported: compute-sanitizer memcheck: Device not supported. Please refer "
              "to the Supported Devices section of the documentation")
    assert re.search(rf"SKIPPED \[3\] test_checks.py:\d+: {re.escape(reason)}", out), out
    assert not seen
    assert len(calls) == 1  # the probe, nothing started under the sanitizer


def test_other_accelerators_and_a_missing_sanitizer_are_not_supported(tmp_path, fake_sanitizer):
    result, seen, calls = _run_plugin(tmp_path, fake_sanitizer, "-p", "no:xdist",
                                      backend="hip", name="AMD Instinct MI300X", arch="gfx942",
                                      warp=64)
    assert _not_supported(result, "compute-sanitizer memcheck: it checks NVIDIA GPUs; the "
                                  "attached device is AMD Instinct MI300X (hip)") == 3
    assert not calls and not seen
    missing = tmp_path / "missing" / "compute-sanitizer"
    result, seen, calls = _run_plugin(tmp_path, missing, "-p", "no:xdist")
    assert _not_supported(result, f"compute-sanitizer memcheck: {missing} cannot be run: ") == 3
    assert not seen


def _not_supported(result, reason):
    """How many checks were skipped for ``reason`` (-rA folds them); none may have failed."""
    assert result.returncode in (0, 1) and " failed" not in result.stdout, result.stdout
    found = re.search(rf"SKIPPED \[(\d+)\] test_checks.py:\d+: not supported: "
                      rf"{re.escape(reason)}", result.stdout)
    return int(found.group(1)) if found else 0


def _has_cuda() -> bool:
    import torch
    return torch.cuda.is_available()


def test_a_bad_tool_is_a_usage_error():
    result = run_pytest("suites/test_numerics.py", "--sanitize", "bogus", "-p", "no:xdist")
    assert result.returncode == 4
    assert "argument --sanitize: invalid choice: 'bogus'" in result.stderr


@pytest.mark.skipif(_has_cuda(), reason="for a machine without an accelerator")
def test_without_an_accelerator_device_checks_are_not_supported_and_nothing_fails():
    result = run_pytest("suites/test_numerics.py::test_matches_reference", "--vendor",
                        "nvidia-sm90", "--mode", "device", "--mode", "interpreter", "--op",
                        "gelu", "--sanitize", "memcheck", "--hypothesis-profile", "ci",
                        "-p", "no:xdist", "-rs")
    out = result.stdout
    assert result.returncode == 0, out
    assert re.search(r"\b4 passed, 4 skipped\b", out), out
    assert out.count("not supported: no accelerator attached") == 1  # -rs folds the 4
    assert "compute-sanitizer memcheck: no device check can run here" in out


# ---- on an NVIDIA GPU with compute-sanitizer -------------------------------------------------
PLANTED = "tests.planted.sanitizer_faults"
FAULTS = [
    # tool, launcher, kernel, what the report says
    ("memcheck", "gelu_reads_past_input", "_gelu_unmasked_load_kernel",
     "Invalid __global__ read"),
    ("memcheck", "gelu_writes_far_past_output", "_gelu_far_store_kernel",
     "Invalid __global__ write"),
    ("initcheck", "gelu_reads_uninitialized_workspace", "_gelu_workspace_kernel",
     "Uninitialized __global__ memory read"),
    ("racecheck", "gelu_shared_memory_race", "_gelu_smem_race_kernel", "shared-memory race"),
]


@pytest.fixture(scope="module")
def real_sanitizer() -> str:
    import torch
    if not torch.cuda.is_available() or torch.version.hip:
        pytest.skip("needs an NVIDIA GPU")
    binary = san.find_sanitizer()
    if binary is None:
        pytest.skip(f"needs compute-sanitizer (on PATH, in /usr/local/cuda*/bin, or "
                    f"${san.ENV_BINARY})")
    return binary


RUN_FAULT = '''
import torch
from tests.planted import sanitizer_faults
from triton_cts.profiles import load_profiles

x = torch.randn(1000, device="cuda")
getattr(sanitizer_faults, {fault!r})(x, profile=load_profiles()["nvidia-sm90"])
torch.cuda.synchronize()
'''


@pytest.mark.parametrize("tool, fault, kernel, evidence", FAULTS)
def test_the_real_tool_reports_each_planted_fault(tmp_path, real_sanitizer, tool, fault, kernel,
                                                  evidence):
    """Each planted kernel alone under the tool: the report parses into an error naming the
    kernel (a check of the parser against this machine's compute-sanitizer)."""
    log = tmp_path / "sanitizer.log"
    command = san.sanitizer_command(real_sanitizer, tool, str(log),
                                    [sys.executable, "-c", RUN_FAULT.format(fault=fault)])
    done = subprocess.run(command, cwd=CHECKOUT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **san.sanitized_environment(tool),
                               "PYTHONPATH": str(CHECKOUT)})
    text = log.read_text() if log.exists() else ""
    verdict = san.probe_verdict(0, text, "")
    if verdict and "not supported" in verdict.lower():
        pytest.skip(f"compute-sanitizer {tool}: {verdict}")
    errors = san.parse_log(text)
    mine = [e for e in errors if e.kernel == kernel and evidence in e.what]
    assert mine, f"{shlex.join(command)}\n{text}\n{done.stdout}\n{done.stderr}"
    if tool != "racecheck":
        assert mine[0].thread and mine[0].block and mine[0].address, mine[0]


@pytest.mark.parametrize("tool, fault, kernel, evidence", FAULTS)
def test_the_numerics_suite_fails_each_planted_fault_under_the_sanitizer(
        real_sanitizer, tool, fault, kernel, evidence):
    """Through the suite, beside the reference kernel under the same tool: only the
    planted implementation fails, and its failures name the kernel. memcheck faults lose
    the device context, so they run under xdist, which replaces the worker."""
    workers = "1" if tool == "memcheck" else "0"
    result = run_pytest("suites/test_numerics.py::test_matches_reference", "--mode", "device",
                        "--op", "gelu", "--impl", "reference", "--impl",
                        f"gelu={PLANTED}:{fault}", "--sanitize", tool, "--hypothesis-profile",
                        "ci", "-n", workers, "-rA", timeout=1800)
    out = result.stdout
    if f"compute-sanitizer {tool}: device checks not supported" in out:
        pytest.skip(re.search(r"device checks not supported: .*", out).group(0))
    assert result.returncode == 1, out[-5000:]
    failed = [line for line in out.splitlines() if line.startswith("FAILED")]
    assert failed and all(f"{PLANTED}:{fault}" in line for line in failed), out[-5000:]
    assert "PASSED suites/test_numerics.py::test_matches_reference[gelu-reference-" in out
    assert f"compute-sanitizer {tool}: " in out and kernel in out and evidence in out, out[-5000:]
    if tool != "racecheck":
        assert re.search(r"by thread \(\d+,\d+,\d+\) in block \(\d+,\d+,\d+\): .*0x[0-9a-f]+",
                         out), out[-5000:]

