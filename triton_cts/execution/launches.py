"""Observe kernel launches in every mode, and route JIT kernels to the interpreter.

Triton fixes a kernel's mode when ``@triton.jit`` runs (``TRITON_INTERPRET`` at import),
so one process could not serve both compile and interpreter checks. This module patches
``JITFunction`` once: while Triton's interpreter knob is on (``interpreted()``), a JIT
kernel's launch and a JIT helper's call (``tl.cdiv``, ``tl.sum``, a kernel's own helpers)
go through an ``InterpretedFunction`` of the same Python function; with the knob off they
compile as usual. ``triton.jit`` is patched too, to make a ``JITFunction`` even inside the
block (Triton's makes an ``InterpretedFunction``, interpreted for good, while the knob is
on). Any implementation, ours or a third party's, runs in both modes from one import.

``record_launches`` wraps ``run`` of ``JITFunction`` and ``InterpretedFunction`` (the one
path every ``kernel[grid](...)`` call takes, autotuned and heuristic kernels included; a
launcher that calls a compiled kernel directly reports through :func:`note_launch`)
and records the kernel, its arguments and the grid, a callable grid evaluated on the
bound arguments as Triton does. ``capture_launches`` records the same without launching:
compile mode uses it to learn the exact specializations a launcher produces. Launches of
an already compiled kernel (``compiled[grid](*args)``: libraries such as FlagGems cache
the kernel their first launch compiled and launch it directly afterwards) are recorded
too, and not made while capturing.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import types
from dataclasses import dataclass, field, replace
from typing import Any

import triton
import triton.language as tl
import triton.runtime.jit
from triton import knobs
from triton.runtime.errors import InterpreterError
from triton.runtime import interpreter as triton_interpreter
from triton.runtime.interpreter import InterpretedFunction, _patch_lang
from triton.runtime.jit import JITFunction

from triton_cts.execution import launch_memo

try:
    from triton.compiler.compiler import CompiledKernel
except ImportError:  # pragma: no cover - a Triton without it
    CompiledKernel = None


@dataclass
class Launch:
    kernel: Any                     # the JITFunction / InterpretedFunction
    args: tuple
    kwargs: dict
    grid: tuple[int, int, int] = (1, 1, 1)
    launched: bool = field(default=True)

    @property
    def name(self) -> str:
        fn = getattr(self.kernel, "fn", None)
        return getattr(fn, "__name__", repr(self.kernel))


def _grid_of(kernel, args, kwargs, grid) -> tuple[int, int, int]:
    if callable(grid):
        sig = inspect.signature(kernel.fn)
        bound = sig.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in sig.parameters})
        bound.apply_defaults()
        meta = dict(bound.arguments)
        meta.update(kwargs)
        grid = grid(meta)
    dims = [int(g) for g in grid]
    if not 1 <= len(dims) <= 3:
        raise ValueError(f"grid {tuple(grid)!r} of {getattr(kernel, 'fn', kernel)!r} must have 1 to 3 dims")
    return tuple(dims + [1] * (3 - len(dims)))


_active: list[list[Launch]] = []
_capturing = False
#: (warmup, rep) in ms for the reference autotuners' device timer, or None for
#: ``triton.testing.do_bench``'s defaults (25, 100). See :func:`brief_tuning`.
_tuning_ms: tuple[float, float] | None = None


_interpreted_twins: dict[int, InterpretedFunction] = {}


def _twin(jit_fn: JITFunction) -> InterpretedFunction:
    """The interpreted counterpart of a JIT function (cached)."""
    twin = _interpreted_twins.get(id(jit_fn))
    if twin is None:
        twin = _interpreted_twins[id(jit_fn)] = InterpretedFunction(jit_fn.fn)
    return twin


#: Launches noted in this process, by either path: a launcher replaying recorded launches
#: (``kernels/fast_launch.py``) tells by it whether any launch of a call took another path
noted = 0


def note_launch(kernel, args, kwargs, grid) -> None:
    """Record a launch in every active log (no-op when none is): the one entry point for
    ``run`` below and for launchers that call a compiled kernel directly
    (``kernels/fast_launch.py``)."""
    global noted
    noted += 1
    if _active:
        launch = Launch(kernel, args, dict(kwargs), _grid_of(kernel, args, kwargs, grid),
                        launched=not _capturing)
        for log in _active:
            log.append(launch)


def _make_run(original, cls):
    def run(self, *args, grid, warmup, **kwargs):
        if not warmup:
            note_launch(self, args, kwargs, grid)
        if _capturing:
            return None
        if cls is JITFunction and knobs.runtime.interpret:
            return _interpret(self, _twin(self), args, kwargs, grid, warmup)
        if cls is InterpretedFunction:
            return _interpret(self, self, args, kwargs, grid, warmup)
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)
    return functools.wraps(original)(run)


def _interpret(kernel, interpreted: InterpretedFunction, args, kwargs, grid, warmup):
    """Run ``interpreted`` on the CPU, or replay the same launch made earlier in this
    process (:mod:`~triton_cts.execution.launch_memo`)."""
    def interpret():
        with _interpreter_language():
            return _ORIGINAL_RUN[InterpretedFunction](interpreted, *args, grid=grid,
                                                      warmup=warmup, **kwargs)
    if warmup or interpreted.pre_run_hooks:
        return interpret()
    dims = _grid_of(interpreted, args, kwargs, grid)
    return launch_memo.memo().run(kernel, interpreted.arg_names, args, kwargs, dims, interpret)


def _language_patched(fn) -> bool:
    """Whether every ``triton.language`` module ``fn`` sees is already patched for the
    interpreter (the interpreter replaces each builtin with a plain wrapper)."""
    langs = [v for v in fn.__globals__.values() if v is tl or v is tl.core]
    return bool(langs) and all(not tl.core.is_builtin(lang.program_id) for lang in langs)


#: Stands in for a function whose globals hold ``tl`` and ``tl.core``: the modules kernels
#: and Triton's own helpers (``tl.sum``, ``tl.cdiv``) reach the language through.
_BOTH_LANGUAGES = types.SimpleNamespace(__globals__={"tl": tl, "core": tl.core})


@contextlib.contextmanager
def _interpreter_language():
    """``tl`` and ``tl.core`` patched for the interpreter for a whole kernel run, so the
    JIT helpers it calls (every program, every call) find them patched instead of
    patching and restoring the language each time (a fifth of the interpreter suites'
    time went into that)."""
    if _language_patched(_BOTH_LANGUAGES):
        yield
        return
    scope = _patch_lang(_BOTH_LANGUAGES)
    try:
        yield
    finally:
        scope.restore()


def _index_squeezed(original):
    """Triton's interpreter patches ``tl.tensor.__index__`` (a scalar tensor as a loop
    bound or index); up to Triton 3.6 it does so with ``int(data)`` on the tensor's
    one-element array, which numpy >= 2.4 refuses ("only 0-dimensional arrays can be
    converted to Python scalars"), so every kernel looping over a tensor-valued range
    failed under the interpreter there (H100 host: triton 3.6, numpy 2.5.2). Later Triton
    squeezes the array first; this does the same after Triton's patch, in its scope."""
    def patch(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))
    return functools.wraps(original)(patch)


