"""The atomics x autotune suite fails on planted faults (an autotuned atomic kernel
without reset_to_zero; an atomic_max accumulator clobbered to 0 by reset_to_zero), with
messages naming the cause, and passes the reference kernels in the same run."""
import torch
import triton
import triton.language as tl

from tests.helpers import run_pytest
from triton_cts.autotune_probe import atomic_updates, cpu_do_bench, observe_autotuning

SUITE = "suites/test_atomics_autotune.py"
PLANTED = "tests.planted.atomic_faults"
NO_RESET = f"{PLANTED}:layer_norm_backward_no_reset"
CLOBBERED = f"{PLANTED}:max_all_atomic_reset_to_zero"


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


def test_cpu_bench_runs_every_config_and_fresh_cache_retunes():
    from triton_cts import launches
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
