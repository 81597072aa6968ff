"""--vendor selection, device detection and --mode parsing."""
import warnings

import pytest

from triton_cts.execution.modes import (Mode, interpreter_blocker, parse_modes,
                                        unsupported_reason)
from triton_cts.profiles import load_profiles
from triton_cts.errors import UsageError
from triton_cts.profiles.vendor_selection import (DeviceInfo, UnknownDeviceWarning, match_device,
                                                  select_profiles)

PROFILES = load_profiles()
H100 = DeviceInfo("cuda", "NVIDIA H100 80GB HBM3", 90, 32, 132)


def names(selected):
    return [p.name for p in selected]


def test_family_selects_every_profile_of_it():
    assert names(select_profiles(["rocm"], PROFILES, None)) == [
        "amd-gfx1100", "amd-gfx1201", "amd-gfx90a", "amd-gfx942", "amd-gfx950"]
    assert names(select_profiles(["npu"], PROFILES, None)) == ["npu-ascend910b"]


def test_all_and_auto_on_cpu_select_everything():
    assert names(select_profiles(["all"], PROFILES, H100)) == sorted(PROFILES)
    assert names(select_profiles(["auto"], PROFILES, None)) == sorted(PROFILES)
    # no --vendor on a CPU is one profile per family (tests/test_describe.py)
    assert len(select_profiles([], PROFILES, None)) == len({p.vendor for p in PROFILES.values()})


def test_auto_on_a_device_selects_its_profile():
    assert names(select_profiles(["auto"], PROFILES, H100)) == ["nvidia-sm90"]


def test_profile_names_combine_without_duplicates():
    assert names(select_profiles(["amd-gfx942", "rocm", "nvidia-sm80"], PROFILES, None)) == [
        "amd-gfx1100", "amd-gfx1201", "amd-gfx90a", "amd-gfx942", "amd-gfx950", "nvidia-sm80"]


def test_unknown_vendor_is_a_usage_error_listing_choices():
    with pytest.raises(UsageError) as info:
        select_profiles(["acme"], PROFILES, None)
    msg = str(info.value)
    assert "unknown vendor or profile 'acme'" in msg
    assert "nvidia, rocm, npu" in msg and "amd-gfx942" in msg


@pytest.mark.parametrize("device, expected", [
    (H100, "nvidia-sm90"),
    (DeviceInfo("cuda", "NVIDIA H200", 90, 32, 132), "nvidia-sm90-h200"),
    (DeviceInfo("cuda", "NVIDIA A100-SXM4-80GB", 80, 32, 108), "nvidia-sm80"),
    (DeviceInfo("hip", "AMD Instinct MI300X", "gfx942", 64, 304), "amd-gfx942"),
    (DeviceInfo("hip", "Radeon RX 7900 XTX", "gfx1100", 32, 96), "amd-gfx1100"),
])
def test_known_devices_map_to_their_profile(device, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert match_device(device, PROFILES).name == expected


def test_unknown_device_falls_back_to_nearest_of_family_with_warning():
    l40 = DeviceInfo("cuda", "NVIDIA L40S", 89, 32, 142)  # sm_89: family sm8x, not Hopper
    with pytest.warns(UnknownDeviceWarning, match="matches no profile exactly.*nvidia-sm80"):
        assert match_device(l40, PROFILES).name == "nvidia-sm80"
    rx7600 = DeviceInfo("hip", "AMD Radeon RX 7600", "gfx1102", 32, 32)
    with pytest.warns(UnknownDeviceWarning, match="amd-gfx1100"):
        assert match_device(rx7600, PROFILES).name == "amd-gfx1100"


def test_parse_modes():
    assert parse_modes(None) == list(Mode)
    assert parse_modes(["auto"]) == list(Mode)
    assert parse_modes(["compile", "interpreter", "compile"]) == [Mode.COMPILE, Mode.INTERPRETER]
    with pytest.raises(UsageError, match="unknown mode 'gpu'"):
        parse_modes(["gpu"])


def test_unsupported_reasons_say_why():
    sm90, gfx942, npu = PROFILES["nvidia-sm90"], PROFILES["amd-gfx942"], PROFILES["npu-ascend910b"]
    assert "no accelerator attached" in unsupported_reason(Mode.DEVICE, sm90, None)
    assert unsupported_reason(Mode.DEVICE, sm90, "nvidia-sm90") is None
    assert "runs profile 'nvidia-sm90', not 'amd-gfx942'" in unsupported_reason(
        Mode.DEVICE, gfx942, "nvidia-sm90")
    assert unsupported_reason(Mode.COMPILE, gfx942, None) is None
    # NPU compile mode runs the IO lint on upstream TTIR; the bishengir lowering that needs
    # triton-ascend is reported by the compile suite itself
    assert unsupported_reason(Mode.COMPILE, npu, None) is None
    # the interpreter runs on every CPU, except beside a numpy its Triton is not verified with
    assert unsupported_reason(Mode.INTERPRETER, npu, None) == interpreter_blocker()
