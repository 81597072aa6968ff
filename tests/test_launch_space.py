"""The derived profiles shrink every launch constant a kernel takes from the profile, so
that the small inputs the interpreter draws reach several tiles per dimension, several
groups with a ragged last one, capped grids and partial sums."""
import torch
from hypothesis import given, settings

from kernels.matmul import matmul
from suites import strategies as hh
from tests.helpers import needs_interpreter
from triton_cts.execution.launches import interpreted, record_launches
from triton_cts.profiles import cdiv, load_profiles

PROFILES = load_profiles()


@settings(max_examples=40, deadline=None)
@given(hh.derived_profiles(PROFILES["nvidia-sm90"]))
def test_derived_profiles_fuzz_every_launch_constant(derived):
    (tile,) = derived.autotune_configs("matmul")
    assert tile["BLOCK_SIZE_M"] <= 32 and tile["BLOCK_SIZE_N"] <= 32
    assert 1 <= tile["GROUP_SIZE_M"] <= 3
    assert 1 <= derived.partials_per_compute_unit <= 3
    rows, cols, warps = derived.tuning("layer_norm")["column_sum_tile"]
    assert rows <= 8 and cols <= 16 and warps <= derived.max_num_warps
    assert derived.max_grid_num <= 8 and derived.compute_units <= 8


def test_a_small_product_spans_several_tiles_and_a_ragged_group():
    """With a derived 16x16 tile and groups of 3 tile rows, an 80 x 40 product has 5 x 3
    tiles in two groups (3 rows, then 2), and the interpreter computes it right."""
    derived = PROFILES["nvidia-sm90"].derive(**{"autotune.matmul": [
        {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 3,
         "num_warps": 1, "num_stages": 1}]})
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(80, 48, generator=gen)
    b = torch.randn(48, 40, generator=gen)
    with interpreted(), record_launches() as log:
        c = matmul(a, b, profile=derived, input_precision="ieee")  # the pointer kernel
    torch.testing.assert_close(c, a @ b, rtol=1e-5, atol=1e-4)
    (launch,) = [entry for entry in log if entry.launched]
    tiles = cdiv(80, 16) * cdiv(40, 16)
    assert launch.grid[0] == min(tiles, derived.max_grid_num) == tiles


@needs_interpreter
def test_the_report_lists_the_launch_coverage_and_its_gaps(tmp_path):
    """Each check's launches are kept, and the report gathers them per kernel: matmul's
    tiles and groups reached, and a boolean constexpr no check set the other way is a gap
    of the run (not a failure of a check): the plain matmul never adds into its output
    (the k_chunks variant does)."""
    from tests.helpers import run_pytest
    from triton_cts.results.report_io import load_report

    out, page = tmp_path / "r.json", tmp_path / "r.html"
    # a target without the tensor-descriptor matmul: every product runs the pointer kernel
    result = run_pytest("suites/test_numerics.py::test_matches_reference_under_fuzzed_constants",
                        "--op", "matmul", "-k", "matmul-reference-amd",  # not the variants
                        "--vendor", "amd-gfx942", "--mode", "interpreter",
                        "--hypothesis-profile", "ci", "--report-json", str(out),
                        "--report-html", str(page))
    assert result.returncode == 0, result.stdout[-3000:]
    doc = load_report(out)
    kernel = doc["coverage"]["kernels"]["_matmul_kernel"]
    assert kernel["checks"] >= 1 and kernel["multi_program"]
    assert set(kernel["constexprs"]["BLOCK_SIZE_M"]) <= {16, 32}  # the derived tiles
    assert all(r["properties"].get("launch_coverage") for r in doc["records"]
               if r["status"] == "pass")
    assert "_matmul_kernel: ACCUMULATE was always False" in doc["coverage"]["gaps"]
    assert "launch coverage:" in result.stdout
    assert 'id="launch-coverage"' in page.read_text()
