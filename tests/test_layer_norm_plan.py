"""The layer-norm forward's plan (kernels/layer_norm/plan.py) and the backward's
(kernels/layer_norm/plan_backward.py): the launchers launch what the plan decided, for
each of its strategies: the kernels, grids, tiles and warps."""
import pytest
import torch

import kernels.layer_norm as ln
from kernels.layer_norm import plan as ln_plan
from kernels.layer_norm import plan_backward as ln_plan_bwd
from triton_cts.execution import launches
from triton_cts.profiles import load_profiles

SM90 = load_profiles()["nvidia-sm90"]
KERNELS = {ln_plan.FUSED: "_layer_norm_fwd_fused_kernel",
           ln_plan.TILED: "_layer_norm_fwd_tiled_kernel",
           ln_plan.ROW_GROUPS: "_layer_norm_fwd_row_groups_kernel"}


@pytest.mark.parametrize("n_rows, n_cols, dtype, rms, strategy", [
    (64, 1024, torch.bfloat16, False, ln_plan.FUSED),
    (4096, 128, torch.float32, True, ln_plan.FUSED),
    (1024, 65536, torch.float32, False, ln_plan.ROW_GROUPS),
    (1024, 65536, torch.bfloat16, False, ln_plan.TILED),
    (1024, 65536, torch.float32, True, ln_plan.TILED),
])
def test_the_forward_launches_its_plan(n_rows, n_cols, dtype, rms, strategy):
    x = torch.empty(n_rows, n_cols, dtype=dtype, device="meta")
    w = torch.empty(n_cols, dtype=dtype, device="meta")
    bias = None if rms else w
    with launches.capture_launches() as log:
        units = ln_plan.group_units(x.device, SM90)
        ln.layer_norm(x, w, bias, rms=rms, profile=SM90)
    plan = ln_plan.forward_plan(SM90, n_rows, n_cols, dtype, False, rms, bias is not None,
                                False, False, False, False, *units, False)
    assert plan.strategy == strategy
    assert [launch.name for launch in log] == [KERNELS[strategy]]
    assert tuple(log[0].grid) == plan.grid + (1,) * (3 - len(plan.grid))
    assert {k: log[0].kwargs[k] for k in plan.meta} == plan.meta
    assert log[0].kwargs["num_warps"] == plan.num_warps
    assert plan.tiles["BLOCK_N"] == log[0].kwargs["BLOCK_N"] <= 1 << 20


# ---- the backward (kernels/layer_norm/plan_backward.py) -------------------------------
GFX942 = load_profiles()["amd-gfx942"]
#: sm90 whose partial-sum backward adds few partial rows in its last program
SM90_LAST = SM90.derive(**{"tuning.layer_norm.backward_last_sum_bytes": 1 << 20})
BACKWARD = {ln_plan_bwd.PARTIAL: ln.layer_norm_backward_partial,
            ln_plan_bwd.ATOMIC: ln.layer_norm_backward_atomic,
            ln_plan_bwd.TILED: ln.layer_norm_backward_tiled,
            ln_plan_bwd.COLUMNS: ln.layer_norm_backward_columns,
            ln_plan_bwd.ROW_GROUPS: ln.layer_norm_backward_row_groups}


def _launched_as_planned(launch, step):
    assert launch.name == step.kernel
    assert tuple(launch.grid) == step.grid + (1,) * (3 - len(step.grid))
    assert {k: launch.kwargs[k] for k in step.meta} == step.meta
    assert launch.kwargs["num_warps"] == step.num_warps


