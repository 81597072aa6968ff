"""The device layer with fakes of torch's per-backend property objects: detection
(``torch.accelerator``, then the fields each vendor's torch documents) for cuda (NVIDIA,
and AMD through ROCm's torch), xpu, npu and a PrivateUse1 backend; matching to profiles
and the fallback within an architecture family; and the stream, synchronization and
memory paths device mode takes through torch's generic API. No accelerator is needed:
what these fakes stand in for is listed in docs/backends.md."""
import warnings
from types import SimpleNamespace

import pytest
import torch

from tests.helpers import run_pytest
from triton_cts.errors import UsageError
from triton_cts.execution import devices, lost_context, modes, size_budget
from triton_cts.profiles import load_profiles
from triton_cts.profiles.vendor_selection import (DeviceInfo, UnknownDeviceWarning,
                                                  arch_family, attached_device, match_device)

PROFILES = load_profiles()
GiB = 2**30


class FakeStream:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def wait_stream(self, other):
        self.log.append(("wait_stream", self.name, other.name))

    def synchronize(self):
        self.log.append(("stream.synchronize", self.name))


def fake_torch(kind: str, props=None, *, hip: str | None = None, name: str | None = None,
               memory=(70 * GiB, 80 * GiB), accelerator: bool = True):
    """A stand-in for ``torch`` with one accelerator of device type ``kind``, whose
    backend module (``torch.<kind>``) returns ``props`` from get_device_properties."""
    log = []
    current = {"stream": FakeStream(log, "default")}
    backend = SimpleNamespace(
        current_device=lambda: 0, is_initialized=lambda: True, is_available=lambda: True,
        get_device_properties=lambda i: props, get_device_name=lambda i: name,
        _sleep=lambda cycles: log.append(("sleep", cycles)))
    if props is None:
        del backend.get_device_properties
    acc = SimpleNamespace(
        is_available=lambda: True,
        current_accelerator=lambda: SimpleNamespace(type=kind),
        current_stream=lambda: current["stream"],
        set_stream=lambda s: (log.append(("set_stream", s.name)), current.update(stream=s)),
        synchronize=lambda: log.append(("synchronize",)),
        get_memory_info=lambda: memory,
        empty_cache=lambda: log.append(("empty_cache",)))
    streams = iter(f"side{i}" for i in range(100))
    fake = SimpleNamespace(version=SimpleNamespace(hip=hip), log=log,
                           Stream=lambda device: (log.append(("Stream", device)),
                                                  FakeStream(log, next(streams)))[1],
                           **{kind: backend})
    if accelerator:
        fake.accelerator = acc
    if kind != "cuda":
        fake.cuda = SimpleNamespace(is_available=lambda: False)
    return fake


def cuda_props(name, major, minor, sms, memory=80 * GiB, **extra):
    return SimpleNamespace(name=name, major=major, minor=minor, multi_processor_count=sms,
                           total_memory=memory, warp_size=extra.pop("warp_size", 32), **extra)


H100 = cuda_props("NVIDIA H100 80GB HBM3", 9, 0, 132)
H200 = cuda_props("NVIDIA H200", 9, 0, 132, 141 * GiB)
# ROCm's torch: device type "cuda", torch.version.hip set, gcnArchName with feature flags
MI300X = cuda_props("AMD Instinct MI300X", 9, 4, 304, 192 * GiB, warp_size=64,
                    gcnArchName="gfx942:sramecc+:xnack-")
PVC = SimpleNamespace(name="Intel(R) Data Center GPU Max 1550", total_memory=64 * GiB,
                      max_compute_units=512, gpu_eu_count=512, gpu_subslice_count=64,
                      sub_group_sizes=[16, 32])
B580 = SimpleNamespace(name="Intel(R) Arc(TM) B580 Graphics", total_memory=12 * GiB,
                       max_compute_units=160, gpu_eu_count=160, gpu_subslice_count=20,
                       sub_group_sizes=[16, 32])
ASCEND = SimpleNamespace(name="Ascend910B3", total_memory=64 * GiB, cube_core_num=20,
                         vector_core_num=40, L2_cache_size=192 * 2**20)


