"""The layer-norm forward's plan (kernels/layer_norm/plan.py): the launcher launches what
the plan decided, for each of its strategies: the kernel, grid, tiles and warps."""
import pytest
import torch

import kernels.layer_norm as ln
from kernels.layer_norm import plan as ln_plan
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
