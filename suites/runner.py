"""Run a check target on a drawn case, in its mode, with poisoned and guarded outputs.

Inside :func:`poisoned_allocations`, every ``torch.empty``-family allocation (how
launchers allocate outputs) is filled with NaN, or a sentinel for integers, and followed
by a guard region holding the same poison. An output element the kernel never writes
stays NaN and fails the comparison; a store past the end of a buffer (an unmasked tail)
changes the guard and is reported on exit. Buffers made with zeros/full are untouched.
Buffers the implementation frees before returning are kept for the check only up to
:data:`RETAINED_BYTES` in total, so an autotuned call (Triton's benchmark allocates a
256 MB cache-flush buffer per config) does not hold every config's buffers at once.
"""
from __future__ import annotations

import contextlib
import inspect
import weakref

import torch

from triton_cts.execution.modes import InputRules, Mode, execute

def _largest_block_bytes() -> int:
    """The largest block any bundled profile lets a program hold (MAX_FUSED_SIZE)."""
    from triton_cts.profiles import load_profiles
    return max(p["launch.max_fused_size_bytes"] for p in load_profiles().values())


#: Guard after each buffer: at least as long as the buffer and one whole block of the
#: largest profile, so a store that overruns by up to one block lands in the guard
#: instead of corrupting other memory.
GUARD_BYTES = _largest_block_bytes()
_INT_SENTINEL = 0x5A5A5A5A5A5A5A5A
#: Bytes of guarded buffers (guards included) one call may keep alive for the exit check
#: after the implementation dropped them; past it, only buffers still referenced at exit
#: (the outputs) are checked. Without a bound, an autotuned library call kept every
#: benchmarked config's buffers, and Triton's 256 MB cache-flush buffer per config, alive
#: until it returned: 20 GiB per call, and device memory ran out for parallel workers.
RETAINED_BYTES = 256 << 20


class OutOfBoundsWrite(AssertionError):
    """A kernel wrote past the end of a buffer it was given."""


def poison_value(dtype: torch.dtype):
    if dtype.is_floating_point:
        return float("nan")
    if dtype == torch.bool:
        return True
    info = torch.iinfo(dtype)
    return (_INT_SENTINEL % (info.max + 1)) if info.min == 0 else (_INT_SENTINEL % info.max)


def _same_as_poison(t: torch.Tensor) -> torch.Tensor:
    if t.dtype.is_floating_point:
        return torch.isnan(t)
    return t == poison_value(t.dtype)


@contextlib.contextmanager
def poisoned_allocations():
    # (the buffer, or a weak reference to it past RETAINED_BYTES; elements in use; shape)
    guards: list[tuple[torch.Tensor | weakref.ref, int, tuple]] = []
    retained = 0
    originals = {name: getattr(torch, name) for name in ("empty", "empty_like")}
    original_new_empty = torch.Tensor.new_empty

    def guarded(shape, dtype, device):
        nonlocal retained
        numel = 1
        for d in shape:
            numel *= int(d)
        guard = max(numel, GUARD_BYTES // dtype.itemsize)
        buf = originals["empty"](numel + guard, dtype=dtype, device=device)
        buf.fill_(poison_value(dtype))
        size = buf.numel() * dtype.itemsize
        if retained + size <= RETAINED_BYTES:
            retained += size
            guards.append((buf, numel, tuple(shape)))
        else:  # the views handed out keep it alive as long as the caller holds them
            guards.append((weakref.ref(buf), numel, tuple(shape)))
        return buf[:numel].view(shape)

    def _shape(args):
        if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)):
            return tuple(args[0])
        return tuple(args)

    def empty(*args, dtype=None, device=None, layout=None, out=None, memory_format=None,
              **kw):
        if out is not None or layout not in (None, torch.strided) or kw.get("requires_grad") \
                or memory_format not in (None, torch.contiguous_format):
            return originals["empty"](*args, dtype=dtype, device=device, layout=layout, out=out,
                                      memory_format=memory_format, **kw)
        return guarded(_shape(args), dtype or torch.get_default_dtype(),
                       device or torch.get_default_device())

    def empty_like(t, *, dtype=None, device=None, layout=None, memory_format=None, **kw):
        dense = t.is_contiguous() or memory_format is torch.contiguous_format
        if not dense or layout not in (None, torch.strided) or kw.get("requires_grad") \
                or memory_format not in (None, torch.contiguous_format, torch.preserve_format):
            out = originals["empty_like"](t, dtype=dtype, device=device, layout=layout,
                                          memory_format=memory_format, **kw)
            return out.fill_(poison_value(out.dtype)) if out.numel() else out
        return guarded(tuple(t.shape), dtype or t.dtype, device or t.device)

    def new_empty(self, *size, dtype=None, device=None, **kw):
        if kw:
            return original_new_empty(self, *size, dtype=dtype, device=device, **kw)
        return guarded(_shape(size), dtype or self.dtype, device or self.device)

    torch.empty, torch.empty_like = empty, empty_like
    torch.Tensor.new_empty = new_empty
    try:
        yield
    finally:
        torch.empty, torch.empty_like = originals["empty"], originals["empty_like"]
        torch.Tensor.new_empty = original_new_empty
    for held, numel, shape in guards:
        buf = held() if isinstance(held, weakref.ref) else held
        if buf is None:
            continue  # freed by the implementation beyond the retention budget
        guard = buf[numel:]
        changed = int((~_same_as_poison(guard)).sum())
        if changed:
            raise OutOfBoundsWrite(
                f"a kernel wrote past the end of a {guard.dtype} buffer of shape {shape}: "
                f"{changed} of the {guard.numel()} guard elements after it changed")