# ---- detection: what each backend's properties give ----------------------------------------
@pytest.mark.parametrize("fake, expected, profile", [
    (fake_torch("cuda", H100), DeviceInfo("cuda", H100.name, 90, 32, 132, 80 * GiB, "cuda",
                                          "torch.cuda.get_device_properties(0)"), "nvidia-sm90"),
    (fake_torch("cuda", H200), DeviceInfo("cuda", "NVIDIA H200", 90, 32, 132, 141 * GiB, "cuda",
                                          "torch.cuda.get_device_properties(0)"),
     "nvidia-sm90-h200"),
    (fake_torch("cuda", MI300X, hip="6.4"),
     DeviceInfo("hip", "AMD Instinct MI300X", "gfx942", 64, 304, 192 * GiB, "cuda",
                "torch.cuda.get_device_properties(0)"), "amd-gfx942"),
    (fake_torch("xpu", PVC), DeviceInfo("xpu", PVC.name, None, 32, 64, 64 * GiB, "xpu",
                                        "torch.xpu.get_device_properties(0)"), "intel-pvc"),
    (fake_torch("xpu", B580), DeviceInfo("xpu", B580.name, None, 32, 20, 12 * GiB, "xpu",
                                         "torch.xpu.get_device_properties(0)"), "intel-bmg"),
    (fake_torch("npu", ASCEND), DeviceInfo("npu", "Ascend910B3", "Ascend910B3", 1, 40, 64 * GiB,
                                           "npu", "torch.npu.get_device_properties(0)"),
     "npu-ascend910b"),
], ids=["H100", "H200", "MI300X-rocm", "xpu-pvc", "xpu-bmg", "npu-910B3"])
def test_each_backend_is_read_from_its_own_properties(fake, expected, profile):
    device = attached_device(fake)
    assert device == expected
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an exact match: no fallback warning
        assert match_device(device, PROFILES).name == profile


def test_a_privateuse1_backend_is_detected_by_its_name_and_stops_with_how_to_add_a_profile():
    fake = fake_torch("acme", SimpleNamespace(name="Acme Tensor Unit 1", total_memory=32 * GiB))
    device = attached_device(fake)
    assert (device.backend, device.name, device.arch, device.device_type) == (
        "acme", "Acme Tensor Unit 1", None, "acme")
    with pytest.raises(UsageError) as info:
        match_device(device, PROFILES)
    msg = str(info.value)
    assert "no profile has backend 'acme'" in msg
    assert "torch reported 'Acme Tensor Unit 1' (torch device 'acme', backend acme, arch not " \
           "reported" in msg and "torch.acme.get_device_properties(0)" in msg
    assert "backend = 'acme'" in msg and "--profile-dir DIR" in msg
    # one without get_device_properties: the name from get_device_name
    bare = attached_device(fake_torch("acme", None, name="Acme 2"))
    assert (bare.name, bare.source) == ("Acme 2", "torch.accelerator")


