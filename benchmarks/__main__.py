"""python -m benchmarks [--op OP ...] [--dtype bfloat16 float32] [--library liger ...] [--json FILE]

Times each reference kernel and torch eager with triton.testing.do_bench (median of
repeated runs, after warm-up, on random data) and prints one table. With --library, each
named third-party library (through its adapter in triton_cts/adapters/) is timed on the
same tensors, one row per library under ours."""
from __future__ import annotations

import argparse
import json
import platform
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
    from triton.testing import do_bench

    from benchmarks import cases
    from triton_cts import adapters
    from triton_cts.profiles import load_profiles
    from triton_cts.vendors import attached_device, match_device

    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--op", action="append", choices=(*cases.MEMORY_OPS, "matmul"))
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
    ops = args.op or [*cases.MEMORY_OPS, "matmul"]
    dtypes = [getattr(torch, d) for d in (args.dtype or ["bfloat16", "float32"])]

    copy_gbs = measured_copy_gbs()
    peak_gbs = profile.peak_bandwidth_gbs()
    rows, records = [], []

    def timed(fn):
        return do_bench(fn, warmup=25, rep=100, return_mode="median")

    for op in ops:
        for dtype in dtypes:
            if op == "matmul":
                benches = [cases.matmul(s, dtype, profile) for s in cases.MATMUL_SIZES]
            else:
                benches = [cases.memory_bound(op, s, dtype, profile) for s in cases.MEMORY_SHAPES]
            for bench in benches:
                ours_ms, torch_ms = timed(bench.ours), timed(bench.torch_eager)
                rec = {"op": op, "dtype": str(dtype).removeprefix("torch."),
                       "shape": "x".join(map(str, bench.shape)), "ms": ours_ms,
                       "torch_ms": torch_ms, "speedup": torch_ms / ours_ms}
                if bench.flops:
                    rec["tflops"] = bench.flops / (ours_ms * 1e-3) / 1e12
                    rec["torch_tflops"] = bench.flops / (torch_ms * 1e-3) / 1e12
                    rec["pct_peak"] = 100 * rec["tflops"] / profile["peak.dense_tflops"].get(
                        rec["dtype"] if dtype != torch.float32 or not profile["dtypes.tf32"] else "tf32", float("nan"))
                    rows.append([op, rec["dtype"], rec["shape"], f"{ours_ms:.3f}",
                                 f"{rec['tflops']:.0f} TFLOP/s", f"{rec['pct_peak']:.0f}", "",
                                 f"{rec['torch_tflops']:.0f} TFLOP/s", f"{rec['speedup']:.2f}x"])
                else:
                    rec["gbs"] = bench.bytes / (ours_ms * 1e-3) / 1e9
                    rec["torch_gbs"] = bench.bytes / (torch_ms * 1e-3) / 1e9
                    rec["pct_peak"] = 100 * rec["gbs"] / peak_gbs
                    rec["pct_copy"] = 100 * rec["gbs"] / copy_gbs
                    rows.append([op, rec["dtype"], rec["shape"], f"{ours_ms:.3f}",
                                 f"{rec['gbs']:.0f} GB/s", f"{rec['pct_peak']:.0f}",
                                 f"{rec['pct_copy']:.0f}", f"{rec['torch_gbs']:.0f} GB/s",
                                 f"{rec['speedup']:.2f}x"])
                records.append(rec)
                for name in libraries:
                    row, lib_rec = _library_row(name, bench, rec, timed, peak_gbs, copy_gbs,
                                                profile)
                    if row:
                        rows.append(row)
                        rec.setdefault("libraries", {})[name] = lib_rec
                torch.cuda.empty_cache()
    print(f"device: {device.name} -> profile {profile.name}; peak {peak_gbs:.0f} GB/s "
          f"(profile), measured copy {copy_gbs:.0f} GB/s")
    print(tabulate(rows, headers=["op", "dtype", "shape", "ms", "ours", "% peak", "% copy",
                                  "torch eager", "speedup"]))
    if args.json:
        import triton
        env = {"device": device.name, "profile": profile.name, "copy_gbs": copy_gbs,
               "torch": torch.__version__, "triton": triton.__version__,
               "python": platform.python_version()}
        with open(args.json, "w") as fh:
            json.dump({"environment": env, "results": records}, fh, indent=1)
    return 0


def _library_row(name, bench, rec, timed, peak_gbs, copy_gbs, profile):
    """One table row and record for library ``name`` on ``bench``; no row where the
    library has no kernel for the op, an error row where its kernel raises."""
    from benchmarks import cases

    fn = cases.library_call(name, bench)
    if fn is None:
        return None, None
    label = f"{bench.op} [{name}]"
    try:
        ms = timed(fn)
    except Exception as exc:  # a library limit (row too long, dtype) is a result too
        message = " ".join(str(exc).split())[:80]
        return [label, rec["dtype"], rec["shape"], "error", message, "", "", "", ""], \
            {"error": f"{type(exc).__name__}: {message}"}
    out = {"ms": ms, "speedup": rec["torch_ms"] / ms, "vs_ours": rec["ms"] / ms}
    if bench.flops:
        out["tflops"] = bench.flops / (ms * 1e-3) / 1e12
        out["pct_peak"] = rec["pct_peak"] * out["tflops"] / rec["tflops"]
        perf, copy = f"{out['tflops']:.0f} TFLOP/s", ""
        torch_perf = f"{rec['torch_tflops']:.0f} TFLOP/s"
    else:
        out["gbs"] = bench.bytes / (ms * 1e-3) / 1e9
        out["pct_peak"] = 100 * out["gbs"] / peak_gbs
        out["pct_copy"] = 100 * out["gbs"] / copy_gbs
        perf, copy = f"{out['gbs']:.0f} GB/s", f"{out['pct_copy']:.0f}"
        torch_perf = f"{rec['torch_gbs']:.0f} GB/s"
    return [label, rec["dtype"], rec["shape"], f"{ms:.3f}", perf, f"{out['pct_peak']:.0f}",
            copy, torch_perf, f"{out['speedup']:.2f}x"], out


if __name__ == "__main__":
    sys.exit(main())
