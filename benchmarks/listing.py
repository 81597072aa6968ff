"""python -m benchmarks.listing [--profile NAME ...]

Every case the benchmark commands would time, listed without a GPU: ``python -m
benchmarks``, ``benchmarks.sweep`` (each op it takes, the profile as is) and
``benchmarks.launch_overhead`` are run with their tensors on torch's meta device, the
launchers and timers replaced by recorders and the timers returning fixed times. For each
case it prints the op, dtype, shape, bytes, FLOPs, precision, the arguments, what ours and
torch's side call, then the commands' own rows and JSON records. Two trees that print the
same listing run the same benchmarks with the same figures (a change to how the cases are
built can be checked so)."""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import pkgutil
import sys
import tempfile
from unittest import mock

import torch
from torch.overrides import TorchFunctionMode

#: Fixed fake times (ms): per call, replayed from a CUDA graph.
CALL_MS, GRAPH_MS = 1.0, 0.5
DEFAULT_PROFILES = ("nvidia-sm90-h200", "amd-gfx942")


def _on_meta(value):
    if isinstance(value, str) and value.startswith("cuda"):
        return "meta"
    if isinstance(value, torch.device) and value.type == "cuda":
        return torch.device("meta")
    return value


class _MetaDevice(TorchFunctionMode):
    """Every tensor made on "cuda" is made on the meta device (shapes and dtypes, no data);
    top-level torch calls are logged while ``self.log`` is a list."""

    log: list | None = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = {k: _on_meta(v) for k, v in (kwargs or {}).items()}
        if isinstance(kwargs.get("generator"), torch._C.Generator):
            kwargs.pop("generator")  # a CPU generator cannot fill a meta tensor
        args = tuple(_on_meta(a) for a in args)
        if self.log is not None:
            self.log.append(f"torch {getattr(func, '__name__', func)}")
        return func(*args, **kwargs)


def describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(describe(v) for v in value) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {describe(v)}" for k, v in value.items()) + "}"
    if hasattr(value, "name") and hasattr(value, "peak_bandwidth_gbs"):
        return f"<profile {value.name}>"
    return repr(value)


class _Outputs(tuple):
    """What a recorded launcher returns: tensors like its first tensor argument, as many
    as the caller unpacks (up to three), and any attribute (``out.mean``) as one more."""

    def __new__(cls, like):
        return super().__new__(cls, (torch.empty_like(like) for _ in range(3)))

    def __getattr__(self, name):
        return self[0]


class _CpuGenerator(torch._C.Generator):
    """``torch.Generator(device="cuda")`` without a GPU: a CPU one (meta tensors take none)."""

    def __new__(cls, device=None):
        return torch._C.Generator()


class Recorder:
    def __init__(self, mode: _MetaDevice):
        self.mode = mode
        self.lines: list[str] = []

    def emit(self, line: str) -> None:
        self.lines.append(line)

    def launcher(self, qualname: str, fn):
        def recorded(*args, **kwargs):
            log, self.mode.log = self.mode.log, None  # describing and faking are no calls
            try:
                if log is not None:
                    log.append(f"{qualname}({', '.join(map(describe, args))}"
                               + "".join(f", {k}={describe(v)}" for k, v in kwargs.items())
                               + ")")
                like = next((a for a in args if isinstance(a, torch.Tensor)), None)
                out = _Outputs(like if like is not None else torch.empty(1, device="meta"))
            finally:
                self.mode.log = log
            n_out = {"attention_forward": 2}.get(fn.__name__)
            return tuple(out[:n_out]) if n_out else out
        recorded.__wrapped__ = fn
        return recorded

    def called(self, fn) -> str:
        """What one call of ``fn`` runs: the launchers and top-level torch calls."""
        self.mode.log = []
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - a torch call the meta device lacks
            self.mode.log.append(f"raised {type(exc).__name__}")
        finally:
            log, self.mode.log = self.mode.log, None
        return "; ".join(log)

    def timer(self, ms: float):
        def fake(fn, *args, **kwargs):
            self.emit(f"    timed: {self.called(fn)}")
            return ms
        return fake

    def interleaved(self, ours, theirs, *args, **kwargs):
        self.emit(f"    timed: {self.called(ours)} || {self.called(theirs)}")
        return CALL_MS, 2 * CALL_MS, 2.0

    def measured(self, real):
        def logged(label, bench, *args, **kwargs):
            self.emit(f"  case {label}: {bench.op} {str(bench.dtype).removeprefix('torch.')} "
                      f"shape={bench.shape} bytes={bench.bytes} flops={bench.flops} "
                      f"precision={bench.precision!r} args={describe(bench.args)} "
                      f"kwargs={describe(bench.kwargs)}")
            return real(label, bench, *args, **kwargs)
        return logged


