"""The results history: one table per device, read by benchmarks.history, every line of the
schema, a few values as the experiments' run files recorded them, and a run appended by
the writer reads back as the goals checker reads a run file."""
import json
import math

import pytest

from benchmarks import goals, history
from benchmarks.history import COLUMNS, HistoryError, read_history

TABLES = {"h200": "NVIDIA H200", "h100": "NVIDIA H100 80GB HBM3"}


@pytest.fixture(scope="module")
def tables():
    return {name: read_history(history.RESULTS_DIR / f"{name}.jsonl") for name in TABLES}


def _value(rows, experiment, **cell):
    """The value of the one row of ``experiment`` whose columns are ``cell``."""
    found = [r for r in rows if r["experiment"] == experiment
             and all(r[k] == v for k, v in cell.items())]
    assert len(found) == 1, f"{experiment} {cell}: {len(found)} rows"
    return found[0]["value"]


def test_every_line_has_the_columns_and_types(tables):
    for name, rows in tables.items():
        assert len(rows) > 1000
        for row in rows:
            assert list(row) == list(COLUMNS)
            assert row["gpu"] == TABLES[name]
            assert row["value"] is None or (isinstance(row["value"], float)
                                            and math.isfinite(row["value"]))
            assert row["value"] is not None or row["note"] is not None  # a null says why
        assert history.experiments(rows)[0].startswith(f"{name}-triton3.6")


def test_the_device_tables_hold_every_experiment(tables):
    # one experiment per results file the tables were folded from (47 on the H200, 37 on
    # the H100) and "comments", the measurements code comments used to carry; runs
    # appended since come after them
    assert len(history.experiments(tables["h200"])) >= 47 + 1
    assert len(history.experiments(tables["h100"])) >= 37 + 1
    assert history.experiments(tables["h200"])[:2] == ["h200-triton3.6", "comments"]
    comments = [r for r in tables["h200"] if r["experiment"] == "comments"]
    assert all(r["run"].startswith(("kernels/", "triton_cts/")) for r in comments)
    assert any("73 -> 78 summing the tile" in r["note"] for r in comments)


def test_values_as_the_run_files_recorded_them(tables):
    h200, h100 = tables["h200"], tables["h100"]
    # python -m benchmarks --json (h200-triton3.6-matmul-final.json)
    assert _value(h200, "h200-triton3.6-matmul-final", op="matmul", dtype="bfloat16",
                  shape="4096x4096x4096", impl="ours", metric="ms") == 0.1985280066728592
    assert _value(h200, "h200-triton3.6-matmul-final", op="copy",
                  metric="copy_gbs") == 4274.722438564857
    # runs kept under a list of named runs (h100-triton3.6-matmul-split-flatten.json)
    assert _value(h100, "h100-triton3.6-matmul-split-flatten", op="matmul",
                  dtype="bfloat16", shape="4096x4096x4096", metric="tflops",
                  run="runs / [0] / before (HEAD profile), round 1") == 666.0012815414096
    # two rounds per variant (h200-triton3.6-weight-early.json)
    rounds = [_value(h200, "h200-triton3.6-weight-early", op="layer_norm",
                     dtype="bfloat16", shape="8192x8192", setting="weight_early",
                     run=f"results / [4] / round {i}") for i in (1, 2)]
    assert rounds == [69.4, 69.2]
    # a table of rows named by a rows_format (h200-triton3.6-rms-norm-ablation.json)
    assert _value(h200, "h200-triton3.6-rms-norm-ablation", shape="16384x4096",
                  setting="liger gemma", metric="median_ms") == 0.06695028364349523
    # rows of a scratch script, named by what its "what" says the columns are
    # (h200-triton3.6-fused-linear-cross-entropy.json: ms, peak MiB, errors per chunk rows)
    flce = "h200-triton3.6-fused-linear-cross-entropy"
    assert _value(h200, flce, run="before_in_product_sums", setting="chunk_rows=256",
                  metric="ms") == 121.16831970214844
    assert _value(h200, flce, run="after_seed0", impl="torch",
                  metric="rel_err_grad_x") == 0.0027355090714991093
    # launch-overhead columns kept per op (h200-triton3.6-cross-entropy-one-launch.json)
    assert _value(h200, "h200-triton3.6-cross-entropy-one-launch", op="cross_entropy",
                  run="launch_overhead / before_1", metric="torch_us") == 121.9