def _make_call(original):
    def __call__(self, *args, **kwargs):
        if not knobs.runtime.interpret:
            return original(self, *args, **kwargs)
        twin = _twin(self)
        if _language_patched(twin.fn):  # inside an interpreted kernel run
            try:
                return twin.rewrite()(*args, **kwargs)
            except Exception as exc:
                raise InterpreterError(repr(exc)) from exc
        # InterpretedFunction.__call__ patches triton.language for the interpreter and
        # never restores it, which breaks later compiles in this process: restore here.
        scope = _patch_lang(twin.fn)
        try:
            return twin.rewrite()(*args, **kwargs)
        except Exception as exc:
            raise InterpreterError(repr(exc)) from exc
        finally:
            scope.restore()
    return functools.wraps(original)(__call__)


def _make_getitem(original):
    """``compiled[grid]``: record the launch its runner makes (the JIT function it was
    compiled from, the args, the first three grid dims); while capturing, launch nothing."""
    def __getitem__(self, grid):
        if not _active:
            return original(self, grid)
        dims = tuple(int(g) for g in tuple(grid)[:3])
        kernel = getattr(getattr(self, "src", None), "fn", None) or self
        launch_now = None if _capturing else original(self, grid)

        def runner(*args, **kwargs):
            launch = Launch(kernel, args, dict(kwargs), dims + (1,) * (3 - len(dims)),
                            launched=launch_now is not None)
            for log in _active:
                log.append(launch)
            return None if launch_now is None else launch_now(*args, **kwargs)
        return runner
    return functools.wraps(original)(__getitem__)