def upcast(value):
    """Floating tensors to float64, for the reference."""
    if isinstance(value, torch.Tensor) and value.dtype.is_floating_point:
        return value.to(torch.float64)
    if isinstance(value, (tuple, list)):
        return type(value)(upcast(v) for v in value)
    return value


def clone_args(args):
    """Copies that keep each tensor's strides, gaps included (``clone`` compacts views
    with gaps, which would hide a kernel that ignores strides)."""
    from triton_cts.execution.modes import copy_with_layout
    return tuple(copy_with_layout(a, a.device) if isinstance(a, torch.Tensor) else a
                 for a in args)


def run_target(target, args: tuple, kwargs: dict, profile=None, poison: bool = True,
               side_stream: bool = False):
    """The implementation's outputs (device/interpreter) or captured launches (compile).
    ``profile`` overrides the target's (for derived profiles). An implementation that
    declines a dtype with :class:`UnsupportedDtypeError` (an atomic the profile lacks for
    it, say) makes the check not supported, with its message as the reason. In every
    mode, a call that changes a tensor argument the op does not write by definition
    (``OpSpec.mutates``) fails naming it (:func:`input_rules`). ``side_stream``: in device
    mode, the call runs on a new stream whose outputs are read after synchronizing only
    that stream (``execute``)."""
    import pytest
    from triton_cts.execution.input_checks import UnsupportedDtypeError
    from triton_cts.results.status import NOT_SUPPORTED, first_line

    fn = target.impl.load()
    profile = profile or target.profile
    ctx = poisoned_allocations() if poison and target.mode is not Mode.COMPILE \
        else contextlib.nullcontext()
    try:
        with ctx:
            # device mode copies the arguments onto the device for the call itself
            called = args if target.mode is Mode.DEVICE else clone_args(args)
            return execute(fn, target.mode, profile, called, kwargs,
                           takes_profile=target.impl.takes_profile(fn),
                           inputs=input_rules(target), side_stream=side_stream)
    except UnsupportedDtypeError as exc:
        pytest.skip(NOT_SUPPORTED + str(exc))
    except Exception as exc:
        if _device_memory_exhausted(exc):
            # the device is shared by every worker: out of memory says nothing of the kernel
            pytest.skip(f"{NOT_SUPPORTED}device memory exhausted ({first_line(str(exc))}); "
                        f"run with fewer -n workers")
        from triton_cts.execution.interpreter_defects import known_defect
        why = known_defect(exc) if target.mode is Mode.INTERPRETER else None
        if why is None:
            raise
        pytest.skip(NOT_SUPPORTED + why)


def _device_memory_exhausted(exc: BaseException) -> bool:
    """Whether ``exc`` says the device ran out of memory, not that a kernel is wrong:
    torch's allocator raises OutOfMemoryError; Triton's launcher raises a RuntimeError
    wrapping CUDA_ERROR_OUT_OF_MEMORY (or HIP's) when a module or launch no longer fits."""
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    if not isinstance(exc, RuntimeError):
        return False
    text = str(exc)
    return "Triton Error [" in text and "out of memory" in text


