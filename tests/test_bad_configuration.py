"""Bad configuration is refused when the run starts, naming what is wrong, instead of
passing silently or failing after the run: profile numbers no hardware has, tolerance
overrides that would let a wrong result pass, reserved profile names, output paths that
cannot be written, malformed expectation files, a bad TRITON_CTS_MAX_NUMEL, and profile
folders that are files or empty. --write-expectations updates an existing file in place.
"""
import copy
import json
import os
import textwrap

import pytest
import torch

from tests.helpers import bundled_profile_data, needs_interpreter, run_pytest, write_toml
from triton_cts.errors import UsageError
from triton_cts.execution.size_budget import ENV_VAR, max_numel_override
from triton_cts.ops import tolerances
from triton_cts.profiles import (EmptyProfileDirWarning, ProfileError, load_profile,
                                 load_profiles, profile_from_dict)
from triton_cts.profiles.schema import (DEFAULT_TOLERANCES, PLAUSIBLE, SCHEMA, Field,
                                        tolerance_ceiling)
from triton_cts.results.expectations import load_expectations, updated_expectations_toml
from triton_cts.results.report_io import ReportError, atomic_write, check_outputs

USAGE_ERROR = int(pytest.ExitCode.USAGE_ERROR)
GRID = "suites/test_grid_limits.py"
ONE_PROFILE = ("--vendor", "nvidia-sm90", "--op", "gelu")


def _profile(tmp_path, change, base="nvidia-sm90", name=None):
    data = copy.deepcopy(bundled_profile_data(base))
    data["name"] = name or data["name"]
    change(data)
    return write_toml(tmp_path / f"{data['name']}.toml", data)


def _refused(path) -> ProfileError:
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert str(path) in str(info.value)
    return info.value


# ---- 1. tolerance overrides: a ceiling, and listed in the report ----------------------
@pytest.mark.parametrize("dtype, tol, field, message", [
    ("float16", {"rtol": 1e30, "atol": 1e30}, "tolerances.gelu.float16.rtol",
     "1e+30 is above the ceiling 0.1 (100 x torch's default 0.001 for float16)"),
    ("float32", {"rtol": 1e-4, "atol": 0.5}, "tolerances.gelu.float32.atol",
     "0.5 is above the ceiling 0.001 (100 x torch's default 1e-05 for float32)"),
    ("int32", {"rtol": 0, "atol": 1}, "tolerances.gelu.int32.atol",
     "above the ceiling 0 (int32 compares exactly)"),
    ("float16", {"rtol": float("inf"), "atol": 1e-5}, "tolerances.gelu.float16.rtol",
     "expected a finite number, got inf"),
])
def test_tolerance_override_above_the_ceiling_is_refused(tmp_path, dtype, tol, field, message):
    path = _profile(tmp_path, lambda d: d.update(tolerances={"gelu": {dtype: tol}}))
    err = _refused(path)
    assert err.field == field and message in err.message


def test_tolerance_override_at_the_ceiling_loads_and_is_listed():
    sm90 = load_profiles()["nvidia-sm90"]
    data = bundled_profile_data()
    data["tolerances"] = {"gelu": {"float16": {"rtol": 0.1, "atol": 1e-3},
                                   "bfloat16": {"rtol": 1.6, "atol": 1e-3}}}
    loose = profile_from_dict(data)
    assert loose.tolerance_overrides() == [
        {"op": "gelu", "dtype": "float16", "rtol": 0.1, "atol": 1e-3},
        {"op": "gelu", "dtype": "bfloat16", "rtol": 1.6, "atol": 1e-3}]
    assert sm90.tolerance_overrides() == []


def test_tolerance_defaults_have_one_source():
    """The policy's defaults and the ceilings come from the same table."""
    for name, tol in DEFAULT_TOLERANCES.items():
        assert tolerances.DEFAULT[getattr(torch, name)] == tol
        assert tolerance_ceiling(name) == pytest.approx(tuple(100 * x for x in tol))
    assert tolerance_ceiling("float8_e5m2") == pytest.approx((12.5, 10.0))


