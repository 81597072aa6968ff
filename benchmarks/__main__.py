"""python -m benchmarks [--op OP ...] [--dtype bfloat16 float32] [--library liger ...] [--json FILE]

Times each reference kernel and torch eager twice, on random data, median of repeated
runs after warm-up: per call (triton.testing.do_bench: what a Python caller sees, the
launcher's CPU time included wherever it exceeds the GPU's) and replayed from a CUDA
graph (do_bench_cudagraph: the kernels alone). Bandwidth and % of peak are computed from
the kernel time; the speedup over torch eager is given for both. A compute-bound kernel
(matmul) follows the GPU's clock, which a power cap moves under load, so it is timed in
alternation with torch and its speedups are the median ratios of the pairs
(``benchmarks/timing.py``). With --library, each named third-party library (through its
adapter in triton_cts/adapters/) is timed on the same tensors, one row per library under
ours."""
from __future__ import annotations

import argparse
import gc
import json
import platform
from importlib import metadata
import sys

import torch


def measured_copy_gbs() -> float:
    """Device-to-device copy of 2 GiB, counting bytes read plus written."""
    from triton.testing import do_bench
    src = torch.empty(1 << 29, device="cuda", dtype=torch.float32).normal_()
    dst = torch.empty_like(src)
    ms = do_bench(lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median")
    return 2 * src.numel() * 4 / (ms * 1e-3) / 1e9


def main(argv=None) -> int:
    from tabulate import tabulate

    from benchmarks import all_ops, cases, timing
    from triton_cts import adapters
    from triton_cts.profiles import load_profiles
    from triton_cts.profiles.vendor_selection import attached_device, match_device

    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--op", action="append",
                        choices=all_ops())
    parser.add_argument("--dtype", action="append", choices=("bfloat16", "float16", "float32"))
    parser.add_argument("--profile", help="profile name (default: the attached device's)")
    parser.add_argument("--library", action="append", default=[],
                        choices=(*(lib.name for lib in adapters.LIBRARIES), "all"),
                        help="also time this library's kernels (repeatable; 'all': every one)")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    libraries = [lib.name for lib in adapters.LIBRARIES
                 if lib.name in args.library or "all" in args.library]
    for name in list(libraries):
        why = adapters.import_problem(adapters.by_name(name))
        if why:
            print(f"--library {name}: not benchmarked: {why}", file=sys.stderr)
            libraries.remove(name)

    device = attached_device()
    if device is None:
        parser.error("no accelerator attached: benchmarks time real kernels on a GPU")
    profiles = load_profiles()
    if args.profile and args.profile not in profiles:
        parser.error(f"unknown profile '{args.profile}'; known: {', '.join(sorted(profiles))}")
    profile = profiles[args.profile] if args.profile else match_device(device, profiles)
    ops = args.op or list(all_ops())
    dtypes = [getattr(torch, d) for d in (args.dtype or ["bfloat16", "float32"])]

    copy_gbs = measured_copy_gbs()
    peak_gbs = profile.peak_bandwidth_gbs()
    rows, records, failed = [], [], []

    def save():
        """Write what is measured so far (after every shape: a run cut short keeps it)."""
        if args.json:
            import triton
            env = {"device": device.name, "profile": profile.name, "copy_gbs": copy_gbs,
                   "torch": torch.__version__, "triton": triton.__version__,
                   "python": platform.python_version(),
                   "libraries": {name: metadata.version(adapters.by_name(name).distribution)
                                 for name in libraries}}
            with open(args.json, "w") as fh:
                json.dump({"environment": env, "results": records}, fh, indent=1)

    def against_torch(fn, bench, torch_times):
        """(times, torch's times, speedups or None) of ``fn``: a compute-bound bench is
        timed in alternation with torch (``timing.paired``), the others alone."""
        if not bench.flops:
            return timing.timed(fn), torch_times, None
        p = timing.paired(fn, bench.torch_eager)
        return p.ours, p.torch, p.speedup

    for op in ops:
        for dtype in dtypes:
            for bench in cases.benches(op, dtype, profile):  # benchmarks/cases.py: BENCHES
                label = f"{op} ({bench.precision}; torch {bench.precision})" \
                    if bench.precision else op
                try:
                    torch_times = None if bench.flops else timing.timed(bench.torch_eager)
                    measured = against_torch(bench.ours, bench, torch_times)
                    row, rec = _measured(label, bench, *measured, profile, peak_gbs, copy_gbs)
                except Exception as exc:  # noqa: BLE001 - the row says it; the run goes on
                    row, rec = _error_row(label, bench, exc)
                    rec = {**bench.cell, **rec}
                    failed.append(f"{label} {bench.cell['dtype']} {bench.cell['shape']}")
                rows.append(row)
                records.append(rec)
                print(" | ".join(row), flush=True)  # progress; the table follows at the end
                if "error" in rec:
                    _release()
                    save()
                    continue
                for name in libraries:
                    row, lib_rec = _library_row(
                        name, bench, lambda fn: against_torch(fn, bench, torch_times), profile,
                        peak_gbs, copy_gbs)
                    if row:
                        rows.append(row)
                        rec.setdefault("libraries", {})[name] = lib_rec
                        print(" | ".join(row), flush=True)
                save()
                torch.cuda.empty_cache()
    print(f"device: {device.name} -> profile {profile.name}; peak {peak_gbs:.0f} GB/s "
          f"(profile), measured copy {copy_gbs:.0f} GB/s")
    print(tabulate(rows, headers=HEADERS))
    print("ms: per call / replayed from a CUDA graph (kernels only); throughput and % from the "
          "graph time; speedup over torch eager per call / in graphs")
    save()
    if failed:  # a library's error is its row's result; ours failing is the run's
        print(f"our kernels failed on {len(failed)} case(s): {'; '.join(failed)}",
              file=sys.stderr)
        return 1
    return 0


