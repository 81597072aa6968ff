"""Profile loading, validation errors and the helpers launchers use."""
import copy
import re
import warnings

import pytest
import torch

from tests.helpers import bundled_profile_data, write_toml
from kernels import cross_entropy_tuning, reductions_tuning, softmax_tuning
from kernels.attention import plan as attention_plan
from kernels.layer_norm import tuning as lnt
from triton_cts.profiles import ProfileError, load_profile, load_profiles, profile_from_dict

REQUIRED_PROFILES = {"nvidia-sm80", "nvidia-sm90", "amd-gfx90a", "amd-gfx942", "amd-gfx1100",
                     "npu-ascend910b"}


def test_bundled_profiles_load_and_cover_required_targets():
    profiles = load_profiles()
    assert REQUIRED_PROFILES <= set(profiles)
    assert {p.vendor for p in profiles.values()} == {"nvidia", "rocm", "npu", "intel"}


def test_every_number_in_bundled_profiles_names_its_source():
    from triton_cts import PROFILE_DIR
    for path in PROFILE_DIR.glob("*.toml"):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            value = re.sub(r'"[^"]*"', "", code.split("=", 1)[1]) if "=" in code else ""
            if any(ch.isdigit() for ch in value):
                assert "#" in line, f"{path.name}:{lineno}: number without a source comment"


def _tune(d, family):
    """``d``'s ``[tuning.<family>]`` table, made where absent."""
    return d.setdefault("tuning", {}).setdefault(family, {})


def _mutate(tmp_path, change, name="nvidia-sm90"):
    data = copy.deepcopy(bundled_profile_data(name))
    change(data)
    return write_toml(tmp_path / f"{data.get('name', name)}.toml", data)


@pytest.mark.parametrize("change, field, expected", [
    (lambda d: d["limits"].update(bogus=1), "limits.bogus", "unknown field"),
    (lambda d: d["limits"].pop("compute_units"), "limits.compute_units", "missing"),
    (lambda d: d["limits"].update(compute_units="132"), "limits.compute_units",
     "got str '132'"),
    (lambda d: d["target"].update(warp_size=48), "target.warp_size", "power of two"),
    (lambda d: d.update(vendor="acme"), "vendor", "one of ('nvidia', 'rocm', 'npu', 'intel', 'other')"),
    (lambda d: d["limits"].update(max_num_warps=64), "limits.max_num_warps",
     "max_num_warps * warp_size = 64 * 32 exceeds max_threads_per_block = 1024"),
    (lambda d: d["limits"].update(grid_max=[1, 2]), "limits.grid_max", "a list of 3"),
    (lambda d: d["launch"].update(num_warps_by_block=[[8192, 16], [2048, 8]]),
     "launch.num_warps_by_block[1]", "ascending"),
    (lambda d: d["launch"].update(num_warps_by_block_32bit=[[8192, 12]]),
     "launch.num_warps_by_block_32bit[0]", "power of two"),
    (lambda d: _tune(d, "layer_norm").update(num_warps_by_block=[[8192, 64]]),
     "tuning.layer_norm.num_warps_by_block[0]", "at most limits.max_num_warps = 32"),
    (lambda d: _tune(d, "layer_norm").update(tiled_num_warps_by_block=[[8192, 16, 2, 1]]),
     "tuning.layer_norm.tiled_num_warps_by_block", "third number"),
    (lambda d: _tune(d, "layer_norm").update(num_warps_by_block_32bit=[[16384, 32, 3]]),
     "tuning.layer_norm.num_warps_by_block_32bit[0]",
     "3 programs of 32 warps exceed the 64 warps a compute unit holds"),
    (lambda d: d["limits"].update(registers_per_sm=0) or d["launch"].update(
        num_warps_by_block=[[8192, 16, 2]]), "launch.num_warps_by_block[0]",
     "need limits.registers_per_sm"),
    (lambda d: d["target"].update(multi_operand_reduce="no"), "target.multi_operand_reduce",
     "true or false"),
    (lambda d: _tune(d, "layer_norm").update(column_sum_tile=[32, 32]), "tuning.layer_norm.column_sum_tile",
     "a list of 3 powers of two"),
    (lambda d: _tune(d, "layer_norm").update(column_sum_tile=[32, 32, 64]),
     "tuning.layer_norm.column_sum_tile[2]", "exceeds limits.max_num_warps = 32"),
    (lambda d: _tune(d, "layer_norm").update(backward_column_tile=[32, 96, 4, 8]),
     "tuning.layer_norm.backward_column_tile", "a list of 4 ints"),
    (lambda d: _tune(d, "layer_norm").update(backward_column_tile=[32, 128, 4, 0]),
     "tuning.layer_norm.backward_column_tile", "programs per compute unit (>= 1)"),
    (lambda d: _tune(d, "layer_norm").update(backward_column_tile=[32, 128, 64, 8]),
     "tuning.layer_norm.backward_column_tile[2]", "exceeds limits.max_num_warps = 32"),
    (lambda d: _tune(d, "layer_norm").update(backward_row_group_tile=[2, 2048, 8, 2, 3]),
     "tuning.layer_norm.backward_row_group_tile", "optionally row blocks in flight (1, or 2"),
    (lambda d: _tune(d, "layer_norm").update(backward_row_group_tile_32bit=[1, 4096, 32, 4]),
     "tuning.layer_norm.backward_row_group_tile_32bit[3]",
     "4 programs of 32 warps exceed the 64 warps a compute unit holds"),
    (lambda d: _tune(d, "layer_norm").update(backward_row_group_tile=[1, 4096, 8]),
     "tuning.layer_norm.backward_row_group_tile", "a list of 4 or 5 ints"),
    (lambda d: d["autotune"]["matmul_tma"][1].update(C_SPLIT=4), "autotune.matmul_tma[1].C_SPLIT",
     "expected one of (1, 2), got 4"),
    (lambda d: d["autotune"]["matmul_tma"][1].update(FLATTEN=True),
     "autotune.matmul_tma[1].FLATTEN", "expected one of (0, 1), got True"),
    (lambda d: d["autotune"]["matmul_tma"][1].update(BLOCK_SIZE_K=0),
     "autotune.matmul_tma[1].BLOCK_SIZE_K", "expected a positive int"),
    (lambda d: d["atomics"].update(add=["float8_e5m2", "complex64"]), "atomics.add",
     "a list of dtype names"),
    (lambda d: d["launch"].update(max_grid_num=2**40), "launch.max_grid_num", "exceeds"),
    (lambda d: d["target"].update(backend="hip"), "target.backend", "needs backend 'cuda'"),
    (lambda d: d["target"].update(backend="Acme NPU"), "target.backend", "lowercase letters"),
    (lambda d: d.update(vendor="other"), "vendor", "backend 'cuda' belongs to vendor 'nvidia'"),
    (lambda d: d.pop("io"), "io", "missing table"),
    (lambda d: d["compile"].update(min_occupancy_waves=32), "compile.min_occupancy_waves",
     "at most compile.max_waves_per_simd = 16"),
    (lambda d: d["compile"].update(shared_memory_per_cu=1024), "compile.shared_memory_per_cu",
     "smaller than limits.shared_memory_per_block"),
])
def test_invalid_profile_names_file_field_and_expectation(tmp_path, change, field, expected):
    path = _mutate(tmp_path, change)
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    err = info.value
    assert err.field == field
    assert expected in err.message
    assert str(path) in str(err)


