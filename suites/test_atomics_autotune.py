"""Atomics x autotune: kernels that accumulate with atomics, or are autotuned, give the
right answer on the first call for a new key, with every config, on later calls, and
with a bounded (or, where declared, no) run-to-run variation.

The autotuner benchmarks every config on the caller's buffers and resets only the
``reset_to_zero`` ones, to 0 (triton/runtime/autotuner.py; Triton issues #4217, #7181). Which implementations this applies
to is found, not listed: each is probed once per profile (launches captured at small
shapes) and checked when it launches a kernel that reaches a ``tl.atomic_*`` with the
launch's constexprs (read from source: ``autotune_probe.atomic_updates``), an autotuned
kernel, or is declared deterministic (``OpSpec.deterministic``); the others are
reported as not supported. The probe runs where the check runs: on the device in device
mode (libraries may refuse CPU tensors, or cache the kernel of a captured, never compiled
call), captured on the CPU otherwise; a probe shape the implementation raises on is
recorded and skipped. Under the interpreter the autotuner's timer is replaced by a CPU one
so every config really runs, and each check clears the autotuner caches first, so its
first call really tunes.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools

import pytest
import torch
from hypothesis import assume, given, note, reject, strategies as st
from hypothesis.control import current_build_context
from hypothesis.errors import Unsatisfiable

from suites import assertions as ah
from suites import runner
from suites import strategies as hh
from triton_cts.execution import launches
from triton_cts.execution.autotune_probe import atomic_updates, observe_autotuning
from triton_cts.execution.input_checks import UnsupportedDtypeError
from triton_cts.execution.modes import Mode, execute
from triton_cts.ops.dtypes import bits
from triton_cts.results.status import NOT_SUPPORTED
from triton_cts.targets import dtype_gap

#: Runs compared by the variation and accumulation checks.
RUNS = 3


@dataclasses.dataclass
class Probe:
    atomic_kernels: dict[str, dict[str, set[str]]]   # kernel -> {atomic op: pointer names}
    tuned_kernels: set[str]
    deterministic: bool
    errors: list[str] = dataclasses.field(default_factory=list)  # probe shapes that raised
    probed: int = 0                                              # probe shapes that ran

    @property
    def relevant(self) -> bool:
        return bool(self.atomic_kernels or self.tuned_kernels or self.deterministic)

    def describe(self) -> str:
        return (f"atomics in {sorted(self.atomic_kernels) or 'no kernel'}, autotuned: "
                f"{sorted(self.tuned_kernels) or 'none'}, declared deterministic: "
                f"{'yes' if self.deterministic else 'no'}")


def _dtypes(target) -> list[torch.dtype]:
    return [d for d in target.op.dtypes if dtype_gap(target, d) is None]


def _probe_shapes(op) -> list[tuple[int, ...]]:
    """A small 2-D shape, and the op's compile shapes with at most 4 rows (the last dim
    picks the launcher's path, the rows only the grid)."""
    shapes = [(33, 65)] if op.min_ndim <= 2 <= op.max_ndim else []
    shapes += [tuple(min(d, 4) for d in s[:-1]) + s[-1:] for s in op.compile_shapes]
    return list(dict.fromkeys(shapes))


_PROBES: dict[tuple, Probe] = {}


def _probe_launches(target, fn, args, kwargs):
    """The launches one call makes: run on the device in device mode (a library may refuse
    CPU tensors, and one that caches the kernel its first launch compiled would cache
    nothing from a captured call, and fail on its next real one), captured without running
    otherwise."""
    takes_profile = target.impl.takes_profile(fn)
    if target.mode is not Mode.DEVICE:
        return execute(fn, Mode.COMPILE, target.profile, args, kwargs,
                       takes_profile=takes_profile)
    with launches.record_launches() as log:
        execute(fn, Mode.DEVICE, target.profile, args, kwargs, takes_profile=takes_profile)
    return log


def probe(target) -> Probe:
    """What the implementation launches for this profile (cached per process)."""
    key = (target.impl.op, target.impl.name, target.impl.target, target.profile.name,
           str(target.mode))
    if key in _PROBES:
        return _PROBES[key]
    op, fn = target.op, target.impl.load()
    dtypes = _dtypes(target)
    dtype = torch.float32 if torch.float32 in dtypes else (dtypes or [None])[0]
    result = Probe({}, set(), target.impl.name in op.deterministic)
    for shape in (_probe_shapes(op) if dtype is not None else []):
        x = hh.make_values(shape, dtype, "normal", seed=0)
        args, kwargs = op.make_args(x, torch.Generator().manual_seed(1))
        with observe_autotuning(cpu_bench=target.mode is not Mode.DEVICE) as calls:
            try:
                log = _probe_launches(target, fn, args, kwargs)
            except UnsupportedDtypeError:
                continue
            except Exception as exc:  # noqa: BLE001 - a shape the implementation refuses
                message = " ".join(str(exc).split())[:200]
                result.errors.append(f"{shape}: {type(exc).__name__}: {message}")
                continue
        result.probed += 1
        for launch in log:
            found = atomic_updates(launch.kernel, launch.kwargs)
            if found:
                result.atomic_kernels[launch.name] = found
        result.tuned_kernels |= {c.kernel for c in calls if c.tunes}
    _PROBES[key] = result
    return result


