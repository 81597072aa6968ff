"""Observe Triton's autotuner and find atomics in kernels, for the atomics x autotune suite.

The autotuner benchmarks every config on the caller's buffers (FIELD-NOTES section 3): a
kernel that accumulates with atomics returns garbage on the first call for a new key
unless its outputs are in ``reset_to_zero``, and ``reset_to_zero`` sets them to 0, not
to the caller's initial value (-inf for ``atomic_max``). :func:`observe_autotuning`
wraps ``Autotuner.run`` to record each tuned launch (configs benchmarked, cache hit,
reset/restore lists, the caller's values of the reset buffers), can clear each
autotuner's cache the first time it is seen (so the first call really tunes), can force
one config, and can replace the benchmark timer with a CPU one so every config really
runs under the interpreter, where Triton's own timer needs a GPU driver.
"""
from __future__ import annotations

import contextlib
import inspect
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from triton.runtime.autotuner import Autotuner, Config
from triton.runtime.jit import JITFunction

#: Atomics whose repetition changes the result: a buffer they update must be reset (or
#: restored) before each config. max/min/and/or are idempotent: repeating them is
#: harmless as long as the buffer starts from the caller's value.
ACCUMULATING = ("add", "sub", "xchg", "cas", "xor")
_ATOMIC_CALL = re.compile(r"\batomic_(\w+)\s*\(\s*(?:[A-Za-z_]\w*\s*=\s*)?([A-Za-z_]\w*)")


def base_function(kernel: Any):
    """The plain Python function under a JITFunction, Heuristics or Autotuner chain."""
    fn = kernel
    while not inspect.isfunction(fn):
        fn = fn.fn
    return fn


def _jit_of(kernel: Any) -> JITFunction | None:
    fn = kernel
    while fn is not None and not isinstance(fn, JITFunction):
        fn = getattr(fn, "fn", None)
    return fn


def atomic_updates(kernel: Any) -> dict[str, set[str]]:
    """{atomic op: names the kernel's source passes as its pointer} for the kernel and the
    JIT helpers it calls (read from source: an atomic inside a branch the constexprs
    switch off still counts). Names are the first identifier of the pointer expression
    (``DW`` in ``tl.atomic_add(DW + cols, ...)``)."""
    found: dict[str, set[str]] = {}
    seen: set[int] = set()

    def scan(fn) -> None:
        if id(fn) in seen:
            return
        seen.add(id(fn))
        try:
            src = inspect.getsource(fn)
        except (OSError, TypeError):
            return
        for op, name in _ATOMIC_CALL.findall(src):
            found.setdefault(op, set()).add(name)
        for name in fn.__code__.co_names:
            helper = fn.__globals__.get(name)
            if isinstance(helper, JITFunction):
                scan(helper.fn)

    scan(base_function(kernel))
    return found


@dataclass
class TunedCall:
    """One ``Autotuner.run``: what the autotuner was told and what it did."""

    kernel: str
    configs: list[Config]
    reset_to_zero: list[str]
    restore_value: list[str]
    user_pre_hook: bool
    atomics: dict[str, set[str]]
    arg_names: tuple[str, ...] = ()
    benchmarked: list[Config] = field(default_factory=list)
    #: benchmarked configs the target refused (Triton times them as inf: out of shared
    #: memory or registers for these arguments): the autotuner never picks them
    refused: list[Config] = field(default_factory=list)
    nonzero_resets: dict[str, str] = field(default_factory=dict)  # name -> example value

    @property
    def tunes(self) -> bool:
        return len(self.configs) > 1

    @property
    def cache_hit(self) -> bool:
        return self.tunes and not self.benchmarked

    def describe(self) -> str:
        return (f"{self.kernel}: {len(self.configs)} configs ({len(self.benchmarked)} "
                f"benchmarked), reset_to_zero={self.reset_to_zero}, restore_value="
                f"{self.restore_value}, pre_hook={'yes' if self.user_pre_hook else 'no'}, "
                f"atomics={ {k: sorted(v) for k, v in self.atomics.items()} }")

    def hazards(self) -> list[str]:
        """What the autotuner will do to the caller's buffers: clobber a non-zero initial
        value, or let every benchmarked config accumulate into an output."""
        if not self.tunes or self.user_pre_hook:
            return []  # a single config is never benchmarked; a pre_hook is the kernel's call
        out = [f"{self.kernel}: autotuned with reset_to_zero={self.reset_to_zero}, but the "
               f"caller passed '{name}' holding {value}: the autotuner sets it to 0 before "
               f"each config and after tuning, not back to that value; keep it out of "
               f"reset_to_zero and put it in restore_value, or re-initialize it in a pre_hook"
               for name, value in self.nonzero_resets.items()]
        for op in ACCUMULATING:
            for name in sorted(self.atomics.get(op, ())):
                if name in self.arg_names and name not in self.reset_to_zero + self.restore_value:
                    out.append(f"{self.kernel}: autotuned over {len(self.configs)} configs and "
                               f"updates '{name}' with tl.atomic_{op}, but '{name}' is in "
                               f"neither reset_to_zero nor restore_value: every benchmarked "
                               f"config adds into the caller's buffer")
        return out


