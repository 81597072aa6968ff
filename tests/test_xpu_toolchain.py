"""Compiling captured launches for the Intel profiles with triton-xpu and ocloc
(triton_cts/toolchains/xpu_toolchain.py, triton_cts/toolchains/xpu_driver.py).

The ocloc verdicts, the zebin reader and the judging against the profile run everywhere,
on output captured from real runs (triton-xpu 3.3.0b1, Debian's ocloc 22.43); the
compiling itself runs only where the toolchain venv exists (``tox -e xpu --notest``), and
is skipped with the reason elsewhere."""
import struct
from pathlib import Path

import pytest
import torch

from kernels import gelu as gelu_kernels
from tests.helpers import run_pytest
from triton_cts.execution.modes import Mode, execute
from triton_cts.profiles import ProfileError, load_profiles
from triton_cts.profiles.vendor_selection import select_profiles
from triton_cts.toolchains import xpu_toolchain
from triton_cts.toolchains.cross_compile import use_project_cache

use_project_cache()
PROFILES = load_profiles()
PVC, BMG = PROFILES["intel-pvc"], PROFILES["intel-bmg"]

# ---- ocloc verdicts from captured output (no toolchain needed) ---------------------------
BUILT = "Compilation from IR - skipping loading of FCL\nBuild succeeded.\n"
NO_BMG = ("Error: Cannot get HW Info for device bmg.\n"
          "Command was: ocloc compile -file <tmp>/kernel.spv -spirv_input -device bmg\n")
IGC_ERROR = ("error: undefined reference to `__builtin_IB_subgroup_block_read_flat_u16_m8k16v2'\n"
             "in function: 'matmul_kernel' called by kernel: 'matmul_kernel'\n"
             "Build failed with error code: -11\n")


def test_ocloc_build_unknown_device_error_and_timeout():
    assert xpu_toolchain.classify_ocloc(0, BUILT)["status"] == "passed"
    unknown = xpu_toolchain.classify_ocloc(255, NO_BMG)
    assert unknown["status"] == "unknown_device"
    assert "does not know device 'bmg'" in unknown["message"]
    err = xpu_toolchain.classify_ocloc(245, IGC_ERROR)
    assert err["status"] == "ocloc_error" and "undefined reference" in err["message"]
    assert "exit 245" in err["message"]
    assert xpu_toolchain.classify_ocloc(None, "")["status"] == "timeout"


# ---- the zebin's .ze_info ------------------------------------------------------------------
# .ze_info of a masked exp kernel (triton-xpu 3.3.0b1, ocloc 22.43 -device pvc), abridged,
# with the attributes a spilling kernel adds
ZE_INFO = """\
---
version:         '1.20'
kernels:
  - name:            exp_kernel
    user_attributes:
      intel_reqd_sub_group_size: 32
    execution_env:
      disable_mid_thread_preemption: true
      grf_count:       128
      has_4gb_buffers: true
      simd_size:       32
      subgroup_independent_forward_progress: true
    payload_arguments:
      - arg_type:        arg_byvalue
        offset:          48
        size:            4
        arg_index:       2
  - name:            hog_kernel
    execution_env:
      grf_count:       256
      has_dpas:        true
      simd_size:       16
      slm_size:        65536
      spill_size:      1024
      private_size:    64
kernels_misc_info:
  - name:            exp_kernel
    args_info:
      - index:           0
        address_qualifier: __global
...
"""


