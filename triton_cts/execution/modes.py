"""Execution modes and what this machine can run.

- ``device``: the implementation runs on the attached accelerator through torch.
- ``interpreter``: kernels run on the CPU under ``TRITON_INTERPRET`` semantics while the
  launcher reads the profile's constants (grid caps, block sizes, IO strategy).
- ``compile``: the launcher runs with launches captured, and each captured launch is
  cross-compiled for the profile's target (no hardware needed).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable

import torch
from triton import knobs

from triton_cts.execution import devices, launches
from triton_cts.ops.dtypes import has_int_dtype, int_dtype
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


def interpreter_blocker() -> str | None:
    """Known-broken interpreter environments. Triton <= 3.6 turned a scalar tensor into an
    index with int() on a one-element array, which numpy >= 2.4 refuses; launches.py
    patches that, and under numpy 2.4 the sm90 interpreter suite then failed the same
    checks as under numpy 2.3. Under numpy 2.5 an H100 host also failed tl.topk, and its
    run was not completed, so numpy >= 2.5 stays blocked with those Triton releases."""
    import numpy
    import triton
    triton_v = tuple(int(p) for p in triton.__version__.split(".")[:2])
    numpy_v = tuple(int(p) for p in numpy.__version__.split(".")[:2])
    if triton_v <= (3, 6) and numpy_v >= (2, 5):
        return (f"the interpreter of triton {triton.__version__} is not verified with numpy "
                f"{numpy.__version__} (tl.topk fails); install numpy<2.5 beside it")
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
        if profile.backend == "xpu":
            # Launches are captured here and compiled with triton-xpu in its own venv; the
            # compile suite says why where that venv is missing
            # (triton_cts/toolchains/xpu_toolchain.py).
            return None
        if profile.backend not in _upstream_backends():
            return f"this Triton build has no '{profile.backend}' backend"
        return None
    return interpreter_blocker()


def device() -> str:
    """The torch device of device mode: the attached accelerator's type ("cuda", on ROCm
    too; "xpu", "npu", a PrivateUse1 backend's), from the device layer."""
    return devices.device_type()


#: GPU clock cycles (about 10 ms) the caller's stream is kept busy while an implementation
#: runs on a side stream (:func:`execute`'s ``side_stream``).
BUSY_CYCLES = 20_000_000


class InputModified(AssertionError):
    """An implementation wrote into an input it does not own."""


class NotOnCallersStream(AssertionError):
    """An implementation's outputs were not final when the stream it was called on was."""


@dataclass(frozen=True)
class InputRules:
    """What :func:`execute` checks of a call's inputs: every tensor argument is unchanged
    after the call, bit for bit, but those the op writes by definition (``writable``:
    positions or parameter names, from ``OpSpec.mutates``). ``who`` (op and
    implementation) and ``names`` (the positional parameters) are for the message."""

    who: str
    names: tuple[str, ...] = ()
    writable: tuple[int | str, ...] = ()

    def _name(self, key: int | str) -> str | None:
        if isinstance(key, str):
            return key
        return self.names[key] if key < len(self.names) else None

    def writes(self, key: int | str) -> bool:
        name = self._name(key)
        return key in self.writable or (name is not None and name in self.writable)

    def label(self, key: int | str) -> str:
        if isinstance(key, str):
            return f"keyword argument '{key}'"
        name = self._name(key)
        return f"argument {key}" + (f" '{name}'" if name else "")


def execute(fn: Callable, mode: Mode, profile: Profile, args: tuple, kwargs: dict | None = None,
            takes_profile: bool = True, *, inputs: InputRules | None = None,
            side_stream: bool = False) -> Any:
    """Run an implementation (already loaded for ``mode``) on ``args``: CPU tensors, or in
    device mode tensors on the CPU or the device, copied for the call either way.

    Returns the outputs on the CPU for device and interpreter modes, and the list of
    captured :class:`~triton_cts.execution.launches.Launch` records for compile mode.
    With ``inputs``, a call that changed a tensor argument it does not own raises
    :class:`InputModified` naming it. With ``side_stream``, device mode runs the call on a
    new stream and reads its outputs after synchronizing only that stream
    (:func:`_call_on_side_stream`); other modes ignore it.
    """
    call_kwargs = dict(kwargs or {})
    if takes_profile:
        call_kwargs["profile"] = profile
    if mode is Mode.DEVICE:
        where = device()
        dev_args = tuple(copy_with_layout(a, where) if isinstance(a, torch.Tensor) else a
                         for a in args)
        # the originals never reach the implementation: they are the copies to compare
        watched = _watch(inputs, dev_args, kwargs or {}, originals=args)
        if side_stream:
            out = _call_on_side_stream(fn, dev_args, call_kwargs,
                                       inputs.who if inputs else getattr(fn, "__name__", "?"))
        else:
            out = fn(*dev_args, **call_kwargs)
            devices.synchronize()
            out = _to_cpu(out)
        _check_unchanged(inputs, watched)
        return out
    watched = _watch(inputs, args, kwargs or {})
    if mode is Mode.INTERPRETER:
        with launches.interpreted():
            out = fn(*args, **call_kwargs)
    else:
        with launches.capture_launches() as out:
            fn(*args, **call_kwargs)
    _check_unchanged(inputs, watched)
    return out