HEADERS = ["op", "dtype", "shape", "ms call / graph", "ours", "% peak", "% copy",
           "torch eager ms", "speedup call / graph"]


def _measured(label, bench, times, torch_times, speedups, profile, peak_gbs, copy_gbs):
    """One table row and JSON record from (per-call, graph) times of ``bench``; the
    speedups over torch are the ratio of the times unless given (paired timing's median
    ratios)."""
    (call, graph), (t_call, t_graph) = times, torch_times
    speedup, graph_speedup = speedups or (t_call / call, t_graph / graph)
    kernel = graph if graph == graph else call  # NaN: no graph, the call time stands
    rec = {**bench.cell, "ms": call, "graph_ms": graph,
           "torch_ms": t_call, "torch_graph_ms": t_graph, "speedup": speedup,
           "graph_speedup": graph_speedup, "paired_with_torch": speedups is not None}
    if bench.precision:
        rec["precision"] = rec["torch_precision"] = bench.precision
    if bench.flops:
        rec["tflops"] = bench.flops / (kernel * 1e-3) / 1e12
        peak_key = "tf32" if bench.precision == "tf32" else rec["dtype"]
        rec["pct_peak"] = 100 * rec["tflops"] / profile["peak.dense_tflops"].get(peak_key,
                                                                             float("nan"))
        perf, pct_copy = f"{rec['tflops']:.0f} TFLOP/s", ""
    else:
        rec["gbs"] = bench.bytes / (kernel * 1e-3) / 1e9
        rec["pct_peak"] = 100 * rec["gbs"] / peak_gbs
        rec["pct_copy"] = 100 * rec["gbs"] / copy_gbs
        perf, pct_copy = f"{rec['gbs']:.0f} GB/s", f"{rec['pct_copy']:.0f}"
    row = [label, rec["dtype"], rec["shape"], f"{call:.3f} / {graph:.3f}", perf,
           f"{rec['pct_peak']:.0f}", pct_copy, f"{t_call:.3f} / {t_graph:.3f}",
           f"{rec['speedup']:.2f}x / {rec['graph_speedup']:.2f}x"]
    return row, rec


def _library_row(name, bench, against_torch, profile, peak_gbs, copy_gbs):
    """One table row and record for library ``name`` on ``bench``; no row where the
    library has no kernel for the op, an error row where its kernel raises (memory
    released, so the next rows run).
    ``against_torch(fn)``: (times, torch's times, speedups or None), as for ours."""
    from benchmarks import cases

    fn = cases.library_call(name, bench)
    if fn is None:
        return None, None
    label = f"{bench.op} [{name}]" + (f" (torch {bench.precision})" if bench.precision else "")
    try:
        measured = against_torch(fn)
    except Exception as exc:  # noqa: BLE001 - a library limit, capture failure or OOM
        failure = _error_row(label, bench, exc)
    else:
        return _measured(label, bench, *measured, profile, peak_gbs, copy_gbs)
    # released after the except block: until it ends, the exception's traceback keeps the
    # failed call's frames, and the tensors (a failed graph capture's pool) they hold
    _release()
    return failure


def _error_row(label, bench, exc):
    """The table row and record of a case whose call raised ``exc``."""
    message = " ".join(str(exc).split())[:80]
    return [label, bench.cell["dtype"], bench.cell["shape"], "error", message, "", "", "",
            ""], {"error": f"{type(exc).__name__}: {message}"}


def _release() -> None:
    """Free what a failed call left: its tensors, the allocator's cache (a failed graph
    capture can leave it holding most of the device's memory)."""
    gc.collect()
    try:
        torch.cuda.synchronize()
    except RuntimeError:  # the failure may be the device's own; the cache is freed anyway
        pass
    torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
