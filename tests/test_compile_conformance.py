"""Compile conformance verdicts on planted kernels: over-limit autotune configs fail,
spills and low occupancy warn, golden stats catch changes, the IO lint flags what a SIMD
NPU lowers badly."""
import json

import pytest
import torch
import triton
import triton.language as tl

from tests.helpers import run_pytest
from tests.planted import compile_faults, npu_io_faults
from triton_cts.toolchains import golden, npu_lint, npu_toolchain
from triton_cts.toolchains.cross_compile import (CompileQualityWarning, compile_launch,
                                                 every_autotune_config, use_project_cache)
from triton_cts.execution.launches import Launch
from triton_cts.execution.modes import Mode, execute, unsupported_reason
from triton_cts.profiles import load_profiles

use_project_cache()
PROFILES = load_profiles()
GFX942, GFX1100, SM90, NPU = (PROFILES[n] for n in ("amd-gfx942", "amd-gfx1100", "nvidia-sm90",
                                                    "npu-ascend910b"))


def _compiled(fn, profile, *args):
    with every_autotune_config():
        launches = execute(fn, Mode.COMPILE, profile, args)
    return [compile_launch(launch, profile) for launch in launches]


def test_every_autotune_config_is_compiled_and_an_over_lds_one_fails():
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    small, big = _compiled(compile_faults.matmul_lds_hog, GFX942, a, b)
    assert "BLOCK_K=32" in small.config and small.violations == []
    assert big.shared_bytes == 131072
    assert big.violations == [
        "_matmul_kernel [BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, num_warps=8, num_stages=2]: "
        "131072 bytes of shared memory > limits.shared_memory_per_block 65536"]


@pytest.mark.parametrize("profile, fails", [(GFX942, True), (GFX1100, False), (SM90, False)])
def test_32_warps_fail_only_on_wave64(profile, fails):
    fits, wide = _compiled(compile_faults.gelu_too_many_warps_config, profile, torch.randn(5000))
    assert fits.violations == []
    assert wide.num_warps == 32 and wide.threads_per_block == 32 * profile.warp_size
    assert bool(wide.violations) == fails
    if fails:
        assert "num_warps 32 x warp size 64 = 2048 threads > limits.max_threads_per_block 1024" \
            in wide.violations[0]


def test_spills_and_low_occupancy_are_quality_issues_not_violations():
    (hog,) = _compiled(compile_faults.gelu_register_hog, GFX942, torch.randn(200, 300))
    assert hog.spills > 0 and hog.violations == []
    assert any("spills" in q for q in hog.quality)
    strict = GFX942.derive(**{"compile.min_occupancy_waves": 8})
    (fits, _) = _compiled(compile_faults.gelu_too_many_warps_config, strict, torch.randn(5000))
    assert fits.quality == []          # 8 waves per SIMD: at the floor
    (slow,) = _compiled(compile_faults.gelu_register_hog, strict, torch.randn(200, 300))
    assert any("occupancy" in q and "< compile.min_occupancy_waves 8" in q for q in slow.quality)
    assert issubclass(CompileQualityWarning, UserWarning)
    assert CompileQualityWarning.__name__.endswith("QualityWarning")


def test_stats_record_is_json_and_occupancy_is_the_minimum_of_its_limiters():
    for profile in (GFX942, SM90):
        (stats,) = _compiled(compile_faults.gelu_register_hog, profile, torch.randn(200, 300))
        record = json.loads(json.dumps(stats.record()))
        for key in ("kernel", "target", "config", "num_warps", "shared", "registers", "spills",
                    "occupancy"):
            assert key in record
        assert stats.occupancy == min(stats.occupancy_registers, stats.occupancy_shared)
        assert 0 < stats.occupancy <= profile["compile.max_waves_per_simd"]


