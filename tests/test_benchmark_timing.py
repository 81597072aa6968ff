"""Paired timing: a kernel and torch's compared under the same clock, and the benchmark's
rows take the paired ratios as given."""
import math

import torch

from benchmarks import timing
from benchmarks.__main__ import _measured
from benchmarks.cases import Bench


class _DriftingClock:
    """Times of equal kernels on a GPU whose clock falls as it heats: each measurement
    takes 2% longer than the one before."""

    def __init__(self):
        self.calls = 0

    def measure(self, fn) -> float:
        self.calls += 1
        return fn() * 1.02 ** self.calls


def test_equal_kernels_under_a_drifting_clock_compare_as_equal_when_alternated():
    same = lambda: 1.0  # noqa: E731 - both sides take the same time at a fixed clock
    clock = _DriftingClock()
    ours, theirs, speedup = timing.alternated(clock.measure, same, same, rounds=5)
    assert abs(speedup - 1.02) < 1e-9  # each pair: theirs right after ours
    # timed one after the other, as the unpaired benchmark did, the second side reads
    # five rounds slower: the drift, not the kernels
    clock = _DriftingClock()
    first = [clock.measure(same) for _ in range(5)]
    second = [clock.measure(same) for _ in range(5)]
    assert sorted(second)[2] / sorted(first)[2] > 1.1
    assert ours < theirs < ours * 1.03


def test_a_row_takes_the_paired_speedups_not_the_ratio_of_medians():
    bench = Bench("matmul", (8, 8, 8), torch.bfloat16, lambda: None, lambda: None,
                  flops=2 * 8 ** 3, args=())
    profile = {"peak.dense_tflops": {"bfloat16": 989.0}}
    _, rec = _measured("matmul", bench, (2.0, 1.0), (1.0, 1.0), (0.97, 1.01), profile,
                       float("nan"), float("nan"))
    assert (rec["speedup"], rec["graph_speedup"], rec["paired_with_torch"]) == (0.97, 1.01,
                                                                                True)
    _, rec = _measured("matmul", bench, (2.0, 1.0), (1.0, 1.0), None, profile,
                       float("nan"), float("nan"))
    assert (rec["speedup"], rec["graph_speedup"], rec["paired_with_torch"]) == (0.5, 1.0,
                                                                                False)
    assert math.isclose(rec["tflops"], 2 * 8 ** 3 / 1e-3 / 1e12)
