"""A kernel that cheats or is careless about the rules of a call cannot pass: one that
writes into an input it does not own, one that returns an earlier call's result, one
that works on another stream than the caller's. Each planted fault
(tests/planted/cheating_faults.py) makes the numerics suite fail with a message naming
the problem, while the reference kernel passes the same run."""
import contextlib
import dataclasses

import pytest
import torch

from suites import runner
from suites import strategies as hh
from tests.helpers import needs_interpreter, run_pytest
from triton_cts.execution import devices, modes
from triton_cts.execution.modes import InputModified, InputRules, Mode, execute
from triton_cts.ops.catalog import ALL_OPS
from triton_cts.ops.implementation import Implementation
from triton_cts.profiles import load_profiles
from triton_cts.targets import CheckTarget

PLANTED = "tests.planted.cheating_faults"
OPS = {op.name: op for op in ALL_OPS}
SM80 = load_profiles()["nvidia-sm80"]


@needs_interpreter
def test_numerics_suite_catches_writes_into_inputs_and_reused_results():
    result = run_pytest("suites/test_numerics.py::test_matches_reference", "--vendor",
                        "nvidia-sm80", "--mode", "interpreter", "--op", "gelu",
                        "--impl", "reference",
                        "--impl", f"gelu={PLANTED}:gelu_writes_into_input",
                        "--impl", f"gelu={PLANTED}:gelu_reuses_result",
                        "--hypothesis-profile", "ci")
    out = result.stdout
    assert result.returncode == 1, out[-3000:]
    # the reference passes for every dtype; each planted implementation fails for each
    assert "8 failed, 4 passed" in out, out[-3000:]
    failed = [line for line in out.splitlines() if line.startswith("FAILED")]
    assert not [line for line in failed if "[gelu-reference-" in line], failed
    for fault in ("gelu_writes_into_input", "gelu_reuses_result"):
        assert sum(f"[gelu-{PLANTED}:{fault}-" in line for line in failed) == 4, failed
    assert (f"gelu[{PLANTED}:gelu_writes_into_input] wrote into an input it does not own "
            f"(argument 0 'x': ") in out
    assert (f"gelu[{PLANTED}:gelu_reuses_result] on nvidia-sm80 (interpreter): a second "
            f"call, on other values") in out
    assert "returned the first call's result bit for bit" in out
    assert "reproduce: pytest" in out


# ---- the input check, in process ----------------------------------------------------
def _rules(*writable):
    return InputRules("op[impl]", ("x", "w"), writable)


def test_an_unchanged_input_passes_nan_and_inf_included():
    x = torch.tensor([float("nan"), float("inf"), -0.0, 1.0])
    out = execute(lambda x, w: x + w, Mode.INTERPRETER, SM80, (x, torch.ones(4)),
                  takes_profile=False, inputs=_rules())
    assert torch.equal(out[1:], torch.tensor([float("inf"), 1.0, 2.0]))


@pytest.mark.parametrize("mode", [Mode.INTERPRETER, Mode.COMPILE])
def test_a_changed_input_fails_naming_it_and_counting_bits(mode):
    def flips_zero_signs(x, w):
        w.neg_()  # -0.0 == 0.0 compares equal, but its bits differ
        return x

    w = torch.zeros(2, 3)
    with pytest.raises(InputModified, match=r"op\[impl\] wrote into an input it does not own "
                                            r"\(argument 1 'w': 6 of 6 elements changed"):
        execute(flips_zero_signs, mode, SM80, (torch.ones(3), w), takes_profile=False,
                inputs=_rules())


@pytest.mark.parametrize("writable", [(1,), ("w",)])
def test_an_argument_the_op_writes_is_exempt_by_position_or_name(writable):
    def updates_w(x, w):
        w.add_(1)
        return x

    execute(updates_w, Mode.INTERPRETER, SM80, (torch.ones(3), torch.zeros(3)),
            takes_profile=False, inputs=_rules(*writable))
    with pytest.raises(InputModified, match="argument 0 'x': 3 of 3"):
        execute(lambda x, w: x.add_(1), Mode.INTERPRETER, SM80,
                (torch.ones(3), torch.zeros(3)), takes_profile=False,
                inputs=_rules(*writable))


