"""Observe Triton's autotuner and find atomics in kernels, for the atomics x autotune suite.

The autotuner benchmarks every config on the caller's buffers (triton/runtime/autotuner.py;
Triton issues #4217, #7181): a
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

import ast
import contextlib
import inspect
import math
import operator
import textwrap
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import triton.language as tl
from triton.runtime.autotuner import Autotuner, Config
from triton.runtime.jit import JITFunction

#: Atomics whose repetition changes the result: a buffer they update must be reset (or
#: restored) before each config. max/min/and/or are idempotent: repeating them is
#: harmless as long as the buffer starts from the caller's value.
ACCUMULATING = ("add", "sub", "xchg", "cas", "xor")


def base_function(kernel: Any):
    """The plain Python function under a JITFunction, Heuristics or Autotuner chain."""
    fn = kernel
    while not inspect.isfunction(fn):
        fn = fn.fn
    return fn


def atomic_updates(kernel: Any, constexprs: Mapping[str, Any] | None = None
                   ) -> dict[str, set[str]]:
    """{atomic op: the kernel's parameters passed as its pointer}, read from the source of
    the kernel and of the JIT helpers it calls.

    The pointer's name is the first identifier of its expression (``DW`` in
    ``tl.atomic_add(DW + cols, ...)``), followed back to a parameter of the kernel: through
    local assignments (``ptrs = OUT + offs``) and through the arguments of helper calls (a
    helper's ``tl.atomic_add(out, ...)`` on the ``DW + cols`` its caller passed is ``DW``).
    ``constexprs`` are the launch's constexpr values: a branch on them (``if LAST_SUMS:``,
    ``if not HAS_BIAS and ...``) is followed only where it is taken; a branch on anything
    else, or on a constexpr not given (a config's, while tuning), is followed both ways."""
    found: dict[str, set[str]] = {}
    fn = base_function(kernel)
    given = constexprs or {}
    env = {name: _Value(given[name], frozenset()) if name in given and _is_constexpr(p)
           else _Value(_UNKNOWN, frozenset([name]))
           for name, p in inspect.signature(fn).parameters.items()}
    _AtomicScan(found).function(fn, env, depth=0)
    return found


def _is_constexpr(param: inspect.Parameter) -> bool:
    """Whether a kernel parameter is annotated ``tl.constexpr`` (a value of the launch's
    specialization; any other argument given by keyword is a runtime value)."""
    note = param.annotation
    return note is tl.constexpr or (isinstance(note, str) and note.split(".")[-1] == "constexpr")


#: A value the scan cannot know statically.
_UNKNOWN = object()


@dataclass(frozen=True)
class _Value:
    """What the scan knows of a name: its constant value (or _UNKNOWN), and the kernel
    parameters a pointer held in it may start from (several after branches the scan
    could not decide)."""
    const: Any
    roots: frozenset


class _AtomicScan:
    """The walk of :func:`atomic_updates` over one kernel and the helpers it calls."""
    MAX_DEPTH = 16  # helpers calling helpers (Triton has no recursion)

    def __init__(self, found: dict[str, set[str]]):
        self.found = found
        self.globals: dict = {}

    def function(self, fn, env: dict[str, _Value], depth: int) -> None:
        try:
            node = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
        except (OSError, TypeError, SyntaxError, IndexError):
            return
        if isinstance(node, ast.FunctionDef):
            saved, self.globals = self.globals, fn.__globals__
            self.block(node.body, env, depth)
            self.globals = saved

    def block(self, statements, env: dict[str, _Value], depth: int) -> None:
        for st in statements:
            if isinstance(st, ast.If):
                self.expression(st.test, env, depth)
                taken = _static(st.test, env)
                if taken is not _UNKNOWN:
                    self.block(st.body if taken else st.orelse, env, depth)
                    continue
                branches = [dict(env), dict(env)]
                self.block(st.body, branches[0], depth)
                self.block(st.orelse, branches[1], depth)
                for name in set(branches[0]) | set(branches[1]):
                    one, two = (b.get(name, _Value(_UNKNOWN, frozenset())) for b in branches)
                    env[name] = _Value(one.const if one.const is two.const else _UNKNOWN,
                                       one.roots | two.roots)
                continue
            if isinstance(st, ast.For):
                for name in ast.walk(st.target):
                    if isinstance(name, ast.Name):
                        env[name.id] = _Value(_UNKNOWN, frozenset())
            for value in ast.iter_child_nodes(st):
                if isinstance(value, ast.stmt):
                    continue  # bodies: walked below, in order
                if isinstance(value, ast.expr):
                    self.expression(value, env, depth)
            for field_name in ("body", "orelse", "finalbody"):
                self.block(getattr(st, field_name, []) or [], env, depth)
            if isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None:
                known = _Value(_static(st.value, env), self.roots(st.value, env))
                for target in (st.targets if isinstance(st, ast.Assign) else [st.target]):
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):  # a tuple's parts: nothing known
                            env[name.id] = known if name is target else \
                                _Value(_UNKNOWN, frozenset())

    def expression(self, expr: ast.expr, env: dict[str, _Value], depth: int) -> None:
        for node in ast.walk(expr):
            if isinstance(node, ast.Call):
                self.call(node, env, depth)

    def call(self, call: ast.Call, env: dict[str, _Value], depth: int) -> None:
        helper = self.resolve(call.func)
        if helper is not None:
            if depth < self.MAX_DEPTH:
                self.helper(helper, call, env, depth)
            return
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else \
            func.id if isinstance(func, ast.Name) else ""
        if not name.startswith("atomic_"):
            return
        pointer = call.args[0] if call.args else next(
            (k.value for k in call.keywords if k.arg == "pointer"),
            call.keywords[0].value if call.keywords else None)
        if pointer is not None:
            # a pointer the scan cannot trace to a parameter (a tuple's part, a loop
            # variable) keeps its own first identifier: the atomic is still reached
            roots = self.roots(pointer, env) or {self.first_name(pointer) or "<pointer>"}
            self.found.setdefault(name.removeprefix("atomic_"), set()).update(roots)

    def helper(self, helper: JITFunction, call: ast.Call, env: dict[str, _Value],
               depth: int) -> None:
        """Walk a JIT helper with what the call passes to each of its parameters."""
        params = list(inspect.signature(helper.fn).parameters.values())
        given = dict(zip((p.name for p in params), call.args))
        given.update((k.arg, k.value) for k in call.keywords if k.arg)
        inner = {p.name: _Value(_static(given[p.name], env), self.roots(given[p.name], env))
                 if p.name in given else
                 _Value(_UNKNOWN if p.default is p.empty else p.default, frozenset())
                 for p in params}
        self.function(helper.fn, inner, depth + 1)

    def resolve(self, func: ast.expr) -> JITFunction | None:
        """The JIT helper a call names (``helper`` or ``module.helper``), else None."""
        parts = []
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name):
            return None
        obj = self.globals.get(func.id)
        for part in reversed(parts):
            obj = getattr(obj, part, None)
        return obj if isinstance(obj, JITFunction) else None

    def roots(self, expr: ast.expr, env: dict[str, _Value]) -> frozenset:
        """The kernel parameters an expression's first identifier may stand for (either
        side's of a conditional expression the scan cannot decide)."""
        if isinstance(expr, ast.BinOp):  # a pointer plus offsets: the pointer's side
            return self.roots(expr.left, env)
        if isinstance(expr, ast.IfExp):
            taken = _static(expr.test, env)
            if taken is _UNKNOWN:
                return self.roots(expr.body, env) | self.roots(expr.orelse, env)
            return self.roots(expr.body if taken else expr.orelse, env)
        name = self.first_name(expr)
        known = env.get(name) if name else None
        return known.roots if known is not None else frozenset()

    def first_name(self, expr: ast.expr) -> str | None:
        """The expression's first identifier in source order, modules skipped."""
        names = sorted((n for n in ast.walk(expr) if isinstance(n, ast.Name)
                        and not inspect.ismodule(self.globals.get(n.id))),
                       key=lambda n: (n.lineno, n.col_offset))
        return names[0].id if names else None


