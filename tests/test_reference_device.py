"""Where a check's float64 work runs (suites/runner.py::reference_device): on the
accelerator in device mode, so every op's reference and error models must make their
tensors on their inputs' device; on the CPU in the other modes, for ops that say why
(``OpSpec.reference_on_cpu``) and where the device has no room."""
import pytest
import torch

from suites import runner
from suites.strategies import beside, make_values
from triton_cts import CHECKOUT
from triton_cts.execution import devices
from triton_cts.execution.modes import Mode
from triton_cts.ops.catalog import ALL_OPS
from triton_cts.ops.implementation import REFERENCE, Implementation
from triton_cts.profiles import load_profile
from triton_cts.targets import CheckTarget

OPS = [op for op in ALL_OPS if op.suites is None or "test_numerics" in op.suites]
PROFILE = load_profile(CHECKOUT / "vendor_profiles" / "nvidia-sm90.toml")


def _target(op, mode):
    return CheckTarget(op, Implementation(REFERENCE, op.name, op.reference_kernel), PROFILE, mode)


def _meta(value):
    if isinstance(value, torch.Tensor):
        value = value.to("meta")
        return value.double() if value.dtype.is_floating_point else value
    if isinstance(value, (tuple, list)):
        return type(value)(_meta(v) for v in value)
    return value


def _functions(op):
    yield "reference", op.reference
    if op.error_scale is not None:
        yield "error_scale", op.error_scale
    if op.conditioning is not None:
        yield "conditioning", lambda *a, **k: op.conditioning(*a, dtype=torch.float32, **k)
    if op.ambiguity is not None:
        yield "ambiguity", op.ambiguity


@pytest.mark.parametrize("op", [op for op in OPS if op.reference_on_cpu is None],
                         ids=lambda op: op.name)
def test_float64_functions_stay_on_their_inputs_device(op):
    """Inputs on the meta device: a tensor made on the CPU by default (torch.zeros(n)
    without device=) meets them and torch refuses the mix. Data-dependent steps (.item())
    cannot run on meta; they run on any real device."""
    shape = (2, 3, 40, 16)[4 - max(op.min_ndim, 2):]
    x = make_values(shape, torch.float32, "normal", 1)
    args, kwargs = op.make_args(x, torch.Generator().manual_seed(2))
    args, kwargs = _meta(args), {k: _meta(v) for k, v in kwargs.items()}
    for name, fn in _functions(op):
        try:
            fn(*args, **kwargs)
        except RuntimeError as exc:
            if "cannot be called on meta tensors" in str(exc):
                continue
            pytest.fail(f"{op.name}.{name} on meta inputs: {exc}")


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_arguments_of_a_case_on_the_device_are_made_there(op):
    """Device mode's boundary cases draw their millions of elements on the device
    (strategies.build_case): make_args on an input there keeps what it computes from the
    input there and draws its large tensors there (OpSpec.randn); a small CPU-made tensor
    is moved beside the input. The meta device stands in for the accelerator, as above."""
    shape = (2, 3, 40, 16)[4 - max(op.min_ndim, 2):]
    dtype = torch.float32 if torch.float32 in op.dtypes else op.dtypes[0]
    x = make_values(shape, dtype, "normal", 1).to("meta")
    try:
        args, kwargs = op.make_args(x, torch.Generator().manual_seed(2))
    except RuntimeError as exc:
        if "cannot be called on meta tensors" in str(exc):
            pytest.skip(f"{op.name}.make_args reads values (.item()), which meta tensors lack")
        pytest.fail(f"{op.name}.make_args on an input on the meta device: {exc}")
    made = [v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)]
    large = [v.device.type for v in made if v.numel() >= x.numel()]
    assert set(large) <= {"meta"}, f"{op.name}: an input-sized tensor made on the CPU"
    moved = beside(args, x.device), {k: beside(v, x.device) for k, v in kwargs.items()}
    assert {v.device.type for v in (*moved[0], *moved[1].values())
            if isinstance(v, torch.Tensor)} == {"meta"}


def test_a_cpu_made_tensor_is_caught():
    """The check above can fail: a reference that makes a tensor on the CPU."""
    x = torch.ones(4, 8, dtype=torch.float64, device="meta")
    with pytest.raises(RuntimeError, match="device"):
        x + torch.zeros(8, dtype=torch.float64)


def test_where_float64_work_runs(monkeypatch):
    op = next(op for op in OPS if op.name == "layer_norm")
    batch_norm = next(op for op in OPS if op.reference_on_cpu is not None)
    # an attached CUDA device, as the device layer sees one (triton_cts/execution/devices.py)
    monkeypatch.setattr(devices, "available", lambda *a: True)
    monkeypatch.setattr(devices, "device_type", lambda *a: "cuda")
    assert runner.reference_device(_target(op, Mode.DEVICE)) == "cuda"
    assert runner.reference_device(_target(op, Mode.INTERPRETER)) == "cpu"
    assert runner.reference_device(_target(op, Mode.COMPILE)) == "cpu"
    assert runner.reference_device(_target(batch_norm, Mode.DEVICE)) == "cpu"
    monkeypatch.setattr(devices, "available", lambda *a: False)
    assert runner.reference_device(_target(op, Mode.DEVICE)) == "cpu"


def test_out_of_device_memory_falls_back_to_the_cpu(monkeypatch):
    """Every worker shares the device: a reference that does not fit there runs on the CPU
    and its result comes back on the CPU either way."""
    target = _target(next(op for op in OPS if op.name == "layer_norm"), Mode.DEVICE)
    monkeypatch.setattr(runner, "reference_device", lambda target: "meta")
    seen = []

    def compute(x):
        seen.append(x.device.type)
        if x.device.type == "meta":
            raise torch.OutOfMemoryError("CUDA out of memory (planted)")
        return x * 2

    out = runner.in_float64(target, (torch.ones(3, dtype=torch.float16),), {}, compute)
    assert seen == ["meta", "cpu"]
    assert out.device.type == "cpu" and out.dtype == torch.float64 and out.tolist() == [2, 2, 2]


def test_kept_float64_work_stays_on_the_device(monkeypatch):
    """With ``keep`` (what check_outputs asks for the reference, error scales and
    allowances) the reference stays where it ran; without it, it comes back to the CPU.
    The meta device stands in for an accelerator here."""
    op = next(op for op in OPS if op.name == "softmax")
    target = _target(op, Mode.DEVICE)
    monkeypatch.setattr(runner, "reference_device", lambda target: "meta")
    x = make_values((4, 8), torch.float32, "normal", 1)
    kept = runner.run_reference(target, (x,), {}, keep=True)
    assert kept.device.type == "meta"
    with pytest.raises(NotImplementedError):  # meta tensors hold no values to copy back
        runner.run_reference(target, (x,), {})