def _setup(target, data, record_property) -> tuple[Probe, torch.dtype]:
    found = probe(target)
    record_property("probe", found.describe())
    for error in found.errors:  # not this suite's finding: the numerics suite owns crashes
        record_property(f"probe shape refused {error.split(':')[0]}", error)
    if found.errors and not found.probed:
        pytest.fail(f"{target.op.name}[{target.impl.name}] on {target.profile.name} "
                    f"({target.mode}): the implementation raised on every probe shape, so "
                    f"what it launches is unknown:\n  " + "\n  ".join(found.errors),
                    pytrace=False)
    if not found.relevant:
        pytest.skip(NOT_SUPPORTED + f"{target.impl.name} launches no atomic or autotuned "
                                    f"kernel for {target.op.name} and is not declared deterministic")
    dtypes = _dtypes(target)
    if not dtypes:
        pytest.skip(NOT_SUPPORTED + f"profile {target.profile.name} supports none of "
                                    f"{target.op.name}'s dtypes in {target.mode} mode")
    return found, data.draw(st.sampled_from(dtypes), label="dtype")


def _draw(target, data, dtype):
    case = data.draw(hh.tuning_cases(target.op, dtype), label="case")
    note(f"case: {case.describe()}")
    return case


@contextlib.contextmanager
def _observed(target, force=None):
    """Launches and autotuner calls; the CPU timer where there is no device to time on."""
    with launches.record_launches() as log, \
            observe_autotuning(fresh=True, cpu_bench=target.mode is not Mode.DEVICE,
                               force=force) as calls:
        yield log, calls