def test_resident_programs_need_a_register_cap(tmp_path):
    # a table entry's third number is met by Triton's CUDA-only maxnreg option
    path = _mutate(tmp_path, lambda d: d["launch"].update(num_warps_by_block=[[8192, 8, 2]]),
                   name="amd-gfx942")
    with pytest.raises(ProfileError, match="maxnreg.*target.backend is 'hip'") as info:
        load_profile(path)
    assert info.value.field == "launch.num_warps_by_block[0]"


def test_row_groups_wait_for_each_other_so_need_a_register_cap(tmp_path):
    # the programs of a group wait at a counter: their residency rests on maxnreg (CUDA)
    path = _mutate(tmp_path, lambda d: _tune(d, "layer_norm").update(backward_row_group_tile=[1, 1024, 4, 2]), name="amd-gfx942")
    with pytest.raises(ProfileError, match="maxnreg.*target.backend is 'hip'") as info:
        load_profile(path)
    assert info.value.field == "tuning.layer_norm.backward_row_group_tile[3]"


def test_name_must_match_file_stem(tmp_path):
    path = write_toml(tmp_path / "other-name.toml", bundled_profile_data())
    with pytest.raises(ProfileError, match="expected the file's stem 'other-name'"):
        load_profile(path)


def test_unreadable_and_malformed_files(tmp_path):
    with pytest.raises(ProfileError, match="cannot read file"):
        load_profile(tmp_path / "missing.toml")
    bad = tmp_path / "broken.toml"
    bad.write_text("name = \n")
    with pytest.raises(ProfileError, match="not valid TOML"):
        load_profile(bad)


def test_profile_dir_adds_profiles_and_refuses_duplicates(tmp_path):
    data = bundled_profile_data("amd-gfx942")
    data["name"] = "amd-gfx950-lab"
    data["target"]["arch"] = "gfx950"
    data["limits"]["shared_memory_per_block"] = 163840
    data["compile"]["shared_memory_per_cu"] = 163840   # 160 KiB LDS per CU on gfx950
    write_toml(tmp_path / "amd-gfx950-lab.toml", data)
    profiles = load_profiles([tmp_path])
    assert profiles["amd-gfx950-lab"]["limits.shared_memory_per_block"] == 163840
    write_toml(tmp_path / "nvidia-sm90.toml", bundled_profile_data())
    with pytest.raises(ProfileError, match="already defined"):
        load_profiles([tmp_path])
    with pytest.raises(ProfileError, match="does not exist"):
        load_profiles([tmp_path / "nope"])


