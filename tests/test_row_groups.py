"""The layer-norm row-group backward (kernels/layer_norm/row_groups.py): which rows take
it, how its grid is bounded by the programs a device keeps resident, and (on a GPU) that
groups of several programs give the column strategy's gradients, bitwise the same on
every run."""
import pytest
import torch

import kernels.layer_norm as ln
from kernels.layer_norm import plan as ln_plan
from kernels.layer_norm.plan_backward import ROW_GROUPS, backward_plan
from kernels.layer_norm import tuning as lnt
from triton_cts.execution import launches
from triton_cts.execution.input_checks import UnsupportedDtypeError
from triton_cts.execution.modes import Mode, execute
from triton_cts.profiles import cdiv, load_profiles
from triton_cts.toolchains.cross_compile import compile_launch, use_project_cache

from .helpers import needs_interpreter

PROFILES = load_profiles()
SM90, GFX942 = PROFILES["nvidia-sm90"], PROFILES["amd-gfx942"]
GROUPS, COLUMNS = "_layer_norm_bwd_row_groups_kernel", "_layer_norm_bwd_columns_kernel"


def _operands(n_rows, n_cols, dtype, device="meta", rms=False):
    make = (torch.empty if device == "meta" else torch.randn)
    x = make(n_rows, n_cols, dtype=dtype, device=device)
    weight = make(n_cols, dtype=dtype, device=device)
    bias = None if rms else make(n_cols, dtype=dtype, device=device)
    stat = torch.empty(n_rows, dtype=torch.float32, device=device)
    return make(n_rows, n_cols, dtype=dtype, device=device), x, weight, bias, stat, stat


def _kernels(fn, *args, **kwargs):
    with launches.capture_launches() as log:
        fn(*args, **kwargs)
    return [(launch.name, launch.grid[0]) for launch in log]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_long_rows_take_row_groups_where_the_profile_has_their_tile(dtype):
    """Past the fused backward the default splits each row over a group of resident
    programs: the row-group tile's slices a row, as many groups as the compute units
    hold; a profile without the tile keeps the column strategy."""
    rows, block_n, warps, per_unit, *_ = lnt.backward_row_group_tile(SM90, dtype)
    n_parts = cdiv(65536, block_n)
    grid = SM90.compute_units * per_unit // n_parts * n_parts
    for fn in (ln.layer_norm_backward, ln.layer_norm_backward_partial,
               ln.layer_norm_backward_atomic, ln.layer_norm_backward_row_groups):
        names = _kernels(fn, *_operands(1024, 65536, dtype), profile=SM90)
        assert (GROUPS, grid) in names and COLUMNS not in dict(names), (fn, names)
    assert COLUMNS in dict(_kernels(ln.layer_norm_backward, *_operands(1024, 65536, dtype),
                                    profile=GFX942))
    with launches.capture_launches(), pytest.raises(
            UnsupportedDtypeError,
            match="'amd-gfx942' has no tuning.layer_norm.backward_row_group_tile"):
        ln.layer_norm_backward_row_groups(*_operands(4, 65536, dtype), profile=GFX942)


def test_rows_needing_more_programs_than_are_resident_take_the_column_strategy():
    """A group must be resident at once: a row that needs more programs than the compute
    units keep resident, or than the profile's grid cap, goes to the column strategy (the
    variant says why)."""
    few = SM90.derive(**{"limits.compute_units": 2})
    _, block_n, _, per_unit, *_ = lnt.backward_row_group_tile(few, torch.bfloat16)
    n_cols = block_n * 2 * per_unit + 1   # one column past what 2 units hold
    assert COLUMNS in dict(_kernels(ln.layer_norm_backward,
                                    *_operands(8, n_cols, torch.bfloat16), profile=few))
    with launches.capture_launches(), pytest.raises(UnsupportedDtypeError,
                                                    match="more programs than the device keeps"):
        ln.layer_norm_backward_row_groups(*_operands(8, n_cols, torch.bfloat16), profile=few)
    # the grid cap bounds a group as the resident programs do
    capped = SM90.derive(**{"launch.max_grid_num": 3, "launch.max_fused_size_bytes": 4096})
    names = _kernels(ln.layer_norm_backward, *_operands(8, 4 * block_n, torch.bfloat16),
                     profile=capped)
    assert COLUMNS in dict(names) and GROUPS not in dict(names)
    names = _kernels(ln.layer_norm_backward, *_operands(8, 3 * block_n, torch.bfloat16),
                     profile=capped)
    assert (GROUPS, 3) in names
    with launches.capture_launches(), pytest.raises(UnsupportedDtypeError,
                                                    match="float64 is not taken"):
        ln.layer_norm_backward_row_groups(*_operands(8, 64, torch.float64), profile=SM90)


def _row_groups_plan(profile, n_rows, n_cols, dtype, flags, units, interpreting):
    return backward_plan(profile, n_rows, n_cols, dtype, *flags, units, interpreting, ROW_GROUPS)


