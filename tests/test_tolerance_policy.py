"""The tolerance policy's second oracle (triton_cts/ops/tolerances.py): an output beyond the
error model fails only if it is also clearly worse than torch's own result in the same
dtype; a pass that rests on torch's error says so."""
import math

import pytest
import torch

from suites import assertions as ah
from suites.strategies import Case
from triton_cts.execution.modes import Mode
from triton_cts.ops.implementation import Implementation
from triton_cts.ops.tolerances import CLEARLY_WORSE_THAN_TORCH, tolerance
from triton_cts.profiles import load_profiles
from triton_cts.targets import CheckTarget, default_registry

PROFILE = load_profiles()["nvidia-sm90"]
PROD = default_registry().ops["prod_all"]
TARGET = CheckTarget(PROD, Implementation("planted", "prod_all", "tests:planted"), PROFILE,
                     Mode.INTERPRETER)
RTOL, ATOL = tolerance(PROD, torch.float32, PROFILE, Mode.INTERPRETER)


class Repro(str):
    """A repro command that keeps what the assertions record."""

    def __new__(cls):
        self = super().__new__(cls, "pytest <repro>")
        self.recorded = {}
        return self

    def record(self, key, value):
        self.recorded[key] = value


def _case(shape=(4,)):
    return Case(shape, torch.float32, "normal", 0, "contiguous", (), {})


def _relative(ratio: float) -> torch.Tensor:
    """A float32 output ``ratio`` times the bound above a float64 reference of 10.0."""
    ref = torch.tensor([10.0], dtype=torch.float64)
    return ref, (ref + ratio * (ATOL + RTOL * 10.0)).to(torch.float32)


def test_beyond_the_model_but_within_twice_torchs_error_passes_and_says_so():
    ref, ours = _relative(2.5)
    _, theirs = _relative(2.0)
    repro = Repro()
    records = ah.assert_matches_reference(TARGET, _case(), (ours,), (ref,), repro,
                                          torch_oracle=lambda: (theirs,))
    assert records[0]["ratio"] == pytest.approx(2.5, rel=1e-3)
    assert records[0]["torch_ratio"] == pytest.approx(2.0, rel=1e-3)
    (note,) = [v for k, v in repro.recorded.items() if "within torch's error" in k]
    assert "2.5x the bound" in note and "torch's own 2x" in note


@pytest.mark.parametrize("torch_ratio", [0.1, 0.9])
def test_beyond_the_model_where_torch_is_within_it_fails(torch_ratio):
    ref, ours = _relative(1.5)
    _, theirs = _relative(torch_ratio)
    with pytest.raises(AssertionError, match=r"torch.s own float32 result errs by"):
        ah.assert_matches_reference(TARGET, _case(), (ours,), (ref,), Repro(),
                                    torch_oracle=lambda: (theirs,))


def test_clearly_worse_than_torch_fails():
    ref, ours = _relative(2.0 * CLEARLY_WORSE_THAN_TORCH + 1.0)
    _, theirs = _relative(2.0)
    with pytest.raises(AssertionError, match="out of tolerance"):
        ah.assert_matches_reference(TARGET, _case(), (ours,), (ref,), Repro(),
                                    torch_oracle=lambda: (theirs,))


def test_a_nan_is_never_excused_by_torch():
    ref, _ = _relative(0.0)
    _, theirs = _relative(3.0)
    with pytest.raises(AssertionError, match="out of tolerance"):
        ah.assert_matches_reference(TARGET, _case(), (torch.tensor([float("nan")]),), (ref,),
                                    Repro(), torch_oracle=lambda: (theirs,))


def test_no_oracle_where_torch_cannot_compute_it():
    ref, ours = _relative(1.5)
    with pytest.raises(AssertionError, match="out of tolerance"):
        ah.assert_matches_reference(TARGET, _case(), (ours,), (ref,), Repro(),
                                    torch_oracle=lambda: None)


@pytest.mark.parametrize("got,want,mismatched", [
    ([1.0, 2.0, 3.0], [1.0, 2.0 + 1e-9, 3.0], 0),                # within: the fast path
    ([5.0, 2.0], [float("inf"), 2.0], 1),                         # inf bound must not pass
    ([float("inf"), 2.0], [float("inf"), 2.0], 0),                # same inf
    ([float("-inf"), 2.0], [float("inf"), 2.0], 1),               # inf of the other sign
    ([float("nan"), 2.0], [float("nan"), 2.0], 0),                # NaN where NaN
    ([float("nan"), 2.0], [1.0, 2.0], 1),
    ([1.1, 2.0], [1.0, 2.0], 1),                                  # out of bound
])
def test_compare_counts_specials_and_bounds(got, want, mismatched):
    r = ah.compare(torch.tensor(got), torch.tensor(want, dtype=torch.float64), 1e-6, 1e-6)
    assert r["mismatched"] == mismatched
    assert (r["worst_index"] is None) == (mismatched == 0)
    finite = [abs(a - b) for a, b in zip(got, want) if math.isfinite(a) and math.isfinite(b)]
    assert r["max_abs_error"] == pytest.approx(max(finite))


@pytest.mark.parametrize("bad_at", [None, 5, 70])
def test_chunked_comparison_agrees_with_the_whole(monkeypatch, bad_at):
    """Large outputs are compared chunk by chunk on the accelerator: the same verdict and
    numbers as one pass, with a per-element bound, and an error in a later chunk found."""
    gen = torch.Generator().manual_seed(0)
    want = torch.randn(9, 11, generator=gen, dtype=torch.float64)
    got = (want + 1e-7 * torch.randn(9, 11, generator=gen, dtype=torch.float64)).float()
    if bad_at is not None:
        got.view(-1)[bad_at] += 1.0
    atol = torch.full((11,), 1e-6, dtype=torch.float64)
    whole = ah.compare(got, want, 1e-6, atol)
    monkeypatch.setattr(ah, "DEVICE_COMPARE_CHUNK", 16)
    chunked = ah._within_everywhere_in_chunks(got, want, 1e-6, atol, "cpu")
    if bad_at is None:
        assert whole["mismatched"] == 0
        assert chunked == (whole["max_abs_error"], whole["ratio"])
    else:
        assert whole["mismatched"] == 1 and chunked is None