def _jit_compiled(original):
    """``triton.jit`` that makes a ``JITFunction`` inside :func:`interpreted` too. Triton's
    decorator makes an ``InterpretedFunction`` while the interpreter knob is on, and that
    one is interpreted for good: a kernel module first imported during an interpreter
    check then ran on the interpreter in device mode as well (its verdicts were the
    interpreter's). A ``JITFunction`` is routed to the interpreter per launch instead."""
    def decorate(decorator, fn):
        with interpreted(False):
            return decorator(fn)

    @functools.wraps(original)
    def jit(fn=None, **options):
        if fn is not None:
            return decorate(functools.partial(original, **options), fn)
        return functools.partial(decorate, original(**options))
    return jit


def _without_overflow_sanitizer(builder) -> None:
    """Turn off the interpreter's int32 overflow sanitizer, which costs and detects
    nothing there: for every integer add, sub and mul it builds the int64 result and the
    range test, but the assert it feeds returns without checking unless the builder's
    ``options.debug`` is set, and the interpreter's builder is made with
    ``InterpreterOptions()``, whose ``debug`` is False whatever ``TRITON_DEBUG`` says
    (``triton/runtime/interpreter.py`` and ``semantic.device_assert``, Triton 3.6 and
    3.9: reports/published/FINDINGS.md, F28; tests/test_interpreter_defects.py keeps that
    true)."""
    options = getattr(builder, "options", None)
    if getattr(options, "sanitize_overflow", False) and not getattr(options, "debug", True):
        builder.options = replace(options, sanitize_overflow=False)


_ORIGINAL_RUN = {cls: cls.run for cls in (JITFunction, InterpretedFunction)}
if not getattr(JITFunction.run, "_triton_cts_patched", False):
    for _cls, _orig in _ORIGINAL_RUN.items():
        _cls.run = _make_run(_orig, _cls)
        _cls.run._triton_cts_patched = True
    JITFunction.__call__ = _make_call(JITFunction.__call__)
    triton.jit = triton.runtime.jit.jit = _jit_compiled(triton.runtime.jit.jit)
    triton_interpreter._patch_lang_tensor = _index_squeezed(triton_interpreter._patch_lang_tensor)
    _without_overflow_sanitizer(getattr(triton_interpreter, "interpreter_builder", None))
    if CompiledKernel is not None:
        CompiledKernel.__getitem__ = _make_getitem(CompiledKernel.__getitem__)


@contextlib.contextmanager
def interpreted(on: bool = True):
    """Run every Triton kernel launched inside the block under the interpreter."""
    old = knobs.runtime.interpret
    knobs.runtime.interpret = on
    try:
        yield
    finally:
        knobs.runtime.interpret = old


@contextlib.contextmanager
def record_launches():
    """Collect every launch made inside the block (launches still run)."""
    log: list[Launch] = []
    _active.append(log)
    try:
        yield log
    finally:  # by identity: nested logs holding the same launches compare equal
        _active[:] = [other for other in _active if other is not log]


@contextlib.contextmanager
def capture_launches():
    """Collect every launch made inside the block without running any kernel."""
    global _capturing
    previous = _capturing
    _capturing = True
    try:
        with record_launches() as log:
            yield log
    finally:
        _capturing = previous


def capturing() -> bool:
    return _capturing


#: Brief tuning: each config is timed for about this long (warmup, rep in ms), still
#: over several launches on the caller's buffers.
BRIEF_TUNING_MS = (1.0, 3.0)


def brief_tuning(on: bool = True) -> None:
    """Time the reference autotuners' configs briefly (:data:`BRIEF_TUNING_MS`) instead
    of with ``do_bench``'s 125 ms a config. The suites check answers, not speed: every
    config still runs several times on the caller's buffers (what the autotune checks
    need), only the pick may be a worse one. On a new shape the fused linear
    cross-entropy tunes 3-4 matmuls of 10 configs: 5 s a call with full timing."""
    global _tuning_ms
    _tuning_ms = BRIEF_TUNING_MS if on else None


def autotune_timer(kernel_call, quantiles=None, **kwargs):
    """The ``do_bench`` of the reference kernels' autotuners: times a config on a device
    (briefly after :func:`brief_tuning`); with nothing to time (interpreted, or launches
    captured for compile mode) it runs the config once, so that every config is still
    launched."""
    if knobs.runtime.interpret or capturing():
        kernel_call()
        return [0.0] * len(quantiles) if quantiles else 0.0
    import triton.testing
    if _tuning_ms is not None:
        kwargs = {**kwargs, "warmup": _tuning_ms[0], "rep": _tuning_ms[1]}
    return triton.testing.do_bench(kernel_call, quantiles=quantiles, **kwargs)