def test_a_privateuse1_backend_with_its_own_profile_is_matched_and_checked(tmp_path):
    """A vendor's profile for its PrivateUse1 backend (vendor 'other', its torch device
    type as target.backend) matches its device exactly; Triton has no such compile target,
    so compile mode is not supported there, and the interpreter runs on its constants."""
    from triton_cts import CHECKOUT
    from triton_cts.execution.modes import Mode, unsupported_reason
    text = (CHECKOUT / "tests" / "profiles" / "minimal-cuda.toml").read_text()
    for old, new in (('name = "minimal-cuda"', 'name = "acme-tu1"'),
                     ('vendor = "nvidia"', 'vendor = "other"'),
                     ('backend = "cuda"', 'backend = "acme"'),
                     ("arch = 80 ", 'arch = "tu1" '),
                     ("device_names = []", 'device_names = ["Acme Tensor Unit"]')):
        assert old in text
        text = text.replace(old, new)
    (tmp_path / "acme-tu1.toml").write_text(text)
    acme = load_profiles([tmp_path])["acme-tu1"]
    device = attached_device(fake_torch("acme", SimpleNamespace(name="Acme Tensor Unit 1",
                                                                total_memory=32 * GiB)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an exact match: no fallback warning
        assert match_device(device, {**PROFILES, "acme-tu1": acme}) is acme
    assert unsupported_reason(Mode.COMPILE, acme, None) == "this Triton build has no 'acme' backend"
    result = run_pytest("suites/test_numerics.py", "--profile-dir", str(tmp_path), "--vendor",
                        "other", "--mode", "interpreter", "--op", "softmax", "-k",
                        "test_matches_reference and not fuzzed and not covering", "-p",
                        "no:xdist", "--hypothesis-profile", "ci", "-q")
    assert result.returncode == 0 and "passed" in result.stdout, result.stdout[-2000:]


def test_no_accelerator_an_mps_one_and_a_broken_driver_are_cpu_only():
    none = fake_torch("cuda", H100)
    none.accelerator.is_available = lambda: False
    assert attached_device(none) is None and not devices.available(none)
    assert attached_device(fake_torch("mps", None)) is None
    with pytest.raises(devices.NoAccelerator, match="mps: Triton has no Metal backend"):
        devices.device_type(fake_torch("mps", None))
    broken = fake_torch("cuda", H100)
    broken.cuda.get_device_properties = lambda i: (_ for _ in ()).throw(RuntimeError("driver"))
    assert attached_device(broken) is None


def test_torch_without_torch_accelerator_falls_back_to_cuda():
    old = fake_torch("cuda", H100, accelerator=False)
    assert attached_device(old).arch == 90
    old.cuda.is_available = lambda: False
    assert attached_device(old) is None


# ---- matching: a fallback only within the backend's architecture family ----------------------
def test_architecture_families_follow_each_vendors_naming():
    assert arch_family("cuda", 89) == arch_family("cuda", 80) == "sm8x"
    assert arch_family("cuda", 90) != arch_family("cuda", 89)
    assert arch_family("hip", "gfx1102") == arch_family("hip", "gfx1100") == "gfx110"
    assert arch_family("hip", "gfx942") != arch_family("hip", "gfx90a")
    assert arch_family("npu", "Ascend910B4") == "Ascend910B"
    assert arch_family("xpu", None) is None


def test_a_new_device_of_a_known_family_falls_back_with_a_warning():
    l40 = attached_device(fake_torch("cuda", cuda_props("NVIDIA L40S", 8, 9, 142)))
    with pytest.warns(UnknownDeviceWarning, match="architecture family sm8x, 'nvidia-sm80'"):
        assert match_device(l40, PROFILES).name == "nvidia-sm80"  # never Hopper's sm90
    b4 = DeviceInfo("npu", "Ascend910B4", "Ascend910B4", 1, 40, device_type="npu")
    with pytest.warns(UnknownDeviceWarning, match="Ascend910B, 'npu-ascend910b'"):
        assert match_device(b4, PROFILES).name == "npu-ascend910b"


@pytest.mark.parametrize("device, why", [
    (DeviceInfo("cuda", "Tesla T4", 75, 32, 40), "no cuda profile has arch 75 or another of "
                                                 "its family sm7x"),
    (DeviceInfo("hip", "AMD Radeon RX 6800 XT", "gfx1030", 32, 72),
     "no hip profile has arch gfx1030 or another of its family gfx103"),
    (DeviceInfo("xpu", "Intel(R) Arc(TM) A770 Graphics", None, 32, 32, device_type="xpu"),
     "no xpu profile has arch None or lists its name in detect.device_names"),
    (DeviceInfo("npu", "Ascend310P3", "Ascend310P3", 1, 8, device_type="npu"),
     "no npu profile has arch Ascend310P3 or another of its family Ascend310P"),
], ids=["T4-sm75", "RDNA2-gfx1030", "xpu-A770", "npu-310P"])
def test_a_device_outside_every_family_stops_with_what_torch_reported(device, why):
    with pytest.raises(UsageError) as info:
        match_device(device, PROFILES)
    msg = str(info.value)
    assert why in msg, msg
    assert f"torch reported '{device.name}'" in msg and "--profile-dir DIR" in msg, msg


def test_an_unmatched_device_stops_only_a_run_that_selects_device_mode(monkeypatch):
    from triton_cts import targets
    from triton_cts.execution.modes import Mode
    t4 = DeviceInfo("cuda", "Tesla T4", 75, 32, 40)
    monkeypatch.setattr(targets, "attached_device", lambda: t4)
    config = SimpleNamespace(issue_config_time_warning=lambda w, stacklevel: None)
    with pytest.raises(UsageError, match="matches no profile"):
        targets._detect(config, PROFILES, [Mode.DEVICE, Mode.INTERPRETER])
    assert targets._detect(config, PROFILES, [Mode.INTERPRETER]) == (None, None, None)
    seen = []
    l40 = DeviceInfo("cuda", "NVIDIA L40S", 89, 32, 142)
    monkeypatch.setattr(targets, "attached_device", lambda: l40)
    config = SimpleNamespace(issue_config_time_warning=lambda w, stacklevel: seen.append(w))
    device, profile, warning = targets._detect(config, PROFILES, [Mode.DEVICE])
    assert (device, profile) == (l40, "nvidia-sm80") and "nearest of its architecture" in warning
    assert [type(w) for w in seen] == [UnknownDeviceWarning]


# ---- streams, synchronization and memory through the generic API ----------------------------
@pytest.fixture(params=["cuda", "xpu", "npu", "acme"])
def backend(request, monkeypatch):
    fake = fake_torch(request.param, SimpleNamespace(name="x", total_memory=80 * GiB))
    monkeypatch.setattr(devices, "_torch", lambda torch_module=None, load=True: fake)
    return fake


def test_the_side_stream_check_uses_the_generic_stream_api(backend):
    kind = backend.accelerator.current_accelerator().type
    out = modes._call_on_side_stream(lambda a: a + 1, (torch.ones(3),), {}, "op[impl]")
    assert torch.equal(out, torch.full((3,), 2.0))
    spin = [("sleep", modes.BUSY_CYCLES)] if kind == "cuda" else []  # torch.cuda._sleep only
    assert backend.log == [("Stream", kind), ("wait_stream", "side0", "default"), *spin,
                           ("set_stream", "side0"), ("stream.synchronize", "side0"),
                           ("set_stream", "default"), ("synchronize",)]


def test_an_output_finished_on_another_stream_is_caught_on_every_backend(backend, monkeypatch):
    """Outputs that change once the whole device is synchronized (work on another stream
    than the caller's) fail, whatever the backend."""
    out = torch.zeros(4)
    monkeypatch.setattr(modes, "_to_cpu", lambda o: o.clone())  # a real device-to-host copy
    synchronize = backend.accelerator.synchronize

    def whole_device():  # the other stream's work lands only now
        synchronize()
        out.fill_(1.0)
    backend.accelerator.synchronize = whole_device
    with pytest.raises(modes.NotOnCallersStream,
                       match=r"op\[impl\], called on a side stream, was not done .*\(output 0: "
                             r"4 of 4 elements"):
        modes._call_on_side_stream(lambda: out, (), {}, "op[impl]")


def test_device_mode_copies_inputs_to_the_accelerator_and_checks_them(backend, monkeypatch):
    """execute() in device mode on a stand-in device (the CPU under the fake's name):
    inputs go to devices.device_type(), the call is synchronized through the generic API,
    and a write into an input fails."""
    kind = backend.accelerator.current_accelerator().type
    where = []
    real_copy = modes.copy_with_layout
    monkeypatch.setattr(modes, "copy_with_layout",
                        lambda t, device: (where.append(device), real_copy(t, "cpu"))[1])

    def scribbles(x, *, profile):
        x.add_(1)
        return x * 2
    rules = modes.InputRules("op[impl]", ("x",))
    with pytest.raises(modes.InputModified, match="argument 0 'x': 3 of 3 elements changed"):
        modes.execute(scribbles, modes.Mode.DEVICE, PROFILES["nvidia-sm90"], (torch.ones(3),),
                      inputs=rules)
    assert where == [kind] and ("synchronize",) in backend.log


def test_lost_context_and_the_memory_budget_use_the_device_layer(backend, monkeypatch):
    lost_context.synchronize_device()
    assert backend.log[-1] == ("synchronize",)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
    assert size_budget.device_memory_problem(1 << 20, torch.float32) is None
    problem = size_budget.device_memory_problem(1 << 30, torch.float32)
    assert "each of 4 worker(s) may use 16.0 GiB" in problem  # 0.8 * 80 GiB / 4
    devices.empty_cache()
    assert backend.log[-1] == ("empty_cache",)


def test_the_float64_reference_runs_on_the_attached_accelerator(backend):
    from suites import runner
    kind = backend.accelerator.current_accelerator().type
    target = SimpleNamespace(mode=modes.Mode.DEVICE, op=SimpleNamespace(reference_on_cpu=None))
    assert runner.reference_device(target) == kind
    target.op.reference_on_cpu = "float64 on this device is not exact"
    assert runner.reference_device(target) == "cpu"


def test_nothing_is_synchronized_where_the_process_never_started_the_device(monkeypatch):
    fake = fake_torch("xpu", PVC)
    fake.xpu.is_initialized = lambda: False
    monkeypatch.setattr(devices, "_torch", lambda torch_module=None, load=True: fake)
    lost_context.synchronize_device()
    assert fake.log == []


# ---- this machine --------------------------------------------------------------------------
def test_device_checks_are_not_supported_without_an_accelerator():
    if devices.available():
        pytest.skip("not supported: an accelerator is attached; this checks a CPU-only machine")
    result = run_pytest("suites/test_numerics.py", "-p", "no:xdist", "--op", "gelu",
                        "--mode", "device", "--vendor", "nvidia-sm90", "--vendor", "intel-pvc",
                        "-q", "-rs", "-k",
                        "test_matches_reference and not boundaries and not covering")
    out = result.stdout
    assert "passed" not in out.splitlines()[-1] and "failed" not in out, out[-2000:]
    assert "not supported: no accelerator attached: device mode needs" in out, out[-2000:]
    assert "16 skipped" in out.splitlines()[-1], out[-2000:]