def test_report_lists_tolerance_overrides_and_the_size_cap(tmp_path, monkeypatch):
    _profile(tmp_path, lambda d: d.update(tolerances={"gelu": {"float16": {
        "rtol": 2e-3, "atol": 1e-4}}}), name="nvidia-sm90-loose")
    out, page = tmp_path / "r.json", tmp_path / "r.html"
    monkeypatch.setenv(ENV_VAR, "512")
    result = run_pytest(GRID, "--collect-only", "-q", "--vendor", "nvidia-sm90-loose",
                        "--op", "gelu", "--profile-dir", str(tmp_path),
                        "--report-json", str(out), "--report-html", str(page))
    env = json.loads(out.read_text())["environment"]
    assert env["tolerance_overrides"] == [{"profile": "nvidia-sm90-loose", "op": "gelu",
                                           "dtype": "float16", "rtol": 0.002, "atol": 0.0001}]
    assert env["max_numel"] == {"device": 512, "interpreter": 512}
    html = page.read_text()
    assert 'id="tolerance-overrides"' in html, result.stdout + result.stderr
    assert "<td>nvidia-sm90-loose</td><td>gelu</td><td>float16</td><td>0.002</td>" in html


# ---- 2. plausibility ranges and reserved names --------------------------------------
@pytest.mark.parametrize("change, field, message", [
    (lambda d: d["peak"].update(memory_bandwidth_gbs=float("inf")),
     "peak.memory_bandwidth_gbs", "expected a finite number, got inf"),
    (lambda d: d["peak"]["dense_tflops"].update(bfloat16=float("nan")),
     "peak.dense_tflops.bfloat16", "expected a finite number, got nan"),
    (lambda d: d["limits"].update(device_memory_bytes=10**30),
     "limits.device_memory_bytes",
     "1,000,000,000,000,000,000,000,000,000,000 is outside the plausible range "
     "[1,048,576, 70,368,744,177,664]"),
    (lambda d: d["launch"].update(max_fused_size_bytes=1), "launch.max_fused_size_bytes",
     "1 is outside the plausible range [16, 8,388,608]"),
    (lambda d: d["launch"].update(max_fused_size_bytes=2**60), "launch.max_fused_size_bytes",
     "1,152,921,504,606,846,976 is outside the plausible range [16, 8,388,608]"),
    (lambda d: d["peak"].update(memory_bandwidth_gbs=3.35e9), "peak.memory_bandwidth_gbs",
     "3.35e+09 is outside the plausible range [0, 100,000] (GB/s"),
    (lambda d: d["limits"].update(grid_max=[2**40, 65535, 65535]), "limits.grid_max[0]",
     "outside the plausible range [1, 4,294,967,295]"),
    (lambda d: d["limits"].update(compute_units=10**6), "limits.compute_units",
     "outside the plausible range"),
    (lambda d: d["autotune"]["matmul"][0].update(BLOCK_SIZE_M=2**30),
     "autotune.matmul[0].BLOCK_SIZE_M", "outside the plausible range"),
])
def test_impossible_numbers_name_file_field_value_and_range(tmp_path, change, field, message):
    err = _refused(_profile(tmp_path, change))
    assert err.field == field and message in err.message


def test_every_numeric_field_has_a_plausible_range():
    def numeric(value):
        return not isinstance(value, (bool, str)) and (
            isinstance(value, (int, float)) or isinstance(value, (list, dict)) and any(
                numeric(v) for v in (value.values() if isinstance(value, dict) else value)))

    for name in ("nvidia-sm90", "amd-gfx942", "npu-ascend910b"):
        data = bundled_profile_data(name)
        for section, fields in SCHEMA.items():
            if not isinstance(fields, dict):
                continue
            for key, spec in fields.items():
                assert isinstance(spec, Field)
                if numeric(data[section].get(key)):
                    assert f"{section}.{key}" in PLAUSIBLE, f"{section}.{key} has no range"
        assert numeric(data["autotune"]) and "autotune" in PLAUSIBLE
    for rng in PLAUSIBLE.values():
        assert rng.low <= rng.high and rng.why


def test_tiny_derived_profiles_stay_plausible():
    """The smallest constants suites/strategies.py derives profiles with."""
    sm90 = load_profiles()["nvidia-sm90"]
    tiny = sm90.derive(**{"launch.max_fused_size_bytes": 64, "launch.elementwise_block_bytes": 64,
                          "launch.row_stack_bytes": 16, "launch.max_grid_num": 1,
                          "limits.compute_units": 1, "limits.grid_max": [1, 1, 1],
                          "limits.grid_max_product": 1})
    assert tiny.max_grid_num == 1


@pytest.mark.parametrize("name", ["nvidia", "rocm", "npu", "all", "auto"])
def test_profile_named_like_a_selector_is_refused(tmp_path, name):
    err = _refused(_profile(tmp_path, lambda d: None, name=name))
    assert err.field == "name" and "--vendor" in err.message and "rename it" in err.message


