"""The atomics x autotune suite fails on planted faults (an autotuned atomic kernel
without reset_to_zero; an atomic_max accumulator clobbered to 0 by reset_to_zero), with
messages naming the cause, and passes the reference kernels in the same run."""
import pytest
import torch
import triton
import triton.language as tl

from tests.helpers import needs_interpreter, run_pytest
from triton_cts.execution.autotune_probe import atomic_updates, cpu_do_bench, observe_autotuning

SUITE = "suites/test_atomics_autotune.py"
PLANTED = "tests.planted.atomic_faults"
NO_RESET = f"{PLANTED}:layer_norm_backward_no_reset"
CLOBBERED = f"{PLANTED}:max_all_atomic_reset_to_zero"


@needs_interpreter
def test_suite_catches_planted_faults_and_passes_references():
    result = run_pytest(SUITE, "--vendor", "nvidia-sm90", "--mode", "interpreter", "--mode",
                        "compile", "--op", "layer_norm_backward", "--op", "max_all",
                        "--impl", "reference/atomic", "--impl", f"layer_norm_backward={NO_RESET}",
                        "--impl", f"max_all={CLOBBERED}", "--hypothesis-profile", "ci",
                        "-p", "no:randomly")
    out = result.stdout
    assert result.returncode == 1, out
    failed = {line.split("::")[1].split(" ")[0] for line in out.splitlines()
              if line.startswith(f"FAILED {SUITE}::")}
    assert not [f for f in failed if "-reference" in f], out  # the references pass
    for impl in (NO_RESET, CLOBBERED):
        for test in ("test_first_tuning_call_matches_reference",):
            assert any(f.startswith(f"{test}[") and impl in f and "interpreter" in f
                       for f in failed), (test, impl, out)
        # the static check also fails in compile mode, where nothing runs
        assert any(f.startswith("test_tuning_keeps_caller_buffers[") and impl in f
                   and f.endswith("compile]") for f in failed), (impl, out)
    assert "'DW' is in neither reset_to_zero nor restore_value" in out
    assert "the caller passed 'OUT' holding -inf" in out
    assert "reproduce: pytest" in out
    assert "passed" in out  # reference/atomic checks ran and passed


@triton.jit
def _accumulate_kernel(X, OUT, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(OUT + offs % 4, tl.load(X + offs, mask=offs < n, other=0.0), mask=offs < n)


def test_atomic_updates_reads_pointer_names():
    assert atomic_updates(_accumulate_kernel) == {"add": {"OUT"}}


@triton.jit
def _add_into(out, values, mask):
    tl.atomic_add(out, values, mask=mask)


@triton.jit
def _count_into(counter, ON: tl.constexpr):
    if ON:
        tl.atomic_xchg(counter, 0)


@triton.jit
def _branchy_kernel(X, OUT, SUMS, COUNTER, MAX_OUT, n, PICK, SUMS_ON: tl.constexpr,
                    COUNT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n, other=0.0)
    ptrs = OUT + offs % 4            # a local pointer: OUT
    _add_into(ptrs, x, offs < n)     # a helper's parameter: OUT again
    if SUMS_ON and not COUNT:
        tl.atomic_add(SUMS + offs % 2, x)
    _count_into(COUNTER, COUNT)
    if PICK > 0:                     # a runtime branch: either pointer
        target = MAX_OUT
    else:
        target = SUMS
    tl.atomic_max(target + offs % 2, x)
    tl.atomic_min((SUMS if COUNT else MAX_OUT) + offs % 2, x)  # a constexpr picks one
    first, _ = OUT, SUMS
    tl.atomic_or(first.to(tl.pointer_type(tl.int32)), 0)  # untraced: kept under its own name


def test_atomic_updates_follows_locals_helpers_and_the_launchs_constexprs():
    """Pointer names are followed back to the kernel's parameters (through a local and a
    helper's parameter); a branch on a constexpr the launch gives is followed only where
    taken (in the kernel and in a helper), one on an unknown value both ways."""
    both = {"MAX_OUT", "SUMS"}
    both, untraced = {"MAX_OUT", "SUMS"}, {"first"}
    assert atomic_updates(_branchy_kernel) == {
        "add": {"OUT", "SUMS"}, "xchg": {"COUNTER"}, "max": both, "min": both, "or": untraced}
    assert atomic_updates(_branchy_kernel, {"SUMS_ON": True, "COUNT": False}) == {
        "add": {"OUT", "SUMS"}, "max": both, "min": {"MAX_OUT"}, "or": untraced}
    assert atomic_updates(_branchy_kernel, {"SUMS_ON": False, "COUNT": True}) == {
        "add": {"OUT"}, "xchg": {"COUNTER"}, "max": both, "min": {"SUMS"}, "or": untraced}
    # a runtime argument passed by keyword is not a constexpr: both branches still count
    assert atomic_updates(_branchy_kernel, {"PICK": 1, "SUMS_ON": False, "COUNT": False}) == {
        "add": {"OUT"}, "max": both, "min": {"MAX_OUT"}, "or": untraced}


def test_a_tuned_kernel_adding_through_a_helper_into_an_unreset_buffer_is_a_hazard():
    """The autotuner's hazard check sees an accumulating atomic in a helper, under the
    name the kernel's caller passes (it read the helper's own parameter name before, and
    so missed it), and none in a branch the launch's constexprs switch off."""
    from triton_cts.execution import launches
    tuned = triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in (2, 4)],
                            key=["n"], reset_to_zero=["MAX_OUT"])(_branchy_kernel)
    x = torch.arange(8, dtype=torch.float32)
    bufs = [torch.zeros(4) for _ in range(4)]
    with launches.interpreted(), observe_autotuning(cpu_bench=True) as calls:
        tuned[lambda meta: (triton.cdiv(8, meta["BLOCK"]),)](x, *bufs, 8, 0, SUMS_ON=False,
                                                              COUNT=False)
    (call,) = calls
    hazards = call.hazards()
    assert any("updates 'OUT' with tl.atomic_add" in h for h in hazards), hazards
    assert not any("'COUNTER'" in h or "'SUMS'" in h for h in hazards), hazards


