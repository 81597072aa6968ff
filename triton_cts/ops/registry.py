"""The op registry: every op of the catalog and the implementations of each that a run can
check. The reference kernels (and their variants) come with each :class:`OpSpec`; the
rest are added through one mechanism, :meth:`Registry.add`, by whoever found them: the
entry points of installed packages (group ``triton_cts.implementations``, name = op,
value = ``module:function``), the library adapters (``triton_cts/adapters/``, which the
plugin reads), or ``--impl OP=module:function``.
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
