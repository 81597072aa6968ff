"""The pytest plugin end to end, run as a user runs it: options, usage errors, ids, and
planted faults that must make the suites fail."""
import re
from types import SimpleNamespace

import pytest

from tests.helpers import bundled_profile_data, needs_interpreter, run_pytest, write_toml
from triton_cts import plugin

USAGE_ERROR = 4  # pytest.ExitCode.USAGE_ERROR


def collected_ids(*args):
    result = run_pytest("suites/", "--collect-only", "-q", *args)
    assert result.returncode == 0, result.stdout + result.stderr
    return [line for line in result.stdout.splitlines() if "::" in line]


def test_unknown_vendor_is_a_usage_error_and_runs_nothing():
    result = run_pytest("suites/", "--vendor", "cerebras")
    assert result.returncode == USAGE_ERROR
    assert "unknown vendor or profile 'cerebras'" in result.stderr
    assert "amd-gfx942" in result.stderr and "nvidia, rocm, npu" in result.stderr
    assert "passed" not in result.stdout


def test_vendor_family_selects_its_profiles_in_every_mode():
    ids = [i for i in collected_ids("--vendor", "rocm") if "[" in i]  # checks of a target
    profiles = {re.search(r"(amd-gfx\w+|nvidia-\w+|npu-\w+)", i).group(1) for i in ids}
    assert profiles == {"amd-gfx90a", "amd-gfx942", "amd-gfx950", "amd-gfx1100", "amd-gfx1201"}
    modes = {re.search(r"-(device|interpreter|compile)(-\w+)*\]$", i).group(1) for i in ids}
    assert modes == {"device", "interpreter", "compile"}


def test_mode_option_narrows_the_run():
    ids = collected_ids("--vendor", "npu", "--mode", "interpreter")
    assert ids and all(re.search(r"-npu-ascend910b-interpreter(-\w+)*\]$", i) for i in ids)


@needs_interpreter
def test_cpu_run_reports_device_checks_as_not_supported():
    result = run_pytest("suites/", "--vendor", "amd-gfx942", "--op", "gelu", "-rs",
                        "--hypothesis-profile", "ci")
    assert result.returncode == 0, result.stdout
    # no accelerator, or one of another profile (an H100 host runs nvidia-sm90)
    assert re.search(r"not supported: (no accelerator attached|the attached device runs "
                     r"profile '[\w-]+', not 'amd-gfx942')", result.stdout), result.stdout
    assert re.search(r"\b[1-9]\d* passed", result.stdout)


@needs_interpreter
def test_planted_wrong_gelu_fails_numerics_and_says_how_to_reproduce():
    result = run_pytest("suites/test_numerics.py::test_matches_reference", "--vendor",
                        "nvidia-sm90", "--mode", "interpreter", "--op", "gelu", "--impl",
                        "reference", "--impl",
                        "gelu=tests.planted.gelu_faults:gelu_wrong_coefficient")
    assert result.returncode == 1, result.stdout
    out = result.stdout
    assert "4 passed" in out and "gelu-reference-" not in out.split("short test summary")[-1]
    assert "gelu[tests.planted.gelu_faults:gelu_wrong_coefficient] on nvidia-sm90 (interpreter)" in out
    assert "out of tolerance" in out and "bound atol + rtol*|ref|" in out
    assert "reproduce: pytest 'suites/test_numerics.py::test_matches_reference[" in out
    assert "--vendor nvidia-sm90 --mode interpreter --impl" in out
    assert "Draw 1 (case): Case(shape=" in out and "reproduce_failure" in out  # minimal example
    assert "CheckTarget(gelu-tests.planted" in out  # targets print by id, not by dump


def test_planted_over_limit_num_warps_fails_compile_on_wave64_only():
    result = run_pytest("suites/test_compile.py", "--vendor", "amd-gfx942", "--vendor",
                        "nvidia-sm90", "--mode", "compile", "--op", "gelu",
                        "--impl", "gelu=tests.planted.gelu_faults:gelu_too_many_warps")
    assert result.returncode == 1, result.stdout
    assert "1 failed, 1 passed" in result.stdout
    assert "num_warps 32 x warp size 64 = 2048 threads > limits.max_threads_per_block 1024" \
        in result.stdout


def test_malformed_user_profile_is_a_usage_error_naming_file_and_field(tmp_path):
    data = bundled_profile_data("amd-gfx942")
    data["name"] = "amd-broken"
    data["limits"]["shared_memory_per_block"] = -1
    path = write_toml(tmp_path / "amd-broken.toml", data)
    result = run_pytest("suites/", "--profile-dir", str(tmp_path))
    assert result.returncode == USAGE_ERROR
    assert f"{path}: field 'limits.shared_memory_per_block': expected a positive int" \
        in result.stderr


@needs_interpreter
def test_user_profile_is_checked_like_a_bundled_one(tmp_path):
    data = bundled_profile_data("amd-gfx942")
    data.update(name="amd-gfx950-lab", description="AMD Instinct MI355X (gfx950), a lab profile")
    data["target"]["arch"] = "gfx950"
    write_toml(tmp_path / "amd-gfx950-lab.toml", data)
    result = run_pytest("suites/", "-v", "--profile-dir", str(tmp_path), "--vendor",
                        "amd-gfx950-lab", "--mode", "compile", "--mode", "interpreter",
                        "--op", "gelu", "--hypothesis-profile", "ci")
    assert result.returncode == 0, result.stdout
    assert "test_compiles_within_limits[gelu-reference-amd-gfx950-lab-compile] PASSED" \
        in result.stdout
    assert "amd-gfx950-lab-interpreter-float32] PASSED" in result.stdout


@pytest.mark.parametrize("args, message", [
    (["--impl", "nosuch"], "unknown implementation 'nosuch'"),
    (["--impl", "gelu=no_such_module_xyz:gelu"], "cannot import 'no_such_module_xyz'"),
    (["--impl", "gelu=kernels.gelu:no_such_fn"], "has no attribute 'no_such_fn'"),
    (["--impl", "nosuchop=kernels.gelu:gelu"], "unknown op 'nosuchop'"),
    (["--op", "nosuchop"], "unknown op(s) nosuchop"),
    (["--mode", "gpu"], "invalid choice: 'gpu'"),
])
def test_bad_options_are_usage_errors(args, message):
    result = run_pytest("suites/", "--collect-only", *args)
    assert result.returncode == USAGE_ERROR
    assert message in result.stderr


@pytest.mark.parametrize("dist, args, scheduler", [
    ("load", ("-n", "2"), "WorkStealingScheduling"),
    ("load", ("-n", "2", "--dist", "load"), None),
    ("load", ("-n", "2", "--dist=load"), None),
    ("loadfile", ("-n", "2", "--dist", "loadfile"), None),
])
def test_xdist_steals_work_unless_dist_is_chosen(monkeypatch, dist, args, scheduler):
    pytest.importorskip("xdist.scheduler")
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    config = SimpleNamespace(getvalue={"dist": dist, "tx": ["popen"] * 2}.get,
                             invocation_params=SimpleNamespace(args=args),
                             getini=lambda name: [])
    made = plugin.pytest_xdist_make_scheduler(config, None)
    assert (made and type(made).__name__) == scheduler