def test_profiles_sharing_a_target_compile_each_kernel_once(tmp_path, monkeypatch):
    """nvidia-sm90 and nvidia-sm90-h200 differ only in memory and peak numbers: the second
    profile's kernel comes from the cache, under the same per-key compile lock."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    hits = []
    monkeypatch.setattr(triton.knobs.compilation, "listener",
                        lambda **kw: hits.append(kw["cache_hit"]))
    x = torch.randn(5000)
    stats = [_compiled(compile_faults.gelu_too_many_warps_config, PROFILES[name], x)
             for name in ("nvidia-sm90", "nvidia-sm90-h200")]
    assert [s.registers for s in stats[0]] == [s.registers for s in stats[1]]
    assert hits == [False] * len(stats[0]) + [True] * len(stats[1])
    assert len(list((tmp_path / "triton-cts-locks").iterdir())) == len(stats[0])


def test_golden_stats_report_regressions_and_missing_entries(tmp_path, monkeypatch):
    monkeypatch.setattr(golden, "GOLDEN_DIR", tmp_path)
    entry = {"k fp32 (64,) [num_warps=4]": {"registers": 40, "spills": 0, "shared": 0}}
    _, missing, _ = golden.compare("amd-gfx942", "gelu[reference]", entry)
    assert "does not exist" in missing[0] and golden.REFRESH_COMMAND in missing[0]
    path = golden.write("amd-gfx942", "hip:gfx942", "gelu[reference]", entry)
    golden.write("amd-gfx942", "hip:gfx942", "softmax[reference]", entry)   # merged, not lost
    assert set(json.loads(path.read_text())["checks"]) == {"gelu[reference]", "softmax[reference]"}
    assert golden.compare("amd-gfx942", "gelu[reference]", entry) == ([], [], [])
    close = {k: dict(v, registers=46) for k, v in entry.items()}        # within 8 registers
    assert golden.compare("amd-gfx942", "gelu[reference]", close) == ([], [], [])
    worse = {k: dict(v, registers=64, spills=12) for k, v in entry.items()}
    regressions, _, improved = golden.compare("amd-gfx942", "gelu[reference]", worse)
    assert any("registers 40 -> 64" in r for r in regressions)
    assert any("spills 0 -> 12" in r for r in regressions) and not improved
    # Doing better is not a regression: it asks for a refresh.
    regressions, _, improved = golden.compare("amd-gfx942", "gelu[reference]",
                                              {k: dict(v, registers=24) for k, v in entry.items()})
    assert not regressions and "registers 40 -> 24" in improved[0]
    assert golden.REFRESH_COMMAND in improved[0]
    # A kernel that already spills may move by a tenth; one that spilled none may not.
    spilling = {k: dict(v, spills=36) for k, v in entry.items()}
    golden.write("amd-gfx942", "hip:gfx942", "attention[reference]", spilling)
    assert golden.compare("amd-gfx942", "attention[reference]",
                          {k: dict(v, spills=39) for k, v in entry.items()}) == ([], [], [])
    assert "spills 36 -> 40" in golden.compare(
        "amd-gfx942", "attention[reference]", {k: dict(v, spills=40) for k, v in entry.items()})[0][0]
    new_kernel = {**entry, "k2 fp32 (64,) [num_warps=4]": entry["k fp32 (64,) [num_warps=4]"]}
    assert golden.compare("amd-gfx942", "gelu[reference]", new_kernel)[1] == [
        f"no golden entry for k2 fp32 (64,) [num_warps=4]; refresh with "
        f"`{golden.REFRESH_COMMAND}`"]
    assert "has no entry for max_all[reference]" in golden.compare(
        "amd-gfx942", "max_all[reference]", entry)[1][0]
    assert not list(tmp_path.rglob("*.tmp"))                             # atomic writes


def test_a_stale_golden_entry_is_a_quality_warning_and_no_entry_is_not(tmp_path, monkeypatch):
    """A compile check whose golden entry (this Triton version, the profile) lacks a kernel
    it compiled (a launch key that changed without a refresh) went uncompared: it is
    reported as a quality warning naming the refresh. A check with no entry, or a version
    with no file, was never recorded: it passes with a plain GoldenMissingWarning."""
    source = golden.load("amd-gfx942")
    if source is None:
        pytest.skip(f"no golden file for amd-gfx942 under triton {triton.__version__}")
    stale_dir = tmp_path / "stale"
    path = stale_dir / f"triton-{triton.__version__}" / "amd-gfx942.json"
    path.parent.mkdir(parents=True)
    source["checks"]["gelu[reference]"] = {
        f"{key} (old key)": stats for key, stats in source["checks"]["gelu[reference]"].items()}
    path.write_text(json.dumps(source))
    args = ("suites/test_compile.py", "--vendor", "amd-gfx942", "--mode", "compile",
            "--op", "gelu", "-W", "ignore::triton_cts.toolchains.golden.GoldenImprovedWarning")
    monkeypatch.setenv("TRITON_CTS_GOLDEN_DIR", str(stale_dir))
    out = run_pytest(*args).stdout
    assert "GoldenStaleWarning" in out and "no golden entry for _gelu" in out, out
    assert "golden entries no longer compiled" in out and golden.REFRESH_COMMAND in out
    assert "CONFORMS: 1 checks (1 quality_warning)" in out, out
    del source["checks"]["gelu[reference]"]
    path.write_text(json.dumps(source))
    for no_entry in (stale_dir, tmp_path / "no-file"):
        monkeypatch.setenv("TRITON_CTS_GOLDEN_DIR", str(no_entry))
        out = run_pytest(*args).stdout
        assert "GoldenMissingWarning" in out and "GoldenStaleWarning" not in out, out
        assert "CONFORMS: 1 checks (1 pass)" in out, out


def test_a_regression_fails_only_if_a_fresh_process_measures_it_too(tmp_path, monkeypatch):
    monkeypatch.setattr(golden, "GOLDEN_DIR", tmp_path)
    golden.write("amd-gfx942", "hip:gfx942", "attention[reference]",
                 {"bwd": {"registers": 128, "spills": 23, "shared": 0},
                  "fwd": {"registers": 100, "spills": 0, "shared": 0}})
    here = {"bwd": {"registers": 128, "spills": 30, "shared": 0},
            "fwd": {"registers": 100, "spills": 2, "shared": 0}}
    regressions = golden.compare("amd-gfx942", "attention[reference]", here)[0]
    assert len(regressions) == 2
    # the fresh process gives the golden spills back for bwd, reproduces fwd's with 3
    fresh = {"bwd": {"registers": 128, "spills": 23, "shared": 0},
             "fwd": {"registers": 100, "spills": 3, "shared": 0}}
    confirmed, unstable = golden.confirm("amd-gfx942", "attention[reference]", here,
                                         regressions, fresh)
    assert confirmed == ["fwd: spills 0 -> 3 (allowed change max(0, 10% of 0)) in a fresh "
                         "process (spills 2 in this one)"]
    assert len(unstable) == 1 and unstable[0].startswith("bwd: spills 23 -> 30 ")
    assert "a fresh process with an empty Triton cache measured spills 23" in unstable[0]
    # the same numbers again: confirmed as measured; no fresh numbers: every one stands
    confirmed, unstable = golden.confirm("amd-gfx942", "attention[reference]", here,
                                         regressions, here)
    assert unstable == [] and all(c.endswith("(a fresh process measured the same)")
                                  for c in confirmed)
    confirmed, unstable = golden.confirm("amd-gfx942", "attention[reference]", here,
                                         regressions, "the recompile took over 900 s")
    assert unstable == [] and len(confirmed) == 2
    assert "not rechecked in a fresh process: the recompile took over 900 s" in confirmed[0]


def _planted_golden(tmp_path, monkeypatch, registers_drop: int) -> None:
    """Golden stats for gelu on gfx942 written from a real compile, then lowered so this
    process's numbers regress."""
    monkeypatch.setenv("TRITON_CTS_GOLDEN_DIR", str(tmp_path))
    monkeypatch.setenv(golden.UPDATE_ENV, "1")
    result = run_pytest("suites/test_compile.py", "--vendor", "amd-gfx942", "--mode", "compile",
                        "--op", "gelu", "-q")
    assert result.returncode == 0, result.stdout
    monkeypatch.delenv(golden.UPDATE_ENV)
    path = tmp_path / f"triton-{triton.__version__}" / "amd-gfx942.json"
    data = json.loads(path.read_text())
    for entry in data["checks"]["gelu[reference]"].values():
        entry["registers"] -= registers_drop
    path.write_text(json.dumps(data))


