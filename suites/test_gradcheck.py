"""Gradients through the kernels: ``torch.autograd.gradcheck`` in float64 compares the
backward kernels' analytic Jacobian with finite differences of the forward kernels, for
every op that declares a differentiable launcher (``OpSpec.autograd``)."""
import pytest
import torch
from hypothesis import given, note, settings, strategies as st
from torch.autograd.gradcheck import GradcheckError

from suites import strategies as hh
from triton_cts.execution import devices, launches
from triton_cts.execution.input_checks import UnsupportedDtypeError
from triton_cts.ops import implementation
from triton_cts.execution.modes import Mode
from triton_cts.results.status import NOT_SUPPORTED
from triton_cts.ops.implementation import REFERENCE

#: gradcheck (fast mode: random projections of the Jacobian) still runs the kernels a
#: few times per input: keep inputs small.
MAX_NUMEL = 48


def _on(arg, device):
    if not isinstance(arg, torch.Tensor):
        return arg
    arg = arg.detach().to(device)
    return arg.requires_grad_() if arg.dtype.is_floating_point else arg


def _has_autograd(target) -> bool:
    return target.op.autograd is not None and target.impl.name == REFERENCE


@pytest.mark.cts_targets(predicate=_has_autograd)
@pytest.mark.cts_modes("device", "interpreter")
@settings(max_examples=2)
@given(data=st.data())
def test_gradients_match_finite_differences(target, data, repro):
    if not target.profile.supports_dtype(torch.float64):
        pytest.skip(f"{NOT_SUPPORTED}gradcheck needs float64, which profile "
                    f"{target.profile.name} lacks")
    case = data.draw(hh.cases(target.op, target.profile, torch.float64, MAX_NUMEL,
                              kinds=("normal",)), label="case")
    note(f"case: {case.describe()}")
    fn = implementation.resolve(target.op.autograd)
    device = devices.device_type() if target.mode is Mode.DEVICE else "cpu"
    # every tensor moves to the device (cross-entropy's labels too); only floats get gradients
    inputs = tuple(_on(a, device) for a in case.args)

    def forward(*tensors):
        return fn(*tensors, **case.kwargs, profile=target.profile)

    interpreted = launches.interpreted() if target.mode is Mode.INTERPRETER \
        else launches.interpreted(False)
    with interpreted:
        try:
            torch.autograd.gradcheck(forward, inputs, eps=1e-6, atol=1e-5, rtol=1e-3,
                                     fast_mode=True)
        except UnsupportedDtypeError as exc:  # e.g. no float64 tl.dot on the profile
            pytest.skip(f"{NOT_SUPPORTED}gradcheck needs float64: {exc}")
        except GradcheckError as exc:  # torch.autograd.gradcheck is the function, not the module
            raise AssertionError(f"{target.op.name}[{target.impl.name}] on "
                                 f"{target.profile.name} ({target.mode}), {case.describe()}: "
                                 f"{exc}\nreproduce: {repro}") from None
