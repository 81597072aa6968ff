"""The goals checker: results files against benchmarks/goals.toml. A goal is met only by a
measurement that reaches it; one no file measured, or a best-library goal with no library
in the run, is never counted as met; bad goals and results files are refused by name."""
import json
import math

import pytest
import torch

from benchmarks import all_ops, goals
from benchmarks.cases import Bench
from benchmarks.goals import Goal, GoalsError, evaluate, parse_goals

OPS = all_ops()


def _rec(op="layer_norm", dtype="bfloat16", shape="1024x65536", **fields):
    return {"op": op, "dtype": dtype, "shape": shape, **fields}


def _parse(*tables):
    return parse_goals({"goal": list(tables)}, "goals.toml", OPS)


def test_the_shipped_goals_parse_and_every_launcher_has_a_launch_overhead_goal():
    shipped = goals.load_goals()
    overhead = {g.op for g in shipped if g.metric == "above_kernel_us"}
    assert overhead == set(OPS)  # an op added to the benchmarks needs its goal here
    cells = {(g.op, g.dtype, g.shape) for g in shipped if g.metric == "pct_copy"}
    assert ("layer_norm", "bfloat16", "32768x1024") in cells
    assert ("rms_norm", "float32", "1024x65536") in cells


def test_a_table_expands_over_its_lists_and_metrics():
    parsed = _parse({"op": ["softmax", "log_softmax"], "dtype": ["bfloat16", "float32"],
                     "shape": "1024x65536", "pct_copy": 75, "best_library": True})
    assert len(parsed) == 2 * 2 * 2
    assert Goal("log_softmax", "float32", "1024x65536", "", "pct_copy", 75.0) in parsed
    assert Goal("softmax", "bfloat16", "1024x65536", "", "best_library", None) in parsed


def test_met_short_and_not_measured():
    parsed = _parse({"op": "layer_norm", "dtype": "bfloat16",
                     "shape": ["1024x65536", "32768x1024", "4096x16384"], "pct_copy": 75})
    records = [_rec(pct_copy=75.0), _rec(shape="32768x1024", pct_copy=74.9)]
    by_shape = {v.goal.shape: v for v in evaluate(parsed, [("run.json", records)])}
    assert by_shape["1024x65536"].status == "met"
    assert by_shape["32768x1024"].status == "short"
    assert math.isclose(by_shape["32768x1024"].measured, 74.9)
    missing = by_shape["4096x16384"]
    assert (missing.status, missing.source) == ("not measured", "")


def test_an_at_most_goal_is_short_above_its_bound():
    parsed = _parse({"op": "attention", "dtype": "bfloat16", "above_kernel_us": 25})
    records = [_rec("attention", shape="1x2x128x64xfull", above_kernel_us=24.0),
               _rec("attention", shape="1x2x128x64xcausal", above_kernel_us=25.5)]
    verdicts = evaluate(parsed, [("overhead.json", records)])
    assert [(v.detail, v.status) for v in verdicts] == [("1x2x128x64xfull", "met"),
                                                       ("1x2x128x64xcausal", "short")]


def test_the_best_library_is_from_the_same_record_and_errors_are_not_numbers():
    parsed = _parse({"op": "layer_norm", "dtype": "bfloat16", "shape": "1024x65536",
                     "best_library": True})
    ahead = _rec(pct_copy=76.0, libraries={"flag_gems": {"pct_copy": 62.0},
                                           "liger": {"error": "RuntimeError: too long"}})
    behind = _rec(pct_copy=76.0, libraries={"flag_gems": {"pct_copy": 76.5}})
    alone = _rec(pct_copy=99.0)
    [v] = evaluate(parsed, [("a.json", [ahead])])
    assert (v.status, v.target, v.detail) == ("met", 62.0, "1024x65536: flag_gems")
    [v] = evaluate(parsed, [("b.json", [behind])])
    assert v.status == "short"
    [v] = evaluate(parsed, [("c.json", [alone])])
    assert v.status == "not measured" and "no results file timed a library" in v.detail
    # a later run without libraries leaves the goal to the last run that timed them
    [v] = evaluate(parsed, [("b.json", [behind]), ("c.json", [alone])])
    assert (v.status, v.source, v.measured) == ("short", "b.json", 76.0)


