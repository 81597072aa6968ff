"""How the benchmarks time a function: per call, replayed from a CUDA graph, and paired
with torch for compute-bound kernels.

A compute-bound kernel runs at the GPU's clock, and a power-capped GPU moves its clock
under a long matmul (an H100 ran between 1185 and 1980 MHz within seconds of bf16
matmuls, drawing its 700 W): two functions timed one after the other see different
clocks, and their ratio drifts by more than the differences a benchmark is after. Paired
timing alternates the two, call by call per call and round by round in graphs, and keeps
the median of the ratios, so both sides see the same clocks."""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable

import torch

#: Alternations of a compute-bound kernel and torch's (the median ratio is kept).
PAIRED_ROUNDS = 5
#: Milliseconds of kernels each side gets per round when timed call by call (about
#: do_bench's 100 ms of repetitions, split over the rounds).
PAIRED_MS_PER_ROUND = 20.0


def per_call_ms(fn: Callable) -> float:
    """Median ms of ``fn`` per call (``do_bench``: the L2 flushed before each call, the
    launcher's CPU time included wherever it exceeds the GPU's)."""
    from triton.testing import do_bench
    return do_bench(fn, warmup=25, rep=100, return_mode="median")


def graph_ms(fn: Callable) -> float:
    """Median ms of ``fn`` replayed from a CUDA graph: the kernels alone."""
    from triton.testing import do_bench_cudagraph
    return do_bench_cudagraph(fn, rep=20, return_mode="median")


def graph_ms_or_nan(fn: Callable) -> float:
    """``graph_ms(fn)``, NaN where ``fn`` cannot be captured in a CUDA graph."""
    try:
        return graph_ms(fn)
    except Exception:  # e.g. torch autograd that cannot be captured
        torch.cuda.synchronize()
        return float("nan")


def timed(fn: Callable) -> tuple[float, float]:
    """(per-call ms, CUDA-graph ms); the graph time is NaN where capture fails."""
    # a first short run is thrown away: the first op timed in a process came out up to
    # 2.5x slower per call than the same op timed later (H200, 40-us kernels)
    from triton.testing import do_bench
    do_bench(fn, warmup=5, rep=20, return_mode="median")
    return per_call_ms(fn), graph_ms_or_nan(fn)


def alternated(measure: Callable[[Callable], float], ours: Callable, theirs: Callable,
               rounds: int = PAIRED_ROUNDS) -> tuple[float, float, float]:
    """(ours, theirs, speedup): medians over ``rounds`` alternations of ``measure(ours)``
    and ``measure(theirs)``; the speedup is the median of each round's theirs / ours."""
    pairs = [(measure(ours), measure(theirs)) for _ in range(rounds)]
    return (statistics.median(o for o, _ in pairs), statistics.median(t for _, t in pairs),
            statistics.median(t / o for o, t in pairs))


def interleaved_per_call(ours: Callable, theirs: Callable, rounds: int = PAIRED_ROUNDS,
                         ms_per_round: float = PAIRED_MS_PER_ROUND) -> tuple[float, float,
                                                                            float]:
    """(ours ms, theirs ms, speedup) per call, the two called in turn, each call timed
    alone between events after flushing the L2 (as ``do_bench`` does); medians over every
    call, the speedup the median of each pair's theirs / ours."""
    from triton import runtime
    driver = runtime.driver.active
    cache = driver.get_empty_cache_for_benchmark()
    for fn in (ours, theirs, ours, theirs):  # warm-up: compile, tune, caches
        fn()
    torch.cuda.synchronize()
    estimate = per_call_ms(ours)
    calls = rounds * max(3, min(200, int(ms_per_round / max(estimate, 1e-3))))
    events = [[torch.cuda.Event(enable_timing=True) for _ in range(4)] for _ in range(calls)]
    for start, end, t_start, t_end in events:
        driver.clear_cache(cache)
        start.record()
        ours()
        end.record()
        driver.clear_cache(cache)
        t_start.record()
        theirs()
        t_end.record()
    torch.cuda.synchronize()
    pairs = [(s.elapsed_time(e), ts.elapsed_time(te)) for s, e, ts, te in events]
    return (statistics.median(o for o, _ in pairs), statistics.median(t for _, t in pairs),
            statistics.median(t / o for o, t in pairs))


@dataclass(frozen=True)
class Paired:
    """Times of a kernel and torch's taken in alternation: (per call, graph) ms each, and
    the speedup over torch (per call, graph) as the median of the pairs' ratios."""
    ours: tuple[float, float]
    torch: tuple[float, float]
    speedup: tuple[float, float]


def paired(ours: Callable, theirs: Callable) -> Paired:
    """``ours`` against ``theirs`` (torch), per call and in graphs, alternated."""
    call, t_call, call_speedup = interleaved_per_call(ours, theirs)
    graph, t_graph, graph_speedup = alternated(graph_ms, ours, theirs)
    return Paired((call, graph), (t_call, t_graph), (call_speedup, graph_speedup))
