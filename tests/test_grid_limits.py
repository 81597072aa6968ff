"""The grid-limit suite fails on planted faults (rows on an axis whose limit they
exceed; a grid-stride loop that skips the tail) and passes the references; the grid
validation and the launch recording it relies on."""
import pytest
import torch
import triton
import triton.language as tl

from tests.helpers import needs_interpreter, run_pytest
from triton_cts.execution import launches
from triton_cts.execution.grid_check import empty_grid, grid_violations
from triton_cts.profiles import load_profiles
from triton_cts.results.report_io import load_report

SUITE = "suites/test_grid_limits.py"
PLANTED = "tests.planted.grid_faults"
AXIS_Y = f"{PLANTED}:softmax_rows_on_axis_y"
SKIPS_TAIL = f"{PLANTED}:gelu_grid_stride_skips_tail"
EMPTY_GRID = f"{PLANTED}:softmax_launches_empty_grid"


@needs_interpreter
def test_suite_catches_planted_faults_and_passes_references():
    result = run_pytest(SUITE, "--vendor", "nvidia-sm90", "--mode", "interpreter", "--mode",
                        "compile", "--op", "softmax", "--op", "gelu", "--impl", "reference",
                        "--impl", f"softmax={AXIS_Y}", "--impl", f"gelu={SKIPS_TAIL}",
                        "--hypothesis-profile", "ci", "-k", "not empty")
    out = result.stdout
    assert result.returncode == 1, out
    failed = {line.split("::")[1].split(" ")[0] for line in out.splitlines()
              if line.startswith(f"FAILED {SUITE}::")}
    assert not [f for f in failed if "-reference" in f], out
    assert f"test_grids_within_limits_at_edges[softmax-{AXIS_Y}-nvidia-sm90-interpreter]" in failed
    assert f"test_grids_within_limits_at_full_size[softmax-{AXIS_Y}-nvidia-sm90-compile]" in failed
    assert f"test_grids_within_limits_at_edges[gelu-{SKIPS_TAIL}-nvidia-sm90-interpreter]" in failed
    # the failure names the kernel, the grid and the limit
    assert ("_softmax_row_per_program_y_kernel launched with grid (1, 65536, 1): axis y = 65536 "
            "exceeds limits.grid_max[1] = 65535 of nvidia-sm90") in out
    assert "out=nan" in out  # rows the loop skipped keep their poison
    assert "reproduce: pytest" in out