def test_matmul_is_compared_with_libraries_on_tflops():
    parsed = _parse({"op": "matmul", "dtype": "bfloat16", "shape": "4096x4096x4096",
                     "best_library": True})
    rec = _rec("matmul", shape="4096x4096x4096", tflops=700.0,
               libraries={"flag_gems": {"tflops": 520.0}})
    [v] = evaluate(parsed, [("m.json", [rec])])
    assert (v.status, v.measured, v.target) == ("met", 700.0, 520.0)


def test_the_last_file_that_measured_a_cell_is_read():
    parsed = _parse({"op": "rms_norm", "dtype": "float32", "shape": "1024x65536",
                     "pct_copy": 75})
    old, new = [_rec("rms_norm", "float32", pct_copy=62.5)], [_rec("rms_norm", "float32",
                                                                    pct_copy=78.3)]
    other = [_rec("softmax", pct_copy=10.0)]
    [v] = evaluate(parsed, [("old.json", old), ("new.json", new), ("other.json", other)])
    assert (v.status, v.source) == ("met", "new.json")
    [v] = evaluate(parsed, [("new.json", new), ("old.json", old)])
    assert (v.status, v.source) == ("short", "old.json")


def test_precision_picks_the_float32_matmul_record():
    parsed = _parse({"op": "matmul", "dtype": "float32", "shape": "4096x4096x4096",
                     "precision": "ieee", "speedup": 0.95})
    records = [_rec("matmul", "float32", "4096x4096x4096", precision="tf32", speedup=0.99),
               _rec("matmul", "float32", "4096x4096x4096", precision="ieee", speedup=0.86)]
    [v] = evaluate(parsed, [("m.json", records)])
    assert (v.status, v.detail) == ("short", "4096x4096x4096 ieee")


@pytest.mark.parametrize("table, field", [
    ({"op": "layernorm", "dtype": "bfloat16", "pct_copy": 90}, "goal[0].op"),
    ({"op": "layer_norm", "dtype": "int8", "pct_copy": 90}, "goal[0].dtype"),
    ({"dtype": "bfloat16", "pct_copy": 90}, "goal[0].op: missing"),
    ({"op": "layer_norm", "dtype": "bfloat16", "pct_copy": True}, "goal[0].pct_copy"),
    ({"op": "layer_norm", "dtype": "bfloat16", "pct_copy": "90"}, "goal[0].pct_copy"),
    ({"op": "layer_norm", "dtype": "bfloat16", "pct_cpy": 90}, "goal[0].pct_cpy: unknown"),
    ({"op": "layer_norm", "dtype": "bfloat16"}, "goal[0]: no metric"),
    ({"op": "layer_norm", "dtype": "bfloat16", "shape": "1024", "pct_copy": 90},
     "goal[0].shape"),
    ({"op": "layer_norm", "dtype": "bfloat16", "best_library": "yes"}, "goal[0].best_library"),
    ({"op": "matmul", "dtype": "float32", "precision": "fp32", "speedup": 1},
     "goal[0].precision"),
])
def test_a_bad_goal_is_refused_naming_file_and_field(table, field):
    with pytest.raises(GoalsError, match=f"goals.toml: {field}".replace("[", r"\[")
                       .replace("]", r"\]")):
        _parse(table)


def test_a_goals_file_without_goals_is_refused():
    with pytest.raises(GoalsError, match="non-empty list"):
        parse_goals({}, "goals.toml", OPS)
    with pytest.raises(GoalsError, match="unknown top-level key 'goals'"):
        parse_goals({"goals": []}, "goals.toml", OPS)


