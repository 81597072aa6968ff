"""Which profiles a run covers: ``--vendor`` selection and detection of an attached device."""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from triton_cts.errors import UsageError, did_you_mean
from triton_cts.profiles import VENDOR_FAMILIES, Profile
from triton_cts.profiles.schema import SPECIAL_SELECTORS


class UnknownDeviceWarning(UserWarning):
    """The attached device matches no profile exactly; the nearest of its family is used."""


@dataclass(frozen=True)
class DeviceInfo:
    """What torch and Triton's driver report about the attached accelerator."""

    backend: str          # "cuda" or "hip"
    name: str             # torch.cuda.get_device_name()
    arch: int | str       # CUDA: major*10+minor; HIP: gcnArchName without feature flags
    warp_size: int
    compute_units: int


def attached_device() -> DeviceInfo | None:
    """The first visible accelerator, or None on a CPU-only machine."""
    try:
        import torch
        if not torch.cuda.is_available():
            return None
        props = torch.cuda.get_device_properties(0)
    except Exception:  # a broken driver is a CPU-only machine for our purposes
        return None
    import torch
    if torch.version.hip:
        arch: int | str = props.gcnArchName.split(":")[0]
        backend = "hip"
    else:
        arch = props.major * 10 + props.minor
        backend = "cuda"
    warp = getattr(props, "warp_size", 64 if backend == "hip" else 32)
    return DeviceInfo(backend, props.name, arch, warp, props.multi_processor_count)


def _arch_number(arch: int | str) -> int:
    if isinstance(arch, int):
        return arch
    digits = re.sub(r"[^0-9a-f]", "", arch.removeprefix("gfx"))
    try:
        return int(digits, 16)
    except ValueError:
        return 0


def match_device(device: DeviceInfo, profiles: Mapping[str, Profile]) -> Profile:
    """The profile for ``device``: same backend and arch (name breaks ties), else the
    nearest arch of the same backend, with an :class:`UnknownDeviceWarning`."""
    same_backend = [p for p in profiles.values() if p.backend == device.backend]
    if not same_backend:
        raise UsageError(f"no profile for backend '{device.backend}' (device '{device.name}'); "
                         f"known profiles: {', '.join(sorted(profiles))}")
    exact = [p for p in same_backend if p.arch == device.arch]
    named = [p for p in exact if any(s.lower() in device.name.lower()
                                     for s in p["detect.device_names"])]
    if named:
        return named[0]
    if len(exact) == 1:
        return exact[0]
    candidates = exact or same_backend
    target = _arch_number(device.arch)
    nearest = min(candidates, key=lambda p: (abs(_arch_number(p.arch) - target),
                                             abs(p.compute_units - device.compute_units), p.name))
    warnings.warn(UnknownDeviceWarning(
        f"device '{device.name}' (arch {device.arch}, {device.compute_units} compute units) "
        f"matches no profile exactly; using the nearest, '{nearest.name}'. Add a profile "
        f"for it with --profile-dir."), stacklevel=2)
    return nearest


#: The profile of each family that a run without ``--vendor`` checks on a CPU-only
#: machine (the test command's, docs/suite-cost.md): a first run that ends in minutes.
#: ``--vendor all`` checks every profile.
REPRESENTATIVES = {"nvidia": "nvidia-sm90", "rocm": "amd-gfx942", "npu": "npu-ascend910b",
                   "intel": "intel-pvc"}
#: What ``--vendor all`` costs on a CPU-only machine (docs/suite-cost.md).
ALL_PROFILES_COST = "about 39 minutes on two cores"


def representatives(profiles: Mapping[str, Profile]) -> list[Profile]:
    """One bundled profile per family (:data:`REPRESENTATIVES`, else the family's first by
    name) and every profile from a ``--profile-dir``."""
    from triton_cts import PROFILE_DIR
    bundled = {n: p for n, p in profiles.items()
               if Path(p.source).resolve().parent == Path(PROFILE_DIR).resolve()}
    picked = [p for p in profiles.values() if p.name not in bundled]
    for family in VENDOR_FAMILIES:
        of_family = sorted(n for n, p in bundled.items() if p.vendor == family)
        if of_family:
            name = REPRESENTATIVES.get(family)
            picked.append(bundled[name if name in of_family else of_family[0]])
    return sorted(picked, key=lambda p: p.name)


def left_out_note(selected: list[Profile], profiles: Mapping[str, Profile]) -> str | None:
    """The end-of-run line of a default CPU-only selection: the profiles it left out and
    the command that checks them all; None when none was left out."""
    names = {p.name for p in selected}
    left = sorted(n for n in profiles if n not in names)
    if not left:
        return None
    return (f"triton-cts: no --vendor on a CPU-only machine: checked one profile per family "
            f"({', '.join(sorted(names))}); left out {len(left)}: {', '.join(left)}. "
            f"Every profile: add --vendor all ({ALL_PROFILES_COST}).")


def select_profiles(selectors: list[str], profiles: Mapping[str, Profile],
                    device: DeviceInfo | None) -> list[Profile]:
    """Resolve ``--vendor`` values (family, profile name, ``all``, ``auto``) to profiles.

    ``auto`` means the attached device's profile, or every profile on a CPU-only machine.
    No ``--vendor`` is ``auto``, except on a CPU-only machine: :func:`representatives`.
    """
    if not selectors and device is None:
        return representatives(profiles)
    chosen: dict[str, Profile] = {}
    for selector in selectors or ["auto"]:
        sel = selector.strip().lower()
        if sel == "all" or (sel == "auto" and device is None):
            picked = list(profiles.values())
        elif sel == "auto":
            picked = [match_device(device, profiles)]
        elif sel in VENDOR_FAMILIES:
            picked = [p for p in profiles.values() if p.vendor == sel]
        elif selector in profiles:
            picked = [profiles[selector]]
        else:
            raise UsageError(
                f"unknown vendor or profile '{selector}'"
                f"{did_you_mean(selector, [*VENDOR_FAMILIES, *SPECIAL_SELECTORS, *profiles])}. Families: "
                f"{', '.join(VENDOR_FAMILIES)}; special: {', '.join(SPECIAL_SELECTORS)}; "
                f"profiles: {', '.join(sorted(profiles))}")
        if not picked:
            raise UsageError(f"--vendor {selector}: no profile of that family is loaded")
        for p in picked:
            chosen.setdefault(p.name, p)
    return sorted(chosen.values(), key=lambda p: p.name)