@pytest.mark.parametrize("profile, n_rows, n_cols, dtype, rms, asked, strategy", [
    (SM90, 64, 1024, torch.bfloat16, False, ln_plan_bwd.PARTIAL, ln_plan_bwd.PARTIAL),
    (SM90, 4097, 128, torch.float32, True, ln_plan_bwd.PARTIAL, ln_plan_bwd.PARTIAL),
    (SM90_LAST, 64, 1024, torch.float32, False, ln_plan_bwd.PARTIAL, ln_plan_bwd.PARTIAL),
    (SM90, 1024, 65536, torch.float32, False, ln_plan_bwd.PARTIAL, ln_plan_bwd.ROW_GROUPS),
    (GFX942, 1024, 65536, torch.bfloat16, False, ln_plan_bwd.PARTIAL, ln_plan_bwd.COLUMNS),
    (SM90, 1024, 65536, torch.bfloat16, True, ln_plan_bwd.ATOMIC, ln_plan_bwd.ROW_GROUPS),
    (SM90, 1024, 4096, torch.float16, False, ln_plan_bwd.TILED, ln_plan_bwd.TILED),
    (SM90, 3, 8192, torch.float32, True, ln_plan_bwd.COLUMNS, ln_plan_bwd.COLUMNS),
    (SM90, 64, 131072, torch.bfloat16, False, ln_plan_bwd.ROW_GROUPS, ln_plan_bwd.ROW_GROUPS),
])
def test_the_backward_launches_its_plan(profile, n_rows, n_cols, dtype, rms, asked, strategy):
    """Each strategy launches what its plan decided, in order: its kernels (kernel, grid,
    tiles, warps, the integer arguments after the usual ones), then the column sums of its
    partial rows; the partial strategy's last program adds them where the profile says."""
    dy, x = (torch.empty(n_rows, n_cols, dtype=dtype, device="meta") for _ in range(2))
    w = torch.empty(n_cols, dtype=dtype, device="meta")
    stat = torch.empty(n_rows, device="meta")
    bias = None if rms else w
    with launches.capture_launches() as log:
        units = ln_plan.group_units(x.device, profile)
        BACKWARD[asked](dy, x, w, bias, stat, stat, rms=rms, profile=profile)
    plan = ln_plan_bwd.backward_plan(profile, n_rows, n_cols, dtype, rms, bias is not None,
                                     False, False, False, False, *units, asked)
    assert plan.strategy == strategy
    steps = [plan.last_sums] if plan.last_sums is not None else [
        *plan.launches, *([plan.sums.launch] if plan.sums is not None else [])]
    assert (plan.last_sums is not None) == (profile is SM90_LAST)
    assert [launch.name for launch in log] == [step.kernel for step in steps]
    for launch, step in zip(log, steps):
        _launched_as_planned(launch, step)
    if plan.scalars:
        assert tuple(log[0 if strategy == ln_plan_bwd.ROW_GROUPS else 1].args[
            -len(plan.scalars):]) == plan.scalars
    if plan.sums is not None and plan.last_sums is None:
        assert log[-1].args[4:6] == (plan.sums.programs, plan.partials)


def test_the_atomic_backward_autotunes_over_its_planned_launches():
    """The atomic strategy's launches are its autotune configs: captured, every config
    runs (then the pick again), each as its plan decided."""
    n_rows, n_cols, dtype = 4096, 256, torch.float32
    dy, x = (torch.empty(n_rows, n_cols, dtype=dtype, device="meta") for _ in range(2))
    w, stat = torch.empty(n_cols, device="meta"), torch.empty(n_rows, device="meta")
    with launches.capture_launches() as log:
        ln.layer_norm_backward_atomic(dy, x, w, w, stat, stat, profile=SM90)
    plan = ln_plan_bwd.backward_plan(SM90, n_rows, n_cols, dtype, False, True, False, False,
                                     False, False, *ln_plan_bwd.UNPLACED, ln_plan_bwd.ATOMIC)
    assert plan.strategy == ln_plan_bwd.ATOMIC and len(plan.launches) > 1
    by_rows = {step.tiles["ROWS_PER_PROGRAM"]: step for step in plan.launches}
    assert len(by_rows) == len(plan.launches)
    assert {launch.kwargs["ROWS_PER_PROGRAM"] for launch in log} == set(by_rows)
    for launch in log:
        step = by_rows[launch.kwargs["ROWS_PER_PROGRAM"]]
        _launched_as_planned(launch, step)
        assert launch.kwargs["num_stages"] == step.options["num_stages"]


def test_a_strategy_the_rows_do_not_take_has_no_plan():
    """Row groups past the programs a device keeps resident, and atomics on a target
    without an atomic_add in the accumulator's dtype, have no plan (their launchers say
    why)."""
    flags = (False, True, False, False, False, False)
    assert ln_plan_bwd.backward_plan(GFX942, 64, 65536, torch.bfloat16, *flags,
                                     GFX942.compute_units, False,
                                     ln_plan_bwd.ROW_GROUPS) is None
    no_f64 = next(p for p in load_profiles().values() if p.supports_dtype(torch.float64)
                  and not p.supports_atomic("add", torch.float64))
    assert ln_plan_bwd.backward_plan(no_f64, 64, 128, torch.float64, *flags,
                                     *ln_plan_bwd.UNPLACED, ln_plan_bwd.ATOMIC) is None