def test_bad_files_exit_2_with_the_file_named(tmp_path, capsys):
    not_json = tmp_path / "broken.json"
    not_json.write_text("{")
    other = tmp_path / "sweep.json"
    other.write_text(json.dumps({"rounds": []}))
    bad_toml = tmp_path / "goals.toml"
    bad_toml.write_text("[[goal]\n")
    for argv, named in ([str(not_json)], "broken.json: not JSON"), \
            ([str(other)], "sweep.json: not a results file"), \
            ([str(tmp_path / "absent.json")], "absent.json: no such results file"), \
            ([str(other), "--goals", str(bad_toml)], "goals.toml: not valid TOML"):
        assert goals.main(argv) == 2
        assert named in capsys.readouterr().err


def test_a_run_kept_under_a_key_of_a_file_is_read_by_file_and_key(tmp_path):
    kept = tmp_path / "rounds.json"
    run = {"environment": {}, "results": [_rec(pct_copy=80.0)]}
    kept.write_text(json.dumps({"command": "python -m benchmarks", "round_2": run}))
    assert goals.load_results(f"{kept}:round_2") == run["results"]
    with pytest.raises(GoalsError, match="no key 'round_3'; the file holds 'command', "
                                         "'round_2'"):
        goals.load_results(f"{kept}:round_3")
    with pytest.raises(GoalsError, match="not a results file"):
        goals.load_results(f"{kept}:command")


def test_exit_0_only_when_every_goal_is_met(tmp_path, capsys):
    goal_file = tmp_path / "goals.toml"
    goal_file.write_text('[[goal]]\nop = "gelu"\ndtype = "float32"\nshape = "8x1024"\n'
                         'pct_copy = 90\n')
    results = tmp_path / "run.json"
    results.write_text(json.dumps({"environment": {}, "results": [
        _rec("gelu", "float32", "8x1024", pct_copy=91.0)]}))
    assert goals.main([str(results), "--goals", str(goal_file)]) == 0
    assert "1 met, 0 short, 0 not measured" in capsys.readouterr().out
    results.write_text(json.dumps({"environment": {}, "results": [
        _rec("gelu", "float32", "8x1024", pct_copy=89.0)]}))
    assert goals.main([str(results), "--goals", str(goal_file)]) == 1
    assert "short by 1.00" in capsys.readouterr().out
    results.write_text(json.dumps({"environment": {}, "results": []}))
    assert goals.main([str(results), "--goals", str(goal_file)]) == 1
    assert "0 met, 0 short, 1 not measured" in capsys.readouterr().out


def test_a_launch_overhead_record_without_a_kernel_time_does_not_meet_its_goal():
    from benchmarks.launch_overhead import record
    bench = Bench("attention", (1, 2, 128, 64, "causal"), torch.bfloat16, lambda: None,
                  lambda: None)
    rec = record(bench, ours=30.0, stubbed=12.0, kernel=4.0, theirs=50.0)
    assert rec["shape"] == "1x2x128x64xcausal" and rec["above_kernel_us"] == 26.0
    json.dumps(rec)  # a results file is JSON
    untimed = record(bench, ours=30.0, stubbed=12.0, kernel=float("nan"), theirs=50.0)
    assert "above_kernel_us" not in untimed and "kernel_us" not in untimed
    parsed = _parse({"op": "attention", "dtype": "bfloat16", "above_kernel_us": 25})
    assert [v.status for v in evaluate(parsed, [("o.json", [rec])])] == ["short"]
    assert [v.status for v in evaluate(parsed, [("o.json", [untimed])])] == ["not measured"]


