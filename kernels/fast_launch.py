"""Launching an already compiled kernel without Triton's per-call binding.

``kernel[grid](*args, **meta)`` binds and specializes every argument, builds and hashes a
cache key and checks the kernel's globals on every call: 17-67 us a launch on an H100
host (benchmarks/results/h100.jsonl, experiment "h100-triton3.6-launch-overhead"), more
than the kernels of a small layer norm take. :func:`launch` pays that once per specialization: the first call
goes through Triton (which compiles, or finds the kernel in its cache) and keeps the
compiled kernel under a key of what Triton specializes on: each tensor's dtype and
16-byte alignment, each integer's class (1, a multiple of 16, 64-bit), the other
arguments' types and every constexpr and launch option. A later call with the same key
calls the compiled kernel directly, with the constexprs in signature order.

An autotuned kernel goes through :func:`tuned_launch`: the autotuner's pick for a key is
kept after its first call, and later calls launch the picked config the same way.

Triton's own path is kept wherever the shortcut could differ from it: in the interpreter,
while launches are captured for cross-compilation, under a launch hook (profilers), for
callable grids (outside :func:`tuned_launch`) and argument types the key does not model.
Launches the suites record (launch coverage, grid checks) are recorded on both paths
alike. ``TRITON_CTS_DIRECT_LAUNCH=0`` turns the shortcut off (every launch
through Triton), to tell whether a result depends on it.
"""
from __future__ import annotations

import functools
import inspect
import os
import threading
from contextlib import contextmanager
from operator import itemgetter

import torch
from triton import knobs
from triton.runtime.autotuner import Heuristics
from triton.runtime.driver import driver
from triton.runtime.jit import JITFunction

from triton_cts.execution import launches
from triton_cts.profiles import Profile

try:
    from triton.compiler.compiler import CompiledKernel
except ImportError:  # pragma: no cover - a Triton without it
    CompiledKernel = None
try:
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - a Triton without host tensor descriptors
    TensorDescriptor = None

#: Whether launches may skip Triton's path (``TRITON_CTS_DIRECT_LAUNCH=0``: never).
ENABLED = os.environ.get("TRITON_CTS_DIRECT_LAUNCH", "1").strip() != "0"
#: (kernel, device, argument key, constexprs and options) -> (compiled kernel, the
#: constexpr values that follow the positional arguments, in signature order)
_PLANS: dict = {}
#: Compiled variants kept at most, over all kernels: launchers called with ever new
#: alignments or integer classes cannot grow the table without bound (past it, new
#: specializations take Triton's path).
MAX_PLANS = 4096


def _hooked() -> bool:
    """Whether a launch hook is set (Triton keeps an empty HookChain where none is)."""
    hook = knobs.runtime.launch_enter_hook
    return hook is not None and bool(getattr(hook, "calls", True))


_TENSOR = torch.Tensor


def _argument_key(args) -> tuple | None:
    """What Triton specializes a call's positional arguments on, or None for a type the
    key does not model (Triton's own path is taken). One flat tuple, built on every
    launch: a tensor adds its dtype and whether its pointer is 16-byte aligned (a dtype
    only ever starts a tensor's pair, so the flat form is unambiguous); an int adds its
    class: -1 for the value 1, else (a multiple of 16) + 2 * (64-bit); a host tensor
    descriptor its dtype, tile shape and padding."""
    key = []
    push = key.append
    for a in args:
        kind = type(a)
        if kind is _TENSOR or (kind is not int and kind is not float and a is not None
                               and isinstance(a, _TENSOR)):
            push(a.dtype)
            push(a.data_ptr() % 16 == 0)
        elif kind is int:
            push(-1 if a == 1 else (a % 16 == 0) + 2 * (not -2**31 <= a < 2**31))
        elif kind is float:
            push("f")
        elif kind is TensorDescriptor:
            # Triton specializes a descriptor on its dtype and tiles (its shape and strides
            # are runtime arguments, the base's alignment is checked on construction)
            push(("desc", a.base.dtype, tuple(a.block_shape), a.padding,
                  getattr(a, "round_f32_to_tf32", False)))
        elif a is None:
            push(None)
        elif isinstance(a, bool):
            push("i1" if a else "i0")
        elif isinstance(a, int):
            push(-1 if a == 1 else (a % 16 == 0) + 2 * (not -2**31 <= a < 2**31))
        elif isinstance(a, float):
            push("f")
        else:
            return None
    return tuple(key)