def test_cpu_bench_runs_every_config_and_fresh_cache_retunes():
    from triton_cts.execution import launches
    tuned = triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in (2, 4, 8)],
                            key=["n"], reset_to_zero=["OUT"])(_accumulate_kernel)
    x = torch.arange(16, dtype=torch.float32)
    for _ in range(2):  # the second context tunes again: caches are cleared on first sight
        out = torch.zeros(4)
        with launches.interpreted(), observe_autotuning(cpu_bench=True) as calls:
            tuned[lambda m: (triton.cdiv(16, m["BLOCK"]),)](x, out, 16)
            tuned[lambda m: (triton.cdiv(16, m["BLOCK"]),)](x, out, 16)
        assert [len(c.benchmarked) for c in calls] == [3, 0]
        assert calls[1].cache_hit and not calls[0].hazards()
        assert torch.equal(out, 2 * torch.tensor([24.0, 28.0, 32.0, 36.0]))
    assert cpu_do_bench(lambda: None, quantiles=(0.5, 0.2)) .__len__() == 2


def test_configs_the_target_refuses_are_recorded_as_refused():
    """A config Triton times as inf (out of shared memory for these arguments) is never
    picked: the every-config check must not run it alone as if it could be."""
    from triton.runtime.errors import OutOfResources

    from triton_cts.execution import launches

    def refuse(nargs):
        raise OutOfResources(327680, 232448, "shared memory")
    configs = [triton.Config({"BLOCK": 4}), triton.Config({"BLOCK": 8}, pre_hook=refuse)]
    tuned = triton.autotune(configs=configs, key=["n"], reset_to_zero=["OUT"])(_accumulate_kernel)
    x, out = torch.arange(16, dtype=torch.float32), torch.zeros(4)
    with launches.interpreted(), observe_autotuning(cpu_bench=True) as calls:
        tuned[lambda m: (triton.cdiv(16, m["BLOCK"]),)](x, out, 16)
    assert len(calls[0].benchmarked) == 2 and calls[0].refused == [configs[1]]
    assert torch.equal(out, torch.tensor([24.0, 28.0, 32.0, 36.0]))


# ---- the probe: where it runs, and shapes an implementation refuses -----------------------
def softmax_refusing_long_rows(x):
    """Launches an atomic kernel, and raises for rows longer than 65536 elements (as
    Liger-Kernel's softmax does)."""
    if x.shape[-1] > 65536:
        raise RuntimeError(f"n = {x.shape[-1]} exceeds the recommended Triton blocksize")
    out = torch.zeros(4, dtype=torch.float32, device=x.device)
    flat = x.reshape(-1)
    _accumulate_kernel[(triton.cdiv(flat.numel(), 64),)](flat, out, flat.numel(), BLOCK=64)
    return torch.softmax(x, -1)


def softmax_refusing_everything(x):
    raise RuntimeError("no kernel for this")


