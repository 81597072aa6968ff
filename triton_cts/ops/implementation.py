"""Who computes an op: an :class:`Implementation` is one callable that claims to compute
it, named ``module:function``: the reference kernels in ``kernels/``, a library adapter
(``triton_cts/adapters/``), or a third-party kernel registered by entry point or
``--impl OP=module:function``. Suites check every implementation alike.

Every mode uses the same import: :mod:`triton_cts.execution.launches` routes JIT kernels to
the interpreter while interpreter checks run, so no second copy of a module is needed.
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from typing import Callable

REFERENCE = "reference"


class ImplementationLoadError(ImportError):
    """An implementation's ``module:function`` cannot be imported or found."""


def _import(module_name: str):
    """Import with Triton's interpreter off: ``triton.jit`` decides at decoration time, so a
    kernel module first imported inside an interpreted block (a check resolving its
    implementation there) would hold InterpretedFunction kernels for good, and every
    compile check of that process would then fail on them. JIT kernels still run under
    the interpreter where a block asks for it (triton_cts.execution.launches)."""
    from triton import knobs
    old = knobs.runtime.interpret
    knobs.runtime.interpret = False
    try:
        return importlib.import_module(module_name)
    finally:
        knobs.runtime.interpret = old


def resolve(target: str) -> Callable:
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ImplementationLoadError(f"'{target}' is not of the form 'module:function'")
    try:
        obj = _import(module_name)
    except ImportError as exc:
        raise ImplementationLoadError(f"cannot import '{module_name}': {exc}") from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ImplementationLoadError(
                f"module '{module_name}' has no attribute '{attr}'") from None
    if not callable(obj):
        raise ImplementationLoadError(f"'{target}' is not callable")
    return obj


@dataclass(frozen=True)
class Implementation:
    """One callable computing ``op``; ``target`` is ``module:function``.

    ``outputs``: where the callable computes only some of the op's outputs (a library
    layer norm that returns y but not mean and rstd), the indices of those it returns, in
    order; the suites compare them with the same outputs of the reference. None: all.
    ``unsupported(mode, profile)``: why it cannot run in that mode for that profile on this
    machine (its library is not installed, say), or None; such checks are reported as not
    supported.
    """

    name: str
    op: str
    target: str
    outputs: tuple[int, ...] | None = None
    unsupported: Callable[[str, object], str | None] | None = field(default=None, compare=False)

    def unsupported_reason(self, mode, profile) -> str | None:
        return self.unsupported(str(mode), profile) if self.unsupported else None

    def load(self) -> Callable:
        return resolve(self.target)

    def takes_profile(self, fn: Callable) -> bool:
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            return False
        return "profile" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