def _tail(kernel: JITFunction, n_args: int, meta: dict) -> tuple | None:
    """The values of the parameters after the positional ones: each from ``meta`` or its
    default; None where one has neither (Triton raises on the first call)."""
    out = []
    for p in kernel.params[n_args:]:
        if p.name in meta:
            out.append(meta[p.name])
        elif p.default is not inspect.Parameter.empty:
            out.append(p.default)
    return tuple(out) if len(out) == len(kernel.params) - n_args else None


def launch(kernel, grid: tuple, *args, **meta):
    """``kernel[grid](*args, **meta)``, calling the compiled kernel directly once this
    specialization has been launched through Triton. ``grid`` is a tuple of 1 to 3 ints;
    ``args`` are positional, every constexpr and launch option is in ``meta``."""
    return _launch(kernel, grid, args, meta, tuple(meta.items()), _PLANS)


class PlannedLaunch:
    """A launch fixed but for its positional arguments: the kernel, the grid and every
    constexpr and launch option, as a :func:`launch_plan` computes them once. Calling it
    with the arguments is ``launch(kernel, grid, *args, **meta)``, but the compiled kernels
    are kept on the plan itself, so a call hashes no constexprs and builds no keyword
    dict."""
    __slots__ = ("kernel", "grid", "meta", "_compiled")

    def __init__(self, kernel, grid: tuple, **meta):
        self.kernel, self.grid, self.meta = kernel, tuple(grid), meta
        self._compiled: dict = {}

    def __call__(self, *args):
        # the table is the plan's own: its key needs no kernel and no constexprs (hashing
        # a JITFunction takes a lock on every call)
        return _launch(self.kernel, self.grid, args, self.meta, None, self._compiled)

    def __repr__(self) -> str:
        return f"PlannedLaunch({getattr(self.kernel, '__name__', self.kernel)}, {self.grid}, {self.meta})"


def _triton_path() -> bool:
    """Whether every launch must take Triton's own path now (see the module docstring)."""
    return (not ENABLED or knobs.runtime.interpret or launches.capturing() or _hooked()
            or CompiledKernel is None)


def _launch(kernel, grid, args, meta, meta_key, table):
    """The launch, with ``table`` keeping its compiled kernels under (kernel, device,
    argument key, ``meta_key``): the constexprs and options where the table is shared;
    under (device, argument key) where ``meta_key`` is None (a table of one kernel and
    one set of constexprs: a :class:`PlannedLaunch`'s)."""
    if type(kernel) is not JITFunction or callable(grid) or _triton_path():
        return kernel[grid](*args, **meta)
    arg_key = _argument_key(args)
    if arg_key is None:
        return kernel[grid](*args, **meta)
    device = driver.active.get_current_device()
    key = (device, arg_key) if meta_key is None else (kernel, device, arg_key, meta_key)
    plan = table.get(key)
    if plan is None:
        compiled = kernel[grid](*args, **meta)  # compiles (or hits Triton's cache)
        tail = _tail(kernel, len(args), meta)
        if isinstance(compiled, CompiledKernel) and tail is not None and len(table) < MAX_PLANS:
            table[key] = (compiled, tail)
        return compiled
    compiled, tail = plan
    dims = tuple(grid) + (1,) * (3 - len(grid))
    launches.note_launch(kernel, args, meta, dims)
    _run_compiled(compiled, dims, device, args, tail)
    recorded = getattr(_recording, "launches", None)
    if recorded is not None:
        recorded.append((kernel, meta, dims, compiled, args, tail))
    return compiled


def _run_compiled(compiled, dims, device, args, tail) -> None:
    """What Triton's ``JITFunction.run`` ends with, on the current stream, without hooks."""
    stream = driver.active.get_current_stream(device)
    compiled.run(dims[0], dims[1], dims[2], stream, compiled.function, compiled.packed_metadata,
                 None, None, None, *args, *tail)


#: (autotuner, device, pick key) -> the config the autotuner picked for that key
_PICKS: dict = {}