def _probe_target(function, mode):
    from triton_cts.execution.modes import Mode
    from triton_cts.ops.implementation import Implementation
    from triton_cts.profiles import load_profiles
    from triton_cts.targets import CheckTarget, default_registry
    op = default_registry().ops["softmax"]
    impl = Implementation(f"tests.test_atomics_autotune:{function}", "softmax",
                          f"tests.test_atomics_autotune:{function}")
    return CheckTarget(op, impl, load_profiles()["nvidia-sm90"], Mode(mode))


def test_probe_records_refused_shapes_and_probes_the_others():
    import pytest
    from suites import test_atomics_autotune as suite

    found = suite.probe(_probe_target("softmax_refusing_long_rows", "compile"))
    assert found.atomic_kernels == {"_accumulate_kernel": {"add": {"OUT"}}}
    assert found.probed >= 2 and len(found.errors) == 1
    assert found.errors[0].startswith("(2, 131072): RuntimeError: n = 131072 exceeds")
    # an implementation that refuses every probe shape fails the check, saying so
    with pytest.raises(pytest.fail.Exception, match="raised on every probe shape"):
        suite._setup(_probe_target("softmax_refusing_everything", "compile"), None,
                     lambda *args: None)


def test_probe_runs_on_the_device_in_device_mode(monkeypatch):
    """A library may refuse CPU tensors (FlagGems enters torch.cuda.device(x.device)), and
    one that caches the kernel its first launch compiled would keep what a captured,
    unlaunched call left: in device mode the probe runs the implementation on the device."""
    from suites import test_atomics_autotune as suite
    from triton_cts.execution.modes import Mode

    modes = []
    monkeypatch.setattr(suite, "execute", lambda fn, mode, *a, **k: modes.append(mode) or [])
    monkeypatch.setattr(suite, "_PROBES", {})
    suite.probe(_probe_target("softmax_refusing_long_rows", "device"))
    suite.probe(_probe_target("softmax_refusing_long_rows", "interpreter"))
    shapes = len(suite._probe_shapes(_probe_target("softmax_refusing_long_rows", "device").op))
    assert modes == [Mode.DEVICE] * shapes + [Mode.COMPILE] * shapes


def test_a_check_no_drawn_case_exercises_is_not_supported_not_failed(tmp_path):
    """FlagGems' rms_norm launched an autotuned kernel on the probe shapes but tuned on none
    of 459 drawn cases; hypothesis then raised Unsatisfiable, which read as a failure."""
    from hypothesis import assume, given, settings, strategies as st
    from suites.test_atomics_autotune import not_supported_if_never_exercised

    @not_supported_if_never_exercised
    @settings(max_examples=5, database=None)
    @given(x=st.integers())
    def never_relevant(x):
        assume(False)

    @not_supported_if_never_exercised
    @settings(max_examples=5, database=None)
    @given(x=st.integers())
    def wrong(x):
        assert x != x

    with pytest.raises(pytest.skip.Exception, match="not supported: no drawn case"):
        never_relevant()
    with pytest.raises(AssertionError):
        wrong()


@needs_interpreter
def test_a_failure_whose_replay_does_not_tune_again_is_reported_as_itself():
    """An implementation with its own tuning cache tunes a shape once per process, so
    hypothesis' replay of a failing case does not tune. The replay is still checked, and
    the report shows the first call's mismatch, not an UnsatisfiedAssumption."""
    impl = f"{PLANTED}:layer_norm_backward_no_reset_tuned_once"
    result = run_pytest(SUITE, "--vendor", "nvidia-sm90", "--mode", "interpreter",
                        "--op", "layer_norm_backward", "--impl", f"layer_norm_backward={impl}",
                        "--hypothesis-profile", "ci", "-k", "first_tuning_call",
                        "-p", "no:randomly")
    out = result.stdout
    assert result.returncode == 1, out
    assert "FAILED" in out and "first_tuning_call" in out, out
    assert "UnsatisfiedAssumption" not in out, out
    assert "out of tolerance" in out, out


def test_the_suites_time_reference_configs_briefly_on_a_device(monkeypatch):
    """Under the plugin (this run) every reference config is still timed on a device,
    over launches of about BRIEF_TUNING_MS, not do_bench's 125 ms; off, do_bench's own."""
    from triton_cts.execution import launches
    seen = []
    monkeypatch.setattr(triton.testing, "do_bench",
                        lambda call, quantiles=None, **kw: seen.append(kw) or 1.0)
    monkeypatch.setattr(launches.knobs.runtime, "interpret", False)
    launches.autotune_timer(lambda: None)
    assert seen[-1] == {"warmup": launches.BRIEF_TUNING_MS[0], "rep": launches.BRIEF_TUNING_MS[1]}
    try:
        launches.brief_tuning(False)
        launches.autotune_timer(lambda: None)
        assert seen[-1] == {}
    finally:
        launches.brief_tuning()
