"""Interpreted launches are run once per process: the same launch again replays its writes.

Under the interpreter a kernel launch is a pure function of the kernel, its constexprs and
scalar arguments, the grid and the bytes of every buffer it is given: it runs each program
in turn on the CPU and writes its results into those buffers. Checks under profiles whose
constants give the same launch (every GPU profile with the same block sizes, and the
derived profiles with tiny constants, drawn alike for every profile by a derandomized
hypothesis run) repeat it bit for bit, and the interpreter is nine tenths of an
interpreter check's time. So the first such launch in a process runs; for each later one
with the same key, the bytes the first left in every buffer it changed are written into
the new buffers instead of interpreting again.

The key holds everything the interpreter reads: the kernel (the function object, so a
fresh or patched kernel never matches, and Triton's cache key of its source and the JIT
functions it calls), the grid, every argument that is not a tensor, and for each tensor
its dtype, sizes, strides, offset, alignment, which arguments share a buffer, and a
digest of every byte of the buffer (the guard regions and poison of the suites' outputs
included). A launch whose arguments hold anything else, or that raises, is not kept.
Observers of launches (grid checks, launch coverage, autotune probes) still see every
launch: only the interpretation is skipped.

``TRITON_CTS_LAUNCH_MEMO_MB`` bounds the bytes kept per process (default
:data:`DEFAULT_MB`, least recently used dropped first); 0 turns replay off.
"""
from __future__ import annotations

import hashlib
import os
import time
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy
import torch

#: Bytes (in MiB) of replayable writes one process keeps by default.
DEFAULT_MB = 256
#: Argument types hashed by value.
_SCALARS = (bool, int, float, str, type(None), torch.dtype)


@dataclass
class MemoStats:
    """What replay did in this process (for ``python -m`` reports and tests)."""

    runs: int = 0          # launches interpreted and kept
    replays: int = 0       # launches replayed
    uncached: int = 0      # launches interpreted and not kept (arguments not hashable, error)
    seconds_run: float = 0.0       # CPU seconds interpreting the kept launches
    seconds_saved: float = 0.0     # CPU seconds of the replayed launches. first runs
    by_kernel: dict = field(default_factory=dict)  # kernel name -> [runs, replays]


def budget_bytes() -> int:
    raw = os.environ.get("TRITON_CTS_LAUNCH_MEMO_MB", "")
    try:
        mb = float(raw) if raw.strip() else DEFAULT_MB
    except ValueError:
        raise ValueError(f"TRITON_CTS_LAUNCH_MEMO_MB={raw!r}: not a number of MiB "
                         f"(0 turns replay of interpreted launches off)") from None
    return max(0, int(mb * (1 << 20)))


class _Unhashable(Exception):
    """An argument the key cannot hold: the launch is interpreted and not kept."""


def _kernel_token(kernel) -> tuple:
    """The kernel's identity: the object (kept alive by the entry) and, for a JIT
    function, Triton's cache key over its source and the JIT functions it calls."""
    try:
        source = getattr(kernel, "cache_key", None)
    except Exception:  # a kernel whose dependencies Triton cannot resolve
        source = None
    fn = getattr(kernel, "fn", kernel)
    return (id(kernel), getattr(fn, "__module__", None), getattr(fn, "__qualname__", None),
            source if isinstance(source, str) else None)


def _storage_bytes(t: torch.Tensor) -> numpy.ndarray:
    """The whole buffer behind ``t`` as bytes (a view, not a copy)."""
    storage = t.untyped_storage()
    if storage.nbytes() == 0:
        return numpy.empty(0, dtype=numpy.uint8)
    whole = torch.empty(0, dtype=torch.uint8, device=t.device)
    whole.set_(storage, 0, (storage.nbytes(),), (1,))
    return whole.numpy()