def tuned_launch(tuner, grid, args: tuple, meta: dict, pick_key: tuple):
    """``tuner[grid](*args, **meta)`` for ``tuner``, a ``triton.autotune`` over a
    JITFunction (optionally through ``triton.heuristics``), without the autotuner's and
    Triton's per-call work once it has picked a config for ``pick_key``: the first call
    with a key goes through the autotuner (which tunes, or finds its earlier pick), and
    keeps its ``best_config``; later calls apply that config (its pre-hook, the
    heuristics) as the autotuner would and :func:`launch` the kernel directly. ``grid``
    is the callable the autotuner takes; ``pick_key`` must tell apart every two calls the
    autotuner's own key tells apart (its key arguments and argument dtypes)."""
    if _triton_path():
        return tuner[grid](*args, **meta)
    key = (tuner, driver.active.get_current_device(), pick_key)
    pick = _PICKS.get(key)
    if pick is None:
        out = tuner[grid](*args, **meta)
        picked = getattr(tuner, "best_config", None)
        if picked is not None and len(_PICKS) < MAX_PLANS:
            # the config's keyword arguments are kept with it: Triton builds them anew
            # on every all_kwargs() call
            _PICKS[key] = (picked, picked.all_kwargs())
        return out
    config, config_kwargs = pick
    full = {**meta, **config_kwargs}
    # what the pre-hook, the heuristics and the grid read: arguments, then constexprs
    named = dict(zip(tuner.arg_names, args))
    named.update(full)
    if config.pre_hook is not None:
        config.pre_hook(dict(named))  # a copy, as the autotuner passes: no key leaks back
    kernel = tuner.fn
    if isinstance(kernel, Heuristics):
        for name, rule in kernel.values.items():  # each sees the ones before it
            full[name] = named[name] = rule(named)
        kernel = kernel.fn
    return _launch(kernel, tuple(grid(named)), args, full, tuple(full.items()), _PLANS)


#: The direct launches of the call being recorded by :meth:`Replays.record`, per thread
_recording = threading.local()


class Replays:
    """Whole calls of a launcher, kept to be replayed: once a call with a given key made
    only direct launches of kept kernels (above), a later call with an equal key makes the
    same launches on its own tensors without resolving them again (plan, autotuner pick,
    argument key, constexprs): what a small product's call spends most of its Python on.

    The key must hold everything the launches depend on besides the call's tensors and
    ``owner``: the tensors' shapes, strides, dtypes and devices, and every option and
    scalar argument. Alignment need not be in it: only calls whose tensors all start on
    16-byte boundaries (what Triton specializes pointers on) are recorded and replayed.
    ``owner`` is the profile, or an object that stands for the profile and part of the
    key (a launcher's remembered checks): it is held with the launches and compared by
    identity, so its hash is never taken. ``tensors`` must be every tensor the launches
    take, in a fixed order (None for an absent one; a call where one tensor stands in two
    places is not recorded, though it may replay another's recording); a recorded launch
    that takes any other tensor (a temporary made in the call) or a tensor descriptor is
    not replayed, nor a call where any launch took Triton's path. Only Triton launches are replayed:
    the block under :meth:`record` must do nothing else a call needs (no torch operation
    on the tensors)."""
    LIMIT = 4096
    #: Recordings of a key that may fail before it is given up (the first ones compile)
    ATTEMPTS = 4

    def __init__(self):
        self._table: dict = {}
        _PLAN_CACHES.append(self._table)

    def replay(self, owner, key: tuple, tensors: tuple, callers: int | None = None) -> bool:
        """Make the launches kept for ``owner`` and ``key`` on ``tensors``; False where
        none are kept (or every launch must take Triton's path now, or a tensor is not
        16-byte aligned): the caller launches. ``callers``: where only the first so many
        tensors are the caller's and the rest were allocated by the launcher (the
        allocator's blocks are aligned), only those are tested for alignment."""
        try:
            hit = self._table.get((id(owner), key))
        except TypeError:  # an unhashable option: the launcher's checks name it
            return False
        if (hit is None or type(hit[1]) is int or hit[0] is not owner or _triton_path()
                or not aligned(tensors if callers is None else tensors[:callers])):
            return False
        device = driver.active.get_current_device()
        launches_, recorded_device = hit[1]
        if device != recorded_device:
            return False
        for kernel, meta, dims, compiled, constants, pick, tail in launches_:
            args = pick(tensors + constants)
            launches.note_launch(kernel, args, meta, dims)
            _run_compiled(compiled, dims, device, args, tail)
        return True

    @contextmanager
    def record(self, owner, key: tuple, tensors: tuple):
        """Around a call's launches that :meth:`replay` did not make: keeps them for
        ``owner`` and ``key`` where they can be replayed."""
        try:
            hit = self._table.get((id(owner), key))
        except TypeError:  # an unhashable option
            key = None
        if key is None or _triton_path() or (hit is not None and hit[1] == 0
                                             and hit[0] is owner) or not aligned(tensors) \
                or _aliased(tensors):
            yield
            return
        outer = getattr(_recording, "launches", None)
        _recording.launches = recorded = []
        noted = launches.noted
        try:
            yield
        finally:
            _recording.launches = outer
        if outer is not None:
            outer.extend(recorded)  # a launcher recorded inside another's call
        kept = (_replayable(recorded, tensors) if launches.noted - noted == len(recorded)
                else None)
        if kept is None:
            attempts = hit[1] if hit is not None and hit[0] is owner and type(hit[1]) is int \
                else self.ATTEMPTS
            kept = attempts - 1  # 0: given up
        else:
            kept = (kept, driver.active.get_current_device())
        if len(self._table) >= self.LIMIT:
            self._table.clear()
        # the owner is kept with its launches, so its id is not reused while they are
        self._table[(id(owner), key)] = (owner, kept)