# ---- 3. output paths are checked before the run -------------------------------------
def test_output_that_is_a_folder_is_a_usage_error_before_any_test(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    result = run_pytest(GRID, "--collect-only", *ONE_PROFILE, "--report-json", str(folder))
    assert result.returncode == USAGE_ERROR, result.stdout + result.stderr
    assert f"--report-json {folder}: cannot be written: it is a folder, not a file" \
        in result.stderr
    assert "collected" not in result.stdout


@pytest.mark.parametrize("args, message", [
    (["--report-json", "{d}/r.out", "--report-html", "{d}/r.out"],
     "--report-html {d}/r.out: the same file as --report-json {d}/r.out"),
    (["--expectations", "{d}/e.toml", "--report-json", "{d}/e.toml"],
     "--report-json {d}/e.toml: the same file as the input --expectations {d}/e.toml"),
    (["--report-json", "{d}/e.toml/r.json"], "{d}/e.toml is not a folder"),
    (["--expectations", "{d}/e.toml", "--write-expectations", "{d}/broken.toml"],
     "expectation file {d}/broken.toml: invalid TOML"),
])
def test_unwritable_or_clashing_outputs_are_usage_errors(tmp_path, args, message):
    (tmp_path / "e.toml").write_text("")
    (tmp_path / "broken.toml").write_text("[[expectation]\n")
    result = run_pytest(GRID, "--collect-only", *ONE_PROFILE,
                        *(a.format(d=tmp_path) for a in args))
    assert result.returncode == USAGE_ERROR, result.stdout + result.stderr
    assert message.format(d=tmp_path) in result.stderr


def test_output_checks_create_nothing_and_allow_updating_a_baseline(tmp_path, monkeypatch):
    exp = tmp_path / "e.toml"
    exp.write_text("")
    new = tmp_path / "new" / "deeper" / "r.json"   # made at the end, by atomic_write
    check_outputs({"--report-json": str(new), "--report-html": None,
                   "--write-expectations": str(exp)}, [("--expectations", str(exp))],
                  updates=("--write-expectations",))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.toml"]
    # a read-only folder (simulated: os.access says so even to root)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(tmp_path)
                        else real_access(p, mode))
    with pytest.raises(ReportError, match=f"--report-json {new}: cannot be written: the "
                                          f"folder {tmp_path} is not writable"):
        check_outputs({"--report-json": str(new)})
    with pytest.raises(ReportError, match="the file exists and is not writable"):
        monkeypatch.setattr(os, "access", lambda p, mode: False)
        check_outputs({"--write-expectations": str(exp)})


def test_a_failed_write_names_the_target_not_the_temporary_file(tmp_path):
    target = tmp_path / "r.json"
    target.mkdir()
    with pytest.raises(OSError) as info:
        atomic_write(target, "{}")
    assert str(target) in str(info.value) and ".tmp" not in str(info.value)
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


# ---- 4. --write-expectations updates an existing file in place ----------------------
EXISTING = textwrap.dedent("""\
    # Known failures of our target (kept as written).

    [[expectation]]
    test = "a::t[skipped]"
    status = "skip"
    reason = "hangs the device"
    link = "https://example.invalid/1"

    # fixed upstream since
    [[expectation]]
    test = "a::t[fixed]"
    status = "xfail"
    reason = "was wrong"

    [[expectation]]
    test = "a::t[flaky]"
    status = "flaky"
    reason = "races"
    link = "https://example.invalid/2"

    [[expectation]]
    test = "a::t[failing]"
    status = "xfail"
    reason = "still wrong"
    link = "https://example.invalid/3"

    # another target's entry: not run here
    [[expectation]]
    test = "b::"
    status = "skip"
    reason = "other target"

    [[expectation]]
    test = "a::t[device"
    status = "xfail"
    reason = "device only"

    [[expectation]]
    test = "a::t[cut"
    status = "xfail"
    reason = "partly run"
    """)