def test_a_recorded_h200_run_of_matmul():
    """The bf16 matmul cells of a recorded H200 run (experiment h200-triton3.6-matmul-final
    of the H200's results history): per call 0.967x and 1.005x torch, in graphs 0.959x and
    1.015x; that run timed no library, so its best-library goals are not measured."""
    from pathlib import Path
    path = Path(goals.__file__).parent / "results" / "h200.jsonl:h200-triton3.6-matmul-final"
    verdicts = [v for v in evaluate(goals.load_goals(), goals.load_sources(path))
                if v.goal.op == "matmul"]
    by_metric = {}
    for v in verdicts:
        by_metric.setdefault(v.goal.metric, []).append(v.status)
    assert by_metric == {"speedup": ["met", "met"], "graph_speedup": ["met", "met"],
                         "best_library": ["not measured", "not measured"],
                         "above_kernel_us": ["not measured"]}
    measured = sorted(round(v.measured, 3) for v in verdicts if v.goal.metric == "speedup")
    assert measured == [0.967, 1.005]


def test_the_whole_history_reads_each_cell_from_its_latest_run(tmp_path):
    """A history reads as its runs oldest first: a cell is judged on the latest run that
    measured it, as with run files named oldest first."""
    table = tmp_path / "h200.jsonl"
    for day, experiment, pct in (("2026-11-01", "old", 70.0), ("2026-11-02", "new", 81.0)):
        run = tmp_path / f"{experiment}.json"
        run.write_text(json.dumps({"environment": {"device": "NVIDIA H200"}, "results": [
            _rec("layer_norm", "float32", "4096x16384", pct_copy=pct)]}))
        from benchmarks import history
        history.append(run, experiment, commit=None, date=day, history=table)
    parsed = _parse({"op": "layer_norm", "dtype": "float32", "shape": "4096x16384",
                     "pct_copy": 80})
    [v] = evaluate(parsed, goals.load_sources(table))
    assert (v.status, v.measured, v.source) == ("met", 81.0, f"{table}:new")
    [v] = evaluate(parsed, goals.load_sources(f"{table}:old"))
    assert (v.status, v.source) == ("short", f"{table}:old")


def test_launch_overhead_writes_records_the_checker_reads(tmp_path, monkeypatch, capsys):
    """The benchmark's glue on a machine without a GPU: the timings are stand-ins (ours 30
    us, stubbed 12, torch 50, the kernel 4 in its graph), the rows and the JSON are real,
    and the launch is restored after its stubbed round."""
    from types import SimpleNamespace

    from triton.runtime.jit import JITFunction

    from benchmarks import launch_overhead, timing
    from kernels import fast_launch
    from triton_cts.profiles import load_profiles, vendor_selection
    real_run, real_direct = JITFunction.run, fast_launch._run_compiled
    bench = Bench("gelu", (8, 1024), torch.bfloat16, lambda: None, lambda: None)
    times = iter([30.0, 12.0, 50.0])
    monkeypatch.setattr(vendor_selection, "attached_device",
                        lambda: SimpleNamespace(name="stand-in GPU"))
    monkeypatch.setattr(vendor_selection, "match_device",
                        lambda device, profiles: load_profiles()["nvidia-sm90-h200"])
    monkeypatch.setattr(launch_overhead, "small_benches", lambda op, dtype, profile: [bench])
    monkeypatch.setattr(launch_overhead, "per_call_us", lambda fn, calls: next(times))
    monkeypatch.setattr(timing, "graph_ms_or_nan", lambda fn: 0.004)
    out = tmp_path / "launch.json"
    assert launch_overhead.main(["--op", "gelu", "--json", str(out)]) == 0
    assert (JITFunction.run, fast_launch._run_compiled) == (real_run, real_direct)
    assert "above kernel" in capsys.readouterr().out
    [rec] = goals.load_results(out)
    assert (rec["shape"], rec["launch_path_us"]) == ("8x1024", 18.0)
    assert math.isclose(rec["kernel_us"], 4.0) and math.isclose(rec["above_kernel_us"], 26.0)
    parsed = _parse({"op": "gelu", "dtype": "bfloat16", "above_kernel_us": 25})
    assert [v.status for v in evaluate(parsed, [(out.name, [rec])])] == ["short"]