def test_compile_suite_fails_a_regression_a_fresh_process_reproduces(tmp_path, monkeypatch):
    _planted_golden(tmp_path, monkeypatch, registers_drop=8 + 1)  # 1 over the slack of 8
    result = run_pytest("suites/test_compile.py", "--vendor", "amd-gfx942", "--mode", "compile",
                        "--op", "gelu")
    assert result.returncode == 1, result.stdout
    assert "golden regression: " in result.stdout
    assert "(a fresh process measured the same)" in result.stdout


def test_compile_suite_warns_on_a_regression_a_fresh_process_does_not_reproduce(
        tmp_path, monkeypatch):
    _planted_golden(tmp_path, monkeypatch, registers_drop=40)
    result = run_pytest("suites/test_compile.py", "--vendor", "amd-gfx942", "--mode", "compile",
                        "--op", "gelu", "-p", "tests.planted.fresh_codegen")
    assert result.returncode == 0, result.stdout
    assert "GoldenUnstableWarning: gelu[reference] on amd-gfx942: " in result.stdout
    assert "codegen depends on what the process compiled before" in result.stdout


def test_a_refresh_drops_the_stats_of_a_check_no_longer_supported(tmp_path, monkeypatch):
    """A refresh of a check the profile no longer supports (its field removed, say) drops
    that check's golden entry: the old stats stood for a kernel no longer compiled. Other
    entries stay."""
    monkeypatch.setenv("TRITON_CTS_GOLDEN_DIR", str(tmp_path))
    monkeypatch.setattr(golden, "GOLDEN_DIR", tmp_path)
    entry = {"k fp32 (64,) [num_warps=4]": {"registers": 40, "spills": 0, "shared": 0}}
    for check in ("layer_norm[reference/row_groups]", "gelu[reference]"):
        path = golden.write("amd-gfx942", "hip:gfx942", check, entry)
    monkeypatch.setenv(golden.UPDATE_ENV, "1")
    result = run_pytest("suites/test_compile.py", "--vendor", "amd-gfx942", "--mode", "compile",
                        "--op", "layer_norm", "-k", "row_groups", "-q", "-rs")
    assert "NOT_SUPPORTED 1N" in result.stdout, result.stdout  # the run checked nothing
    assert list(json.loads(path.read_text())["checks"]) == ["gelu[reference]"]
    assert not golden.remove("amd-gfx942", "layer_norm[reference/row_groups]")


