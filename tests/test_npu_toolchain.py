"""Lowering captured launches for the Ascend profile with triton-ascend and
bishengir-compile (triton_cts/npu_toolchain.py, triton_cts/npu_driver.py).

The verdict parsing runs everywhere, on bishengir-compile output captured from real
runs; the lowering itself runs only where the toolchain venv exists (``tox -e npu
--notest``), and is skipped with the reason elsewhere."""
import pytest
import torch
import triton.language as tl

from kernels import gelu as gelu_kernels
from tests.helpers import run_pytest
from tests.planted import npu_io_faults, npu_ub_faults
from triton_cts.toolchains import npu_toolchain
from triton_cts.toolchains.cross_compile import use_project_cache
from triton_cts.execution.launches import Launch
from triton_cts.execution.modes import Mode, execute
from triton_cts.profiles import load_profiles

use_project_cache()
NPU = load_profiles()["npu-ascend910b"]
UB_BITS = NPU["limits.shared_memory_per_block"] * 8

# ---- verdicts from captured output (no toolchain needed) ---------------------------------
PASSED = """\
[ERROR] Failed to run `hivmc --version`.
[WARNING] Failed to detect hivmc version for backward compatibility
[ERROR] Cannot find hivmc under $PATH
loc("<tmp>/kernel.ttadapter.mlir":1:1): error: External hivmc run fails, returning module before running external compiler
[ERROR] Failed to run BiShengIR pipeline
"""
# an overflow after a retry: the retry's "Cannot find hivmc" must not read as a pass
UB_OVERFLOW = """\
loc("<tmp>/kernel.ttadapter.mlir":2:1): loc("<tmp>/kernel.ttadapter.mlir":3:3): [ERROR] Cannot find hivmc under $PATH
[NOTE] Ub overflow detected; automatically set enable-code-motion to false and retrying compilation.
[NOTE] Due to Ub overflow, automatically set enable-code-motion to false; compilation still failed.
loc("<tmp>/kernel.ttadapter.mlir":2:1): error: Failed to run BiShengHIR pipeline
loc("<tmp>/kernel.ttadapter.mlir":3:3): error: ub overflow, requires 3683328 bits while 1572864 bits available! (possible reason: tiling basic block is too large)
[ERROR] Failed to run BiShengIR pipeline
"""
VERIFIER = """\
loc("<tmp>/kernel.ttadapter.mlir":12:5): error: 'hivm.hir.vcast' op unsupported cast from f64 to f32
[ERROR] Failed to run BiShengIR pipeline
"""
ADAPTER_CRASH = """\
<unknown>:0: error: strides must not be zero
triton-adapter-opt: StorageUniquerSupport.h:180: Assertion `succeeded(...)' failed.
PLEASE submit a bug report to https://github.com/llvm/llvm-project/issues/ and include the crash backtrace.
Stack dump:
0.\tProgram arguments: triton-adapter-opt kernel.ttir.mlir --triton-to-linalg
 #0 0x000055ed48a1c8b1 (triton-adapter-opt+0x1f288b1)
 #1 0x00007f89f505a050 (/lib/x86_64-linux-gnu/libc.so.6+0x3c050)
"""


def test_cannot_find_hivmc_after_the_verifiers_is_a_pass():
    assert npu_toolchain.classify_bishengir(1, PASSED)["status"] == "passed"
    assert npu_toolchain.classify_bishengir(0, "")["status"] == "passed"


def test_ub_overflow_reports_required_against_available_bits():
    v = npu_toolchain.classify_bishengir(1, UB_OVERFLOW)
    assert v["status"] == "ub_overflow"
    assert (v["required_bits"], v["available_bits"]) == (3683328, 1572864)
    assert "requires 3683328 bits" in v["message"] and "196608 bytes" in v["message"]


def test_other_errors_are_verifier_failures_and_timeouts_are_timeouts():
    v = npu_toolchain.classify_bishengir(1, VERIFIER)
    assert v["status"] == "verifier" and "unsupported cast from f64" in v["message"]
    assert npu_toolchain.classify_bishengir(None, "")["status"] == "timeout"


def test_lowering_messages_drop_the_stack_dump():
    msg = npu_toolchain.lowering_message(ADAPTER_CRASH)
    assert "strides must not be zero" in msg and "Assertion" in msg
    assert "#0 0x" not in msg and "Program arguments" not in msg and "PLEASE" not in msg