def input_rules(target) -> InputRules:
    """The arguments a call of ``target`` must leave unchanged: all but ``OpSpec.mutates``,
    named after the reference's parameters."""
    params = inspect.signature(target.op.reference).parameters.values()
    names = tuple(p.name for p in params
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    return InputRules(f"{target.op.name}[{target.impl.name}]", names, target.op.mutates)


#: Added to a case's seed for the values of a second call (any fixed offset will do).
SECOND_CALL_SEED = 0x2545F491


def other_values(target, case, kind: str = "normal"):
    """``case`` with other values: the same shape, dtype and layout, ``kind`` values from
    another seed, built into arguments as ``strategies.cases`` does. Normal values differ
    from any drawn case's almost surely (a resample of all -inf rows or of a few ties may
    not), and no correct implementation is near its bound on them."""
    from suites.strategies import build_case
    seed = (case.seed + SECOND_CALL_SEED) % 2**31
    return build_case(target.op, case.dtype, case.shape, kind, seed, case.layout)


def same_bits(a, b) -> bool:
    """Whether two outputs hold the same dtype, shape and bits."""
    from triton_cts.execution.modes import changed_elements
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
            and a.dtype == b.dtype and a.shape == b.shape and not changed_elements(a, b))


def reference_device(target) -> str:
    """Where a check's float64 work (the reference, the error models) runs: on the
    accelerator in device mode, on the CPU otherwise and for ops whose truth CUDA torch's
    float64 does not give (``OpSpec.reference_on_cpu``). On one CPU thread a worker's
    float64 attention backward at a few thousand keys took minutes of a device run; float64
    is IEEE arithmetic on either, only the order of a sum may differ (1e-16 relative)."""
    from triton_cts.execution import devices
    if (target.mode is Mode.DEVICE and target.op.reference_on_cpu is None
            and devices.available()):
        return devices.device_type()
    return "cpu"


def _float64_copy(value, device):
    """A copy on ``device`` keeping strides, floating tensors in float64."""
    from triton_cts.execution.modes import copy_with_layout
    if isinstance(value, torch.Tensor):
        copy = copy_with_layout(value, device)
        return copy.to(torch.float64) if copy.dtype.is_floating_point else copy
    if isinstance(value, (tuple, list)):
        return type(value)(_float64_copy(v, device) for v in value)
    return value


def reference_inputs(target, args: tuple, kwargs: dict, device: str = "cpu") -> tuple[tuple, dict]:
    """Float64 copies of the inputs on ``device``, for the reference and the error models."""
    return (tuple(_float64_copy(a, device) for a in args),
            {k: _float64_copy(v, device) for k, v in kwargs.items()})


def _on_cpu(value):
    from triton_cts.execution.modes import _to_cpu
    return _to_cpu(value)


def in_float64(target, args: tuple, kwargs: dict, compute, keep: bool = False):
    """``compute(*args64, **kwargs64)`` on float64 copies of the inputs where
    :func:`reference_device` says, its tensors returned on the CPU, or with ``keep`` left
    where they were computed (a comparison on the device then moves no float64 copy of a
    large output either way). Where the device has no room (every worker shares it), the
    CPU computes it instead."""
    device = reference_device(target)
    if device != "cpu":
        try:
            args64, kwargs64 = reference_inputs(target, args, kwargs, device)
            computed = compute(*args64, **kwargs64)
            return computed if keep else _on_cpu(computed)
        except torch.OutOfMemoryError:
            pass
        finally:
            args64 = kwargs64 = None
            from triton_cts.execution import devices
            devices.empty_cache()  # what the reference held is other workers' memory
    args64, kwargs64 = reference_inputs(target, args, kwargs)
    return _on_cpu(compute(*args64, **kwargs64))


def run_reference(target, args: tuple, kwargs: dict, keep: bool = False):
    return provided(target, in_float64(target, args, kwargs, target.op.reference, keep))


def torch_oracle(target, args: tuple, kwargs: dict):
    """A function giving the op's torch reference computed in the inputs' own dtype where
    the check runs (on the device in device mode, else on the CPU): what torch's own
    implementation returns for the same input, the second oracle of the tolerance policy
    (``triton_cts.ops.tolerances``). Called only when a check is out of its bound; None
    from it where torch cannot compute the op in that dtype there."""
    def compute():
        from triton_cts.execution.modes import _to_cpu, copy_with_layout
        from triton_cts.execution import devices
        device = devices.device_type() if target.mode is Mode.DEVICE else "cpu"
        moved = tuple(copy_with_layout(a, device) if isinstance(a, torch.Tensor) else a
                      for a in args)
        try:
            out = target.op.reference(*moved, **kwargs)
        except (RuntimeError, TypeError, NotImplementedError):
            return None  # e.g. no half-precision kernel of the op on this device
        return provided(target, _to_cpu(out))
    return compute