def test_helpers_read_the_profile():
    profiles = load_profiles()
    sm90, gfx942, npu = profiles["nvidia-sm90"], profiles["amd-gfx942"], profiles["npu-ascend910b"]
    assert sm90.max_fused_elements(torch.float32) == 65536 // 4
    assert sm90.max_fused_elements(torch.bfloat16) == 65536 // 2
    assert npu.max_fused_elements(torch.float32) == 16384 // 4
    assert sm90.num_warps_for(64) == 4 and sm90.num_warps_for(32768) == 32
    # 32-bit data take the profile's own table; 16-bit data the general one; float64
    # elements count twice
    assert sm90.num_warps_for(16384, torch.float32) == 32
    assert sm90.num_warps_for(16384, torch.bfloat16) == 16
    assert sm90.num_warps_for(8192, torch.float64) == 32
    assert gfx942.num_warps_for(16384, torch.float32) == gfx942.num_warps_for(16384)  # no table
    assert gfx942.num_warps_for(32768) == 16          # wave64: at most 16 warps
    # a kernel's own 16-bit table where the profile has one, else the general table;
    # 32-bit data keep theirs
    ln = "num_warps_by_block"
    assert sm90.num_warps_for(16384, torch.bfloat16, lnt.warps_table(sm90, ln, torch.bfloat16)) == 8
    assert sm90.num_warps_for(8192, torch.bfloat16, lnt.warps_table(sm90, ln, torch.bfloat16)) == 16
    assert sm90.num_warps_for(16384, torch.float32, lnt.warps_table(sm90, ln, torch.float32)) == 32
    assert gfx942.num_warps_for(16384, torch.bfloat16, lnt.warps_table(gfx942, ln, torch.bfloat16)) == gfx942.num_warps_for(16384)
    # a table's third number keeps that many programs resident: registers capped to fit
    h200 = profiles["nvidia-sm90-h200"]
    assert h200.launch_options_for(16384, torch.float32, lnt.warps_table(h200, ln, torch.float32)) == {"num_warps": 32, "maxnreg": 32}
    assert h200.launch_options_for(8192, torch.float32, lnt.warps_table(h200, ln, torch.float32)) == {"num_warps": 16}
    assert h200.launch_options_for(8192, torch.float64, lnt.warps_table(h200, ln, torch.float64)) == {"num_warps": 32}  # no cap
    assert h200.launch_options_for(16384, torch.bfloat16, lnt.warps_table(h200, ln, torch.bfloat16)) == {"num_warps": 8,
                                                                 "maxnreg": 128}
    tiled = "tiled_num_warps_by_block"
    assert h200.launch_options_for(32768, torch.bfloat16, lnt.warps_table(h200, tiled, torch.bfloat16)) == {"num_warps": 16,
                                                                    "maxnreg": 64}
    assert h200.launch_options_for(32768, torch.float32, lnt.warps_table(h200, tiled, torch.float32)) == {"num_warps": 32}
    assert sm90.launch_options_for(32768, torch.bfloat16, lnt.warps_table(sm90, tiled, torch.bfloat16)) == {"num_warps": 16,
                                                                    "maxnreg": 64}
    assert sm90.launch_options_for(16384, torch.float32, lnt.warps_table(sm90, ln, torch.float32)) == {"num_warps": 32}
    assert gfx942.launch_options_for(32768, torch.bfloat16, lnt.warps_table(gfx942, tiled, torch.bfloat16)) == {"num_warps": 16}
    assert sm90.capped_grid(10**9) == 65535 and sm90.capped_grid(0) == 1
    assert npu.capped_grid(1000) == 40
    assert npu.select_loads and npu.slice_broadcast and not sm90.select_loads
    assert not npu.supports_dtype(torch.float64) and sm90.supports_dtype(torch.float64)
    assert not sm90.supports_atomic("max", torch.float16)
    assert sm90.elementwise_block(torch.float32, 10) == 16


def test_derive_validates_like_a_file():
    sm90 = load_profiles()["nvidia-sm90"]
    small = sm90.derive(**{"launch.max_grid_num": 2, "launch.max_fused_size_bytes": 256})
    assert small.capped_grid(100) == 2 and small.max_fused_elements(torch.float32) == 64
    assert sm90.capped_grid(100) == 100  # the original is untouched
    with pytest.raises(ProfileError, match="max_num_warps"):
        sm90.derive(**{"limits.max_num_warps": 64})
    with pytest.raises(ProfileError, match="unknown field"):
        sm90.derive(**{"launch.no_such_field": 1})
    # None removes an optional field; a required one is then missing
    assert lnt.forward_row_group_tile(sm90.derive(**{"tuning.layer_norm.forward_row_group_tile_32bit": None}
                       ), torch.float32) is None
    with pytest.raises(ProfileError, match="max_grid_num"):
        sm90.derive(**{"launch.max_grid_num": None})


def test_profile_from_dict_rejects_non_table():
    with pytest.raises(ProfileError, match="expected a table"):
        profile_from_dict({**bundled_profile_data(), "limits": 3})