SCALAR_LOOP = """\
module {
  func.func @k(%arg2: memref<?xf32>, %arg3: memref<?xf32>) {
    scf.for %arg11 = %5 to %8 step %9  : i64 {
      %reinterpret_cast = memref.reinterpret_cast %arg2 to offset: [%11], sizes: [256], strides: [1] : memref<?xf32> to memref<256xf32, strided<[1], offset: ?>>
      memref.copy %subview, %subview_4 : memref<?xf32, strided<[1], offset: ?>> to memref<?xf32, strided<[1]>>
      scf.if %17 {
        linalg.fill ins(%cst : f32) outs(%alloc : memref<256xf32>)
      } {hivm.unlikely_condition}
    }
    %1 = scf.for %arg10 = %c0 to %c256 step %c1 iter_args(%arg11 = %0) -> (tensor<256xf32>) {
      %reinterpret_cast_0 = memref.reinterpret_cast %arg2 to offset: [%4], sizes: [1], strides: [1] : memref<?xf32> to memref<1xf32, strided<[1], offset: ?>>
      %5 = memref.load %reinterpret_cast_0[%c0] : memref<1xf32, strided<[1], offset: ?>>
      %inserted = tensor.insert %5 into %arg11[%arg10] : tensor<256xf32>
      scf.yield {DiscreteMemAccess} %inserted : tensor<256xf32>
    } {ExtractedLoadOrStore}
    return
  }
}
"""


def test_scalar_loops_are_found_and_vector_copies_in_loops_are_not():
    loops = npu_toolchain.scalar_loops(SCALAR_LOOP)
    assert loops == ["line 10: scf.for with 1 scalar memref.load "
                     "(memref<1xf32, strided<[1], offset: ?>>) [ExtractedLoadOrStore]"]


def test_launch_requests_describe_pointers_scalars_and_constexprs():
    x = torch.randn(64)
    launch = Launch(gelu_kernels._gelu_tanh_fwd_kernel, (x, x[1:], 64),
                    {"BLOCK_SIZE": 64, "COMPUTE_FP64": False, "ACC": tl.float32,
                     "num_warps": 1}, launched=False)
    r = npu_toolchain.launch_request(launch)
    assert (r["module"], r["kernel"]) == ("kernels.gelu", "_gelu_tanh_fwd_kernel")
    assert r["args"] == [{"kind": "pointer", "dtype": "float32", "aligned": True},
                         {"kind": "pointer", "dtype": "float32", "aligned": False},
                         {"kind": "int", "value": 64}]
    assert r["kwargs"]["COMPUTE_FP64"] == {"kind": "bool", "value": False}
    assert r["kwargs"]["ACC"] == {"kind": "tl_dtype", "name": "fp32"}


# ---- the lowering itself (toolchain venv only) -------------------------------------------
needs_toolchain = pytest.mark.skipif(
    npu_toolchain.unavailable_reason() is not None,
    reason=f"not supported: {npu_toolchain.unavailable_reason()}")


def _verdicts(fn, *args):
    launches = execute(fn, Mode.COMPILE, NPU, args)
    assert launches
    return npu_toolchain.lower_launches(launches, NPU["target.arch"])


@needs_toolchain
def test_a_tile_over_the_unified_buffer_is_a_ub_overflow_and_the_reference_passes():
    x = torch.randn(64, 100)
    (hog,) = _verdicts(npu_ub_faults.gelu_ub_hog, x)
    assert hog["status"] == "ub_overflow", hog
    assert hog["available_bits"] == UB_BITS and hog["required_bits"] > UB_BITS
    (ref,) = _verdicts(gelu_kernels.gelu, x)
    assert ref["status"] == "passed", ref
    assert ref["scalar_loops"] == []


@needs_toolchain
def test_adapter_output_shows_the_io_patterns_the_lint_flags():
    # a load through a broadcast pointer crashes triton-ascend 3.2's adapter ("strides must not be zero")
    (bcast,) = _verdicts(npu_io_faults.gelu_broadcast_pointer, torch.randn(64, 100))
    assert bcast["status"] == "lowering_error"
    assert "strides must not be zero" in bcast["message"]
    # division offsets become a loop of scalar loads
    launch = Launch(npu_io_faults._division_offsets_kernel, (torch.randn(64), torch.randn(256)),
                    {"BLOCK_SIZE": 256}, launched=False)
    (div,) = npu_toolchain.lower_launches([launch], NPU["target.arch"])
    assert div["status"] == "passed" and len(div["scalar_loops"]) == 1, div


@needs_toolchain
def test_compile_suite_fails_a_ub_overflow_with_required_and_available_bits():
    result = run_pytest("suites/test_compile.py", "--vendor", "npu-ascend910b", "--mode",
                        "compile", "--impl", "gelu=tests.planted.npu_ub_faults:gelu_ub_hog",
                        "--op", "gelu")
    out = result.stdout
    assert result.returncode == 1, out
    assert "1 failed" in out, out
    assert "_gelu_ub_hog_kernel [BLOCK_SIZE=65536]: bishengir-compile: ub overflow: requires" in out
    assert f"while {UB_BITS} bits" in out and "limits.shared_memory_per_block 196608" in out
