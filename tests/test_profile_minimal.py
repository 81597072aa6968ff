"""A profile of hardware facts and the generic launch constants only (no tuning tables) runs
every kernel family on its derived defaults: it loads, each family's tuning is its declared
default, and the compile and interpreter suites pass on it for an op of each family."""
import re

from tests.helpers import run_pytest
from triton_cts import CHECKOUT
from triton_cts.profiles import load_profiles, tuning

PROFILE_DIR = CHECKOUT / "tests" / "profiles"
NAME = "minimal-cuda"
#: An op of each family with tuning (attention, cross-entropy, layer norm, matmul,
#: reductions, softmax), each launcher's strategy chosen on the defaults.
OPS = ("layer_norm", "rms_norm_backward", "softmax", "cross_entropy", "max_all", "max_dim",
       "matmul", "attention")


def test_the_minimal_profile_has_facts_only_and_takes_every_default():
    text = (PROFILE_DIR / f"{NAME}.toml").read_text()
    facts = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert len(facts) <= 60
    profile = load_profiles([PROFILE_DIR])[NAME]
    assert not {"tuning", "autotune", "tolerances", "math_ulp"} & set(profile.data)
    for family, fields in tuning.families().items():
        assert dict(profile.tuning(family)) == {
            name: spec.default_for(profile) for name, spec in fields.items()}


def _passes(result, suite: str) -> int:
    out = result.stdout + result.stderr
    assert result.returncode == 0, f"{suite} on {NAME}:\n{out[-4000:]}"
    summary = re.search(r"(\d+) passed", out)
    assert summary and int(summary.group(1)) > 0, out[-2000:]
    assert not re.search(r"\d+ (failed|error)", out), out[-2000:]
    return int(summary.group(1))


#: Each family's launchers on the defaults, once: every implementation's kernels compiled
#: but the k-chunk matmul's (its autotune configs are the matmul's, over split K), and the
#: interpreter's check against the reference on the profile itself (the fuzzed-constants
#: checks replace its launch constants with drawn ones, so they say little of its own).
COMPILE_ONLY = "not k_chunks"
INTERPRET_ONLY = "test_matches_reference and not fuzzed"


def test_the_minimal_profile_passes_the_compile_and_interpreter_suites():
    selection = ["--profile-dir", str(PROFILE_DIR), "--vendor", NAME, "-p", "no:xdist", "-q",
                 *(arg for op in OPS for arg in ("--op", op))]
    _passes(run_pytest("suites/test_compile.py", "--mode", "compile", "-k", COMPILE_ONLY,
                       *selection, timeout=1200), "compile")
    _passes(run_pytest("suites/test_numerics.py", "--mode", "interpreter", "-k",
                       INTERPRET_ONLY, "--hypothesis-profile", "ci", *selection,
                       timeout=1200), "interpreter")