#: name -> (GPUTarget fields, compute units, shared memory per block and per SM/CU, resident
#: waves per SIMD, fp8 dtypes of tl.dot, device name torch reports): the data sheet and
#: CUDA / LLVM facts the Blackwell, CDNA4 and RDNA4 profiles rest on.
NEW_TARGETS = {
    "nvidia-sm100": (("cuda", 100, 32), 148, 232448, 233472, 16,
                     {"float8_e4m3fn", "float8_e5m2"}, "NVIDIA B200"),
    "nvidia-sm120": (("cuda", 120, 32), 170, 101376, 102400, 12,
                     {"float8_e4m3fn", "float8_e5m2"}, "NVIDIA GeForce RTX 5090"),
    "amd-gfx950": (("hip", "gfx950", 64), 256, 163840, 163840, 8,
                   {"float8_e4m3fn", "float8_e5m2"}, "AMD Instinct MI355X"),
    "amd-gfx1201": (("hip", "gfx1201", 32), 64, 65536, 131072, 16,
                    {"float8_e4m3fn", "float8_e5m2"}, "AMD Radeon RX 9070 XT"),
}


@pytest.mark.parametrize("name", sorted(NEW_TARGETS))
def test_new_targets_load_with_their_facts(name):
    from triton_cts.profiles.vendor_selection import DeviceInfo, match_device
    target, units, shared, shared_cu, waves, fp8, device = NEW_TARGETS[name]
    profiles = load_profiles()
    p = profiles[name]
    t = p.gpu_target()
    assert (t.backend, t.arch, t.warp_size) == target
    assert p.compute_units == units
    assert p["limits.shared_memory_per_block"] == shared
    assert p["compile.shared_memory_per_cu"] == shared_cu
    assert p["compile.max_waves_per_simd"] == waves
    assert fp8 <= set(p["dtypes.dot"]) and not {"float8_e4m3fnuz", "float8_e5m2fnuz"} & set(
        p["dtypes.supported"])
    assert p.max_num_warps * p.warp_size == 1024
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an exact match, no nearest-profile warning
        assert match_device(DeviceInfo(t.backend, device, t.arch, t.warp_size, units),
                            profiles).name == name


def test_new_targets_differ_from_their_predecessors_where_the_hardware_does():
    p = load_profiles()
    # consumer Blackwell: 99 KiB per block and 48 warps per SM, under Hopper's 227 KiB and 64
    assert p["nvidia-sm120"]["limits.shared_memory_per_block"] < \
        p["nvidia-sm90"]["limits.shared_memory_per_block"] == \
        p["nvidia-sm100"]["limits.shared_memory_per_block"]
    # CDNA4: 160 KiB of LDS, 2.5 times CDNA3's 64 KiB; HBM3e bandwidth above HBM3's
    assert p["amd-gfx950"]["limits.shared_memory_per_block"] == \
        p["amd-gfx942"]["limits.shared_memory_per_block"] * 5 // 2
    assert p["nvidia-sm100"].peak_bandwidth_gbs() > p["nvidia-sm90-h200"].peak_bandwidth_gbs()
    assert p["amd-gfx950"].peak_bandwidth_gbs() > p["amd-gfx942"].peak_bandwidth_gbs()
    # RDNA4 adds OCP fp8 to RDNA3's WMMA dtypes
    assert set(p["amd-gfx1201"]["dtypes.dot"]) - set(p["amd-gfx1100"]["dtypes.dot"]) == {
        "float8_e4m3fn", "float8_e5m2"}


def test_16bit_partials_apply_to_16bit_data_only():
    """``tuning.layer_norm.partials_per_compute_unit_16bit`` sets the partial-sum backward's programs
    per compute unit for 16-bit rows stacked several a program; wider data, unstacked
    rows, and every dtype on a profile without it, take ``partials_per_compute_unit``; a
    bad value names its field."""
    base = load_profiles()["amd-gfx942"]
    assert "partials_per_compute_unit_16bit" not in base.tuning_overrides("layer_norm")
    assert lnt.partials_for(base, torch.bfloat16) == lnt.partials_for(base, torch.float32) == \
        base["launch.partials_per_compute_unit"]
    more = base.derive(**{"tuning.layer_norm.partials_per_compute_unit_16bit": 4})
    assert lnt.partials_for(more, torch.bfloat16) == lnt.partials_for(more, torch.float16) == 4
    assert lnt.partials_for(more, torch.bfloat16, stacked=False) == base["launch.partials_per_compute_unit"]
    assert lnt.partials_for(more, torch.float32) == lnt.partials_for(more, torch.float64) == \
        base["launch.partials_per_compute_unit"]
    with pytest.raises(ProfileError, match="tuning.layer_norm.partials_per_compute_unit_16bit"):
        base.derive(**{"tuning.layer_norm.partials_per_compute_unit_16bit": 0})