@needs_interpreter
def test_empty_grid_on_an_empty_input_is_a_quality_warning(tmp_path):
    """Triton's CUDA and HIP launchers and its interpreter skip an empty grid: launching
    one for an input with no elements gives the right result, and is reported as a quality
    warning, not a failure."""
    out = tmp_path / "r.json"
    result = run_pytest(f"{SUITE}::test_empty_tensors", "--vendor", "nvidia-sm90", "--mode",
                        "interpreter", "--mode", "compile", "--op", "softmax", "--impl",
                        f"softmax={EMPTY_GRID}", "--report-json", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    records = load_report(out)["records"]
    assert {r["mode"] for r in records} == {"interpreter", "compile"}
    for r in records:
        assert r["status"] == "quality_warning", r
        assert "_softmax_row_kernel with an empty grid" in r["reason"], r


@pytest.fixture(scope="module")
def sm90():
    return load_profiles()["nvidia-sm90"]


@pytest.mark.parametrize("grid, problem", [
    ((1, 65535, 1), None),
    ((1, 65536, 1), "axis y = 65536 exceeds limits.grid_max[1] = 65535"),
    ((1, 1, 65536), "axis z = 65536 exceeds limits.grid_max[2] = 65535"),
    ((65536, 65536, 1), "4294967296 programs exceed limits.grid_max_product = 2147483647"),
    ((2**31 - 1, 2, 1), "programs exceed limits.grid_max_product"),
    ((0,), "axis x = 0"),
])
def test_grid_violations(sm90, grid, problem):
    found = grid_violations(grid, sm90, capped=False, kernel="k")
    assert grid_violations((0, 1, 1), sm90, capped=True, allow_empty=True) == []
    assert empty_grid((4, 0, 1)) and not empty_grid((4, 1, 1))
    if problem is None:
        assert found == []
    else:
        assert any(problem in p for p in found), found
        assert all(p.startswith(f"k launched with grid ") for p in found)


def test_capped_launchers_are_held_to_max_grid_num(sm90):
    assert grid_violations((65535,), sm90, capped=True) == []
    assert "launch.max_grid_num = 65535" in grid_violations((65536,), sm90, capped=True)[0]
    assert grid_violations((65536,), sm90, capped=False) == []
    with pytest.raises(ValueError, match="1 to 3 dims"):
        grid_violations((1, 1, 1, 1), sm90, capped=False)


@triton.autotune(configs=[triton.Config({"BLOCK": 2}), triton.Config({"BLOCK": 4})], key=["n"],
                 do_bench=lambda call, quantiles=None: [call() or 0.0] * len(quantiles))
@triton.heuristics(values={"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def _copy_kernel(X, Y, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < n), mask=offs < n)


def test_recording_covers_autotuned_and_heuristic_launches_with_callable_grids():
    x, y = torch.arange(8.0), torch.zeros(8)
    with launches.interpreted(), launches.record_launches() as log:
        _copy_kernel[lambda meta: (triton.cdiv(8, meta["BLOCK"]),)](x, y, 8)
    # both configs while tuning, then the chosen one; each grid from its own BLOCK
    assert sorted({(rec.name, rec.grid) for rec in log}) == [
        ("_copy_kernel", (2, 1, 1)), ("_copy_kernel", (4, 1, 1))]
    assert len(log) == 3 and torch.equal(x, y)


def test_launches_of_an_already_compiled_kernel_are_recorded():
    """Libraries that cache the kernel their first launch compiled (FlagGems' LibEntry)
    launch it as compiled[grid](*args) afterwards, past JITFunction.run: those launches
    are recorded too (grid cut to three dims), and not made while capturing."""
    from types import SimpleNamespace

    from triton.compiler.compiler import CompiledKernel

    assert CompiledKernel.__getitem__.__wrapped__ is not None  # patched at import
    made = []
    getitem = launches._make_getitem(lambda self, grid: lambda *args: made.append(grid))
    jit = _copy_kernel.fn.fn  # under the autotuner and the heuristics
    compiled = SimpleNamespace(src=SimpleNamespace(fn=jit))
    getitem(compiled, (5, 1, 1))(1, 2)  # nothing recording: a plain launch
    with launches.record_launches() as log:
        getitem(compiled, (3, 2, 1, 1, 1))("x", "y")
    assert made == [(5, 1, 1), (3, 2, 1, 1, 1)]
    assert [(rec.name, rec.grid, rec.args, rec.launched) for rec in log] == [
        ("_copy_kernel", (3, 2, 1), ("x", "y"), True)]
    with launches.capture_launches() as log:
        getitem(compiled, (7,))("x")
    assert len(made) == 2 and [(rec.grid, rec.launched) for rec in log] == [((7, 1, 1), False)]


@triton.jit
def _rand_kernel(OUT, seed, OFFSET, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    offs = OFFSET + i.to(tl.int64)
    tl.store(OUT + i, tl.rand(seed, offs), mask=i < n)


@pytest.mark.parametrize("start", [0, 2**31 - 40, 2**32 - 40, 2**40])
def test_reference_dropout_mask_is_tl_rand_bit_for_bit_past_2_31(start):
    """The 2^31-element check of layer_norm_residual_dropout rebuilds the kernel's mask on
    the device in chunks; the counters past 2^31 and 2^32 must match tl.rand exactly."""
    from triton_cts.ops.layer_norm import philox_uniform
    seed, n = 2**31 - 5, 100
    out = torch.empty(n, dtype=torch.float32)
    with launches.interpreted():
        _rand_kernel[(1,)](out, seed, start, n, BLOCK=128)
    ours = philox_uniform(seed, torch.arange(start, start + n, dtype=torch.int64))
    assert torch.equal(ours.view(torch.int32), out.view(torch.int32))


def test_reference_dropout_mask_is_chunked(monkeypatch):
    from triton_cts.ops import layer_norm as ln
    whole = ln.dropout_keep_mask((7, 33), 11, 0.5)
    monkeypatch.setattr(ln, "PHILOX_CHUNK", 10)
    assert torch.equal(ln.dropout_keep_mask((7, 33), 11, 0.5), whole)
    assert 0.3 < whole.float().mean() < 0.7


@needs_interpreter
def test_tiny_derived_grid_limits_apply_only_to_launchers_that_take_the_profile():
    """Liger-Kernel's softmax launched grid (4,) under a derived profile whose grid limit is
    1 and failed: it never sees the profile. Such implementations are not supported by the
    interpreter's grid-edge check (device mode checks them at the real limits)."""
    result = run_pytest(SUITE, "--vendor", "nvidia-sm90", "--mode", "interpreter", "--op",
                        "softmax", "--impl", f"softmax={PLANTED}:softmax_without_profile",
                        "--hypothesis-profile", "ci", "-k", "at_edges", "-rs")
    out = result.stdout
    assert result.returncode == 1, out  # every check not supported: nothing was checked
    assert "NO RESULT" in out, out
    assert "softmax_without_profile does not take the profile" in out, out