def test_the_goals_checker_reads_the_history_by_experiment(tables):
    [(source, records)] = goals.load_history(
        history.RESULTS_DIR / "h200.jsonl:h200-triton3.6-matmul-final")
    assert source.endswith("h200.jsonl:h200-triton3.6-matmul-final")
    assert len(records) == 6 and {r["op"] for r in records} == {"matmul"}
    with pytest.raises(goals.GoalsError, match="no experiment 'h200-absent'"):
        goals.load_history(history.RESULTS_DIR / "h200.jsonl:h200-absent")


def _run_file(tmp_path, **env):
    run = {"environment": {"device": "NVIDIA H200", "profile": "nvidia-sm90-h200",
                           "copy_gbs": 4270.0, "torch": "2.13.0", "triton": "3.9.0",
                           "python": "3.12", "libraries": {"liger": "0.8.5"}, **env},
           "results": [{"op": "layer_norm", "dtype": "bfloat16", "shape": "1024x65536",
                        "ms": 0.09, "graph_ms": 0.085, "torch_ms": 0.16,
                        "torch_graph_ms": 0.15, "speedup": 1.8, "graph_speedup": 1.76,
                        "paired_with_torch": False, "gbs": 3158.0, "pct_peak": 65.8,
                        "pct_copy": 74.0,
                        "libraries": {"liger": {"error": "RuntimeError: too long"}}}]}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    return path


def test_a_run_appended_reads_back_as_the_run_file(tmp_path):
    table = tmp_path / "h200.jsonl"
    run = _run_file(tmp_path)
    assert history.main(["append", str(run), "--experiment", "new-run", "--commit",
                         "abc1234", "--date", "2026-12-01", "--history", str(table)]) == 0
    rows = read_history(table)
    assert {(r["date"], r["gpu"], r["triton"], r["torch"], r["commit"], r["kind"])
            for r in rows} == {("2026-12-01", "NVIDIA H200", "3.9.0", "2.13.0", "abc1234",
                                "benchmark")}
    [(source, [rec])] = goals.load_history(f"{table}:new-run")
    original = json.loads(run.read_text())["results"][0]
    assert rec == {k: v for k, v in original.items() if k != "paired_with_torch"}
    with pytest.raises(HistoryError, match="already holds experiment 'new-run'"):
        history.append(run, "new-run", commit=None, date="2026-12-01", history=table)
    # a second run of the experiment names itself, once
    history.append(run, "new-run", commit=None, date="2026-12-01", history=table, run="after")
    with pytest.raises(HistoryError, match="already holds experiment 'new-run' run 'after'"):
        history.append(run, "new-run", commit=None, date="2026-12-01", history=table, run="after")


def test_the_device_table_is_named_by_the_gpu(tmp_path):
    assert history.device_file("NVIDIA H200", tmp_path) == tmp_path / "h200.jsonl"
    assert history.device_file("NVIDIA H100 80GB HBM3", tmp_path) == tmp_path / "h100.jsonl"
    with pytest.raises(HistoryError, match="cannot tell a device table"):
        history.device_file("AMD Instinct", tmp_path)


@pytest.mark.parametrize("change, message", [
    ({"value": "90"}, "value: expected a finite number or null"),
    ({"value": True}, "value: expected a finite number or null"),
    ({"op": None}, "op: expected str, got None"),
    ({"date": "1 Dec 2026"}, "date: expected YYYY-MM-DD"),
    ({"kind": "bench"}, "kind: unknown 'bench'"),
    ({"extra": 1}, "unknown column 'extra'"),
])
def test_a_bad_line_is_refused_naming_file_line_and_column(tmp_path, change, message):
    good = {c: None for c in COLUMNS} | {
        "date": "2026-12-01", "gpu": "NVIDIA H200", "experiment": "e", "kind": "benchmark",
        "op": "gelu", "impl": "ours", "metric": "ms", "value": 1.0}
    table = tmp_path / "t.jsonl"
    table.write_text(json.dumps(good) + "\n" + json.dumps(good | change) + "\n")
    with pytest.raises(HistoryError, match=f"t.jsonl:2: {message}"):
        read_history(table)
    table.write_text(json.dumps({k: v for k, v in good.items() if k != "metric"}) + "\n")
    with pytest.raises(HistoryError, match="t.jsonl:1: missing column 'metric'"):
        read_history(table)


def test_a_file_that_is_not_a_run_is_refused_by_name(tmp_path):
    other = tmp_path / "sweep-notes.json"
    other.write_text(json.dumps({"rounds": []}))
    assert history.main(["append", str(other), "--experiment", "x",
                         "--history", str(tmp_path / "t.jsonl")]) == 2
    nan_run = _run_file(tmp_path, device=None)
    with pytest.raises(HistoryError, match="does not name its device"):
        history.append(nan_run, "x", commit=None, date="2026-12-01")