def test_reduction_grid_caps_where_the_profile_says():
    """``tuning.reductions.programs_per_compute_unit`` (and ``_32bit``) cap a whole-tensor
    reduction's first stage at that many programs a compute unit; a profile without them
    launches a program a block (capped at MAX_GRID_NUM)."""
    profiles = load_profiles()
    sm90, gfx942 = profiles["nvidia-sm90"], profiles["amd-gfx942"]
    units = sm90.compute_units
    assert reductions_tuning.reduction_grid(sm90, 10**6, torch.bfloat16) == 8 * units
    assert reductions_tuning.reduction_grid(sm90, 10**6, torch.float32) == 16 * units
    assert reductions_tuning.reduction_grid(sm90, 10**6, torch.float64) == 16 * units
    assert reductions_tuning.reduction_grid(sm90, 5, torch.float32) == 5  # fewer blocks than the cap
    assert reductions_tuning.reduction_grid(gfx942, 10**6, torch.float32) == gfx942.capped_grid(10**6)
    only_16 = gfx942.derive(**{"tuning.reductions.programs_per_compute_unit": 2})
    assert reductions_tuning.reduction_grid(only_16, 10**6, torch.float32) == 2 * gfx942.compute_units
    with pytest.raises(ProfileError, match="tuning.reductions.programs_per_compute_unit"):
        sm90.derive(**{"tuning.reductions.programs_per_compute_unit": 0})


