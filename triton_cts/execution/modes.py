"""Execution modes and what this machine can run.

- ``device``: the implementation runs on the attached accelerator through torch.
- ``interpreter``: kernels run on the CPU under ``TRITON_INTERPRET`` semantics while the
  launcher reads the profile's constants (grid caps, block sizes, IO strategy).
- ``compile``: the launcher runs with launches captured, and each captured launch is
  cross-compiled for the profile's target (no hardware needed).
"""
from __future__ import annotations

import enum
from typing import Any, Callable

import torch
from triton import knobs

from triton_cts.execution import launches
from triton_cts.profiles import Profile


class Mode(str, enum.Enum):
    DEVICE = "device"
    INTERPRETER = "interpreter"
    COMPILE = "compile"

    def __str__(self) -> str:
        return self.value


MODE_CHOICES = ("auto", *(m.value for m in Mode))


class NotSupported(Exception):
    """A check cannot run here (absent hardware, toolchain, mode or dtype); carries why."""


def parse_modes(values: list[str] | None) -> list[Mode]:
    """``--mode`` values to modes; ``auto`` (the default) is every mode."""
    values = values or ["auto"]
    modes: list[Mode] = []
    for value in values:
        if value not in MODE_CHOICES:
            from triton_cts.errors import UsageError
            raise UsageError(f"unknown mode '{value}'; choose from {', '.join(MODE_CHOICES)}")
        for m in (list(Mode) if value == "auto" else [Mode(value)]):
            if m not in modes:
                modes.append(m)
    return modes


def _upstream_backends() -> set[str]:
    try:
        from triton.backends import backends
    except ImportError:
        return set()
    names = {"nvidia": "cuda", "amd": "hip"}
    return {names.get(b, b) for b in backends}


def _interpreter_blocker() -> str | None:
    """Known-broken interpreter environments: triton <= 3.6 converts size-1 arrays with
    int(), which numpy >= 2.4 refuses ("only 0-dimensional arrays can be converted")."""
    import numpy
    import triton
    triton_v = tuple(int(p) for p in triton.__version__.split(".")[:2])
    numpy_v = tuple(int(p) for p in numpy.__version__.split(".")[:2])
    if triton_v <= (3, 6) and numpy_v >= (2, 4):
        return (f"the interpreter of triton {triton.__version__} fails with numpy "
                f"{numpy.__version__}; install numpy<2.4 beside it")
    return None


def unsupported_reason(mode: Mode, profile: Profile, device_profile: str | None) -> str | None:
    """Why ``mode`` cannot run for ``profile`` on this machine, or None if it can."""
    if mode is Mode.DEVICE:
        if device_profile is None:
            return (f"no accelerator attached: device mode needs a {profile.description} "
                    f"(profile {profile.name})")
        if device_profile != profile.name:
            return (f"the attached device runs profile '{device_profile}', not "
                    f"'{profile.name}'")
        return None
    if mode is Mode.COMPILE:
        if profile.backend == "npu":
            # The IO lint runs on upstream TTIR here; the compile suite reports the
            # triton-ascend + bishengir lowering as not supported, saying why and how to
            # set up its environment (triton_cts/toolchains/npu_toolchain.py).
            if not _upstream_backends():
                return "the NPU IO lint needs an upstream Triton backend to produce TTIR"
            return None
        if profile.backend not in _upstream_backends():
            return f"this Triton build has no '{profile.backend}' backend"
        return None
    return _interpreter_blocker()


def execute(fn: Callable, mode: Mode, profile: Profile, args: tuple, kwargs: dict | None = None,
            takes_profile: bool = True) -> Any:
    """Run an implementation (already loaded for ``mode``) on CPU ``args``.

    Returns the outputs on the CPU for device and interpreter modes, and the list of
    captured :class:`~triton_cts.execution.launches.Launch` records for compile mode.
    """
    kwargs = dict(kwargs or {})
    if takes_profile:
        kwargs["profile"] = profile
    if mode is Mode.DEVICE:
        dev_args = tuple(copy_with_layout(a, "cuda") if isinstance(a, torch.Tensor) else a
                         for a in args)
        out = fn(*dev_args, **kwargs)
        torch.cuda.synchronize()
        return _to_cpu(out)
    if mode is Mode.INTERPRETER:
        with launches.interpreted():
            return fn(*args, **kwargs)
    with launches.capture_launches() as log:
        fn(*args, **kwargs)
    return log


def copy_with_layout(t: torch.Tensor, device) -> torch.Tensor:
    """A copy of ``t`` on ``device`` with the same sizes and strides (``.to`` and ``clone``
    compact a view with gaps into a contiguous tensor)."""
    out = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=device)
    out.copy_(t)
    return out


def _to_cpu(out):
    if isinstance(out, torch.Tensor):
        return out.cpu()
    if isinstance(out, (tuple, list)):
        return type(out)(_to_cpu(o) for o in out)
    return out


def cpu_tensors_allowed() -> bool:
    """Launchers accept CPU tensors only while interpreting or capturing for compile."""
    return bool(knobs.runtime.interpret) or launches.capturing()
