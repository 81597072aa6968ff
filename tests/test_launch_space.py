"""The derived profiles shrink every launch constant a kernel takes from the profile, so
that the small inputs the interpreter draws reach several tiles per dimension, several
groups with a ragged last one, capped grids and partial sums."""
import torch
from hypothesis import given, settings

from kernels.matmul import matmul
from suites import strategies as hh
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
    rows, cols, warps = derived.column_sum_tile
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
        c = matmul(a, b, profile=derived)
    torch.testing.assert_close(c, a @ b, rtol=1e-5, atol=1e-4)
    (launch,) = [entry for entry in log if entry.launched]
    tiles = cdiv(80, 16) * cdiv(40, 16)
    assert launch.grid[0] == min(tiles, derived.max_grid_num) == tiles