def test_golden_refresh_help_touches_no_file_and_a_selection_keeps_the_others(
        tmp_path, monkeypatch, capsys):
    """`refresh --help` (pytest's options follow `refresh`) printed pytest's help after
    deleting every golden file of this Triton version; now it prints the usage alone. A
    refresh with a selection replaces the selected entries; one without rebuilds the
    files from scratch."""
    monkeypatch.setattr(golden, "GOLDEN_DIR", tmp_path)
    runs = []
    monkeypatch.setattr(golden.subprocess, "call", lambda cmd, **kw: runs.append(cmd) or 0)
    path = golden.write("amd-gfx942", "hip:gfx942", "gelu[reference]",
                        {"k fp32 (64,) [num_warps=4]": {"registers": 40, "spills": 0}})
    for args in (["refresh", "--help"], ["refresh", "-n", "2", "-h"]):
        assert golden.main(args) == 0 and path.exists() and not runs
    assert "--vendor" in capsys.readouterr().out
    assert golden.main(["refresh", "--vendor", "nvidia-sm90", "-n", "2"]) == 0
    assert path.exists() and len(runs) == 1
    assert golden.main(["refresh", "-n", "2"]) == 0
    assert not path.exists() and runs[-1][-2:] == ["-n", "2"]


def test_golden_files_exist_for_this_triton_version_and_every_bundled_gpu_profile():
    if not golden.golden_path("x").parent.is_dir():
        pytest.skip(f"not supported: no golden compile stats are kept for triton "
                    f"{triton.__version__} ({golden.REFRESH_COMMAND} creates them)")
    for name, profile in PROFILES.items():
        if profile.backend not in ("npu", "xpu"):   # compiled by their own toolchains
            data = golden.load(name)
            assert data is not None, f"{golden.golden_path(name)} missing: {golden.REFRESH_COMMAND}"
            assert data["checks"], name


# ---- IO lint --------------------------------------------------------------------------
def _lint(fn, profile, *args):
    return [f for launch in execute(fn, Mode.COMPILE, profile, args)
            for f in npu_lint.lint_ttir(npu_lint.upstream_ttir(launch), profile, launch.name)]