def test_a_keyword_tensor_is_checked_too():
    with pytest.raises(InputModified, match="keyword argument 'scale': 1 of 4"):
        execute(lambda x, scale: scale.index_fill_(0, torch.tensor([2]), 5.0),
                Mode.INTERPRETER, SM80, (torch.ones(4),), {"scale": torch.ones(4)},
                takes_profile=False, inputs=_rules())


@pytest.mark.parametrize("rows, cols", [(4, 4), (1, 1)])  # one element: any stride
def test_only_viewed_elements_of_a_strided_input_are_compared(rows, cols):
    x = torch.zeros(rows, 2 * cols, dtype=torch.float16)[:, ::2]

    def writes_the_gaps(x):
        x.as_strided(x.shape, x.stride(), 1).fill_(7.0)  # the elements between x's
        return x.clone()

    execute(writes_the_gaps, Mode.INTERPRETER, SM80, (x,), takes_profile=False,
            inputs=_rules())
    with pytest.raises(InputModified, match=f"argument 0 'x': {rows * cols} of"):
        execute(lambda x: x.fill_(-0.0), Mode.INTERPRETER, SM80, (x,), takes_profile=False,
                inputs=_rules())


def _case(op, shape, dtype=torch.float32, seed=3):
    x = hh.make_values(shape, dtype, "normal", seed)
    args, kwargs = op.make_args(x, torch.Generator().manual_seed(seed + 1))
    return args, kwargs


def test_batch_norm_may_update_its_running_statistics_and_nothing_else():
    """The reference batch norm updates running_mean and running_var in place
    (OpSpec.mutates); without that declaration the same call fails, naming them."""
    op = OPS["batch_norm_train"]
    assert op.mutates == ("running_mean", "running_var")
    args, kwargs = _case(op, (4, 3, 5))
    target = CheckTarget(op, Implementation("reference", op.name, op.reference_kernel), SM80,
                         Mode.INTERPRETER)
    out = runner.run_target(target, args, kwargs)
    assert not torch.equal(out[3], args[3])  # updated (the runner passes copies)
    undeclared = dataclasses.replace(target, op=dataclasses.replace(op, mutates=()))
    with pytest.raises(InputModified, match=r"batch_norm_train\[reference\] wrote into an input "
                       r"it does not own \(argument 3 'running_mean': 3 of 3 elements changed; "
                       r"argument 4 'running_var': 3 of 3 elements changed"):
        runner.run_target(undeclared, args, kwargs)


def test_no_other_op_declares_a_written_argument():
    assert {op.name: op.mutates for op in ALL_OPS if op.mutates} == \
        {"batch_norm_train": ("running_mean", "running_var")}


def test_a_second_case_has_other_values_of_the_same_shape_and_layout():
    op = OPS["gelu_backward"]
    x = hh.with_layout(hh.make_values((3, 5), torch.float16, "large_offset", 11), "transposed")
    case = hh.Case((3, 5), torch.float16, "large_offset", 11, "transposed",
                   *op.make_args(x, torch.Generator().manual_seed(12)))
    other = runner.other_values(CheckTarget(op, None, SM80, Mode.INTERPRETER), case)
    assert other.seed != case.seed and other.kind == "normal"
    assert other._replace(seed=11, kind="large_offset", args=(), kwargs={}) == \
        case._replace(args=(), kwargs={})
    assert [a.shape for a in other.args] == [a.shape for a in case.args]
    assert other.args[1].stride() == case.args[1].stride() == (1, 3)  # transposed, like x
    assert (other.args[1].double().abs().max() < 10).item()  # normal values
    again = runner.other_values(CheckTarget(op, None, SM80, Mode.INTERPRETER), case)
    assert all(torch.equal(a, b) for a, b in zip(again.args, other.args))  # reproducible