def test_write_expectations_updates_an_existing_file_in_place(tmp_path):
    path = tmp_path / "e.toml"
    path.write_text(EXISTING)
    exp = {e.test: e.__dict__ for e in load_expectations(path)}
    records = [
        {"test_id": "a::t[skipped]", "status": "waived", "expectation": exp["a::t[skipped]"],
         "reason": "waived: hangs the device (https://example.invalid/1)"},
        {"test_id": "a::t[fixed]", "status": "unexpected_pass", "reason": "waived: was wrong"},
        {"test_id": "a::t[flaky]", "status": "pass", "reason": "passed; expected flaky"},
        {"test_id": "a::t[failing]", "status": "waived", "expectation": exp["a::t[failing]"],
         "reason": "waived: still wrong (https://example.invalid/3)"},
        {"test_id": "a::t[device-1]", "status": "not_supported", "reason": "no accelerator"},
        {"test_id": "a::t[cut-1]", "status": "unexpected_pass", "reason": ""},
        {"test_id": "a::t[new]", "status": "fail", "reason": "AssertionError: off by 2"},
        {"test_id": "a::t[slow]", "status": "timeout", "reason": "Timeout"},
        {"test_id": "a::t[ok]", "status": "pass", "reason": ""},
    ]
    collected = [r["test_id"] for r in records] + ["a::t[cut-2]"]  # the run stopped early
    text = updated_expectations_toml(path, records, collected, note="command: pytest x")
    path.write_text(text)
    entries = [(e.test, e.status, e.reason, e.link) for e in load_expectations(path)]
    assert entries == [
        ("a::t[skipped]", "skip", "hangs the device", "https://example.invalid/1"),
        ("a::t[flaky]", "flaky", "races", "https://example.invalid/2"),
        ("a::t[failing]", "xfail", "still wrong", "https://example.invalid/3"),
        ("b::", "skip", "other target", ""),
        ("a::t[device", "xfail", "device only", ""),
        ("a::t[cut", "xfail", "partly run", ""),
        ("a::t[new]", "xfail", "fail: AssertionError: off by 2", ""),
        ("a::t[slow]", "skip", "timeout: Timeout", ""),
    ]
    assert '# removed: "a::t[fixed]" passes now (was xfail: was wrong)' in text
    assert "# Known failures of our target (kept as written)." in text
    assert "# another target's entry: not run here" in text
    assert "# command: pytest x" in text


def test_write_expectations_updates_entries_written_inline(tmp_path):
    """Entries not laid out as [[expectation]] blocks are written anew, the same ones."""
    path = tmp_path / "e.toml"
    path.write_text('# inline\nexpectation = [\n'
                    '  { test = "a::t[1]", status = "skip", reason = "hangs", link = "https://example.invalid/L" },\n'
                    '  { test = "a::t[2]", status = "xfail", reason = "fixed" },\n]\n')
    records = [{"test_id": "a::t[2]", "status": "unexpected_pass", "reason": ""},
               {"test_id": "a::t[3]", "status": "fail", "reason": "boom"}]
    path.write_text(updated_expectations_toml(path, records, note="command: pytest"))
    assert [(e.test, e.status, e.reason, e.link) for e in load_expectations(path)] == [
        ("a::t[1]", "skip", "hangs", "https://example.invalid/L"), ("a::t[3]", "xfail", "fail: boom", "")]
    assert path.read_text().startswith("# inline\n")


def test_write_expectations_of_a_waived_check_keeps_its_entry(tmp_path):
    """A new baseline copies the entry that waived a check (skip, flaky, link), not an
    xfail of the check's id."""
    waiver = {"test": "a::t[", "status": "flaky", "reason": "races",
              "link": "https://example.invalid/2"}
    records = [{"test_id": "a::t[1]", "status": "waived", "expectation": waiver,
                "reason": "waived: races (https://example.invalid/2)"},
               {"test_id": "a::t[2]", "status": "waived", "expectation": waiver, "reason": ""}]
    path = tmp_path / "new.toml"
    path.write_text(updated_expectations_toml(path, records, note="command: pytest"))
    assert [{k: e.__dict__[k] for k in waiver} for e in load_expectations(path)] == [waiver]