def not_supported_if_never_exercised(test):
    """Outside ``@given``: when no drawn case made the implementation launch an atomic or
    autotuned kernel (every example rejected by ``assume(_relevant(...))``, e.g. an
    autotuner that does not tune again for keys it has seen), the check did not run: it
    is not supported here, not a failure and not a pass."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        try:
            return test(*args, **kwargs)
        except Unsatisfiable:
            pytest.skip(NOT_SUPPORTED + "no drawn case made the implementation launch an "
                                        "atomic or autotuned kernel (its probe shapes did), "
                                        "so there was nothing to check")
    return run


def _relevant(found: Probe, log, calls) -> bool:
    """Whether this run exercised what the suite checks (an atomic or tuned launch)."""
    return found.deterministic or any(c.tunes for c in calls) \
        or any(atomic_updates(launch.kernel, launch.kwargs) for launch in log)


def _assume_exercised(exercised: bool) -> None:
    """Reject a drawn case that launched no atomic or tuned kernel, except while
    hypothesis replays a case that failed: an autotuner with its own persistent cache
    (FlagGems') does not tune the same key again, and rejecting the replay would hide the
    failure behind a FlakyFailure. The replay is checked all the same (an untuned call
    must match the reference too)."""
    if not exercised and not current_build_context().is_final:
        reject()


def _tuning_note(calls) -> str:
    tuned = {c.kernel: c for c in calls}
    return "autotuned launches: " + ("; ".join(c.describe() for c in tuned.values()) or "none")


def _check(target, case, out, ref, repro, calls, against="ref", scale=1.0):
    # against the reference: its allowances; against another run: both runs' conditioning
    try:
        return ah.check_outputs(target, case, out, repro, references=ref, against=against,
                                scale=scale, ambiguity=against == "ref",
                                allowance_scale=1.0 if against == "ref" else 2.0, oracle=False)
    except AssertionError as exc:
        exc.add_note(_tuning_note(calls))
        for hazard in {h for c in calls for h in c.hazards()}:
            exc.add_note(f"likely cause: {hazard}")
        raise


@pytest.mark.cts_modes("device", "interpreter")
@not_supported_if_never_exercised
@given(data=st.data())
def test_first_tuning_call_matches_reference(target, data, repro, record_property):
    """The first call for a new autotune key (every config benchmarked on the caller's
    buffers) returns the reference: a missing reset_to_zero shows here."""
    found, dtype = _setup(target, data, record_property)
    case = _draw(target, data, dtype)
    with ah.context(target, case, repro), _observed(target) as (log, calls):
        out = runner.run_target(target, case.args, case.kwargs)
    _assume_exercised(_relevant(found, log, calls))
    note(_tuning_note(calls))
    _check(target, case, out, runner.run_reference(target, case.args, case.kwargs), repro, calls)


@pytest.mark.cts_modes("device", "interpreter")
@not_supported_if_never_exercised
@given(data=st.data())
def test_every_config_matches_tuned_call(target, data, repro, record_property):
    """Each config the autotuner benchmarked, run alone, gives the tuned call's answer
    (within twice the op's tolerance: configs may sum in another order). Configs the
    target refused for these arguments (out of shared memory, say: Triton times them as
    inf and never picks them) are recorded, not run."""
    found, dtype = _setup(target, data, record_property)
    if not found.tuned_kernels:
        pytest.skip(NOT_SUPPORTED + f"{target.impl.name} launches no autotuned kernel for {target.op.name}")
    case = _draw(target, data, dtype)
    with ah.context(target, case, repro), _observed(target) as (_, calls):
        tuned = runner.run_target(target, case.args, case.kwargs)
    configs = {(c.kernel, str(cfg)): (c.kernel, cfg) for c in calls for cfg in c.benchmarked
               if not any(cfg is r for r in c.refused)}
    refused = sorted({f"{c.kernel}: {cfg}" for c in calls for cfg in c.refused})
    assume(configs)
    record_property("configs checked", len(configs))
    if refused:
        record_property("configs the target refused", refused)
    for kernel, config in configs.values():
        with ah.context(target, case, repro), _observed(target, force={kernel: config}) as (_, alone):
            out = runner.run_target(target, case.args, case.kwargs)
        try:
            _check(target, case, out, tuned, repro, alone,
                   against="autotuned output", scale=2.0)
        except AssertionError as exc:
            exc.add_note(f"{kernel} run with config {config} alone differs from the autotuned "
                         f"call ({_tuning_note(calls)})")
            raise


@pytest.mark.cts_modes("device", "interpreter")
@not_supported_if_never_exercised
@given(data=st.data())
def test_repeated_calls(target, data, repro, record_property):
    """Calls after the first (autotune cache hits where the launcher keeps its autotuner)
    still return the reference: nothing accumulates across calls. And the runs agree
    with each other: bit for bit for implementations the op declares deterministic,
    otherwise within the op's tolerance (the stated bound: float atomics may add in
    another order on every run)."""
    found, dtype = _setup(target, data, record_property)
    case = _draw(target, data, dtype)
    ref = runner.run_reference(target, case.args, case.kwargs)
    with ah.context(target, case, repro), _observed(target) as (log, calls):
        outs = [ah.as_outputs(runner.run_target(target, case.args, case.kwargs))
                for _ in range(RUNS)]
    _assume_exercised(_relevant(found, log, calls))
    record_property("autotune cache hits", sum(c.cache_hit for c in calls))
    record_property("run-to-run bound", "bitwise" if found.deterministic else "op tolerance")
    for run, out in enumerate(outs[1:], start=2):
        try:
            _check(target, case, out, ref, repro, calls)
        except AssertionError as exc:
            exc.add_note(f"call {run} of {RUNS} on the same inputs: later calls accumulate")
            raise
        if not found.deterministic:
            _check(target, case, out, outs[0], repro, calls, against="run 1")
            continue
        for i, (a, b) in enumerate(zip(outs[0], out)):
            if a is None or torch.equal(bits(a), bits(b)):
                continue
            differ = int((bits(a) != bits(b)).sum())
            pytest.fail(f"{target.op.name}[{target.impl.name}] on {target.profile.name} "
                        f"({target.mode}), {case.describe()}: declared deterministic, but "
                        f"output {i} of run {run} differs from run 1 in {differ} of "
                        f"{a.numel()} elements (bitwise)\nreproduce: {repro}", pytrace=False)


@pytest.mark.cts_modes("device", "compile")
@not_supported_if_never_exercised
@given(data=st.data())
def test_tuning_keeps_caller_buffers(target, data, repro, record_property):
    """What the autotuner does to the caller's buffers, read from each tuned launch:
    a buffer the caller filled with non-zero values (-inf for atomic_max) must not be
    in reset_to_zero (it would be zeroed), and a buffer updated by an accumulating
    atomic must be in reset_to_zero or restore_value (or a pre_hook must handle both).
    Read from captured launches in compile mode (nothing runs), and on the device; under
    the interpreter the first-call check runs the kernels and names the same causes."""
    found, dtype = _setup(target, data, record_property)
    if not found.tuned_kernels:
        pytest.skip(NOT_SUPPORTED + f"{target.impl.name} launches no autotuned kernel for {target.op.name}")
    case = _draw(target, data, dtype)
    with ah.context(target, case, repro), _observed(target) as (_, calls):
        runner.run_target(target, case.args, case.kwargs)
    _assume_exercised(any(c.tunes for c in calls))
    hazards = list(dict.fromkeys(h for c in calls for h in c.hazards()))
    if hazards:
        pytest.fail(f"{target.op.name}[{target.impl.name}] on {target.profile.name} "
                    f"({target.mode}), {case.describe()}:\n  " + "\n  ".join(hazards)
                    + f"\nreproduce: {repro}", pytrace=False)