def _aliased(tensors) -> bool:
    """Whether a tensor stands in two places of ``tensors`` (matmul(a, a)): launches
    recorded then could not tell which place an argument came from, and replayed for a
    call of the same key on distinct tensors would read the wrong one."""
    present = [id(t) for t in tensors if t is not None]
    return len(set(present)) < len(present)


def aligned(tensors) -> bool:
    """Whether every tensor of ``tensors`` (None skipped) starts on a 16-byte boundary."""
    bits = 0
    for t in tensors:
        if t is not None:
            bits |= t.data_ptr()
    return not bits & 15


def _replayable(recorded: list, tensors: tuple) -> tuple | None:
    """The recorded launches, each with its arguments other than tensors (``constants``)
    and ``pick``, which takes a later call's arguments from ``tensors + constants`` of that
    call (one C call, where a loop over the tensor slots cost microseconds a launch); None
    where one takes a tensor not in ``tensors`` or a tensor descriptor."""
    where = {id(t): i for i, t in enumerate(tensors)}
    kept = []
    for kernel, meta, dims, compiled, args, tail in recorded:
        positions, constants = [], []
        for a in args:
            if isinstance(a, torch.Tensor):
                if id(a) not in where:
                    return None
                positions.append(where[id(a)])
            elif TensorDescriptor is not None and isinstance(a, TensorDescriptor):
                return None
            else:
                positions.append(len(tensors) + len(constants))
                constants.append(a)
        kept.append((kernel, meta, dims, compiled, tuple(constants), _picker(positions), tail))
    return tuple(kept) if kept else None


def _picker(positions: list[int]):
    """A function taking the items at ``positions`` of a sequence, as a tuple."""
    if len(positions) == 1:
        index = positions[0]
        return lambda items: (items[index],)
    return itemgetter(*positions) if positions else (lambda items: ())


#: (device index, stream, what) -> buffers kept by :func:`stream_buffers`
_STREAM_BUFFERS: dict = {}
#: Buffer sets kept at most (past it the table starts over; a dropped set is freed in
#: stream order by torch's allocator)
MAX_STREAM_BUFFERS = 64