def _call_on_side_stream(fn: Callable, args: tuple, kwargs: dict, who: str):
    """Call ``fn`` on a new stream that waits for the caller's (where the inputs were
    copied), while the caller's stream is kept busy for :data:`BUSY_CYCLES` (where the
    backend has a spin kernel: ``devices.keep_busy``); synchronize
    only the new stream and copy the outputs to the CPU on it. Work the implementation
    launches on another stream (the default one, whatever the current stream is) has then
    most likely not run when its outputs are read: read again once the whole device is
    synchronized, they differ, and :class:`NotOnCallersStream` says so."""
    caller = devices.current_stream()
    side = devices.new_stream()
    side.wait_stream(caller)
    devices.keep_busy(BUSY_CYCLES)  # a spin kernel on the caller's stream, where one exists
    with devices.on_stream(side):
        out = fn(*args, **kwargs)
        side.synchronize()
        early = _to_cpu(out)  # a blocking copy on the side stream: waits for it alone
    # the outputs are read; let every stream finish before buffers are freed or compared
    devices.synchronize()
    late = _to_cpu(out)
    changed = [f"output {i}: {n} of {b.numel()} elements"
               for i, (a, b) in enumerate(zip(_tensors(early), _tensors(late)))
               if isinstance(a, torch.Tensor) and (n := changed_elements(a, b))]
    if changed:
        raise NotOnCallersStream(
            f"{who}, called on a side stream, was not done when that stream was: its "
            f"outputs changed after the whole device was synchronized "
            f"({'; '.join(changed)}). It launches work on another stream (the default "
            f"one?) than the caller's current stream.")
    return early


def _tensors(out) -> tuple:
    if isinstance(out, torch.Tensor):
        return (out,)
    return tuple(out) if isinstance(out, (tuple, list)) else ()


def _watch(rules: InputRules | None, args: tuple, kwargs: dict, originals: tuple = ()):
    """(key, the tensor the call receives, its values before the call) for each tensor
    argument the call must leave unchanged; ``originals``: copies already made of the
    positional ones (device mode)."""
    if rules is None:
        return []
    watched = []
    for key, t in [*enumerate(args), *kwargs.items()]:
        if not isinstance(t, torch.Tensor) or t.is_meta or rules.writes(key):
            continue
        before = originals[key] if isinstance(key, int) and key < len(originals) \
            else t.detach().clone()
        watched.append((key, t, before))
    return watched


def _check_unchanged(rules: InputRules | None, watched) -> None:
    changed = [(key, n, t.numel()) for key, t, before in watched
               if (n := changed_elements(before, t))]
    if changed:
        what = "; ".join(f"{rules.label(key)}: {n} of {numel} elements changed"
                         for key, n, numel in changed)
        raise InputModified(
            f"{rules.who} wrote into an input it does not own ({what}; compared bit for bit "
            f"with a copy taken before the call). An op whose implementations update an "
            f"argument by definition names it in OpSpec.mutates.")


def changed_elements(before: torch.Tensor, after: torch.Tensor) -> int:
    """How many elements of ``after`` differ from ``before`` bit for bit (a NaN payload or
    the sign of a zero counts; a NaN equals the same NaN)."""
    if before.numel() == 0:
        return 0
    if tuple(before.shape) != tuple(after.shape) or before.dtype != after.dtype:
        return before.numel()
    after = after.to(before.device)
    size = before.element_size()
    if has_int_dtype(size):  # one pass, no temporaries: the common case, no change
        try:
            # equal as integers of the same width is equal bit for bit
            same_size_int = int_dtype(size)
            if torch.equal(before.detach().view(same_size_int), after.detach().view(same_size_int)):
                return 0
        except RuntimeError:  # a dtype that cannot be viewed as an integer: count below
            pass
    return int((_bits(before) != _bits(after)).any(dim=1).sum())


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bytes of ``t``'s elements, one row per element."""
    flat = t.detach().reshape(-1)
    if flat.stride() != (1,):  # a strided view; or one element, which may keep any stride
        flat = torch.empty_strided((flat.numel(),), (1,), dtype=flat.dtype,
                                   device=flat.device).copy_(flat)
    return flat.view(torch.uint8).view(flat.numel(), flat.element_size())


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
