"""Compile conformance: the kernels a launcher really launches for a profile compile for
its target and stay within its limits (threads per block, shared memory)."""
import pytest
import torch

from suites import strategies as hh
from suites import runner
from triton_cts.cross_compile import compile_launch
from triton_cts.plugin import NOT_SUPPORTED


@pytest.mark.cts_modes("compile")
def test_compiles_within_limits(target, repro, record_property):
    dtypes = target.op.supported_dtypes(target.profile)
    if not dtypes:
        pytest.skip(NOT_SUPPORTED + f"profile {target.profile.name} supports none of "
                                    f"{target.op.name}'s dtypes")
    violations, compiled = [], 0
    for dtype in dtypes:
        for shape in target.op.compile_shapes:
            x = hh.make_values(shape, dtype, "normal", seed=0)
            args, kwargs = target.op.make_args(x, torch.Generator().manual_seed(1))
            launches = runner.run_target(target, args, kwargs)
            if not launches:
                violations.append(f"{dtype} {shape}: the launcher launched no kernel")
            for launch in launches:
                stats = compile_launch(launch, target.profile)
                compiled += 1
                record_property(f"{stats.kernel} {dtype} {shape}",
                                f"warps={stats.num_warps} shared={stats.shared_bytes}")
                violations += [f"{str(dtype).removeprefix('torch.')} {shape}: {v}"
                               for v in stats.violations]
    assert not violations, (f"{target.op.name}[{target.impl.name}] for {target.profile.name}: "
                            + "; ".join(violations) + f"\nreproduce: {repro}")
    assert compiled > 0