def test_the_grid_is_bounded_by_the_attached_devices_compute_units(monkeypatch):
    """A device with fewer compute units than its profile (a PCIe H100 has 114 SMs, a MIG
    slice fewer) bounds the groups: more programs than it holds would wait forever."""
    monkeypatch.setitem(ln_plan._DEVICE_UNITS, 0, 8)
    assert ln_plan._resident_units(SM90, torch.device("cuda", 0)) == 8
    assert ln_plan._resident_units(SM90, torch.device("meta")) == SM90.compute_units
    plan = _row_groups_plan(SM90, 1024, 65536, torch.float32,
                            (False, True, False, False, False, False), 8, False)
    n_groups, n_parts = plan.scalars
    assert n_groups * n_parts <= 8 * lnt.backward_row_group_tile(SM90, torch.float32)[3]


def test_the_interpreter_runs_a_group_as_one_program():
    """The interpreter runs programs one after another, so a program waiting for another
    would wait forever: there a group is one program holding whole rows."""
    flags = (False, True, False, False, False, False)
    plan = _row_groups_plan(SM90, 64, 65536, torch.bfloat16, flags, SM90.compute_units, True)
    n_groups, n_parts = plan.scalars
    assert n_parts == 1 and plan.launches[0].grid == (n_groups,)


@needs_interpreter
def test_interpreted_row_groups_match_the_column_strategy():
    """Rows of two row blocks with a ragged last one and the next rows loaded ahead
    (the bf16 tile's), with residual, rowscale and dropout operands."""
    torch.manual_seed(0)
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        dy, x, weight, bias, _, _ = _operands(5, 2100, dtype, "cpu")
        rowscale = torch.rand(5, dtype=dtype) + 0.5
        mask = torch.rand(5, 2100) > 0.2
        with launches.interpreted():
            out = ln.layer_norm(x, weight, bias, 1e-5, profile=SM90)
            kwargs = dict(rowscale=rowscale, dropout_mask=mask, dropout_p=0.2,
                          dresidual_out=torch.randn_like(x), has_residual=True, profile=SM90)
            got = ln.layer_norm_backward_row_groups(dy, x, weight, bias, out.mean, out.rstd,
                                                    **kwargs)
            want = ln.layer_norm_backward_columns(dy, x, weight, bias, out.mean, out.rstd,
                                                  **kwargs)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=2e-2 if dtype.itemsize == 2 else 1e-5,
                                       atol=1e-2 if dtype.itemsize == 2 else 1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16bit_data_are_held_in_16_bits_across_a_meeting(dtype):
    """x and dy are converted to float32 for the row sums and again, from their 16-bit
    registers, after the meeting: with the float32 copies held across it instead, the
    Hopper tile (2 rows x 4096 columns a program, two programs an SM) spilled 160-224
    bytes a thread at its 128-register cap (Triton 3.6 and 3.9); held in 16 bits, 0 (3.6)
    or 8 (3.9). Cross-compiled for sm_90 at the benchmark's longest rows."""
    use_project_cache()
    args = _operands(1024, 65536, dtype, "cpu")
    launched = execute(ln.layer_norm_backward_row_groups, Mode.COMPILE, SM90, args)
    (groups,) = [launch for launch in launched if launch.name == GROUPS]
    assert groups.kwargs["RECONVERT"] and groups.kwargs["F16_ASM"] == (dtype == torch.float16)
    stats = compile_launch(groups, SM90)
    assert stats.registers <= 128 and stats.spills <= 16, stats


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device: groups of "
                    "several programs meet only where programs run at once")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("shape", [(1024, 65536), (301, 20000), (7, 9000)])
def test_groups_of_programs_match_the_column_strategy_on_the_device(dtype, shape):
    """Rows split over 3 to 32 programs a group (ragged last slices and row blocks) give
    the column strategy's gradients, bitwise the same on a second run."""
    from triton_cts.profiles.vendor_selection import attached_device, match_device
    profile = match_device(attached_device(), PROFILES)
    if lnt.backward_row_group_tile(profile, dtype) is None:
        pytest.skip(f"profile '{profile.name}' has no row-group tile")
    torch.manual_seed(1)
    for rms in (False, True):
        dy, x, weight, bias, _, _ = _operands(*shape, dtype, "cuda", rms=rms)
        out = ln.layer_norm(x * 3 + 1, weight, bias, 1e-5, rms=rms, profile=profile)
        args = (dy, x * 3 + 1, weight, bias, out.mean, out.rstd)
        first = ln.layer_norm_backward_row_groups(*args, rms=rms, profile=profile)
        second = ln.layer_norm_backward_row_groups(*args, rms=rms, profile=profile)
        columns = ln.layer_norm_backward_columns(*args, rms=rms, profile=profile)
        for a, b, c in zip(first, second, columns):
            if a is None:
                continue
            assert torch.equal(a, b)
            scale = c.float().abs().max().item()
            assert (a.float() - c.float()).abs().max().item() <= (
                4e-3 if dtype.itemsize == 2 else 1e-6) * scale


