"""Metamorphic relations (suites/relations.py): each relation an op declares in
``OpSpec.relations`` holds for every implementation of it, within the op's tolerance."""
import dataclasses

import pytest
from hypothesis import given, note, strategies as st

from suites import assertions as ah
from suites import relations as rel
from suites import runner
from suites import strategies as hh
from triton_cts.results.status import NOT_SUPPORTED
from triton_cts.targets import selection
from triton_cts.ops.implementation import REFERENCE
from triton_cts.ops.tolerances import tolerance


def _sibling(target, op_name, registry):
    """``target`` retargeted at another op, implemented by the same family (the reference
    kernels, or the same library), or None when that family has no such op."""
    family = REFERENCE if target.impl.name.startswith(REFERENCE) else target.impl.name
    impl = next((i for i in registry.implementations.get(op_name, ()) if i.name == family),
                None)
    if impl is None:
        return None
    return dataclasses.replace(target, op=registry.ops[op_name], impl=impl)


@pytest.mark.cts_modes("device", "interpreter")
@given(data=st.data())
def test_relation_holds(target, dtype, relation, data, repro, record_property, request):
    relation = rel.get(relation)
    kinds = runner.value_kinds(target, dtype, record_property, relation.kinds)
    case = data.draw(hh.cases(target.op, target.profile, dtype, hh.FUZZ_NUMEL, kinds),
                     label="case")
    note(f"case: {case.describe()}; relation: {relation.name} ({relation.description})")
    runner.record_inputs(record_property, target, case, target.profile, kinds,
                         hh.reachable_boundaries(target.profile, dtype, hh.FUZZ_NUMEL))
    registry = selection(request.config).registry

    def run(args, kwargs, op=None):
        who = target if op is None else _sibling(target, op, registry)
        if who is None:
            pytest.skip(f"{NOT_SUPPORTED}{target.impl.name} has no '{op}' to relate to")
        return runner.as_tuple(runner.run_target(who, args, kwargs))

    def tol(out_dtype):
        return tolerance(target.op, out_dtype, target.profile, target.mode)

    def allow(args, kwargs):
        return runner.allowances(target, args, kwargs, ambiguity=False)

    with ah.context(target, case, repro):
        comparisons = relation.check(run, tol, case.args, case.kwargs, allow)
    for c in comparisons:
        records = ah.assert_matches_reference(target, case, c.outputs, c.expected, repro,
                                              against=c.against, scale=c.scale,
                                              error_scales=c.error_scales,
                                              tolerance_dtype=c.tolerance_dtype,
                                              ambiguities=c.allowances)
        for r in records:
            record_property(f"{relation.name} {r['output']} max_abs_error", r["max_abs_error"])
