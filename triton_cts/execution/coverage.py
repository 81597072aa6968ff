"""Launch-space coverage: which launch configurations the checks reached.

A check can only catch a bug on a path it runs. Every suite check's kernel launches are
recorded (all modes: run, interpreted or captured for compile) and summarized as its
``launch_coverage`` property: per launch the kernel, its integer and boolean constexprs
(tile sizes, GROUP_SIZE_M, GRID_STRIDE, EVEN_K, ...), and how many programs it started.
The report gathers them per kernel (:func:`summarize`); a boolean constexpr that every
check launched with one value only is a gap: a situation the launcher can produce that no
check reached (a quality warning of the run, not of any check).
"""
from __future__ import annotations

import math
from collections import defaultdict

import pytest

from triton_cts.execution.launches import record_launches

PROPERTY = "launch_coverage"


def describe(launch) -> dict:
    """One launch as data: kernel name, constexprs that are ints or bools, programs."""
    kernel = launch.kernel
    fn = getattr(kernel, "fn", None)
    params = getattr(kernel, "params", ()) or getattr(getattr(fn, "__self__", None),
                                                      "params", ())
    constexprs = {}
    for i, p in enumerate(params):
        if not getattr(p, "is_constexpr", False):
            continue
        value = launch.kwargs.get(p.name, launch.args[i] if i < len(launch.args) else None)
        if isinstance(value, bool) or (isinstance(value, int) and -2**31 <= value < 2**31):
            constexprs[p.name] = value
        elif isinstance(value, int):  # a sentinel (INT64_MIN, say): kept as text, as xdist
            constexprs[p.name] = str(value)  # sends only 32-bit ints
    return {"kernel": launch.name, "constexprs": constexprs,
            "programs": min(math.prod(launch.grid), 2**31 - 1)}  # xdist: 32-bit ints


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Record the launches of a suite check's call and keep their summary on the item."""
    from triton_cts.targets import is_check
    if not is_check(item):
        return (yield)
    with record_launches() as log:
        try:
            return (yield)
        finally:  # the harness's own probes (interpreter defects, say) are not the check's
            seen = {repr(d): d for d in (describe(entry) for entry in log
                                         if not _is_harness_kernel(entry))}
            if seen:
                item.user_properties.append((PROPERTY, list(seen.values())))


def _is_harness_kernel(launch) -> bool:
    fn = getattr(launch.kernel, "fn", None)
    return str(getattr(fn, "__module__", "")).startswith("triton_cts.")


def summarize(records: list[dict]) -> dict:
    """Per kernel, over every record's ``launch_coverage``: the values each constexpr took,
    whether any launch started several programs, and the checks that launched it; and the
    gaps: boolean constexprs seen with one value only."""
    kernels: dict[str, dict] = defaultdict(lambda: {"constexprs": defaultdict(set),
                                                     "multi_program": False, "checks": 0})
    for rec in records:
        launches = (rec.get("properties") or {}).get(PROPERTY) or []
        for name in {entry["kernel"] for entry in launches}:
            kernels[name]["checks"] += 1
        for entry in launches:
            k = kernels[entry["kernel"]]
            for key, value in entry["constexprs"].items():
                k["constexprs"][key].add(value)
            k["multi_program"] |= entry["programs"] > 1
    out, gaps = {}, []
    for name, k in sorted(kernels.items()):
        values = {key: sorted(v, key=repr) for key, v in sorted(k["constexprs"].items())}
        out[name] = {"checks": k["checks"], "multi_program": k["multi_program"],
                     "constexprs": values}
        for key, seen in values.items():
            if len(seen) == 1 and isinstance(seen[0], bool):
                gaps.append(f"{name}: {key} was always {seen[0]}")
        if not k["multi_program"]:
            gaps.append(f"{name}: every launch started one program")
    return {"kernels": out, "gaps": gaps}