# ---- device mode: the second call runs on a side stream ------------------------------
@pytest.fixture
def fake_device(monkeypatch):
    """Device mode on the CPU, with torch.cuda's streams replaced by fakes that log what
    happens on which stream."""
    log = []

    class Stream:
        def __init__(self, name="side"):
            self.name = name

        def wait_stream(self, other):
            log.append(f"{self.name} waits for {other.name}")

        def synchronize(self):
            log.append(f"{self.name} synchronized")

    current = [Stream("caller")]

    @contextlib.contextmanager
    def stream(s):
        previous, current[0] = current[0], s
        try:
            yield
        finally:
            current[0] = previous

    def read(out):  # a copy, as from the device
        log.append(f"outputs read on {current[0].name}")
        return out.clone()

    # the device layer (triton_cts/execution/devices.py), on a stand-in device: the CPU
    monkeypatch.setattr(modes, "device", lambda: "cpu")
    monkeypatch.setattr(modes, "_to_cpu", read)
    monkeypatch.setattr(devices, "new_stream", lambda *a: Stream())
    monkeypatch.setattr(devices, "on_stream", stream)
    monkeypatch.setattr(devices, "current_stream", lambda *a: current[0])
    monkeypatch.setattr(devices, "keep_busy", lambda cycles, *a: log.append(
        f"{current[0].name} kept busy"))
    monkeypatch.setattr(devices, "synchronize", lambda *a: log.append("device synchronized"))
    return log, current


def test_a_side_stream_call_reads_its_outputs_after_synchronizing_only_that_stream(fake_device):
    log, current = fake_device

    def impl(x):
        log.append(f"called on {current[0].name}")
        return x * 2

    x = torch.arange(4.0)
    out = execute(impl, Mode.DEVICE, SM80, (x,), takes_profile=False, inputs=_rules(),
                  side_stream=True)
    assert torch.equal(out, 2 * x)
    assert log == ["side waits for caller",    # the inputs, copied on the caller's stream
                   "caller kept busy",         # work launched there instead runs late
                   "called on side", "side synchronized", "outputs read on side",
                   "device synchronized",      # only after reading
                   "outputs read on caller"]   # to see whether they were final
    log.clear()
    execute(impl, Mode.DEVICE, SM80, (x,), takes_profile=False, inputs=_rules())
    assert log == ["called on caller", "device synchronized", "outputs read on caller"]
    log.clear()
    execute(impl, Mode.INTERPRETER, SM80, (x,), takes_profile=False, side_stream=True)
    assert log == ["called on caller"]         # no streams outside device mode


def test_outputs_still_changing_after_the_side_stream_synchronized_fail(fake_device,
                                                                         monkeypatch):
    pending = []

    def launches_elsewhere(x):
        y = torch.full_like(x, float("nan"))
        pending.append(lambda: y.copy_(x * 2))  # runs when the whole device synchronizes
        return y

    monkeypatch.setattr(devices, "synchronize", lambda *a: [job() for job in pending])
    with pytest.raises(modes.NotOnCallersStream,
                       match=r"op\[impl\], called on a side stream, was not done when that "
                             r"stream was: its outputs changed after the whole device was "
                             r"synchronized \(output 0: 3 of 3 elements\)"):
        execute(launches_elsewhere, Mode.DEVICE, SM80, (torch.ones(3),), takes_profile=False,
                inputs=_rules(), side_stream=True)


@pytest.mark.parametrize("side_stream", [False, True])
def test_device_mode_compares_the_inputs_the_implementation_received(fake_device, side_stream):
    with pytest.raises(InputModified, match="argument 0 'x': 4 of 4 elements changed"):
        execute(lambda x: x.mul_(2), Mode.DEVICE, SM80, (torch.arange(1.0, 5.0),),
                takes_profile=False, inputs=_rules(), side_stream=side_stream)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: device mode")
def test_numerics_suite_catches_work_on_the_default_stream():
    """On a GPU: a launcher that launches on the default stream whatever stream the caller
    made current fails the second call, which runs on a side stream; the reference
    passes."""
    result = run_pytest("suites/test_numerics.py::test_matches_reference", "--mode", "device",
                        "--op", "gelu", "--impl", "reference",
                        "--impl", f"gelu={PLANTED}:gelu_on_default_stream",
                        "--hypothesis-profile", "ci")
    out = result.stdout
    assert result.returncode == 1, out[-3000:]
    failed = [line for line in out.splitlines() if line.startswith("FAILED")]
    assert failed and all(f"{PLANTED}:gelu_on_default_stream" in line for line in failed), \
        out[-3000:]
    assert (f"gelu[{PLANTED}:gelu_on_default_stream], called on a side stream, was not "
            f"done when that stream was") in out, out[-3000:]
    assert "4 passed" in out, out[-3000:]
