"""`python -m reports diff` between runs of two Triton versions: every codegen change of a
compiled kernel (registers, spills, shared memory, occupancy, verdicts, kernels one run
compiled only) shows, better or worse; worse stats stay compile-stat regressions; a status
change of a numerics check shows with its suite."""
import json

from reports.__main__ import main as reports_main
from reports.diff import diff
from triton_cts.results.report_io import document

CONFIG = "BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, num_warps=8, num_stages=2"
SPILLS = f"_matmul_kernel [{CONFIG}]: spills {{}} (registers), scratch {{}} bytes per thread"


def stats(registers=166, spills=0, shared=65536, quality=(), kernel="_matmul_kernel",
          config=CONFIG):
    return {"kernel": kernel, "target": "hip:gfx942", "config": config, "num_warps": 8,
            "num_stages": 2, "registers": registers, "spills": spills, "shared": shared,
            "scratch": spills * 4, "occupancy": 2.0, "grid": [64, 1, 1], "violations": [],
            "quality": list(quality), "profile": "amd-gfx942", "dtype": "float16",
            "shape": [512, 512]}


def run(triton, *records):
    env = {"triton": triton, "torch": "2.13.0", "profiles": ["amd-gfx942"],
           "modes": ["compile", "interpreter"], "shard": None}
    return document(env, list(records), expectations={"stale": [], "unexpected_passes": []})


def compiled(test_id, *kernel_stats):
    return {"test_id": test_id, "status": "pass", "op": "matmul", "profile": "amd-gfx942",
            "suite": "test_compile", "compile_stats": list(kernel_stats)}


def numerics(test_id, status):
    return {"test_id": test_id, "status": status, "op": "softmax", "profile": "amd-gfx942",
            "suite": "test_numerics"}


MM = "suites/test_compile.py::test_compiles_within_limits[matmul-reference-amd-gfx942-compile]"
SM = "suites/test_numerics.py::test_matches_reference[softmax-reference-amd-gfx942-interpreter]"
OLD = run("3.6.0", compiled(MM, stats(), stats(kernel="_gelu_kernel", config="BLOCK=1024")),
          numerics(SM, "pass"))
# 3.9: fewer registers but spills (a quality warning appears), shared memory unchanged, the
# gelu kernel no longer compiled, a new config compiled, and the softmax check fails.
NEW = run("3.9.0", compiled(MM, stats(registers=109, spills=12, quality=[SPILLS.format(12, 48)]),
                            stats(config="BLOCK_SIZE_M=64, num_warps=4, num_stages=2")),
          numerics(SM, "fail"))


def test_every_codegen_change_shows_better_or_worse():
    d = diff(OLD, NEW)
    changes = {(stat, old, new) for _, _, stat, old, new in d.codegen_changes}
    assert ("registers", 166, 109) in changes                  # better: listed, no regression
    assert ("spills", 0, 12) in changes and ("scratch", 0, 48) in changes
    # the verdict that appeared, without the kernel and config its row already names
    assert ("quality", "-", "spills 12 (registers), scratch 48 bytes per thread") in changes
    assert ("compiled", "yes", "no") in changes and ("compiled", "no", "yes") in changes
    assert not any(stat == "shared" for stat, _, _ in changes)  # unchanged: not listed
    assert {(s, o, n) for _, _, s, o, n in d.compile_regressions} == {("spills", 0, 12),
                                                                      ("scratch", 0, 48)}
    assert d.toolchain_changed == ["triton 3.6.0 -> 3.9.0"]
    assert [t for t, *_ in d.new_failures] == [SM] and d.regressed


def test_a_spill_count_that_moves_is_a_stat_change_not_a_new_verdict():
    old = run("3.6.0", compiled(MM, stats(spills=4, quality=[SPILLS.format(4, 16)])))
    new = run("3.9.0", compiled(MM, stats(spills=8, quality=[SPILLS.format(8, 32)])))
    assert {stat for _, _, stat, _, _ in diff(old, new).codegen_changes} == {"spills", "scratch"}
    assert diff(new, new).codegen_changes == []


def test_cli_prints_the_codegen_changes_and_the_numerics_status_changes(tmp_path, capsys):
    (tmp_path / "old.json").write_text(json.dumps(OLD))
    (tmp_path / "new.json").write_text(json.dumps(NEW))
    assert reports_main(["diff", str(tmp_path / "old.json"), str(tmp_path / "new.json")]) == 1
    out = capsys.readouterr().out
    assert "toolchain changed: triton 3.6.0 -> 3.9.0" in out
    assert "codegen changes, better or worse (6 in 3 compiled kernels):" in out
    assert "registers 166 -> 109; spills 0 -> 12; scratch 0 -> 48; quality - -> " in out
    assert f"_matmul_kernel [{CONFIG}] float16 [512, 512]" in out
    assert "status changes by suite: suites/test_numerics.py 1" in out
    assert "6 codegen change(s)" in out