def test_row_reduction_tile_stacks_rows_only_while_the_device_stays_full():
    """``row_reduction_tile`` fills an elementwise block: steps of
    ``tuning.reductions.row_step_bytes`` (``_32bit``) along a row, rows stacked while at least
    ``row_reduction_programs_per_compute_unit`` programs a compute unit remain, and a
    longer step for rows left unstacked; a profile without the fields walks a row in
    whole elementwise blocks and keeps one program a compute unit."""
    profiles = load_profiles()
    sm90, gfx942 = profiles["nvidia-sm90"], profiles["amd-gfx942"]
    units = sm90.compute_units  # 132: 4 a unit is 528 programs
    assert reductions_tuning.row_reduction_tile(sm90, 4096, 4096, torch.bfloat16) == (4, 512)
    assert reductions_tuning.row_reduction_tile(sm90, 32768, 1024, torch.bfloat16) == (4, 512)
    assert reductions_tuning.row_reduction_tile(sm90, 32768, 1024, torch.float32) == (8, 128)  # 512-byte steps
    assert reductions_tuning.row_reduction_tile(sm90, 4096, 4096, torch.float32) == (4, 256)
    assert reductions_tuning.row_reduction_tile(sm90, 2048, 16384, torch.bfloat16) == (2, 1024)
    assert reductions_tuning.row_reduction_tile(sm90, 1024, 32768, torch.bfloat16) == (1, 2048)
    assert reductions_tuning.row_reduction_tile(sm90, 65536, 100, torch.bfloat16) == (16, 128)
    assert reductions_tuning.row_reduction_tile(sm90, 8, 4096, torch.bfloat16) == (1, 2048)
    assert reductions_tuning.row_reduction_tile(sm90, 4 * units * 4, 3, torch.float32) == (4, 4)
    block = gfx942.elementwise_block(torch.float32)
    assert reductions_tuning.row_reduction_tile(gfx942, 4096, 4096, torch.float32) == (1, block)
    assert reductions_tuning.row_reduction_tile(gfx942, 10**6, 64, torch.float32) == (block // 64, 64)
    # one step for every width where the profile has no _32bit entry
    steps = gfx942.derive(**{"tuning.reductions.row_step_bytes": 1024})
    assert reductions_tuning.row_reduction_tile(steps, 10**6, 4096, torch.float32) == (block // 256, 256)
    assert reductions_tuning.row_reduction_tile(steps, 10**6, 4096, torch.float16) == (
        gfx942.elementwise_block(torch.float16) // 512, 512)
    with pytest.raises(ProfileError, match="tuning.reductions.row_step_bytes"):
        sm90.derive(**{"tuning.reductions.row_step_bytes": 1000})
    with pytest.raises(ProfileError, match="tuning.reductions.row_programs_per_compute_unit"):
        sm90.derive(**{"tuning.reductions.row_programs_per_compute_unit": 0})


def test_online_grid_caps_32bit_rows_only():
    """``launch.online_programs_per_compute_unit_32bit`` caps the online softmax forward's
    grid on float32 data at that many programs a compute unit; other dtypes, and profiles
    without the field, launch a program a row (capped at MAX_GRID_NUM); a bad value names
    its field."""
    profiles = load_profiles()
    sm90, gfx942 = profiles["nvidia-sm90"], profiles["amd-gfx942"]
    units = sm90.compute_units
    assert sm90.online_grid(4 * units, torch.float32) == units
    assert sm90.online_grid(7, torch.float32) == 7  # fewer rows than the cap
    assert sm90.online_grid(4 * units, torch.bfloat16) == 4 * units
    assert sm90.online_grid(4 * units, torch.float64) == 4 * units
    assert sm90.online_grid(10**9, torch.bfloat16) == sm90.capped_grid(10**9)
    assert gfx942.online_grid(10**6, torch.float32) == gfx942.capped_grid(10**6)
    two = sm90.derive(**{"launch.online_programs_per_compute_unit_32bit": 2})
    assert two.online_grid(10**6, torch.float32) == 2 * units
    with pytest.raises(ProfileError, match="online_programs_per_compute_unit_32bit"):
        sm90.derive(**{"launch.online_programs_per_compute_unit_32bit": 0})


def _partial_plan(profile, n_rows, n_cols, dtype, flags):
    """The layer-norm backward's partial-strategy plan of rows that fit its fused kernel."""
    from kernels.layer_norm.plan_backward import PARTIAL, UNPLACED, backward_plan
    return backward_plan(profile, n_rows, n_cols, dtype, *flags, *UNPLACED, PARTIAL)


def test_backward_warps_table_reaches_both_dx_kernels():
    """``tuning.layer_norm.backward_num_warps_by_block`` (and ``_32bit``) set the warps and
    register cap of the layer-norm backward's fused and tiled dx kernels; without it they
    take the general tables."""
    from kernels.layer_norm.tiles import _tiled_backward_block

    sm90 = load_profiles()["nvidia-sm90"]
    flags = (False, True, False, False, False, False)
    plan = _partial_plan(sm90, 16384, 4096, torch.bfloat16, flags).launches[0]
    assert plan.meta["num_warps"] == sm90.num_warps_for(4096, torch.bfloat16)
    assert _tiled_backward_block(65536, torch.float32, sm90)[1] == {
        "num_warps": sm90.num_warps_for(2 * 8192, torch.float32)}
    tuned = sm90.derive(**{
        "tuning.layer_norm.backward_num_warps_by_block": [[4096, 8], [16384, 16, 2]],
        "tuning.layer_norm.backward_num_warps_by_block_32bit": [[16384, 16]]})
    plan = _partial_plan(tuned, 16384, 4096, torch.bfloat16, flags).launches[0]
    assert plan.meta["num_warps"] == 8 and "maxnreg" not in plan.meta
    block, options = _tiled_backward_block(65536, torch.bfloat16, tuned)
    assert (block, options) == (8192, {"num_warps": 16, "maxnreg": 64})
    assert _tiled_backward_block(65536, torch.float32, tuned)[1] == {"num_warps": 16}


def test_partial_backward_takes_the_16bit_partials_only_for_stacked_rows():
    sm90 = load_profiles()["nvidia-sm90"]
    flags = (False, True, False, False, False, False)
    units = sm90.compute_units
    stacked = _partial_plan(sm90, 32768, 1024, torch.bfloat16, flags)
    assert stacked.launches[0].meta["ROWS_PER_PROGRAM"] > 1 and stacked.partials == 4 * units
    single = _partial_plan(sm90, 16384, 4096, torch.bfloat16, flags)
    assert single.launches[0].meta["ROWS_PER_PROGRAM"] == 1 and single.partials == 2 * units
    assert _partial_plan(sm90, 32768, 1024, torch.float32, flags).partials == 2 * units


def test_softmax_row_tile_shortens_the_forward_tile_of_16_bit_data_only():
    """``tuning.softmax.row_tile_bytes`` is the softmax forward's row tile on data narrower
    than 32 bits, never past MAX_FUSED_SIZE; 32-bit and wider data, and profiles without
    the field, keep MAX_FUSED_SIZE."""
    profiles = load_profiles()
    sm90, h200 = profiles["nvidia-sm90"], profiles["nvidia-sm90-h200"]
    assert softmax_tuning.row_tile(sm90, torch.bfloat16) == sm90.max_fused_elements(torch.bfloat16)
    assert softmax_tuning.row_tile(h200, torch.bfloat16) == 16384  # 32768 bytes, measured there
    assert softmax_tuning.row_tile(h200, torch.float16) == 16384
    assert softmax_tuning.row_tile(h200, torch.float32) == h200.max_fused_elements(torch.float32)
    assert softmax_tuning.row_tile(h200, torch.float64) == h200.max_fused_elements(torch.float64)
    wide = sm90.derive(**{"tuning.softmax.row_tile_bytes": 1 << 20})
    assert softmax_tuning.row_tile(wide, torch.bfloat16) == sm90.max_fused_elements(torch.bfloat16)
    with pytest.raises(ProfileError, match="tuning.softmax.row_tile_bytes"):
        sm90.derive(**{"tuning.softmax.row_tile_bytes": 3000})


def test_layer_norm_normalize_tile_shortens_16_bit_walks_only():
    """``tuning.layer_norm.normalize_tile_bytes`` is the tile of the tiled layer-norm
    forward's normalizing walk on data narrower than 32 bits, never past the summing walk's
    tile; 32-bit and wider data, and profiles without the field, keep that tile. A value
    that is not a power of two names the field."""
    profiles = load_profiles()
    sm90, h200 = profiles["nvidia-sm90"], profiles["nvidia-sm90-h200"]
    assert lnt.normalize_tile(sm90, torch.bfloat16, 16384) == 16384
    assert lnt.normalize_tile(h200, torch.bfloat16, 16384) == 8192  # 16384 bytes
    assert lnt.normalize_tile(h200, torch.float16, 16384) == 8192
    assert lnt.normalize_tile(h200, torch.bfloat16, 4096) == 4096
    assert lnt.normalize_tile(h200, torch.float32, 16384) == 16384
    assert lnt.normalize_tile(h200, torch.float64, 8192) == 8192
    with pytest.raises(ProfileError, match="tuning.layer_norm.normalize_tile_bytes"):
        sm90.derive(**{"tuning.layer_norm.normalize_tile_bytes": 3000})


def test_layer_norm_backward_last_sum_takes_partials_within_the_profile_bytes():
    """``tuning.layer_norm.backward_last_sum_bytes`` bounds the partials (programs x columns
    x accumulator bytes) the partial-sum backward's last program adds itself; profiles
    without the field, or without an int32 atomic_add to count programs, never take it.
    A value that is not a power of two names the field."""
    profiles = load_profiles()
    sm90, h200 = profiles["nvidia-sm90"], profiles["nvidia-sm90-h200"]
    assert lnt.backward_last_sum(h200, 8, 1024, torch.float32)  # 32 KiB
    assert lnt.backward_last_sum(h200, 16, 1024, torch.float32)  # 64 KiB
    assert not lnt.backward_last_sum(h200, 17, 1024, torch.float32)
    assert not lnt.backward_last_sum(h200, 16, 1024, torch.float64)
    assert not lnt.backward_last_sum(sm90, 1, 1, torch.float32)
    no_int32_add = h200.derive(**{"atomics.add": ["float32"]})
    assert not lnt.backward_last_sum(no_int32_add, 1, 1, torch.float32)
    with pytest.raises(ProfileError, match="tuning.layer_norm.backward_last_sum_bytes"):
        sm90.derive(**{"tuning.layer_norm.backward_last_sum_bytes": 3000})


def test_layer_norm_backward_prefetch_is_a_flag_off_where_absent():
    """``tuning.layer_norm.backward_prefetch`` is off unless a profile sets it (the H200's,
    where it was measured); a value that is not true or false names the field."""
    profiles = load_profiles()
    assert lnt.backward_prefetch(profiles["nvidia-sm90-h200"]) is True
    assert lnt.backward_prefetch(profiles["nvidia-sm90"]) is False
    assert lnt.backward_prefetch(profiles["npu-ascend910b"]) is False
    with pytest.raises(ProfileError, match="tuning.layer_norm.backward_prefetch"):
        profiles["nvidia-sm90"].derive(**{"tuning.layer_norm.backward_prefetch": 1})


def test_norms_take_their_own_warps_table_and_weight_first_bounds_where_the_profile_has_them():
    """``tuning.layer_norm.rms_norm_num_warps_by_block`` falls back to the layer-norm table (and on
    32-bit data to ``layer_norm_num_warps_by_block_32bit``); the weight is loaded first for
    one-row programs up to ``tuning.layer_norm.rms_norm_weight_first_max_block`` (``_32bit`` on 32-bit
    data), never where the field is absent; layer norm has its own bounds
    (``tuning.layer_norm.weight_first_max_block``). A bound that is not a positive int
    names the field."""
    profiles = load_profiles()
    h200, sm90 = profiles["nvidia-sm90-h200"], profiles["nvidia-sm90"]
    rms, ln = "rms_norm_num_warps_by_block", "num_warps_by_block"
    assert h200.launch_options_for(4096, torch.bfloat16, lnt.warps_table(h200, rms, torch.bfloat16)) == {"num_warps": 8}
    assert h200.launch_options_for(4096, torch.bfloat16, lnt.warps_table(h200, ln, torch.bfloat16)) == {"num_warps": 4}
    for block in (1024, 8192, 16384):
        assert (h200.launch_options_for(block, torch.bfloat16, lnt.warps_table(h200, rms, torch.bfloat16))
                == h200.launch_options_for(block, torch.bfloat16, lnt.warps_table(h200, ln, torch.bfloat16)))
    for block in (2048, 4096, 16384):  # 32-bit data: the layer-norm 32-bit table
        assert (h200.launch_options_for(block, torch.float32, lnt.warps_table(h200, rms, torch.float32))
                == h200.launch_options_for(block, torch.float32, lnt.warps_table(h200, ln, torch.float32)))
        assert (sm90.launch_options_for(block, torch.bfloat16, lnt.warps_table(sm90, rms, torch.bfloat16))
                == sm90.launch_options_for(block, torch.bfloat16, lnt.warps_table(sm90, ln, torch.bfloat16)))
    assert lnt.weight_first(h200, "rms_norm", 4096, torch.bfloat16)
    assert not lnt.weight_first(h200, "rms_norm", 8192, torch.bfloat16)
    assert lnt.weight_first(h200, "rms_norm", 8192, torch.float32)
    assert not lnt.weight_first(h200, "rms_norm", 16384, torch.float32)
    assert not lnt.weight_first(h200, "rms_norm", 1, torch.float64)
    assert not lnt.weight_first(sm90, "rms_norm", 1, torch.bfloat16)
    assert not lnt.weight_first(sm90, "rms_norm", 1, torch.float32)
    # layer norm has bounds of its own: on the H200 only 32-bit rows, up to 2048 elements
    assert lnt.weight_first(h200, "layer_norm", 2048, torch.float32)
    assert not lnt.weight_first(h200, "layer_norm", 4096, torch.float32)
    assert not lnt.weight_first(h200, "layer_norm", 1024, torch.bfloat16)
    assert not lnt.weight_first(h200, "layer_norm", 1024, torch.float64)
    with pytest.raises(ProfileError, match="tuning.layer_norm.weight_first_max_block"):
        sm90.derive(**{"tuning.layer_norm.weight_first_max_block": "2048"})
    with pytest.raises(ProfileError, match="tuning.layer_norm.rms_norm_weight_first_max_block_32bit"):
        sm90.derive(**{"tuning.layer_norm.rms_norm_weight_first_max_block_32bit": 0})
    with pytest.raises(ProfileError, match="tuning.layer_norm.rms_norm_num_warps_by_block"):
        sm90.derive(**{"tuning.layer_norm.rms_norm_num_warps_by_block": [[4096, 64]]})


def test_cross_entropy_is_one_launch_within_the_profile_elements_and_one_count_step():
    """``tuning.cross_entropy.one_launch_elements`` bounds the logits of a one-launch
    cross-entropy, whose rows must also fit one count step (``elementwise_block`` of
    float32); absent, never. A bound that is not a positive int names the field."""
    profiles = load_profiles()
    h200, sm90 = profiles["nvidia-sm90-h200"], profiles["nvidia-sm90"]
    step = h200.elementwise_block(torch.float32)
    limit = h200.tuning("cross_entropy")["one_launch_elements"]
    assert cross_entropy_tuning.one_launch(h200, 8, limit // 8)
    assert not cross_entropy_tuning.one_launch(h200, 8, limit // 8 + 1)
    assert cross_entropy_tuning.one_launch(h200, step, 2)
    assert not cross_entropy_tuning.one_launch(h200, step + 1, 2)
    assert not cross_entropy_tuning.one_launch(sm90, 1, 1)
    with pytest.raises(ProfileError, match="tuning.cross_entropy.one_launch_elements"):
        sm90.derive(**{"tuning.cross_entropy.one_launch_elements": 0})


def test_attention_backward_single_launch_is_a_flag_off_where_absent():
    """``tuning.attention.backward_single_launch`` is off unless a profile sets it (the
    H200's, where it was measured); a value that is not true or false names the field."""
    profiles = load_profiles()
    assert attention_plan.backward_single_launch(profiles["nvidia-sm90-h200"]) is True
    assert attention_plan.backward_single_launch(profiles["nvidia-sm90"]) is False
    assert attention_plan.backward_single_launch(profiles["amd-gfx942"]) is False
    with pytest.raises(ProfileError, match="tuning.attention.backward_single_launch"):
        profiles["nvidia-sm90"].derive(**{"tuning.attention.backward_single_launch": "yes"})


def test_tuning_tables_name_the_file_family_field_and_expected_type(tmp_path):
    """``[tuning.<family>]`` is held to the family's declaration with the schema's errors:
    an unknown family, an unknown field, a wrong type and an implausible number each name
    the file, the field and what was expected."""
    cases = [
        (lambda d: _tune(d, "layer_nrom").update(backward_prefetch=True),
         "tuning.layer_nrom", "unknown tuning family (known: attention, cross_entropy"),
        (lambda d: _tune(d, "softmax").update(row_tile=4096),
         "tuning.softmax.row_tile", "unknown field (known here: row_tile_bytes)"),
        (lambda d: _tune(d, "matmul").update(pointer_max_work="512"),
         "tuning.matmul.pointer_max_work", "expected a positive int (M*N*K"),
        (lambda d: _tune(d, "softmax").update(row_tile_bytes=1 << 30),
         "tuning.softmax.row_tile_bytes", "outside the plausible range [16, 8,388,608]"),
        (lambda d: d.update(tuning={"softmax": 4}), "tuning.softmax", "expected a table"),
    ]
    for change, field, expected in cases:
        path = _mutate(tmp_path, change)
        with pytest.raises(ProfileError) as info:
            load_profile(path)
        assert info.value.field == field and expected in info.value.message, info.value
        assert str(path) in str(info.value)


def test_every_number_a_bundled_tuning_table_holds_has_a_plausible_range():
    from triton_cts.profiles import tuning
    for profile in load_profiles().values():
        for family, values in profile.data.get("tuning", {}).items():
            fields = tuning.declaration(family)
            for name, value in values.items():
                if not isinstance(value, bool):
                    assert fields[name].plausible is not None, f"tuning.{family}.{name}"
