"""The device layer: the one place device mode reaches the attached accelerator.

Which accelerator is attached, and its properties, come from
:func:`triton_cts.profiles.vendor_selection.attached_device` (``torch.accelerator``, then
the properties its vendor's torch documents). Everything device mode does with it goes
through torch's generic API (https://pytorch.org/docs/stable/accelerator.html,
``torch.Stream``, ``torch.Event``): the device string, streams and synchronization (the
side-stream check, the input-mutation check, lost-context detection), free and total
memory (the per-worker memory budget), the allocator cache. It serves ``cuda`` (NVIDIA,
and AMD through ROCm's torch, which keeps the device type ``cuda``), ``xpu``, ``npu``
(torch_npu) and any PrivateUse1 backend alike.

Only :func:`keep_busy` is per backend: a spin kernel on the current stream exists as
``torch.cuda._sleep`` alone; elsewhere the side-stream check runs without one.
"""
from __future__ import annotations

import contextlib
import functools
import sys

from triton_cts.profiles.vendor_selection import (NO_TRITON_BACKEND, DeviceInfo,
                                                  accelerator_type, attached_device)

__all__ = ["DeviceInfo", "attached_device", "device_type", "available", "initialized",
           "synchronize", "current_stream", "new_stream", "on_stream", "keep_busy",
           "total_memory", "free_memory", "empty_cache", "NoAccelerator"]


class NoAccelerator(RuntimeError):
    """Device mode was asked for on a machine with no accelerator Triton can drive."""


def _torch(torch_module=None, load: bool = True):
    """The torch module every function here talks to (tests pass fakes of it); with
    ``load`` False, None where this process has not imported torch."""
    if torch_module is not None:
        return torch_module
    if not load:
        return sys.modules.get("torch")
    import torch
    return torch


def device_type(torch_module=None) -> str:
    """The torch device string of device mode: "cuda", "xpu", "npu", a PrivateUse1 name.
    :class:`NoAccelerator` where none is attached."""
    kind = accelerator_type(_torch(torch_module))
    if kind is None or kind in NO_TRITON_BACKEND:
        raise NoAccelerator("no accelerator attached" + (
            f" that Triton can drive ({kind}: {NO_TRITON_BACKEND[kind]})" if kind else ""))
    return kind


@functools.lru_cache(maxsize=1)
def kernel_device_type() -> str | None:
    """The attached accelerator's device type, or None; read once per process, for the
    launchers' input checks (every launch asks)."""
    return device_type() if available() else None


def available(torch_module=None) -> bool:
    """Whether an accelerator device mode can use is attached."""
    kind = accelerator_type(_torch(torch_module))
    return kind is not None and kind not in NO_TRITON_BACKEND


def initialized(torch_module=None) -> bool:
    """Whether this process has already started the accelerator (a process that never
    touched it has nothing to wait for, and must not start it just to wait). Without the
    backend's own is_initialized: whether torch is loaded and an accelerator attached."""
    torch = _torch(torch_module, load=False)
    if torch is None or not available(torch):
        return False
    module = getattr(torch, device_type(torch), None)
    check = getattr(module, "is_initialized", None)
    return bool(check()) if check is not None else True


def synchronize(torch_module=None) -> None:
    """Wait for every kernel queued on the current device, on every stream."""
    torch = _torch(torch_module)
    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "synchronize"):
        acc.synchronize()
    else:  # torch before 2.6
        torch.cuda.synchronize()


def current_stream(torch_module=None):
    """The current stream of the current device (a ``torch.Stream``)."""
    torch = _torch(torch_module)
    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "current_stream"):
        return acc.current_stream()
    return torch.cuda.current_stream()


def new_stream(torch_module=None):
    """A new stream on the current device (``torch.Stream(device)``)."""
    torch = _torch(torch_module)
    if hasattr(torch, "accelerator") and hasattr(torch, "Stream"):
        return torch.Stream(device=device_type(torch))
    return torch.cuda.Stream()


@contextlib.contextmanager
def on_stream(stream, torch_module=None):
    """Make ``stream`` the current stream inside the block, the previous one after it
    (``torch.accelerator.set_stream``: Triton's launchers read the current stream)."""
    torch = _torch(torch_module)
    acc = getattr(torch, "accelerator", None)
    if acc is None or not hasattr(acc, "set_stream"):
        with torch.cuda.stream(stream):
            yield stream
        return
    previous = acc.current_stream()
    acc.set_stream(stream)
    try:
        yield stream
    finally:
        acc.set_stream(previous)


def keep_busy(cycles: int, torch_module=None) -> bool:
    """Queue a spin kernel of about ``cycles`` clock cycles on the current stream, where
    the backend has one (``torch.cuda._sleep``, CUDA and ROCm); whether it did."""
    torch = _torch(torch_module)
    if device_type(torch) != "cuda":
        return False
    busy = getattr(torch.cuda, "_sleep", None)
    if busy is None:
        return False
    busy(cycles)
    return True


def _memory_info(torch):
    """(free, total) bytes of the current device, or None where the backend says not."""
    acc = getattr(torch, "accelerator", None)
    getter = getattr(acc, "get_memory_info", None)
    if getter is not None:
        try:
            free, total = getter()
            return int(free), int(total)
        except (RuntimeError, NotImplementedError, TypeError, AttributeError):
            pass
    module = getattr(torch, device_type(torch), None)
    getter = getattr(module, "mem_get_info", None)
    if getter is not None:
        free, total = getter()
        return int(free), int(total)
    return None


def total_memory(torch_module=None) -> int:
    """Bytes of memory of the current device: the backend's memory info, else the total
    the device's properties report (:class:`DeviceInfo`)."""
    torch = _torch(torch_module)
    info = _memory_info(torch)
    if info is not None:
        return info[1]
    device = attached_device(torch)
    return device.total_memory if device is not None else 0


def free_memory(torch_module=None) -> int | None:
    """Free bytes on the current device, or None where the backend does not say."""
    info = _memory_info(_torch(torch_module))
    return None if info is None else info[0]


def empty_cache(torch_module=None) -> None:
    """Give the allocator's cached blocks back to the device (every worker shares it);
    nothing where no accelerator is attached."""
    torch = _torch(torch_module)
    if not available(torch):
        return
    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "empty_cache"):
        acc.empty_cache()
        return
    module = getattr(torch, device_type(torch), None)
    if hasattr(module, "empty_cache"):
        module.empty_cache()
