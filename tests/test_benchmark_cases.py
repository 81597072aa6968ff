"""The benchmark cases come from one table, ``benchmarks.cases.BENCHES`` (each op's shapes,
its bytes or FLOPs model and its builder); listed without a GPU (``benchmarks.listing``),
every op is timed by each command, with its figure, calling our launcher under the
profile."""
import dataclasses
import gc
import json
import re
import weakref

import pytest
import torch

from benchmarks import all_ops, cases
from benchmarks.bench import BenchSpec, moved
from benchmarks.listing import listing
from triton_cts.ops.catalog import ALL_OPS

PROFILE = "nvidia-sm90-h200"


def test_every_bench_times_an_op_of_the_registry():
    assert {spec.op for spec in cases.BENCHES.values()} <= {op.name for op in ALL_OPS}
    assert all_ops() == tuple(cases.BENCHES)


def test_a_bench_spec_needs_exactly_one_figure_and_a_known_sweep():
    for figures in ({}, {"bytes": moved(1), "flops": lambda shape: 1}):
        with pytest.raises(ValueError, match="bench of 'gelu'.*exactly one"):
            BenchSpec("gelu", lambda *a: [], (), (), **figures)
    with pytest.raises(ValueError, match="sweep must be one of"):
        BenchSpec("gelu", lambda *a: [], (), (), bytes=moved(1), sweep="columns")


def _sections(lines: list[str]) -> dict[str, list[str]]:
    out, title = {}, None
    for line in lines:
        if line.startswith("== "):
            title = line[3:]
            out[title] = []
        elif title is not None:
            out[title].append(line)
    return out


@pytest.fixture(scope="module")
def sections():
    return _sections(listing(PROFILE))


def test_python_m_benchmarks_times_every_op_in_each_dtype_with_its_figure(sections):
    lines = sections[f"benchmarks --profile {PROFILE} --dtype bfloat16 --dtype float32"]
    seen, records, timed = set(), [], []
    for line in lines:
        if line.startswith("    timed: "):
            timed.append(line)
            continue
        case = re.match(r"  case .*?: (\w+) (\w+) shape=.* bytes=(\d+) flops=(\d+) ", line)
        if case:
            op, dtype, nbytes, flops = case.groups()
            seen.add((op, dtype))
            assert (int(nbytes) > 0) != (int(flops) > 0), line  # one figure, never none
            # ours (or torch's, timed first) calls a launcher with the profile
            assert any(f"<profile {PROFILE}>" in t for t in timed), line
            timed = []
        elif line.startswith("  json "):
            records.append(json.loads(line[len("  json "):]))
    assert seen == {(op, d) for op in all_ops() for d in ("bfloat16", "float32")}
    assert {(r["op"], r["dtype"]) for r in records} == seen
    assert all(("gbs" in r) != ("tflops" in r) for r in records)


def test_the_sweep_and_launch_overhead_cover_their_ops(sections):
    from benchmarks.sweep import swept_ops
    swept = {title.split()[2] for title in sections if title.startswith("sweep ")}
    assert swept == set(swept_ops()) and "matmul" in swept and "cross_entropy" not in swept
    rows = sections["launch_overhead --dtype bfloat16"]
    listed = {line.split("|")[1].split()[0] for line in rows if line.startswith("  | ")
              and line.count("|") > 2}
    assert listed == set(all_ops())


def test_a_library_that_fails_is_its_rows_error_and_the_run_goes_on(tmp_path, monkeypatch,
                                                                      capsys):
    """A library whose call raises (an out-of-memory after a failed graph capture, say) gets
    an error row; memory is released and every later row still runs; the run exits 0.
    Our own kernel failing is an error row too, and the run then exits 1."""
    import benchmarks.__main__ as bench_main
    from benchmarks.listing import Recorder, _fake_gpu, _MetaDevice
    from triton_cts import adapters

    released, held = [], []

    def release():  # what the failed call held is garbage by now (its traceback is gone)
        gc.collect()
        released.append(all(ref() is None for ref in held))
    monkeypatch.setattr(bench_main, "_release", release)
    monkeypatch.setattr(adapters, "import_problem", lambda lib: None)
    monkeypatch.setattr(bench_main.metadata, "version", lambda dist: "0+stand-in")
    from benchmarks import timing

    def timed(fn):  # the listing's timers describe calls; these make them, errors and all
        fn()
        return 1.0, 0.5

    def library_call(name, bench):
        def fails():
            kept = torch.empty(4)  # stands for the chunks a failed capture holds
            held.append(weakref.ref(kept))
            raise torch.cuda.OutOfMemoryError("CUDA out of memory: 108 GiB reserved")
        return fails if bench.op == "softmax" else None
    monkeypatch.setattr(cases, "library_call", library_call)
    ops = ["--op", "softmax", "--op", "rms_norm", "--dtype", "bfloat16", "--library", "liger"]
    out = tmp_path / "run.json"
    with _fake_gpu(Recorder(_MetaDevice()), PROFILE):
        monkeypatch.setattr(timing, "timed", timed)
        assert bench_main.main(ops + ["--profile", PROFILE, "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    results = json.loads(out.read_text())["results"]
    softmax = [r for r in results if r["op"] == "softmax"]
    assert softmax and all(r["libraries"]["liger"]["error"].startswith("OutOfMemoryError")
                           for r in softmax)
    assert released == [True] * len(softmax)
    assert any(r["op"] == "rms_norm" and "gbs" in r for r in results)  # the rows after ran
    assert "softmax [liger] | bfloat16" in printed and "| error | CUDA out of memory" in printed

    real = cases.benches

    def ours_fails(op, dtype, profile):
        for bench in real(op, dtype, profile):
            if op == "softmax":
                bench = _raising(bench)
            yield bench
    monkeypatch.setattr(cases, "benches", ours_fails)
    released.clear()
    with _fake_gpu(Recorder(_MetaDevice()), PROFILE):
        assert bench_main.main(ops + ["--profile", PROFILE, "--json", str(out)]) == 1
    results = json.loads(out.read_text())["results"]
    assert [r["error"] for r in results if r["op"] == "softmax"][0].startswith("RuntimeError")
    assert any(r["op"] == "rms_norm" and "gbs" in r for r in results)
    assert released


def _raising(bench):
    def ours():
        raise RuntimeError("illegal memory access")
    return dataclasses.replace(bench, ours=ours)
