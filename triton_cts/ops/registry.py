"""The op registry: every op of the catalog and the implementations of each that a run can
check. The reference kernels (and their variants) come with each :class:`OpSpec`; the
rest are added through one mechanism, :meth:`Registry.add`, by whoever found them: the
entry points of installed packages (group ``triton_cts.implementations``, name = op,
value = ``module:function``), the library adapters (``triton_cts/adapters/``, which the
plugin reads), or ``--impl OP=module:function``.

Ops the catalog lacks come from users' packages the same two ways: entry-point group
``triton_cts.ops`` and ``--op-module MODULE`` (:meth:`Registry.load_ops`). Each is
validated first (:func:`validate_op`): a malformed spec is a usage error naming where it
came from and the field.
"""
from __future__ import annotations

from importlib import metadata
from typing import Iterable, Mapping

from triton_cts.errors import UsageError, did_you_mean
from triton_cts.ops.implementation import REFERENCE, Implementation, ImplementationLoadError
from triton_cts.ops.spec import OpSpec

ENTRY_POINT_GROUP = "triton_cts.implementations"


class Registry:
    """Ops by name, and per op the implementations a run may select."""

    def __init__(self, ops: Mapping[str, OpSpec]):
        self.ops = dict(ops)
        self.implementations: dict[str, list[Implementation]] = {
            name: [Implementation(REFERENCE, name, op.reference_kernel)]
            + [Implementation(f"{REFERENCE}/{v}", name, t) for v, t in op.variants.items()]
            for name, op in self.ops.items()}
        #: where each op of a user's package came from (entry point or --op-module)
        self.op_sources: dict[str, str] = {}

    def add(self, impl: Implementation) -> None:
        if impl.op not in self.ops:
            raise UsageError(f"implementation '{impl.name}' is for unknown op '{impl.op}'"
                             f"{did_you_mean(impl.op, self.ops)}; "
                             f"known ops: {', '.join(sorted(self.ops))}")
        existing = self.implementations[impl.op]
        if any(i.name == impl.name for i in existing):
            raise UsageError(f"op '{impl.op}' already has an implementation named '{impl.name}'")
        existing.append(impl)

    def add_all(self, impls: Iterable[Implementation]) -> None:
        for impl in impls:
            self.add(impl)

    def names(self) -> set[str]:
        return {i.name for impls in self.implementations.values() for i in impls}

    def load_entry_points(self) -> None:
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            label = ep.dist.name if ep.dist is not None else ep.module.split(".")[0]
            self.add(Implementation(label, ep.name, ep.value))

    def add_op(self, spec: OpSpec, source: str, relations=None) -> None:
        """Register a user's op, validated, with its own kernel as implementation
        ``reference`` (the kernel its spec names), so every suite checks it by default."""
        validate_op(spec, source, self.ops, relations)
        self.ops[spec.name] = spec
        self.implementations[spec.name] = (
            [Implementation(REFERENCE, spec.name, spec.reference_kernel)]
            + [Implementation(f"{REFERENCE}/{v}", spec.name, t) for v, t in spec.variants.items()])
        self.op_sources[spec.name] = source

    def load_ops(self, op_modules: list[str] | None = None, relations=None) -> list[str]:
        """Add the ops of installed packages (entry-point group ``triton_cts.ops``) and of
        ``--op-module`` values; returns their names, in order."""
        added = []
        for ep in metadata.entry_points(group=OP_ENTRY_POINT_GROUP):
            dist = ep.dist.name if ep.dist is not None else ep.module.split(".")[0]
            source = (f"entry point '{ep.name} = {ep.value}' (group {OP_ENTRY_POINT_GROUP}, "
                      f"package {dist})")
            for spec in load_op_target(ep.value, source):
                self.add_op(spec, source, relations)
                added.append(spec.name)
        for value in op_modules or ():
            source = f"--op-module {value}"
            for spec in load_op_target(value, source):
                self.add_op(spec, source, relations)
                added.append(spec.name)
        return added

    def select(self, impl_options: list[str] | None) -> list[Implementation]:
        """``--impl`` values: ``reference`` (default), ``all``, an implementation name, or
        ``OP=module:function`` (registers and selects it)."""
        chosen: list[Implementation] = []
        for value in impl_options or [REFERENCE]:
            if "=" in value:
                op, _, target = value.partition("=")
                impl = Implementation(target, op.strip(), target.strip())
                self.add(impl)
                try:  # fail at start-up, not in the middle of a run
                    impl.load()
                except ImplementationLoadError as exc:
                    hint = ("; the module must be importable here: put its folder on "
                            "PYTHONPATH or install its package") \
                        if "cannot import" in str(exc) else ""
                    raise UsageError(f"--impl {value}: {exc}{hint}") from exc
                picked = [impl]
            elif value == "all":
                picked = [i for impls in self.implementations.values() for i in impls]
            else:  # "reference" also takes its variants "reference/<name>"
                picked = [i for impls in self.implementations.values() for i in impls
                          if i.name == value or i.name.startswith(value + "/")]
                if not picked:
                    raise UsageError(f"unknown implementation '{value}'"
                                     f"{did_you_mean(value, [*self.names(), 'all'])}; known: "
                                     f"{', '.join(sorted(self.names()))}, all, or OP=module:function")
            chosen += [i for i in picked if i not in chosen]
        return chosen


