"""python -m benchmarks.sweep --op OP [--dtype D] [--shape MxN | --size N] --set FIELD=VALUE ...

Times the reference kernels under variants of the attached device's profile, to choose
the profile's launch constants from measurements: every combination of the --set values
(a field named twice is an axis with two values; VALUE is JSON or TOML-like: 32768,
"masked", [[2048, 8], [8192, 16]]) is derived from the profile, validated like a file,
and timed on the same tensors as ``python -m benchmarks``, from a CUDA graph (the kernels
alone, as the benchmark's graph column). A setting the device refuses (out of shared
memory or registers) is listed as refused. Prints one table, best setting per (op, dtype,
shape) marked with '*'.

    python -m benchmarks.sweep --op layer_norm --dtype bfloat16 \\
        --set launch.max_fused_size_bytes=32768 --set launch.max_fused_size_bytes=65536

The fused add + RMS norm, SwiGLU and GEGLU (forward and backward) take --shape as their
rows (tokens x hidden), as the memory-bound ops do. ``--op matmul`` times N x N x N products (``--size``, default the benchmark's sizes) and
reports TFLOP/s; a setting is a whole config list, e.g. ``--set 'autotune.matmul_tma=[{
"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8,
"num_warps": 8, "num_stages": 3}]'``. A compute-bound kernel's speed follows the GPU's
clock, which drifts as a sweep heats it, so each setting is timed in five alternations
with torch.matmul and compared with it by the median of the five ratios
(``benchmarks/timing.py``).
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys

import torch


def parse_settings(items: list[str]) -> dict[str, list]:
    """``["a.b=1", "a.b=2", "c.d=[1]"]`` -> ``{"a.b": [1, 2], "c.d": [[1]]}``, in order."""
    axes: dict[str, list] = {}
    for item in items:
        field, sep, raw = item.partition("=")
        if not sep or not field:
            raise ValueError(f"--set wants FIELD=VALUE, got '{item}'")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw  # a bare word: a string field such as io.load=select
        axes.setdefault(field.strip(), []).append(value)
    return axes


def parse_shape(text: str) -> tuple[int, int]:
    try:
        m, n = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a shape is MxN, e.g. 4096x1024; got '{text}'")
    if m <= 0 or n <= 0:
        raise argparse.ArgumentTypeError(f"a shape needs positive sizes; got '{text}'")
    return m, n


def sweep_cases(ops, shapes, sizes) -> list[tuple[str, tuple[int, ...]]]:
    """(op, shape) pairs to time: memory-bound ops at ``shapes`` (default the benchmark's
    MxN shapes), matmul at ``sizes`` (N x N x N; default the benchmark's sizes)."""
    from benchmarks import cases
    out = []
    for op in ops:
        if op not in swept_ops():
            raise ValueError(f"the sweep times {', '.join(swept_ops())}; not '{op}' (its "
                             f"benchmark shape is fixed)")
        if cases.BENCHES[op].sweep == "sizes":
            out += [(op, (n,)) for n in sizes or cases.MATMUL_SIZES]
        else:
            out += [(op, tuple(shape)) for shape in shapes or cases.MEMORY_SHAPES]
    return out


def swept_ops() -> tuple[str, ...]:
    """The ops the sweep times: those resized by rows (--shape), then by sizes (--size)."""
    from benchmarks import cases
    from benchmarks.bench import SWEEP_KINDS
    return tuple(op for kind in SWEEP_KINDS for op, spec in cases.BENCHES.items()
                 if spec.sweep == kind)


def parse_size(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n <= 0:
        raise argparse.ArgumentTypeError(f"a matmul size is a positive integer N (N x N x N); "
                                         f"got '{text}'")
    return n


def main(argv=None) -> int:
    from tabulate import tabulate
    from triton.runtime.errors import OutOfResources
    from benchmarks import timing

    def kernel_ms(fn) -> float:
        """Median ms of ``fn`` replayed from a CUDA graph: the kernels alone. Per-call
        times carry the launcher's CPU time, which made 50-us kernels differ by up to 1.6x
        between two identical settings (H100, 32768x1024 RMS norm)."""
        try:
            return timing.graph_ms(fn)
        except OutOfResources:
            raise
        except Exception:  # a function that cannot be captured: time it per call
            torch.cuda.synchronize()
            return timing.per_call_ms(fn)

    from benchmarks import cases
    from benchmarks.__main__ import measured_copy_gbs
    from triton_cts.profiles import ProfileError, load_profiles
    from triton_cts.profiles.vendor_selection import attached_device, match_device

    parser = argparse.ArgumentParser(prog="python -m benchmarks.sweep", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--op", action="append", required=True,
                        choices=swept_ops())
    parser.add_argument("--dtype", action="append", choices=("bfloat16", "float16", "float32"))
    parser.add_argument("--shape", action="append", type=parse_shape,
                        help="MxN (repeatable; default: the benchmark shapes)")
    parser.add_argument("--size", action="append", type=parse_size,
                        help="matmul N (N x N x N; repeatable; default: the benchmark sizes)")
    parser.add_argument("--set", action="append", default=[], dest="settings",
                        metavar="FIELD=VALUE", help="a profile field value to try (repeatable)")
    parser.add_argument("--profile", help="profile name (default: the attached device's)")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    try:
        axes = parse_settings(args.settings)
    except ValueError as exc:
        parser.error(str(exc))

    device = attached_device()
    if device is None:
        parser.error("no accelerator attached: the sweep times real kernels on a GPU")
    profiles = load_profiles()
    if args.profile and args.profile not in profiles:
        parser.error(f"unknown profile '{args.profile}'; known: {', '.join(sorted(profiles))}")
    base = profiles[args.profile] if args.profile else match_device(device, profiles)
    variants = []
    for values in itertools.product(*axes.values()):
        changes = dict(zip(axes, values))
        try:
            variants.append((changes, base.derive(**changes) if changes else base))
        except ProfileError as exc:
            parser.error(f"--set {changes}: {exc}")

    copy_gbs = measured_copy_gbs()
    dtypes = [getattr(torch, d) for d in (args.dtype or ["bfloat16", "float32"])]
    rows, records = [], []

    for (op, shape), dtype in itertools.product(sweep_cases(args.op, args.shape, args.size),
                                                dtypes):
        torch.manual_seed(0)
        eager = cases.benches(op, dtype, base, shape)  # matmul float32: one per precision
        torch_ms = [0.0 if b.flops else kernel_ms(b.torch_eager) for b in eager]
        del eager
        group = []
        for changes, profile in variants:
            torch.manual_seed(0)
            for i, bench in enumerate(cases.benches(op, dtype, profile, shape)):
                record = {**bench.cell, "op": op, "setting": changes, "precision": bench.precision}
                try:
                    if bench.flops:  # compute-bound: against torch timed right after, rounds
                        ms, record["torch_ms"], speedup = timing.alternated(
                            kernel_ms, bench.ours, bench.torch_eager)
                    else:
                        ms = kernel_ms(bench.ours)
                        record["torch_ms"], speedup = torch_ms[i], torch_ms[i] / ms
                except OutOfResources as exc:  # a setting the device refuses is a result too
                    record["refused"] = str(exc)
                else:
                    record.update(ms=ms, speedup=speedup)
                    if bench.flops:
                        record["tflops"] = bench.flops / (ms * 1e-3) / 1e12
                    else:
                        gbs = bench.bytes / (ms * 1e-3) / 1e9
                        record.update(gbs=gbs, pct_copy=100 * gbs / copy_gbs)
                group.append(record)
            torch.cuda.empty_cache()
        for precision in dict.fromkeys(r["precision"] for r in group):
            same = [r for r in group if r["precision"] == precision]
            ran = [r for r in same if "ms" in r]
            best = max(ran, key=lambda r: r["speedup"] if "tflops" in r else -r["ms"],
                       default=None)
            for r in same:
                setting = ", ".join(f"{k}={json.dumps(v)}" for k, v in r["setting"].items())
                label = (setting or "(profile)") + (" *" if r is best else "")
                dtype_name = r["dtype"] + (f" ({r['precision']})" if r["precision"] else "")
                if "tflops" in r:
                    rate, pct = f"{r['tflops']:.0f} TFLOP/s", ""
                elif "ms" in r:
                    rate, pct = f"{r['gbs']:.0f} GB/s", f"{r['pct_copy']:.0f}"
                if "ms" in r:
                    rows.append([r["op"], dtype_name, r["shape"], label, f"{r['ms']:.3f}", rate,
                                 pct, f"{r['speedup']:.2f}x"])
                else:
                    rows.append([r["op"], dtype_name, r["shape"], label,
                                 "refused: out of resources", "", "", ""])
                print(" | ".join(map(str, rows[-1])), flush=True)  # progress, for long sweeps
        records += group
    print(f"device: {device.name} -> profile {base.name}; measured copy {copy_gbs:.0f} GB/s")
    print(tabulate(rows, headers=["op", "dtype", "shape", "setting", "ms", "rate", "% copy",
                                  "vs torch"]))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": device.name, "profile": base.name, "copy_gbs": copy_gbs,
                       "results": records}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