@needs_interpreter
def test_write_expectations_updates_the_file_given_as_expectations(tmp_path):
    path = tmp_path / "nvidia-sm90.toml"
    empty = f"{GRID}::test_empty_tensors[gelu-reference-nvidia-sm90-interpreter]"
    edges = f"{GRID}::test_grids_within_limits_at_edges[gelu-reference-nvidia-sm90-interpreter]"
    path.write_text(textwrap.dedent(f"""\
        # our baseline
        [[expectation]]
        test = "{empty}"
        status = "xfail"
        reason = "believed broken"

        [[expectation]]
        test = "{edges}"
        status = "skip"
        reason = "too slow here"
        link = "https://example.invalid/9"

        [[expectation]]
        test = "{GRID}::test_empty_tensors[gelu-reference-amd-gfx942-"
        status = "flaky"
        reason = "another profile"
        link = "https://example.invalid/10"
        """))
    result = run_pytest(GRID, *ONE_PROFILE, "--mode", "interpreter", "--hypothesis-profile",
                        "ci", "-k", "empty or edges", "--expectations", str(path),
                        "--write-expectations", str(path))
    assert "1 xpassed" in result.stdout or "XPASS" in result.stdout, result.stdout
    text = path.read_text()
    entries = [(e.test, e.status, e.link) for e in load_expectations(path)]
    assert entries == [
        (edges, "skip", "https://example.invalid/9"),
        (f"{GRID}::test_empty_tensors[gelu-reference-amd-gfx942-", "flaky",
         "https://example.invalid/10")], text
    assert text.startswith("# our baseline\n") and f'# removed: "{empty}" passes now' in text


# ---- 5. malformed expectation files -------------------------------------------------
@pytest.mark.parametrize("body, got", [
    ('[expectation]\ntest = "a::t"\nstatus = "xfail"\nreason = "r"\n',
     "got one [expectation] table (single brackets)"),
    ("expectation = 5\n", "got int 5"),
    ('expectation = ["a::t"]\n', "entry 1: expected an [[expectation]] table with test, "
                                 "status and reason, got str 'a::t'"),
])
def test_expectation_table_typos_name_the_file(tmp_path, body, got):
    path = tmp_path / "e.toml"
    path.write_text(body)
    with pytest.raises(ReportError) as info:
        load_expectations(path)
    assert str(path) in str(info.value) and got in str(info.value)
    assert "[[expectation]]" in str(info.value)


def test_single_bracket_expectation_is_a_usage_error_not_an_internal_error(tmp_path):
    path = tmp_path / "e.toml"
    path.write_text('[expectation]\ntest = "a::t"\nstatus = "xfail"\nreason = "r"\n')
    result = run_pytest(GRID, "--collect-only", *ONE_PROFILE, "--expectations", str(path))
    assert result.returncode == USAGE_ERROR, result.stdout + result.stderr
    assert "INTERNALERROR" not in result.stdout + result.stderr
    assert f"expectation file {path}: expected entries as [[expectation]] tables" \
        in result.stderr


# ---- 6. TRITON_CTS_MAX_NUMEL --------------------------------------------------------
@pytest.mark.parametrize("value", ["0", "-1", "abc", "1e6"])
def test_bad_max_numel_is_a_usage_error(monkeypatch, value):
    monkeypatch.setenv(ENV_VAR, value)
    with pytest.raises(UsageError, match=f"TRITON_CTS_MAX_NUMEL='{value}': expected a "
                                         f"positive int"):
        max_numel_override()


def test_max_numel_override_reads_the_variable(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert max_numel_override() is None
    monkeypatch.setenv(ENV_VAR, " 4096 ")
    assert max_numel_override() == 4096


def test_bad_max_numel_stops_the_run_at_start(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "0")
    result = run_pytest(GRID, "--collect-only", *ONE_PROFILE)
    assert result.returncode == USAGE_ERROR, result.stdout + result.stderr
    assert "TRITON_CTS_MAX_NUMEL='0': expected a positive int" in result.stderr


def test_strategies_read_the_cap_only_through_size_budget():
    from triton_cts import CHECKOUT
    source = (CHECKOUT / "suites" / "strategies.py").read_text()
    assert "size_budget import max_numel" in source and "environ" not in source


# ---- 7. --profile-dir: a file, an empty folder --------------------------------------
def test_profile_dir_that_is_a_file_says_so(tmp_path):
    path = tmp_path / "nvidia-sm90.toml"
    path.write_text("")
    with pytest.raises(ProfileError, match="is a file, not a folder") as info:
        load_profiles([path])
    assert str(path) in str(info.value)
    result = run_pytest(GRID, "--collect-only", *ONE_PROFILE, "--profile-dir", str(path))
    assert result.returncode == USAGE_ERROR
    assert f"{path}: is a file, not a folder" in result.stderr


def test_empty_profile_dir_warns(tmp_path):
    with pytest.warns(EmptyProfileDirWarning, match=f"profile directory {tmp_path} holds no"):
        profiles = load_profiles([tmp_path])
    assert "nvidia-sm90" in profiles
    result = run_pytest(GRID, "--collect-only", *ONE_PROFILE, "--profile-dir", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"EmptyProfileDirWarning: profile directory {tmp_path} holds no *.toml" \
        in result.stdout