# ---- ops from users' packages ------------------------------------------------------------
#: Entry-point group of packages that add ops: name = the op (or any label), value =
#: ``module`` (its ``OPS``) or ``module:attr`` (an OpSpec, or a sequence of them).
OP_ENTRY_POINT_GROUP = "triton_cts.ops"
#: What a dtype's check runs the reference on: a few rows of a few elements.
_PROBE_ROWS, _PROBE_COLS = 3, 16


def _ops_of(obj, source: str) -> list[OpSpec]:
    """The OpSpecs ``obj`` holds: a module's ``OPS``, one OpSpec, or a sequence of them."""
    if hasattr(obj, "__file__") and not isinstance(obj, OpSpec):  # a module
        if not hasattr(obj, "OPS"):
            raise UsageError(f"{source}: module '{obj.__name__}' has no OPS (a tuple of "
                             f"triton_cts.ops.spec.OpSpec)")
        obj = obj.OPS
    specs = [obj] if isinstance(obj, OpSpec) else list(obj) \
        if isinstance(obj, (tuple, list)) else None
    if not specs:
        raise UsageError(f"{source}: expected an OpSpec or a non-empty tuple of OpSpecs, got "
                         f"{type(obj).__name__}")
    for spec in specs:
        if not isinstance(spec, OpSpec):
            raise UsageError(f"{source}: {spec!r} is a {type(spec).__name__}, not an "
                             f"OpSpec (triton_cts.ops.spec)")
    return specs


def load_op_target(target: str, source: str) -> list[OpSpec]:
    """Import ``module`` or ``module:attr`` (interpreter off, as for implementations) and
    return its OpSpecs; any failure is a UsageError naming ``source``."""
    from triton_cts.ops.implementation import _import
    module_name, _, attr = target.partition(":")
    try:
        obj = _import(module_name.strip())
        for part in filter(None, attr.strip().split(".")):
            obj = getattr(obj, part)
    except Exception as exc:  # noqa: BLE001 - OpSpec's own checks raise ValueError
        raise UsageError(f"{source}: cannot load '{target}': {type(exc).__name__}: {exc}") \
            from None
    return _ops_of(obj, source)


def _fail(source: str, spec: OpSpec, field_name: str, problem: str) -> UsageError:
    return UsageError(f"{source}: op '{spec.name}', field '{field_name}': {problem}")


def _probe_input(spec: OpSpec, dtype):
    import torch
    ndim = max(spec.min_ndim, min(2, spec.max_ndim))
    shape = (_PROBE_ROWS,) * max(0, ndim - 1) + ((_PROBE_COLS,) if ndim else ())
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return x.to(dtype) if dtype.is_floating_point else (x * 10).round().to(dtype)


def _upcast(value):
    """Floating tensors to float64, as the suites call the reference."""
    import torch
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.double()
    return value


def validate_op(spec: OpSpec, source: str, known_ops, relations=None) -> None:
    """A user's OpSpec, checked before any test: every problem is a UsageError naming
    ``source`` (the entry point or --op-module) and the field. ``relations``: the names of
    the metamorphic relations there are (None: not checked)."""
    import torch
    from triton_cts.ops.implementation import ImplementationLoadError, resolve
    if spec.name in known_ops:
        raise _fail(source, spec, "name", "clashes with an op already registered (built-in "
                    "ops and ops of other packages keep their names); rename it")
    if not callable(spec.reference):
        raise _fail(source, spec, "reference", "no float64 reference: a callable taking "
                    "make_args' arguments upcast to float64 and returning the outputs")
    if not callable(spec.make_args):
        raise _fail(source, spec, "make_args", "must be a callable (x, generator) -> "
                    "(args, kwargs)")
    targets = {"reference_kernel": spec.reference_kernel, "autograd": spec.autograd,
               **{f"variants[{v!r}]": t for v, t in spec.variants.items()}}
    for field_name, value in targets.items():
        if value is None:
            continue
        try:
            resolve(value)
        except ImplementationLoadError as exc:
            raise _fail(source, spec, field_name, str(exc)) from None
    bad = [d for d in spec.dtypes if not isinstance(d, torch.dtype)]
    if bad:
        raise _fail(source, spec, "dtypes", f"{bad!r} are not torch dtypes")
    for key in spec.tolerances:
        if key not in spec.dtypes:
            raise _fail(source, spec, "tolerances", f"{key} is not one of the op's dtypes")
    unknown = [r for r in spec.relations if relations is not None and r not in relations]
    if unknown:
        raise _fail(source, spec, "relations", f"no relation named {', '.join(unknown)}; "
                    f"known: {', '.join(sorted(relations))}")
    for dtype in spec.dtypes:  # the reference runs on every dtype the op declares
        what = "make_args"
        try:
            args, kwargs = spec.make_args(_probe_input(spec, dtype),
                                          torch.Generator().manual_seed(1))
            what = "reference"
            spec.reference(*map(_upcast, args), **{k: _upcast(v) for k, v in kwargs.items()})
        except Exception as exc:  # noqa: BLE001 - reported as the spec's problem
            name = str(dtype).removeprefix("torch.")
            raise _fail(source, spec, "dtypes" if what == "reference" else what,
                        f"the {what} refuses {name} inputs (called on a {name} input of "
                        f"shape {tuple(_probe_input(spec, dtype).shape)}): "
                        f"{type(exc).__name__}: {exc}") from None


