"""Input checks shared by every launcher: clear errors before any kernel runs."""
from __future__ import annotations

from typing import Iterable

import torch

from triton_cts.execution import devices, launches
from triton_cts.execution.modes import cpu_tensors_allowed
from triton_cts.profiles import Profile


class UnsupportedDtypeError(TypeError):
    """The op or the profile's hardware does not support this dtype."""


class ShapeMismatchError(ValueError):
    """Input shapes do not fit together."""


class WrongDeviceError(ValueError):
    """Inputs live on a device the kernel cannot run on, or on different devices."""


def check_inputs(op: str, profile: Profile, dtypes: Iterable[torch.dtype],
                 **tensors: torch.Tensor | None) -> None:
    """Every named tensor: a tensor, on one usable device, of a dtype the op and profile
    support. Launchers call this on every launch: the common case (tensors on the
    attached accelerator, of a supported dtype) takes one pass with no allocation; the
    rest is checked in full."""
    if type(dtypes) is not tuple:
        dtypes = tuple(dtypes)
    device = None
    for name, t in tensors.items():
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{op}: '{name}' must be a torch.Tensor, got {type(t).__name__}")
        dtype = t.dtype
        if dtype not in dtypes:
            raise UnsupportedDtypeError(
                f"{op}: '{name}' has dtype {dtype}; {op} supports "
                f"{', '.join(str(d).removeprefix('torch.') for d in dtypes)}")
        if not profile.supports_dtype(dtype):
            raise UnsupportedDtypeError(
                f"{op}: '{name}' has dtype {dtype}, which profile '{profile.name}' does not "
                f"support (dtypes.supported in {profile.source})")
        if device is None:
            device = t.device
        elif t.device != device:
            found = {u.device for u in tensors.values() if isinstance(u, torch.Tensor)}
            raise WrongDeviceError(f"{op}: inputs are on different devices: "
                                   f"{', '.join(sorted(map(str, found)))}")
    if device is None or device.type == "cuda":
        return
    accelerator = devices.kernel_device_type()  # xpu, npu, a PrivateUse1 backend
    if device.type == accelerator:
        return
    if device.type == "meta" and launches.capturing():
        return  # compile mode records grids at full size without allocating
    if device.type == "cpu" and not cpu_tensors_allowed():
        raise WrongDeviceError(
            f"{op}: inputs are on the CPU; run on a GPU or under the Triton interpreter")
    if device.type not in ("cpu", "cuda", accelerator):
        raise WrongDeviceError(f"{op}: Triton cannot run on device '{device}'")


def check_same_shape(op: str, **tensors: torch.Tensor | None) -> None:
    shapes = {n: tuple(t.shape) for n, t in tensors.items() if t is not None}
    if len(set(shapes.values())) > 1:
        desc = ", ".join(f"{n}={s}" for n, s in shapes.items())
        raise ShapeMismatchError(f"{op}: shapes must match, got {desc}")
