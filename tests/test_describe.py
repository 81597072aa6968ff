"""`python -m triton_cts ops|profiles`, the generated docs/ops.md, the nearest names an
unknown --op, --vendor or --impl suggests, and the default selection on a CPU-only
machine (one profile per family, and the line saying what it left out)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from triton_cts import describe
from triton_cts.__main__ import main
from triton_cts.errors import UsageError, did_you_mean
from triton_cts.ops import catalog
from triton_cts.profiles import load_profiles, profile_from_dict
from triton_cts.profiles.vendor_selection import (REPRESENTATIVES, left_out_note,
                                                  representatives, select_profiles)
from triton_cts.targets import default_registry

ROOT = Path(__file__).resolve().parents[1]
PROFILES = load_profiles([])


def test_ops_page_is_current():
    page = ROOT / "docs" / "ops.md"
    assert page.exists(), f"docs/ops.md is missing; write it with `{describe.REGENERATE}`"
    assert page.read_text() == describe.ops_markdown(), (
        f"docs/ops.md is stale: regenerate it with `{describe.REGENERATE}`")


def test_ops_page_lists_every_op():
    text = describe.ops_markdown()
    for op in catalog.ALL_OPS:
        assert f"`{op.name}`" in text, op.name


def test_one_op_gives_its_signature_outputs_and_checks():
    lines = describe.op_details(next(o for o in catalog.ALL_OPS if o.name == "layer_norm"))
    assert lines["arguments"] == ["x: [3, 8] the input's dtype", "weight: [8] the input's dtype",
                                  "bias: [8] the input's dtype", "eps = 1e-05"]
    assert lines["outputs"] == ["y: [3, 8] the input's dtype", "mean: [3] float32",
                                "rstd: [3] float32"]
    assert "shift_invariance" in lines["relations"][0]
    assert lines["variants"] == ["reference/row_groups: "
                                 "kernels.layer_norm:layer_norm_forward_row_groups"]
    assert "liger" in lines["libraries"][0] and "flag_gems" in lines["libraries"][0]
    assert any(t.startswith("float32: rtol 1.3e-06, atol 0.001 (the op's own")
               for t in lines["tolerance"])


def test_every_op_example_names_each_output_once():
    for op in catalog.ALL_OPS:
        if op.primitive is not None:
            continue
        ex = describe.example(op, PROFILES["nvidia-sm90"])
        names = [v.name for v in ex.outputs]
        assert len(set(names)) == len(names), (op.name, names)
        assert not ex.note, (op.name, ex.note)  # the kernel returns what the reference does
        assert all(v.dtype for v in ex.outputs if v.shape is not None), (op.name, ex.outputs)


def test_output_names_come_from_the_description_or_fall_back():
    op = next(o for o in catalog.ALL_OPS if o.name == "fused_linear_cross_entropy")
    assert describe.output_names(op, 3) == ["loss", "grad_x", "grad_weight"]
    assert describe.output_names(op, 4) == ["loss", "grad_x", "grad_weight", "grad_bias"]
    gelu = next(o for o in catalog.ALL_OPS if o.name == "gelu")
    assert describe.output_names(gelu, 1) == ["out"]
    assert describe.output_names(gelu, 2) == ["out0", "out1"]


def test_cli_ops_and_profiles(capsys):
    assert main(["ops"]) == 0
    out = capsys.readouterr().out
    assert all(op.name in out for op in catalog.ALL_OPS)
    assert main(["ops", "layer_nrom"]) == 2
    assert "did you mean layer_norm" in capsys.readouterr().err
    assert main(["profiles"]) == 0
    out = capsys.readouterr().out
    for name, profile in PROFILES.items():
        assert f"{name}  [{profile.vendor}]" in out
    assert "nvidia-sm90  [nvidia] (default on a CPU-only machine)" in out


def test_unknown_names_suggest_the_nearest():
    assert did_you_mean("amd-gfx924", PROFILES).startswith(" (did you mean amd-gfx942")
    assert did_you_mean("zzz", PROFILES) == ""
    with pytest.raises(UsageError, match=r"'amd-gfx924' \(did you mean amd-gfx942"):
        select_profiles(["amd-gfx924"], PROFILES, None)
    with pytest.raises(UsageError, match=r"'rcom' \(did you mean rocm"):
        select_profiles(["rcom"], PROFILES, None)
    registry = default_registry()
    with pytest.raises(UsageError, match=r"'ligr' \(did you mean liger"):
        registry.select(["ligr"])
    with pytest.raises(UsageError, match=r"op 'layer_nrom' \(did you mean layer_norm"):
        registry.select(["layer_nrom=kernels.layer_norm:layer_norm_forward"])
    with pytest.raises(UsageError, match="PYTHONPATH"):
        registry.select(["layer_norm=no_such_module_here:fn"])


def _run_pytest(*args):
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU-only machine
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", *args],
                          cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)


def test_default_on_a_cpu_is_one_profile_per_family():
    picked = [p.name for p in select_profiles([], PROFILES, None)]
    assert sorted(picked) == sorted(REPRESENTATIVES.values())
    assert {PROFILES[n].vendor for n in picked} == {p.vendor for p in PROFILES.values()}
    # --vendor all and an explicit auto are unchanged: every profile
    assert [p.name for p in select_profiles(["all"], PROFILES, None)] == sorted(PROFILES)
    assert [p.name for p in select_profiles(["auto"], PROFILES, None)] == sorted(PROFILES)
    note = left_out_note(select_profiles([], PROFILES, None), PROFILES)
    assert "--vendor all" in note and "nvidia-sm80" in note and "left out 9" in note
    assert left_out_note(list(PROFILES.values()), PROFILES) is None


def test_default_keeps_profiles_from_a_profile_dir():
    data = dict(PROFILES["nvidia-sm80"].data, name="mine-sm80")
    mine = profile_from_dict(data, source="elsewhere/mine-sm80.toml")
    picked = [p.name for p in representatives({**PROFILES, "mine-sm80": mine})]
    assert "mine-sm80" in picked and len(picked) == len(REPRESENTATIVES) + 1


def test_a_run_without_vendor_says_what_it_left_out():
    # device checks on a CPU-only machine: each reported not supported at once
    args = ("suites/test_numerics.py", "--op", "gelu", "--mode", "device", "-v")
    result = _run_pytest(*args)
    out = result.stdout + result.stderr
    assert "left out 9: amd-gfx1100" in out and "add --vendor all" in out, out[-3000:]
    assert "-nvidia-sm80-" not in out and "-nvidia-sm90-" in out, out[-3000:]
    result = _run_pytest(*args, "--vendor", "all")
    assert "left out" not in result.stdout and "-nvidia-sm80-" in result.stdout
