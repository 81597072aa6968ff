"""The op registry: what each op is, and which implementations of it are checked.

An :class:`OpSpec` (one per op, in ``triton_cts/ops/``) holds the op's metadata: its float64
torch reference, the dtypes and shapes it accepts, how to build its arguments from one
input tensor, tolerance defaults, and the reference kernel's launcher. An
:class:`Implementation` is one callable that claims to compute the op: the reference
kernels in ``kernels/``, or a third-party kernel registered by entry point
(group ``triton_cts.implementations``, name = op, value = ``module:function``) or on the
command line with ``--impl OP=module:function``. Suites check every implementation alike.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from importlib import metadata
from typing import Callable, Mapping

import torch

from triton_cts import loader

ENTRY_POINT_GROUP = "triton_cts.implementations"
REFERENCE = "reference"


@dataclass(frozen=True)
class OpSpec:
    """Metadata of one op. ``make_args(x, generator)`` builds the call's positional
    arguments and keyword options from the drawn input ``x``; ``reference`` takes the same
    arguments upcast to float64 and returns the expected output(s)."""

    name: str
    description: str
    reference: Callable[..., torch.Tensor]
    reference_kernel: str                       # "kernels.<family>:<launcher>"
    dtypes: tuple[torch.dtype, ...]
    make_args: Callable[[torch.Tensor, torch.Generator], tuple[tuple, dict]]
    min_ndim: int = 1
    max_ndim: int = 4
    tolerances: Mapping[torch.dtype, tuple[float, float]] = field(default_factory=dict)
    #: Shapes the compile suite cross-compiles (the launcher's specializations at these).
    compile_shapes: tuple[tuple[int, ...], ...] = ((4096,),)
    #: Other reference-kernel strategies for the same op, name -> "module:function"; each
    #: is registered as implementation "reference/<name>" and checked like the default.
    variants: Mapping[str, str] = field(default_factory=dict)
    #: Metamorphic relations that hold for the op (names from suites/relations.py).
    relations: tuple[str, ...] = ()
    #: (rtol, atol) for float32 where the profile runs float32 dots as tf32, on a device.
    tf32_tolerance: tuple[float, float] | None = None
    #: Where rounding error grows with the inputs' magnitude rather than the result's (a
    #: dot product of large terms that cancel), ``error_scale(*args64)`` gives, per output,
    #: the magnitude atol is multiplied by; None keeps atol as is.
    error_scale: Callable[..., tuple] | None = None
    #: Where an input is a rounded copy of something an implementation may also recompute
    #: (the float32 mean and rstd a backward receives), two answers are right: the
    #: gradient at the statistics given and the one at the exact statistics.
    #: ``ambiguity(*args64)`` gives, per output, the elementwise gap between them (or None);
    #: it is added to the bound.
    ambiguity: Callable[..., tuple] | None = None
    #: Where the op is ill-conditioned at some inputs, so that any correct implementation
    #: errs by more than the output's rounding (a normalisation of values whose mean dwarfs
    #: their spread: the computed mean carries a rounding error proportional to the
    #: values' magnitude, which the division by the spread amplifies; a softmax backward
    #: whose dy - sum(dy * y) cancels), ``conditioning(*args64, dtype=input_dtype)`` gives,
    #: per output, the absolute error such an implementation may make (or None); it is
    #: added to the bound. Models in triton_cts/ops/moments.py.
    conditioning: Callable[..., tuple] | None = None
    #: "module:function" of a differentiable launcher taking the op's forward arguments
    #: (what make_args builds) and returning the op's first output; gradcheck runs it.
    autograd: str | None = None
    #: Known gaps of an execution mode: {(mode, dtype): reason}; reported as not supported.
    mode_gaps: Mapping[tuple[str, torch.dtype], str] = field(default_factory=dict)
    #: Implementations declared bitwise reproducible from run to run (same inputs,
    #: profile and shape), by implementation name ("reference", "reference/partial"):
    #: the atomics suite checks them bit for bit, others within the op's tolerance.
    deterministic: tuple[str, ...] = ()

    def __post_init__(self):
        if not self.name.isidentifier():
            raise ValueError(f"op name '{self.name}' must be an identifier")
        if self.min_ndim < 0 or self.max_ndim < self.min_ndim:
            raise ValueError(f"op '{self.name}': need 0 <= min_ndim <= max_ndim")
        if not self.dtypes:
            raise ValueError(f"op '{self.name}': dtypes must not be empty")

    def __repr__(self) -> str:
        return f"OpSpec({self.name})"

    def _repr_pretty_(self, printer, cycle) -> None:  # hypothesis' example printer
        printer.text(repr(self))

    def supported_dtypes(self, profile) -> list[torch.dtype]:
        return profile.supported_dtypes(self.dtypes)


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
        return loader.resolve(self.target)

    def takes_profile(self, fn: Callable) -> bool:
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            return False
        return "profile" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


class Registry:
    def __init__(self, ops: Mapping[str, OpSpec]):
        self.ops = dict(ops)
        self.implementations: dict[str, list[Implementation]] = {
            name: [Implementation(REFERENCE, name, op.reference_kernel)]
            + [Implementation(f"{REFERENCE}/{v}", name, t) for v, t in op.variants.items()]
            for name, op in self.ops.items()}

    def add(self, impl: Implementation) -> None:
        if impl.op not in self.ops:
            from triton_cts.vendors import UsageError
            raise UsageError(f"implementation '{impl.name}' is for unknown op '{impl.op}'; "
                             f"known ops: {', '.join(sorted(self.ops))}")
        existing = self.implementations[impl.op]
        if any(i.name == impl.name for i in existing):
            from triton_cts.vendors import UsageError
            raise UsageError(f"op '{impl.op}' already has an implementation named '{impl.name}'")
        existing.append(impl)

    def names(self) -> set[str]:
        return {i.name for impls in self.implementations.values() for i in impls}

    def load_entry_points(self) -> None:
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            label = ep.dist.name if ep.dist is not None else ep.module.split(".")[0]
            self.add(Implementation(label, ep.name, ep.value))

    def select(self, impl_options: list[str] | None) -> list[Implementation]:
        """``--impl`` values: ``reference`` (default), ``all``, an implementation name, or
        ``OP=module:function`` (registers and selects it)."""
        from triton_cts.vendors import UsageError

        chosen: list[Implementation] = []
        for value in impl_options or [REFERENCE]:
            if "=" in value:
                op, _, target = value.partition("=")
                impl = Implementation(target, op.strip(), target.strip())
                self.add(impl)
                try:  # fail at start-up, not in the middle of a run
                    impl.load()
                except loader.ImplementationLoadError as exc:
                    raise UsageError(f"--impl {value}: {exc}") from exc
                picked = [impl]
            elif value == "all":
                picked = [i for impls in self.implementations.values() for i in impls]
            else:  # "reference" also takes its variants "reference/<name>"
                picked = [i for impls in self.implementations.values() for i in impls
                          if i.name == value or i.name.startswith(value + "/")]
                if not picked:
                    raise UsageError(f"unknown implementation '{value}'; known: "
                                     f"{', '.join(sorted(self.names()))}, all, or OP=module:function")
            chosen += [i for i in picked if i not in chosen]
        return chosen


def default_registry() -> Registry:
    from triton_cts import adapters
    from triton_cts.ops import ALL_OPS
    registry = Registry({op.name: op for op in ALL_OPS})
    adapters.register(registry)  # third-party libraries, by name (--impl liger)
    return registry