def error_scales(target, args: tuple, kwargs: dict, keep: bool = False):
    """Per-output atol multipliers from the op's error model, or None."""
    if target.op.error_scale is None:
        return None
    return provided(target, in_float64(target, args, kwargs,
                                       lambda *a, **k: as_tuple(target.op.error_scale(*a, **k)),
                                       keep))


def ambiguities(target, args: tuple, kwargs: dict):
    """Per-output gaps between equally right answers (``OpSpec.ambiguity``), or None."""
    if target.op.ambiguity is None:
        return None
    return provided(target, in_float64(target, args, kwargs,
                                       lambda *a, **k: as_tuple(target.op.ambiguity(*a, **k))))


def input_dtype(args) -> torch.dtype:
    """The dtype of the first floating tensor argument (the drawn input's), float32 if none."""
    return next((a.dtype for a in args if isinstance(a, torch.Tensor)
                 and a.dtype.is_floating_point), torch.float32)


def allowances(target, args: tuple, kwargs: dict, ambiguity: bool = True, scale: float = 1.0,
               keep: bool = False):
    """Per-output additions to atol, or None: the op's conditioning (``OpSpec.conditioning``:
    the error any correct implementation may make at these inputs, given the input dtype),
    times ``scale`` (2 where two implementation outputs are compared), plus, with
    ``ambiguity``, the gap between equally right answers (``OpSpec.ambiguity``)."""
    if target.op.conditioning is None and not (ambiguity and target.op.ambiguity is not None):
        return None
    dtype = input_dtype(args)

    def compute(*args64, **kwargs64):
        parts = []
        if target.op.conditioning is not None:
            cond = as_tuple(target.op.conditioning(*args64, dtype=dtype, **kwargs64))
            parts.append(tuple(None if c is None else c * scale for c in cond))
        if ambiguity and target.op.ambiguity is not None:
            parts.append(as_tuple(target.op.ambiguity(*args64, **kwargs64)))
        return tuple(None if all(p[i] is None for p in parts)
                     else sum(p[i] for p in parts if p[i] is not None)
                     for i in range(len(parts[0])))
    return provided(target, in_float64(target, args, kwargs, compute, keep))


def provided(target, values):
    """The op's outputs the implementation computes (``Implementation.outputs``)."""
    if target.impl.outputs is None:
        return values
    values = as_tuple(values)
    return tuple(values[i] for i in target.impl.outputs)


def as_tuple(value):
    return (value,) if isinstance(value, torch.Tensor) else tuple(value)


def value_kinds(target, dtype, record_property, kinds=None) -> tuple[str, ...]:
    """``kinds`` (default: all value kinds), less those a known interpreter defect makes
    unjudgeable; each one left out is recorded on the check so the report says what was
    not tested."""
    from suites.strategies import VALUE_KINDS
    from triton_cts.execution import interpreter_defects

    kinds = VALUE_KINDS if kinds is None else kinds
    if target.mode is not Mode.INTERPRETER:
        return kinds
    excluded = interpreter_defects.excluded_value_kinds(dtype)
    for kind, why in excluded.items():
        if kind in kinds:
            record_property(f"values '{kind}' not drawn", why)
    return tuple(k for k in kinds if k not in excluded)


def record_inputs(record_property, target, case, profile, kinds, boundaries) -> None:
    """Record on the check what ``case`` met, beside what the check offers, for the
    report's input coverage (``triton_cts.results.input_coverage``): its value class, its
    layout and the boundaries its row length sits at under ``profile`` (as the values and
    the view really are: ``effective_kind``, ``effective_layout``); the classes ``kinds``,
    the layouts an input of the op's dims can have, and ``boundaries`` (names of
    ``boundary_labels``)."""
    from suites.strategies import (LAYOUTS, boundary_labels, effective_kind,
                                   effective_layout)
    from triton_cts.results import input_coverage
    met = {"value_classes": [effective_kind(case.kind, case.dtype)],
           "layouts": [effective_layout(case.shape, case.layout)],
           "boundaries": boundary_labels(case.shape[-1], profile, case.dtype)
           if case.shape else ()}
    layouts = LAYOUTS if target.op.max_ndim >= 2 else tuple(l for l in LAYOUTS
                                                            if l != "transposed")
    offered = {"value_classes": [effective_kind(k, case.dtype) for k in kinds],
               "layouts": layouts, "boundaries": boundaries}
    record_property(input_coverage.PROPERTY, input_coverage.entry(met, offered))