@pytest.mark.parametrize("fn, rule", [(npu_io_faults.gelu_discrete_mask, "discrete-mask"),
                                      (npu_io_faults.gelu_broadcast_pointer, "broadcast-pointer")])
def test_io_lint_flags_planted_patterns_on_the_npu_only(fn, rule):
    x = torch.randn(64, 100)
    findings = _lint(fn, NPU, x)
    assert findings and all(f.startswith(rule + ": ") for f in findings), findings
    assert _lint(fn, SM90, x) == []


@pytest.mark.parametrize("kernel, args, rule", [
    (npu_io_faults._division_offsets_kernel, (torch.randn(64), torch.randn(256)),
     "division-offsets"),
    (npu_io_faults._gather_kernel, (torch.randn(64), torch.zeros(256, dtype=torch.int32),
                                    torch.randn(256)), "gather"),
    (npu_io_faults._program_id_y_kernel, (torch.randn(512), torch.randn(512)), "program-id-yz"),
    (npu_io_faults._float64_kernel, (torch.randn(256), torch.zeros(256, dtype=torch.float64)),
     "dtype"),
])
def test_io_lint_rules(kernel, args, rule):
    launch = Launch(kernel, args, {"BLOCK_SIZE": 256}, launched=False)
    findings = npu_lint.lint_ttir(npu_lint.upstream_ttir(launch), NPU, launch.name)
    assert [f.split(":")[0] for f in findings] == [rule], findings


@triton.jit
def _sibling_loops_kernel(X, Y, N, BLOCK_SIZE: tl.constexpr):
    for start in range(0, N, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        tl.store(Y + cols, tl.load(X + cols, mask=cols < N), mask=cols < N)
    for i in range(0, 2):
        cols = N - 1 - i     # a scalar named like the first loop's tensor
        tl.store(Y + cols, tl.load(X + cols))


def test_io_lint_scopes_names_by_region():
    """Triton names values after source variables, so sibling loops print the same SSA
    name (%cols) twice: the first loop's load must be judged by its own %cols (affine in
    the lane), not by the scalar the second loop defines (a broadcast pointer)."""
    launch = Launch(_sibling_loops_kernel, (torch.randn(256), torch.randn(256), 256),
                    {"BLOCK_SIZE": 64}, launched=False)
    ttir = npu_lint.upstream_ttir(launch)
    assert ttir.count("%cols = ") == 2, "the kernel no longer reuses the name: rewrite it"
    assert npu_lint.lint_ttir(ttir, NPU, launch.name) == []


def test_npu_compile_is_supported_here_and_names_the_missing_toolchain(monkeypatch):
    assert unsupported_reason(Mode.COMPILE, NPU, None) is None     # the lint runs everywhere
    monkeypatch.setenv(npu_toolchain.PYTHON_ENV, "/nonexistent/python")
    npu_toolchain.unavailable_reason.cache_clear()
    try:
        assert "tox -e npu" in npu_toolchain.unavailable_reason()
    finally:
        npu_toolchain.unavailable_reason.cache_clear()


def test_compile_suite_fails_over_limit_config_and_warns_on_spills():
    result = run_pytest("suites/test_compile.py", "--vendor", "amd-gfx942", "--mode", "compile",
                        "--impl", "matmul=tests.planted.compile_faults:matmul_lds_hog",
                        "--impl", "gelu=tests.planted.compile_faults:gelu_register_hog",
                        "-W", "ignore::triton_cts.toolchains.golden.GoldenMissingWarning",
                        "-W", "ignore::triton_cts.toolchains.golden.GoldenImprovedWarning")
    out = result.stdout
    assert result.returncode == 1, out
    assert "1 failed, 1 passed" in out
    assert ("float32 (512, 512): _matmul_kernel [BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, "
            "num_warps=8, num_stages=2]: 131072 bytes of shared memory > "
            "limits.shared_memory_per_block 65536") in out
    # the big config also spills where it fits (fp16/bf16): a warning, beside the failure
    assert "CompileQualityWarning: matmul[tests.planted.compile_faults:matmul_lds_hog]" in out
    assert "spills" in out
