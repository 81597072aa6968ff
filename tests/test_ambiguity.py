"""A backward that trusts the float32 statistics it is given is as right as one that
recomputes them: the suite must accept both (OpSpec.ambiguity), and only because of that
allowance (without it, large-offset rows would be a false alarm)."""
import pytest
import torch

from suites import assertions as ah
from suites import runner
from suites import strategies as hh
from triton_cts.execution.modes import Mode
from triton_cts.targets import CheckTarget
from triton_cts.profiles import load_profile
from triton_cts.ops.implementation import Implementation
from triton_cts.targets import default_registry
from tests.helpers import CHECKOUT


def _backward_trusting_stats(dy, x, weight, bias, mean, rstd):
    """Layer-norm backward in float32 from the statistics as given (torch's contract)."""
    dy, x, weight = dy.float(), x.float(), weight.float()
    xhat = (x - mean[..., None]) * rstd[..., None]
    g = dy * weight
    dx = rstd[..., None] * (g - xhat * (g * xhat).mean(-1, keepdim=True) - g.mean(-1, keepdim=True))
    rows = tuple(range(dy.dim() - 1))
    return dx, (dy * xhat).sum(rows), dy.sum(rows)


@pytest.fixture
def check():
    registry = default_registry()
    op = registry.ops["layer_norm_backward"]
    profile = load_profile(CHECKOUT / "vendor_profiles" / "nvidia-sm90.toml")
    return CheckTarget(op, Implementation("trusting", op.name, "tests:none"), profile,
                       Mode.INTERPRETER)


def _case(op):
    x = hh.make_values((8, 64), torch.float32, "large_offset", seed=3)
    args, kwargs = op.make_args(x, torch.Generator().manual_seed(4))
    return hh.Case((8, 64), torch.float32, "large_offset", 3, "contiguous", args, kwargs)


def test_trusting_the_given_statistics_passes(check):
    case = _case(check.op)
    out = _backward_trusting_stats(*case.args)
    ref = runner.run_reference(check, case.args, case.kwargs)
    gaps = runner.ambiguities(check, case.args, case.kwargs)
    ah.assert_matches_reference(check, case, out, ref, "repro", ambiguities=gaps)


def test_without_the_allowance_it_would_be_a_false_alarm(check):
    case = _case(check.op)
    out = _backward_trusting_stats(*case.args)
    ref = runner.run_reference(check, case.args, case.kwargs)
    with pytest.raises(AssertionError, match="out of tolerance"):
        ah.assert_matches_reference(check, case, out, ref, "repro")


def test_the_allowance_does_not_cover_a_wrong_gradient(check):
    case = _case(check.op)
    dx, dw, db = _backward_trusting_stats(*case.args)
    ref = runner.run_reference(check, case.args, case.kwargs)
    gaps = runner.ambiguities(check, case.args, case.kwargs)
    with pytest.raises(AssertionError, match="out of tolerance"):
        ah.assert_matches_reference(check, case, (dx * 1.01, dw, db), ref, "repro",
                                    ambiguities=gaps)
