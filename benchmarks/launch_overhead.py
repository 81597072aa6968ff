"""python -m benchmarks.launch_overhead [--dtype bfloat16] [--calls 2000] [--op OP ...]

Per-call CPU time of each launcher, on shapes small enough that the GPU is never the
limit: what a Python caller pays per call beyond the kernel. The memory-bound ops at
8 x 1024, matmul at 256^3, the LLM ops at 8 tokens (``benchmarks.llm_cases.SMALL_*``) and
attention at batch 1, 2 heads, 128 tokens, head dim 64. Three numbers per op (float32
matmul: per input precision; attention: full and causal), each the mean over ``--calls``
back-to-back calls with one synchronization at the end, the fastest of five such rounds:

- ``ours``: the launcher as users call it;
- ``ours, launch stubbed``: the same with Triton's ``JITFunction.run`` and the direct call
  of a compiled kernel (``kernels/fast_launch.py``) replaced by no-ops, i.e. our Python
  (input checks, allocation, constants from the profile, the launch key);
- ``torch``: the torch eager equivalent.

``ours - stubbed`` is what is left of the launch: the driver call (and, for kernels
launched through Triton's own path, binding and specializing the arguments and the cache
lookup). ``kernel`` is the same call replayed from a CUDA graph (the kernels alone; NaN
where it cannot be captured), and ``above kernel`` = ``ours - kernel``, the figure the
launch-overhead goal of ``benchmarks/goals.toml`` bounds. ``--json FILE`` writes one
record per row for ``python -m benchmarks.goals``."""
from __future__ import annotations

import argparse
import json
import math
import platform
import time

import torch

from benchmarks import all_ops


def small_benches(op: str, dtype, profile) -> list:
    """The benches of ``op`` at the small shapes of the module docstring (each op's
    ``BenchSpec.small_shape`` in ``benchmarks.cases.BENCHES``)."""
    from benchmarks import cases
    return cases.small_benches(op, dtype, profile)


def label(bench) -> str:
    """The op, with its input precision or masking where an op has several benches."""
    extra = bench.precision or (bench.shape[-1] if bench.op.startswith("attention") else "")
    return f"{bench.op} ({extra})" if extra else bench.op


#: Rounds of ``calls`` timed per number; the fastest is reported. On shared GPU hosts one
#: round of the same launcher varied by up to 1.5x (other processes take the CPU).
ROUNDS = 5


def per_call_us(fn, calls: int) -> float:
    for _ in range(20):  # warm-up: compile, caches
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


ALL_OPS = all_ops()


def record(bench, ours: float, stubbed: float, kernel: float, theirs: float) -> dict:
    """One results record of ``bench`` from its per-call times (us): ours, ours with the
    launch stubbed, the kernel alone (CUDA-graph replay, NaN where it cannot be captured)
    and torch's; JSON has no NaN, so a kernel not timed leaves its fields out."""
    rec = {**bench.cell, "bench": label(bench), "ours_us": ours, "stubbed_us": stubbed,
           "launch_path_us": ours - stubbed, "torch_us": theirs}
    if bench.precision:
        rec["precision"] = bench.precision
    if math.isfinite(kernel):
        rec["kernel_us"], rec["above_kernel_us"] = kernel, ours - kernel
    return rec


def main(argv=None) -> int:
    from tabulate import tabulate
    from triton.runtime.jit import JITFunction

    from kernels import fast_launch

    from triton_cts.profiles import load_profiles
    from triton_cts.profiles.vendor_selection import attached_device, match_device

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--op", action="append", default=[], choices=ALL_OPS)
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    device = attached_device()
    if device is None:
        parser.error("no accelerator attached: launch overhead is measured on a GPU")
    dtype = getattr(torch, args.dtype)
    profile = match_device(device, load_profiles())
    from benchmarks import timing
    rows, records = [], []
    for bench in (b for op in args.op or ALL_OPS for b in small_benches(op, dtype, profile)):
        ours = per_call_us(bench.ours, args.calls)
        kernel = timing.graph_ms_or_nan(bench.ours) * 1e3
        real_run, real_direct = JITFunction.run, fast_launch._run_compiled
        JITFunction.run = lambda self, *a, **k: None
        fast_launch._run_compiled = lambda *a: None
        try:
            stubbed = per_call_us(bench.ours, args.calls)
        finally:
            JITFunction.run, fast_launch._run_compiled = real_run, real_direct
        theirs = per_call_us(bench.torch_eager, args.calls)
        rows.append([label(bench), f"{ours:.1f}", f"{stubbed:.1f}", f"{ours - stubbed:.1f}",
                     f"{kernel:.1f}", f"{ours - kernel:.1f}", f"{theirs:.1f}"])
        records.append(record(bench, ours, stubbed, kernel, theirs))
        print(" | ".join(rows[-1]), flush=True)
        if args.json:  # after every row: a run cut short keeps what it measured
            import triton
            env = {"device": device.name, "profile": profile.name, "calls": args.calls,
                   "torch": torch.__version__, "triton": triton.__version__,
                   "python": platform.python_version()}
            with open(args.json, "w") as fh:
                json.dump({"environment": env, "results": records}, fh, indent=1)
    print(f"profile {profile.name}, {args.dtype}, small shapes, mean of {args.calls} calls, "
          f"fastest of {ROUNDS} rounds; kernel: replayed from a CUDA graph")
    print(tabulate(rows, headers=["op", "ours us/call", "ours, launch stubbed",
                                  "launch path", "kernel us", "above kernel",
                                  "torch us/call"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