class LaunchMemo:
    """The per-process table of interpreted launches (see the module docstring)."""

    def __init__(self, budget: int | None = None):
        self.budget = budget_bytes() if budget is None else budget
        self.used = 0
        self.entries: OrderedDict[bytes, tuple] = OrderedDict()
        self.kernels: dict[int, object] = {}   # keeps keyed kernels alive: ids stay unique
        self.stats = MemoStats()

    # ---- the key ----------------------------------------------------------------------
    def _describe(self, value, buffers: dict, parts: list) -> None:
        if isinstance(value, torch.Tensor):
            if value.device.type != "cpu" or value.is_meta:
                raise _Unhashable("a tensor not on the CPU")
            storage = value.untyped_storage()
            ptr = storage.data_ptr()
            if ptr not in buffers:
                buffers[ptr] = value
            index = list(buffers).index(ptr)
            parts.append(("T", str(value.dtype), tuple(value.shape), tuple(value.stride()),
                          value.storage_offset(), index, value.data_ptr() % 16))
        elif hasattr(value, "base") and hasattr(value, "dtype") \
                and isinstance(getattr(value, "base"), torch.Tensor):  # TensorWrapper
            parts.append(("W", str(value.dtype)))
            self._describe(value.base, buffers, parts)
        elif isinstance(value, _SCALARS):
            parts.append((type(value).__name__, value))
        elif isinstance(value, (tuple, list)):
            parts.append(("(", len(value)))
            for v in value:
                self._describe(v, buffers, parts)
        elif type(value).__module__.startswith("triton.language") and hasattr(value, "value"):
            self._describe(value.value, buffers, parts)  # tl.constexpr
        elif type(value).__module__.startswith("triton.language") and hasattr(value, "name"):
            parts.append(("tl.dtype", str(value)))
        else:
            raise _Unhashable(type(value).__name__)

    def key(self, kernel, arg_names, args, kwargs, grid) -> tuple[bytes, list] | None:
        """(key, the distinct buffers in argument order), or None where an argument cannot
        be hashed."""
        buffers: dict[int, torch.Tensor] = {}
        parts: list = [_kernel_token(kernel), tuple(grid)]
        kept = {k: v for k, v in kwargs.items() if k in arg_names}
        try:
            for value in args:
                self._describe(value, buffers, parts)
            for name in sorted(kept):
                parts.append(("K", name))
                self._describe(kept[name], buffers, parts)
        except _Unhashable:
            return None
        digest = hashlib.blake2b(repr(parts).encode(), digest_size=32)
        views = [_storage_bytes(t) for t in buffers.values()]
        for v in views:
            digest.update(v.nbytes.to_bytes(8, "little"))
            digest.update(v.data)
        return digest.digest(), views

    # ---- running or replaying ---------------------------------------------------------
    def run(self, kernel, arg_names, args, kwargs, grid, interpret):
        """``interpret()``, or the replay of an identical earlier launch."""
        if self.budget <= 0:
            return interpret()
        name = getattr(getattr(kernel, "fn", kernel), "__name__", repr(kernel))
        counts = self.stats.by_kernel.setdefault(name, [0, 0])
        keyed = self.key(kernel, arg_names, args, kwargs, grid)
        if keyed is None:
            self.stats.uncached += 1
            return interpret()
        key, views = keyed
        entry = self.entries.get(key)
        if entry is not None:
            self.entries.move_to_end(key)
            writes, seconds = entry[0], entry[1]
            for index, data in writes:
                views[index][:] = data
            self.stats.replays += 1
            self.stats.seconds_saved += seconds
            counts[1] += 1
            return None
        before = [v.copy() for v in views]
        start = time.process_time()
        result = interpret()
        seconds = time.process_time() - start
        writes = [(i, after.copy()) for i, (b, after) in enumerate(zip(before, views))
                  if not numpy.array_equal(b, after)]
        size = sum(w.nbytes for _, w in writes) + 256
        self.stats.runs += 1
        self.stats.seconds_run += seconds
        counts[0] += 1
        if size <= self.budget:
            self.kernels[id(kernel)] = kernel
            self.entries[key] = (writes, seconds, size)
            self.used += size
            while self.used > self.budget:
                _, (_, _, dropped) = self.entries.popitem(last=False)
                self.used -= dropped
        return result


_MEMO: LaunchMemo | None = None


def memo() -> LaunchMemo:
    global _MEMO
    if _MEMO is None:
        _MEMO = LaunchMemo()
    return _MEMO
