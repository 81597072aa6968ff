"""Planted faults per value class, layout and boundary (tests/planted/coverage_faults.py):
each softmax there is wrong on one class, layout or boundary row length only, and the
numerics suite catches every one in every run, whatever the hypothesis seed: under ``ci``
and under ``ci-seeded`` with three seeds, each failure naming the class, layout or
boundary it was caught on (the covering cases: suites/test_numerics.py::
test_matches_reference_on_covering_cases).

Interpreter mode by default. In device mode on a GPU (the attached device's profile):

    TRITON_CTS_PLANTED_MODE=device python -m pytest tests/test_planted_coverage.py -p no:xdist -v -rA

Each run prints how many of the planted faults it caught (``-rA`` shows the lines).
"""
import os
import re

import pytest
import torch

from suites import assertions as ah
from suites import runner
from suites import strategies as hh
from tests.helpers import needs_interpreter, run_pytest
from tests.planted.coverage_faults import FAULTS
from triton_cts.execution import devices
from triton_cts.execution.modes import Mode
from triton_cts.profiles import load_profiles
from triton_cts.results.report_io import load_report
from triton_cts.targets import CheckTarget, default_registry

PLANTED = "tests.planted.coverage_faults"
COVERING = "suites/test_numerics.py::test_matches_reference_on_covering_cases"
MODE = os.environ.get("TRITON_CTS_PLANTED_MODE", "interpreter")
SELECTION = {"interpreter": ["--mode", "interpreter", "--vendor", "nvidia-sm90"],
             "device": ["--mode", "device", "--vendor", "auto", "--require-mode", "device"]}
#: The runs: hypothesis profile and seed (ci is derandomized: no seed).
RUNS = [("ci", None), ("ci-seeded", 1), ("ci-seeded", 2), ("ci-seeded", 3)]
if MODE not in SELECTION:
    raise ValueError(f"TRITON_CTS_PLANTED_MODE={MODE!r}: interpreter or device")
in_mode = needs_interpreter if MODE == "interpreter" else pytest.mark.skipif(
    not devices.available(),
    reason="not supported: TRITON_CTS_PLANTED_MODE=device needs an accelerator")


def caught_on(message: str, fault: str) -> bool:
    """Whether a failure ``message`` names the class, layout or boundary of ``fault``."""
    kind, _, what = fault.partition(":")
    if kind == "class":
        return f"values '{what}'" in message
    if kind == "layout":
        return f"layout '{what}'" in message
    return any(what in m.group(1).split(", ")
               for m in re.finditer(r"covering case \d+ of \d+: row length \d+ \((.*)\)$",
                                    message, re.M))


@in_mode
@pytest.mark.parametrize("profile, seed", RUNS,
                         ids=[f"{p}-{s}" if s is not None else p for p, s in RUNS])
def test_every_planted_fault_is_caught_in_every_run(profile, seed, tmp_path):
    out = tmp_path / "r.json"
    result = run_pytest(COVERING, "-p", "no:xdist", "-q", "--op", "softmax",
                        *SELECTION[MODE], *(f"--impl=softmax={PLANTED}:{name}" for name in FAULTS),
                        "--hypothesis-profile", profile,
                        *(("--hypothesis-seed", str(seed)) if seed is not None else ()),
                        "--report-json", str(out), timeout=1200)
    assert out.exists(), result.stdout[-3000:] + result.stderr[-3000:]
    records = load_report(out)["records"]
    caught, missed = [], []
    for name, fault in FAULTS.items():
        ran = [r for r in records if r["impl"] == f"{PLANTED}:{name}"
               and r["status"] not in ("not_supported", "waived")]
        failed = [r for r in ran if r["status"] == "fail"]
        named = [r for r in failed if caught_on(r.get("message") or "", fault)]
        (caught if ran and len(named) == len(ran) else missed).append(
            f"{name} ({fault}): {len(ran)} ran, {len(failed)} failed, {len(named)} naming it")
    print(f"{MODE}, {profile}{f' --hypothesis-seed {seed}' if seed is not None else ''}: "
          f"caught {len(caught)} of {len(FAULTS)} planted faults")
    assert not missed, "\n".join(missed) + "\n" + result.stdout[-3000:]
    assert "reproduce: pytest" in result.stdout


@needs_interpreter
def test_each_planted_fault_is_wrong_only_there():
    """On the covering cases, each planted softmax fails only cases of its class, layout
    or boundary, and at least one: a check that met none of them would pass it."""
    profile = load_profiles()["nvidia-sm90"]
    covering = hh.covering_profile(profile)
    registry = default_registry()
    op = registry.ops["softmax"]
    cases = hh.covering_cases(op, covering, torch.float32)

    def there(case, fault):
        kind, _, what = fault.partition(":")
        return {"class": hh.effective_kind(case.kind, case.dtype) == what,
                "layout": hh.effective_layout(case.shape, case.layout) == what,
                "boundary": what in hh.boundary_labels(case.shape[-1], covering, case.dtype),
                }[kind]

    for name, fault in FAULTS.items():
        (impl,) = registry.select([f"softmax={PLANTED}:{name}"])
        target = CheckTarget(op, impl, profile, Mode.INTERPRETER)
        failed = []
        for i, case in enumerate(cases):
            out = runner.run_target(target, case.args, case.kwargs, profile=covering)
            try:
                ah.check_outputs(target, case, out, "-", profile=covering)
            except AssertionError:
                failed.append(i)
        expected = [i for i, case in enumerate(cases) if there(case, fault)]
        assert failed and set(failed) <= set(expected), (name, fault, failed, expected)