def _static(expr: ast.expr, env: dict[str, _Value]) -> Any:
    """The value of a test on constants and known constexprs, else _UNKNOWN."""
    if isinstance(expr, ast.Constant):
        return expr.value
    if isinstance(expr, ast.Name):
        known = env.get(expr.id)
        value = known.const if known is not None else _UNKNOWN
        return getattr(value, "value", value)  # a tl.constexpr holds its value
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        value = _static(expr.operand, env)
        return _UNKNOWN if value is _UNKNOWN else not value
    if isinstance(expr, ast.BoolOp):
        values = [_static(v, env) for v in expr.values]
        deciding = isinstance(expr.op, ast.Or)  # True decides an or, False an and
        if any(v is not _UNKNOWN and bool(v) is deciding for v in values):
            return deciding
        return _UNKNOWN if any(v is _UNKNOWN for v in values) else not deciding
    if isinstance(expr, ast.Compare) and len(expr.ops) == 1:
        left, right = _static(expr.left, env), _static(expr.comparators[0], env)
        compare = _COMPARE.get(type(expr.ops[0]))
        if compare is None or left is _UNKNOWN or right is _UNKNOWN:
            return _UNKNOWN
        try:
            return compare(left, right)
        except TypeError:
            return _UNKNOWN
    return _UNKNOWN


_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
            ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
            ast.Is: operator.is_, ast.IsNot: operator.is_not}


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
            atomics=atomic_updates(self, kwargs), arg_names=tuple(self.arg_names),
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