def cpu_do_bench(kernel_call, quantiles=None, **_):
    """The autotuner's timer on a CPU: runs the config once, timed with perf_counter (ms)."""
    start = time.perf_counter()
    kernel_call()
    ms = (time.perf_counter() - start) * 1e3
    return [ms] * len(quantiles) if quantiles else ms


def _first_nonzero(t: Any) -> str | None:
    if not isinstance(t, torch.Tensor) or t.device.type == "meta" or t.numel() == 0:
        return None
    nz = t.reshape(-1) != 0
    if not bool(nz.any()):
        return None
    return repr(t.reshape(-1)[int(torch.nonzero(nz)[0])].item())


@contextlib.contextmanager
def observe_autotuning(*, fresh: bool = True, cpu_bench: bool = False,
                       force: dict[str, Config] | None = None):
    """Record every ``Autotuner.run`` inside the block into the yielded list.

    ``fresh``: clear each autotuner's cache the first time the block sees it, so the
    first call for a key tunes. ``cpu_bench``: time configs with :func:`cpu_do_bench`
    (every config runs). ``force``: {kernel name: config} runs that kernel with that
    config alone (no tuning)."""
    calls: list[TunedCall] = []
    seen: set[int] = set()
    original_run, original_bench = Autotuner.run, Autotuner._bench
    original_do_bench = Autotuner.__dict__["do_bench"]
    active: list[TunedCall] = []

    def run(self, *args, **kwargs):
        named = {**dict(zip(self.arg_names, args)), **kwargs}
        name = base_function(self).__name__
        call = TunedCall(
            kernel=name, configs=list(self.configs), reset_to_zero=list(self.reset_to_zero),
            restore_value=list(self.restore_value),
            user_pre_hook=self.user_defined_pre_hook or any(c.pre_hook for c in self.configs),
            atomics=atomic_updates(self), arg_names=tuple(self.arg_names),
            nonzero_resets={n: v for n in self.reset_to_zero
                            if (v := _first_nonzero(named.get(n))) is not None})
        calls.append(call)
        if fresh and id(self) not in seen:
            self.cache.clear()
        seen.add(id(self))
        saved = self.configs
        if force and name in force:
            self.configs = [force[name]]
        active.append(call)
        try:
            return original_run(self, *args, **kwargs)
        finally:
            active.pop()
            self.configs = saved

    def bench(self, *args, config, **meta):
        if active:
            active[-1].benchmarked.append(config)
        timing = original_bench(self, *args, config=config, **meta)
        first = timing[0] if isinstance(timing, (list, tuple)) else timing
        if active and isinstance(first, float) and math.isinf(first):
            active[-1].refused.append(config)
        return timing

    Autotuner.run, Autotuner._bench = run, bench
    if cpu_bench:  # a data descriptor wins over the cached_property's instance value
        Autotuner.do_bench = property(lambda self: cpu_do_bench)
    try:
        yield calls
    finally:
        Autotuner.run, Autotuner._bench = original_run, original_bench
        Autotuner.do_bench = original_do_bench


__all__ = ["TunedCall", "atomic_updates", "base_function", "cpu_do_bench",
           "observe_autotuning", "ACCUMULATING"]