def _zebin(sections: dict[str, bytes]) -> bytes:
    """A minimal little-endian ELF64 with these sections (and its .shstrtab)."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n in [*sections, ".shstrtab"])
    blobs = [*sections.values(), names]
    offset, body, headers = 64, b"", [struct.pack("<IIQQQQIIQQ", *[0] * 10)]
    name_at = 1
    for name, blob in zip([*sections, ".shstrtab"], blobs):
        headers.append(struct.pack("<IIQQQQIIQQ", name_at, 1, 0, 0, offset + len(body),
                                   len(blob), 0, 0, 1, 0))
        name_at += len(name) + 1
        body += blob
    shoff = offset + len(body)
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    header = ident + struct.pack("<HHIQQQIHHHHHH", 0xFF12, 0, 1, 0, 0, shoff, 0, 64, 0, 0,
                                 64, len(headers), len(headers) - 1)
    return header + body + b"".join(headers)


def test_zeinfo_reads_each_kernels_execution_env():
    kernels = xpu_toolchain.zeinfo_kernels(ZE_INFO)
    assert set(kernels) == {"exp_kernel", "hog_kernel"}
    assert kernels["exp_kernel"]["grf_count"] == 128 and kernels["exp_kernel"]["simd_size"] == 32
    assert "offset" not in kernels["exp_kernel"]         # payload arguments are not read
    assert kernels["hog_kernel"]["has_dpas"] is True


def test_zebin_resources_with_the_specs_defaults():
    binary = _zebin({".text.exp_kernel": b"\0" * 16, ".ze_info": ZE_INFO.encode()})
    assert set(xpu_toolchain.elf_sections(binary)) >= {".ze_info", ".text.exp_kernel"}
    assert xpu_toolchain.zebin_resources(binary, "exp_kernel") == {
        "grf_count": 128, "simd_size": 32, "spill_size": 0, "private_size": 0, "slm_size": 0,
        "barrier_count": 0, "has_dpas": False}
    hog = xpu_toolchain.zebin_resources(binary, "hog_kernel")
    assert (hog["grf_count"], hog["spill_size"], hog["slm_size"]) == (256, 1024, 65536)
    with pytest.raises(ValueError, match="no kernel other"):
        xpu_toolchain.zebin_resources(binary, "other")
    with pytest.raises(ValueError, match="no .ze_info"):
        xpu_toolchain.zebin_resources(_zebin({".text": b"x"}), "exp_kernel")
    with pytest.raises(ValueError, match="not a little-endian 64-bit ELF"):
        xpu_toolchain.elf_sections(b"SPIR-V, not ELF")


# ---- judging a verdict against the profile -------------------------------------------------
def _verdict(num_warps=4, width=32, shared=0, **native):
    env = dict(xpu_toolchain.RESOURCE_DEFAULTS, grf_count=128, simd_size=width)
    env.update(native)
    return {"status": "passed", "num_warps": num_warps, "threads_per_warp": width,
            "shared": shared, "stages": ["ttir", "ttgir", "llir", "spv", "zebin"],
            "build_flags": "", "native": env}


def test_a_small_kernel_is_within_limits_at_full_occupancy():
    stats, violations, quality = xpu_toolchain.judge(_verdict(), PVC)
    assert (violations, quality) == ([], [])
    assert stats["registers"] == 128 and stats["threads_per_block"] == 128
    assert stats["occupancy"] == 8.0                    # 8 threads per vector engine


def test_work_group_size_and_shared_local_memory_over_the_limits_fail():
    _, violations, _ = xpu_toolchain.judge(_verdict(num_warps=64), PVC)
    assert violations == ["num_warps 64 x sub-group size 32 = 2048 work-items > "
                          "limits.max_threads_per_block 1024"]
    _, violations, _ = xpu_toolchain.judge(_verdict(slm_size=200000), PVC)
    assert violations == ["200000 bytes of shared local memory > "
                          "limits.shared_memory_per_block 131072"]


def test_large_grf_work_groups_beyond_the_xe_core_fail_and_spills_warn():
    # triton-xpu refuses grf_mode='large' with num_warps > 32: 64 threads of 256 GRF do
    # not fit in one Xe-core (32 of them do)
    _, violations, _ = xpu_toolchain.judge(_verdict(num_warps=64, width=16, grf_count=256), PVC)
    assert len(violations) == 1 and "limits.registers_per_sm 131072" in violations[0]
    stats, violations, quality = xpu_toolchain.judge(
        _verdict(num_warps=32, width=16, grf_count=256, spill_size=1024), PVC)
    assert violations == [] and stats["occupancy"] == 4.0
    assert quality == ["spills 1024 bytes, private memory 0 bytes per thread (256 registers)"]


def test_without_a_zebin_only_the_triton_level_limits_are_judged():
    verdict = dict(_verdict(num_warps=64), native=None)
    stats, violations, quality = xpu_toolchain.judge(verdict, BMG)
    assert "registers" not in stats and quality == [] and len(violations) == 1


def test_a_launch_that_kills_the_driver_is_a_lowering_error_and_the_others_still_run(
        monkeypatch):
    def driver(requests, target, keep, timeout):
        if any(r["kernel"] == "bad" for r in requests):
            raise RuntimeError("the XPU driver failed (exit 8):\nInvalidFunctionCall: "
                               "Unexpected llvm intrinsic: llvm.fma.bf16")
        return [{"status": "passed", "kernel": r["kernel"]} for r in requests]
    monkeypatch.setattr(xpu_toolchain, "_run_driver", driver)
    verdicts = xpu_toolchain._run_isolated(
        [{"kernel": "a"}, {"kernel": "bad"}, {"kernel": "c"}], {}, None, 1.0)
    assert [v["status"] for v in verdicts] == ["passed", "lowering_error", "passed"]
    assert "llvm.fma.bf16" in verdicts[1]["message"]


# ---- the profiles and the request ----------------------------------------------------------
def test_intel_family_selects_both_profiles_and_requests_their_extensions():
    assert [p.name for p in select_profiles(["intel"], PROFILES, None)] == ["intel-bmg",
                                                                          "intel-pvc"]
    pvc, bmg = (xpu_toolchain.target_request(p)["capability"] for p in (PVC, BMG))
    assert pvc["has_subgroup_matrix_multiply_accumulate_tensor_float32"] is True
    assert bmg["has_subgroup_matrix_multiply_accumulate_tensor_float32"] is False
    assert pvc["sub_group_sizes"] == [16, 32] and pvc["max_work_group_size"] == 1024
    assert xpu_toolchain.target_request(PVC)["arch"] == "pvc"


def test_an_xpu_profile_needs_its_warp_size_among_its_sub_group_sizes():
    with pytest.raises(ProfileError, match="target.sub_group_sizes"):
        PVC.derive(**{"target.sub_group_sizes": [16]})


def test_xpu_python_follows_the_environment_variable(monkeypatch, tmp_path):
    monkeypatch.setenv(xpu_toolchain.PYTHON_ENV, str(tmp_path / "python"))
    assert xpu_toolchain.xpu_python() == tmp_path / "python"


# ---- the compiling itself (toolchain venv only) --------------------------------------------
needs_toolchain = pytest.mark.skipif(
    xpu_toolchain.unavailable_reason() is not None,
    reason=f"not supported: {xpu_toolchain.unavailable_reason()}")


def _verdicts(fn, profile, *args):
    launches = execute(fn, Mode.COMPILE, profile, args)
    assert launches
    return xpu_toolchain.lower_launches(launches, profile)


@needs_toolchain
def test_gelu_compiles_to_spirv_and_to_a_zebin_where_ocloc_knows_the_device():
    (pvc,) = _verdicts(gelu_kernels.gelu, PVC, torch.randn(64, 100))
    assert pvc["status"] == "passed", pvc
    assert pvc["stages"][:4] == ["ttir", "ttgir", "llir", "spv"] and pvc["spirv_bytes"] > 0
    if pvc["native"] is None:
        pytest.skip(f"not supported: no zebin: {pvc['native_skipped']}")
    assert pvc["stages"][-1] == "zebin" and pvc["native"]["grf_count"] in (128, 256)
    assert pvc["native"]["simd_size"] in PVC["target.sub_group_sizes"]


@needs_toolchain
def test_compile_suite_fails_a_work_group_over_the_limit(tmp_path):
    # the planted 32-warp config is 1024 work-items: over a profile that allows 512
    text = (Path(PVC.source).read_text().replace('name = "intel-pvc"', 'name = "pvc-512"')
            .replace("max_threads_per_block = 1024", "max_threads_per_block = 512")
            .replace("max_num_warps = 32 ", "max_num_warps = 16 ")
            .replace("[32768, 32]", "[32768, 16]"))
    (tmp_path / "pvc-512.toml").write_text(text)
    result = run_pytest("suites/test_compile.py", "--vendor", "pvc-512", "--mode", "compile",
                        "--impl", "gelu=tests.planted.compile_faults:gelu_too_many_warps_config",
                        "--op", "gelu", "--profile-dir", str(tmp_path))
    out = result.stdout
    assert result.returncode == 1, out
    assert "1 failed" in out, out
    assert ("num_warps 32 x sub-group size 32 = 1024 work-items > "
            "limits.max_threads_per_block 512") in out, out
