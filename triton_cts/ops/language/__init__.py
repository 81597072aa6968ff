"""Triton language primitives as ops: the math functions, conversions, integer semantics,
random numbers, ``tl.dot``, atomics, scans and sorts, block pointers and memory hints
every kernel ports on.

Each primitive is an :class:`~triton_cts.ops.spec.OpSpec` like any op, so ``--op``
selects it and every mode, report and expectation file applies; :func:`primitive_op`
builds it with two differences:

- ``suites``: the generic op suites (numerics, relations, gradcheck, grid limits,
  atomics/autotune) do not take it; the compile suite (cross-compiles its kernels for
  every profile, the NPU lint included) and its own language suite
  (``suites/test_language_<family>.py``) do;
- ``primitive``: a description of the primitive (a dataclass of its family module) that
  its suite reads: which function, which bound, which behaviour to record.

One module per family, each declaring ``OPS``; the kernels and launchers are in
``kernels/language/<family>.py``. :data:`OPS` gathers every family module present.
"""
from __future__ import annotations

import importlib

from triton_cts.ops.spec import OpSpec

#: Family modules, in report order.
FAMILIES = ("math", "conversions", "integers", "random", "dot", "atomics", "scans", "memory")
#: The generic suite every primitive's kernels go through as well as its own.
COMPILE_SUITE = "test_compile"


def primitive_op(*, name: str, suite: str, primitive: object, **fields) -> OpSpec:
    """An OpSpec for a language primitive, checked by the compile suite and by ``suite``
    (its language suite's file stem, e.g. ``"test_language_math"``) only. ``fields`` are
    OpSpec's (reference, reference_kernel, dtypes, make_args, compile_shapes, ...)."""
    if not suite.startswith("test_language_"):
        raise ValueError(f"primitive '{name}': suite must be a language suite "
                         f"('test_language_<family>'), got '{suite}'")
    return OpSpec(name=name, suites=(COMPILE_SUITE, suite), primitive=primitive, **fields)


def _family_ops(family: str) -> tuple[OpSpec, ...]:
    """A family module's OPS; a family whose module is not written yet has none."""
    module_name = f"{__name__}.{family}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return ()
        raise
    return tuple(module.OPS)


OPS: tuple[OpSpec, ...] = tuple(op for family in FAMILIES for op in _family_ops(family))


def primitives(family_type: type) -> tuple[OpSpec, ...]:
    """The primitives whose description is a ``family_type``."""
    return tuple(op for op in OPS if isinstance(op.primitive, family_type))


def is_a(family_type: type):
    """A ``cts_targets`` predicate: targets whose op's primitive is a ``family_type``,
    e.g. ``@pytest.mark.cts_targets(predicate=is_a(MathFunction))``."""
    return lambda target: isinstance(target.op.primitive, family_type)