def test_groups_meeting_many_times_compensate_their_column_sums():
    """Each lane of a group adds one dweight/dbias term a meeting: 2M rows of 4 columns
    over 264 groups (7944 meetings) missed the float32 bound of dbias uncompensated on an
    H100; the benchmark's long rows meet 64 times and keep the plain sums."""
    flags = (False, True, False, False, False, False)
    def compensated(n_rows, n_cols):
        plan = _row_groups_plan(SM90, n_rows, n_cols, torch.float32, flags,
                                SM90.compute_units, False)
        return plan.launches[0].meta["COMPENSATED"]
    assert compensated(2097153, 4) and not compensated(1024, 65536)


# ---- the forward ----------------------------------------------------------------------
FORWARD_GROUPS, TILED_FORWARD = "_layer_norm_fwd_row_groups_kernel", "_layer_norm_fwd_tiled_kernel"
#: sm90 with a row-group forward tile for 16-bit data too (the profile has one for 32-bit)
SM90_ALL = SM90.derive(**{"tuning.layer_norm.forward_row_group_tile": [2, 4096, 8, 2]})


def test_long_layer_norm_rows_take_the_row_group_forward_where_the_profile_has_its_tile():
    """float32 layer-norm rows past the fused tile are split over groups of resident
    programs on sm90 (as many groups as the compute units hold); bf16 (no 16-bit tile),
    RMS norm, rows with a residual and a profile without the tile keep the tiled forward;
    the variant names why it declines."""
    x, w = torch.empty(1024, 65536, device="meta"), torch.empty(65536, device="meta")
    _, block_n, _, per_unit = lnt.forward_row_group_tile(SM90, torch.float32)
    n_parts = cdiv(65536, block_n)
    grid = SM90.compute_units * per_unit // n_parts * n_parts
    assert (FORWARD_GROUPS, grid) in _kernels(ln.layer_norm, x, w, w, profile=SM90)
    for names in (_kernels(ln.layer_norm, x.bfloat16(), w.bfloat16(), w.bfloat16(), profile=SM90),
                  _kernels(ln.layer_norm, x, w, None, rms=True, profile=SM90),
                  _kernels(ln.layer_norm, x, w, w, residual=x, profile=SM90),
                  _kernels(ln.layer_norm, x, w, w, profile=GFX942)):
        assert TILED_FORWARD in dict(names) and FORWARD_GROUPS not in dict(names), names
    with launches.capture_launches(), pytest.raises(
            UnsupportedDtypeError, match="no tuning.layer_norm.forward_row_group_tile for "
                                         "torch.bfloat16"):
        ln.layer_norm_forward_row_groups(x.bfloat16(), w.bfloat16(), None, profile=SM90)


@needs_interpreter
def test_interpreted_row_group_forward_matches_the_fused_forward():
    """A group of one program (the interpreter's) over rows with a large mean: y, mean and
    rstd of the fused forward, to rounding, for each float dtype."""
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        x = (torch.randn(5, 2100) * 3 + 50).to(dtype)
        weight, bias = torch.randn(2100).to(dtype), torch.randn(2100).to(dtype)
        with launches.interpreted():
            got = ln.layer_norm_forward_row_groups(x, weight, bias, 1e-5, profile=SM90_ALL)
            want = ln.layer_norm_forward(x, weight, bias, 1e-5, profile=SM90_ALL)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=2e-2 if dtype.itemsize == 2 else 2e-5,
                                       atol=2e-2 if dtype.itemsize == 2 else 2e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device: groups of "
                    "several programs meet only where programs run at once")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("shape", [(1024, 65536), (301, 20000), (7, 9000), (3, 262144)])
def test_groups_of_programs_normalize_as_the_tiled_forward_on_the_device(dtype, shape):
    """Rows split over 3 to 64 programs a group (ragged last slices and row blocks) give
    the tiled forward's y, mean and rstd to rounding, bitwise the same on a second run."""
    from triton_cts.profiles.vendor_selection import attached_device, match_device
    profile = match_device(attached_device(), PROFILES)
    if lnt.forward_row_group_tile(profile, torch.float32) is None:
        pytest.skip(f"profile '{profile.name}' has no row-group forward tile")
    grouped = profile.derive(**{"tuning.layer_norm.forward_row_group_tile": list(
        lnt.forward_row_group_tile(profile, torch.float32))})
    without = profile.derive(**{f"tuning.layer_norm.{field}": None for field in (
        "forward_row_group_tile", "forward_row_group_tile_32bit")})
    torch.manual_seed(2)
    x = torch.randn(*shape, device="cuda").mul(3).add(10).to(dtype)
    weight, bias = (torch.randn(shape[1], device="cuda").to(dtype) for _ in range(2))
    first = ln.layer_norm_forward_row_groups(x, weight, bias, profile=grouped)
    second = ln.layer_norm_forward_row_groups(x, weight, bias, profile=grouped)
    tiled = ln.layer_norm_forward(x, weight, bias, profile=without)
    for a, b, c in zip(first, second, tiled):
        assert torch.equal(a, b)
        torch.testing.assert_close(a.float(), c.float(),
                                   rtol=1e-2 if a.dtype.itemsize == 2 else 2e-5,
                                   atol=2e-2 if a.dtype.itemsize == 2 else 2e-5)