def _kernel_modules():
    import kernels
    for info in pkgutil.walk_packages(kernels.__path__, "kernels."):
        try:
            yield importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - a backend module this machine cannot import
            continue


@contextlib.contextmanager
def _fake_gpu(recorder: Recorder, profile_name: str):
    from triton_cts.profiles import vendor_selection
    from triton_cts.profiles.vendor_selection import DeviceInfo
    import benchmarks.__main__ as bench_main
    import triton.testing
    from benchmarks import timing

    device = DeviceInfo("cuda", f"fake device for {profile_name}", 90, 32, 132)
    with contextlib.ExitStack() as stack:
        patch = stack.enter_context
        for module in list(_kernel_modules()):
            for name, fn in list(vars(module).items()):
                if callable(fn) and not isinstance(fn, type) and not name.startswith("_") \
                        and getattr(fn, "__module__", "").startswith("kernels") \
                        and hasattr(fn, "__name__"):
                    qual = fn.__name__  # not its module: where a launcher lives may move
                    patch(mock.patch.object(module, name, recorder.launcher(qual, fn)))
        patch(mock.patch.object(vendor_selection, "attached_device", lambda: device))
        patch(mock.patch.object(vendor_selection, "match_device",
                                lambda dev, profiles: profiles[profile_name]))
        patch(mock.patch.object(bench_main, "measured_copy_gbs", lambda: 4000.0))
        patch(mock.patch.object(triton.testing, "do_bench", recorder.timer(CALL_MS)))
        patch(mock.patch.object(triton.testing, "do_bench_cudagraph", recorder.timer(GRAPH_MS)))
        patch(mock.patch.object(timing, "interleaved_per_call", recorder.interleaved))
        patch(mock.patch.object(bench_main, "_measured", recorder.measured(bench_main._measured)))
        patch(mock.patch.object(torch.cuda, "synchronize", lambda *a, **k: None))
        patch(mock.patch.object(torch.cuda, "empty_cache", lambda *a, **k: None))
        patch(mock.patch.object(torch, "Generator", _CpuGenerator))
        patch(recorder.mode)
        yield


def _run(recorder: Recorder, title: str, main, argv: list[str]) -> None:
    """``main(argv + ["--json", F])`` with its printed lines and JSON records emitted."""
    recorder.emit(f"== {title} {' '.join(argv)}")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out.json")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            main([*argv, "--json", path])
        recorder.lines += ["  | " + line for line in out.getvalue().splitlines()]
        with open(path) as fh:
            data = json.load(fh)
    for rec in data["results"]:
        recorder.emit("  json " + json.dumps(rec, sort_keys=True))


def listing(profile_name: str) -> list[str]:
    """Every case of the three benchmark commands under profile ``profile_name``."""
    import benchmarks.__main__ as bench_main
    from benchmarks import launch_overhead, sweep

    recorder = Recorder(_MetaDevice())
    with _fake_gpu(recorder, profile_name):
        dtypes = ["--dtype", "bfloat16", "--dtype", "float32"]
        _run(recorder, "benchmarks", bench_main.main, ["--profile", profile_name, *dtypes])
        sweep_ops = next(a.choices for a in _parser_actions(sweep.main) if a.dest == "op")
        for op in sweep_ops:
            _run(recorder, "sweep", sweep.main, ["--op", op, "--profile", profile_name, *dtypes])
        for dtype in ("bfloat16", "float32"):
            recorder.emit(f"== launch_overhead --dtype {dtype}")
            out = io.StringIO()
            with mock.patch.object(launch_overhead, "per_call_us", _per_call_us(recorder)), \
                    contextlib.redirect_stdout(out):
                launch_overhead.main(["--dtype", dtype, "--calls", "1"])
            recorder.lines += ["  | " + line for line in out.getvalue().splitlines()]
    return recorder.lines


def _per_call_us(recorder: Recorder):
    def fake(fn, calls):
        recorder.emit(f"    per call: {recorder.called(fn)}")
        return 10.0
    return fake


def _parser_actions(main):
    """The argparse actions of ``main``'s parser (caught as it parses ``--help``)."""
    seen = []
    real = argparse.ArgumentParser.parse_args

    def capture(self, *args, **kwargs):
        seen.extend(self._actions)
        raise SystemExit(0)
    with mock.patch.object(argparse.ArgumentParser, "parse_args", capture):
        try:
            main(["--help"])
        except SystemExit:
            pass
    assert real is argparse.ArgumentParser.parse_args
    return seen


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.listing",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", action="append", help="profile name (repeatable; default: "
                        + ", ".join(DEFAULT_PROFILES) + ")")
    args = parser.parse_args(argv)
    for name in args.profile or DEFAULT_PROFILES:
        print(f"### profile {name}")
        print("\n".join(listing(name)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
