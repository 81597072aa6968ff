"""Which profiles a run covers: ``--vendor`` selection and detection of an attached device.

Which accelerator is attached comes from ``torch.accelerator`` (torch 2.6 and later:
https://pytorch.org/docs/stable/accelerator.html); its properties are read per backend
from the fields its vendor's torch documents (:data:`READERS`). The rest of device mode
(streams, events, memory) goes through ``triton_cts.execution.devices``.
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from triton_cts.errors import UsageError, did_you_mean
from triton_cts.profiles import VENDOR_FAMILIES, Profile
from triton_cts.profiles.schema import SPECIAL_SELECTORS


class UnknownDeviceWarning(UserWarning):
    """The attached device matches no profile exactly; the nearest of its architecture
    family is used."""


@dataclass(frozen=True)
class DeviceInfo:
    """What torch reports about the attached accelerator."""

    backend: str          # profile backend: "cuda", "hip", "xpu", "npu", or torch's type
    name: str             # the device name torch reports
    arch: int | str | None  # CUDA: major*10+minor; HIP: gcnArchName; NPU: SoC; None: unknown
    warp_size: int
    compute_units: int
    total_memory: int = 0  # bytes
    device_type: str = "cuda"  # the torch device type ("cuda" on ROCm too)
    #: where the fields came from, for messages ("torch.xpu.get_device_properties(0)")
    source: str = ""

    def describe(self) -> str:
        return (f"'{self.name}' (torch device '{self.device_type}', backend {self.backend}, "
                f"arch {self.arch if self.arch is not None else 'not reported'}, "
                f"warp/sub-group size {self.warp_size}, {self.compute_units} compute units, "
                f"{self.total_memory / 2**30:.1f} GiB; from {self.source or 'torch'})")


#: Accelerator types torch reports that Triton has no backend for: a CPU-only machine here.
NO_TRITON_BACKEND = {"mps": "Triton has no Metal backend"}


def accelerator_type(torch_module=None) -> str | None:
    """The torch device type of the attached accelerator ("cuda", "xpu", "npu", a
    PrivateUse1 backend's name), or None. Before torch 2.6 (no ``torch.accelerator``),
    CUDA only."""
    if torch_module is None:
        import torch as torch_module
    acc = getattr(torch_module, "accelerator", None)
    if acc is None:
        cuda = getattr(torch_module, "cuda", None)
        return "cuda" if cuda is not None and cuda.is_available() else None
    if not acc.is_available():
        return None
    device = acc.current_accelerator()
    return None if device is None else device.type


def _index(module) -> int:
    try:
        return int(module.current_device())
    except Exception:  # a backend module without current_device: its first device
        return 0


def _read_cuda(torch, kind: str, index: int | None = None) -> DeviceInfo:
    """torch.cuda.get_device_properties: major/minor, multi_processor_count, warp_size,
    total_memory (https://pytorch.org/docs/stable/generated/torch.cuda.get_device_properties.html);
    on ROCm's torch (torch.version.hip set) gcnArchName names the ISA, e.g. gfx942."""
    i = _index(torch.cuda) if index is None else index
    props = torch.cuda.get_device_properties(i)
    if getattr(torch.version, "hip", None):
        arch: int | str = props.gcnArchName.split(":")[0]  # drop feature flags (":sramecc+")
        backend, warp = "hip", getattr(props, "warp_size", 64)
    else:
        arch = props.major * 10 + props.minor
        backend, warp = "cuda", getattr(props, "warp_size", 32)
    return DeviceInfo(backend, props.name, arch, warp, props.multi_processor_count,
                      props.total_memory, kind, f"torch.cuda.get_device_properties({i})")


def _read_xpu(torch, kind: str, index: int | None = None) -> DeviceInfo:
    """torch.xpu.get_device_properties: name, total_memory, gpu_subslice_count (Xe-cores:
    the unit the profiles count), max_compute_units, sub_group_sizes
    (https://pytorch.org/docs/stable/generated/torch.xpu.get_device_properties.html). No
    field names the ocloc architecture (pvc, bmg): profiles match by name."""
    i = _index(torch.xpu) if index is None else index
    props = torch.xpu.get_device_properties(i)
    units = getattr(props, "gpu_subslice_count", 0) or getattr(props, "max_compute_units", 0)
    sizes = list(getattr(props, "sub_group_sizes", ()) or ())
    # Triton's XPU backend compiles with 32 threads per warp where the device offers it
    warp = 32 if 32 in sizes else (max(sizes) if sizes else 32)
    return DeviceInfo("xpu", props.name, None, warp, int(units),
                      int(getattr(props, "total_memory", 0)), kind,
                      f"torch.xpu.get_device_properties({i})")


def _read_npu(torch, kind: str, index: int | None = None) -> DeviceInfo:
    """torch_npu's torch.npu.get_device_properties: name (the SoC, e.g. Ascend910B3, which
    bishengir takes as --target), total_memory, vector_core_num and cube_core_num
    (torch_npu: torch_npu/csrc/npu/Module.cpp, RegisterNPUDeviceProperties). Triton
    vector kernels run one program per vector core; there are no warps."""
    i = _index(torch.npu) if index is None else index
    props = torch.npu.get_device_properties(i)
    units = getattr(props, "vector_core_num", 0) or getattr(props, "cube_core_num", 0)
    return DeviceInfo("npu", props.name, props.name, 1, int(units),
                      int(getattr(props, "total_memory", 0)), kind,
                      f"torch.npu.get_device_properties({i})")


def _read_other(torch, kind: str, index: int | None = None) -> DeviceInfo:
    """Any other backend (a PrivateUse1 one): its module's get_device_name and, where it
    has one, get_device_properties' name and total_memory; torch documents no
    architecture field for them."""
    module = getattr(torch, kind, None)
    i = index if index is not None else (_index(module) if module is not None else 0)
    props = getattr(module, "get_device_properties", None)
    props = props(i) if props is not None else None
    name = getattr(props, "name", None)
    if name is None and hasattr(module, "get_device_name"):
        name = module.get_device_name(i)
    source = f"torch.{kind}.get_device_properties({i})" if props is not None \
        else "torch.accelerator"
    return DeviceInfo(kind, str(name or kind), None, 0,
                      int(getattr(props, "multi_processor_count", 0) or 0),
                      int(getattr(props, "total_memory", 0) or 0), kind, source)


#: Property readers per torch device type; any other type: ``_read_other``.
READERS: dict[str, Callable] = {"cuda": _read_cuda, "xpu": _read_xpu, "npu": _read_npu}


def attached_device(torch_module=None, index: int | None = None) -> DeviceInfo | None:
    """The current accelerator (or device ``index`` of the visible ones), or None on a
    CPU-only machine (or one whose accelerator Triton cannot drive:
    :data:`NO_TRITON_BACKEND`)."""
    try:
        if torch_module is None:
            import torch as torch_module
        kind = accelerator_type(torch_module)
        if kind is None or kind in NO_TRITON_BACKEND:
            return None
        return READERS.get(kind, _read_other)(torch_module, kind, index)
    except Exception:  # a broken driver is a CPU-only machine for our purposes
        return None


def _arch_number(arch: int | str | None) -> int:
    if isinstance(arch, int):
        return arch
    digits = re.sub(r"[^0-9a-f]", "", str(arch or "").removeprefix("gfx"))
    try:
        return int(digits, 16)
    except ValueError:
        return 0


def arch_family(backend: str, arch: int | str | None) -> str | None:
    """The architecture family a fallback may not leave, or None (no fallback): CUDA's
    compute capability major ("devices with the same major revision number are of the
    same core architecture", CUDA C++ Programming Guide, compute capability); AMD's
    gfx<major><minor><stepping> without the stepping (LLVM AMDGPU usage, processors:
    https://llvm.org/docs/AMDGPUUsage.html#processors); an Ascend SoC without its
    trailing bin digit (Ascend910B3 -> Ascend910B)."""
    if arch is None:
        return None
    if backend == "cuda" and isinstance(arch, int):
        return f"sm{arch // 10}x"
    if backend == "hip" and str(arch).startswith("gfx") and len(str(arch)) > 4:
        return str(arch)[:-1]
    if backend == "npu":
        return re.sub(r"\d+$", "", str(arch)) or None
    return None


def _no_profile(device: DeviceInfo, profiles: Mapping[str, Profile], why: str) -> UsageError:
    return UsageError(
        f"the attached accelerator matches no profile: {why}. torch reported {device.describe()}. "
        f"Known profiles: {', '.join(sorted(profiles))}. Add a profile for it (a TOML file "
        f"whose [target] says backend = '{device.backend}' and arch = "
        f"'{device.arch if device.arch is not None else '...'}', and whose [detect] "
        f"device_names holds a part of '{device.name}') in a folder given with "
        f"--profile-dir DIR, or choose profiles with --vendor and a mode other than device.")


def match_device(device: DeviceInfo, profiles: Mapping[str, Profile]) -> Profile:
    """The profile for ``device``: same backend and arch (name breaks ties), or same
    backend and a device name it lists; else the nearest profile of the same backend and
    architecture family (:func:`arch_family`), with an :class:`UnknownDeviceWarning`.
    Anything else is a :class:`UsageError` saying what torch reported and how to add a
    profile."""
    same_backend = [p for p in profiles.values() if p.backend == device.backend]
    if not same_backend:
        raise _no_profile(device, profiles, f"no profile has backend '{device.backend}'")
    exact = [p for p in same_backend if device.arch is not None and p.arch == device.arch]
    named = [p for p in (exact or same_backend)
             if any(s.lower() in device.name.lower() for s in p["detect.device_names"])]
    if named and (exact or device.arch is None):
        return named[0]
    if len(exact) == 1:
        return exact[0]
    family = arch_family(device.backend, device.arch)
    candidates = exact or [p for p in same_backend
                           if family is not None and arch_family(p.backend, p.arch) == family]
    if not candidates:
        raise _no_profile(device, profiles, (
            f"no {device.backend} profile has arch {device.arch}"
            + (f" or another of its family {family}" if family else "")
            + (" or lists its name in detect.device_names" if device.arch is None else "")))
    target = _arch_number(device.arch)
    nearest = min(candidates, key=lambda p: (abs(_arch_number(p.arch) - target),
                                             abs(p.compute_units - device.compute_units), p.name))
    warnings.warn(UnknownDeviceWarning(
        f"device '{device.name}' (arch {device.arch}, {device.compute_units} compute units) "
        f"matches no profile exactly; using the nearest of its architecture family "
        f"{family or device.arch}, '{nearest.name}'. Add a profile for it with --profile-dir."),
        stacklevel=2)
    return nearest


#: The profile of each family that a run without ``--vendor`` checks on a CPU-only
#: machine (the test command's, docs/suite-cost.md): a first run that ends in minutes.
#: ``--vendor all`` checks every profile.
REPRESENTATIVES = {"nvidia": "nvidia-sm90", "rocm": "amd-gfx942", "npu": "npu-ascend910b",
                   "intel": "intel-pvc"}
#: What ``--vendor all`` costs on a CPU-only machine (docs/suite-cost.md).
ALL_PROFILES_COST = "about 35 minutes on two cores"


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