def stream_buffers(device: torch.device, what: tuple, make):
    """Buffers a launch uses and leaves as it found them (a counter its last program sets
    back to zero, scratch rows it overwrites), kept for the GPU stream the launch goes to:
    launches on one stream run one after another, so the next launch of the same ``what``
    there may take them instead of allocating. ``make()`` builds them. Fresh ones where
    the device has no streams (CPU in the interpreter, meta tensors); None while a CUDA
    graph is captured: buffers kept past a capture could be shared by graphs replayed side
    by side, and the caller launches the way that needs none."""
    if device.type != "cuda":
        return make()
    if torch.cuda.is_current_stream_capturing():
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    # the stream a launch goes to, as _run_compiled asks Triton's driver for it
    key = (index, driver.active.get_current_stream(index), what)
    buffers = _STREAM_BUFFERS.get(key)
    if buffers is None:
        if len(_STREAM_BUFFERS) >= MAX_STREAM_BUFFERS:
            _STREAM_BUFFERS.clear()
        buffers = _STREAM_BUFFERS[key] = make()
    return buffers


def launch_plan(plan):
    """Memoize a launcher's ``plan(profile, *key)``: what a launch takes from the profile
    and the shapes alone (kernel, grid, constexprs, num_warps), computed once per profile
    and key instead of on every call. The key must be hashable and hold everything the
    plan reads besides the profile; a plan must not be mutated by its caller."""
    plans: dict = {}

    @functools.wraps(plan)
    def planned(profile, *key):
        hit = plans.get((id(profile), *key))
        if hit is not None and hit[0] is profile:
            return hit[1]
        value = plan(profile, *key)
        if len(plans) >= MAX_PLANS:
            plans.clear()
        # the profile is kept with its plan, so its id is not reused while it is cached
        plans[(id(profile), *key)] = (profile, value)
        return value

    planned.cache_clear = plans.clear
    _PLAN_CACHES.append(plans)
    return planned


#: The tables of every :func:`launch_plan`, for :func:`clear`.
_PLAN_CACHES: list[dict] = []


def signature(*tensors) -> tuple | None:
    """What the input checks read from each argument: its type, shape, dtype and device
    (None stays None). Two calls with equal signatures pass or fail the same checks on a
    GPU. None where an argument is not tensor-like (the full checks say what is wrong)."""
    try:
        return tuple([None if t is None else (type(t), t.shape, t.dtype, t.device)
                      for t in tensors])
    except AttributeError:
        return None


class PassedChecks:
    """What a launcher derived from inputs that passed its checks, kept per profile under a
    key that ends with the inputs' :func:`signature` (the options the checks read come
    before it), so that a later call with the same key skips the checks: a launcher's
    checks cost more per call than its launch.

    Only inputs on a CUDA device are remembered: whether CPU and meta tensors pass depends
    on the execution mode (interpreter, compile capture), so those are checked every time.
    Failed checks are never remembered, nor keys whose signature is None."""
    #: Entries kept at most (a caller with ever new shapes cannot grow the table without
    #: bound; past it the table starts over).
    LIMIT = 4096

    def __init__(self):
        self._table: dict = {}
        _PLAN_CACHES.append(self._table)

    def get(self, profile: Profile, key: tuple):
        """The value remembered for ``profile`` and ``key``, or None."""
        hit = self._table.get((id(profile), key))
        return hit[1] if hit is not None and hit[0] is profile else None

    def remember(self, profile: Profile, key: tuple, device: torch.device, value):
        """Keep ``value`` for ``profile`` and ``key`` if the checked inputs were on
        ``device``, a CUDA device; returns ``value``."""
        if device.type == "cuda" and key[-1] is not None:
            if len(self._table) >= self.LIMIT:
                self._table.clear()
            # the profile is kept with its value, so its id is not reused while cached
            self._table[(id(profile), key)] = (profile, value)
        return value

    def checked(self, profile: Profile, key: tuple, tensor, check, *args):
        """``check(*args)``'s value (True where it returns None), run only where nothing is
        remembered for ``profile`` and ``key``; once it passes, remembered if ``tensor``
        (one of the checked inputs) is on a CUDA device, as :meth:`remember` does."""
        try:
            hit = self.get(profile, key)
        except TypeError:  # an unhashable option: checked on every call (the check names it)
            hit, key = None, (None,)
        if hit is None:
            value = check(*args)
            hit = self.remember(profile, key, tensor.device, True if value is None else value)
        return hit

    def clear(self) -> None:
        self._table.clear()


def clear() -> None:
    """Forget every kept kernel (they are launched through Triton again), launch plan and
    remembered check."""
    _PLANS.clear()
    _PICKS.clear()
    for plans in _PLAN_CACHES:
        plans.clear()
