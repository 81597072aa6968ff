"""The benchmark cases come from one table, ``benchmarks.cases.BENCHES`` (each op's shapes,
its bytes or FLOPs model and its builder); listed without a GPU (``benchmarks.listing``),
every op is timed by each command, with its figure, calling our launcher under the
profile."""
import json
import re

import pytest

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
