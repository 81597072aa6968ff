"""The plausible range of every number a profile holds: well-typed numbers no real target
has (a typo, a unit slip, a value pasted into the wrong field) are refused by the schema's
checks (:mod:`triton_cts.profiles.schema`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


# Each range is wide around today's hardware; the tiny constants of derived profiles
# (suites/strategies.py) stay inside them.
@dataclass(frozen=True)
class Range:
    """The values a numeric field (every number in it, for a list or table) may take."""
    low: float
    high: float
    why: str


KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40
#: A Triton block holds at most 2^20 elements (TRITON_MAX_TENSOR_NUMEL), 8 MiB of float64;
#: a program holds at least one 16-byte vector.
_PER_UNIT = Range(1, 1024, "programs per compute unit: a few")
_BLOCK_BYTES = Range(16, 8 * MiB, "bytes one program holds: at least a 16-byte vector, at "
                                  "most Triton's 2^20-element block of float64")

PLAUSIBLE: dict[str, Range] = {
    "target.arch": Range(10, 999, "a CUDA compute capability, major * 10 + minor (90 = 9.0)"),
    "target.warp_size": Range(1, 128, "threads per warp or wavefront: 32 or 64 on GPUs, 1 on NPUs"),
    "target.rng_counter_bits": Range(32, 64, "a Philox counter width"),
    "limits.max_threads_per_block": Range(1, 4096, "1024 on every GPU today, 1 on NPUs"),
    "limits.max_num_warps": Range(1, 128, "32 or 16 on GPUs today, 1 on NPUs"),
    "limits.shared_memory_per_block": Range(1 * KiB, 64 * MiB,
                                            "on-chip memory of one block: 64 to 228 KiB today"),
    "limits.registers_per_sm": Range(0, 4 * MiB, "32-bit registers per SM/CU: 64K to 128K today"),
    "limits.registers_per_thread": Range(0, 4096, "registers per thread: 128 to 512 today"),
    "limits.compute_units": Range(1, 16384, "SMs, CUs or cores of one device: 304 at most today"),
    "limits.device_memory_bytes": Range(1 * MiB, 64 * TiB,
                                        "memory of one device: under 300 GiB today"),
    "limits.grid_max": Range(1, 2**32 - 1, "programs per grid axis: a 32-bit count"),
    "limits.grid_max_product": Range(1, 2**63 - 1, "programs in one launch: a 64-bit count"),
    "launch.max_fused_size_bytes": _BLOCK_BYTES,
    "launch.max_grid_num": Range(1, 2**32 - 1, "programs a launcher starts: a 32-bit count"),
    "launch.elementwise_block_bytes": _BLOCK_BYTES,
    "launch.row_stack_bytes": _BLOCK_BYTES,
    **{f"launch.{name}": _PER_UNIT for name in (
        "partials_per_compute_unit", "partials_per_compute_unit_16bit",
        "reduction_programs_per_compute_unit", "reduction_programs_per_compute_unit_32bit",
        "row_reduction_programs_per_compute_unit", "online_programs_per_compute_unit_32bit")},
    "launch.row_reduction_step_bytes": _BLOCK_BYTES,
    "launch.row_reduction_step_bytes_32bit": _BLOCK_BYTES,
    "launch.softmax_row_tile_bytes": _BLOCK_BYTES,
    "launch.layer_norm_normalize_tile_bytes": _BLOCK_BYTES,
    "launch.layer_norm_backward_last_sum_bytes": _BLOCK_BYTES,
    "launch.rms_norm_weight_first_max_block": Range(1, 1 << 20, "row elements: a Triton "
                                                    "block holds at most 2^20 elements"),
    "launch.rms_norm_weight_first_max_block_32bit": Range(1, 1 << 20, "as "
                                                          "launch.rms_norm_weight_first_max_block"),
    "launch.layer_norm_weight_first_max_block": Range(1, 1 << 20, "as "
                                                      "launch.rms_norm_weight_first_max_block"),
    "launch.layer_norm_weight_first_max_block_32bit": Range(
        1, 1 << 20, "as launch.rms_norm_weight_first_max_block"),
    "launch.cross_entropy_one_launch_elements": Range(1, 1 << 40, "logits of a call: the "
                                                      "size where the host stops being "
                                                      "the limit"),
    "launch.matmul_added_c_tiles": Range(1, 16, "float32 C tiles an added-into product's "
                                         "epilogue holds: 1 on GPUs, 4 on the Ascend NPU"),
    "launch.matmul_pointer_max_work": Range(1, 2**63 - 1, "M*N*K of a product: 512^3 "
                                            "on the Hopper profiles"),
    "launch.default_num_warps": Range(1, 128, "warps of one program"),
    "launch.num_warps_by_block": Range(1, 1 << 20, "block elements and warps: a Triton block "
                                                   "holds at most 2^20 elements"),
    "launch.num_warps_by_block_32bit": Range(1, 1 << 20, "as launch.num_warps_by_block"),
    "launch.layer_norm_num_warps_by_block": Range(1, 1 << 20, "as launch.num_warps_by_block"),
    "launch.layer_norm_num_warps_by_block_32bit": Range(1, 1 << 20,
                                                        "as launch.num_warps_by_block"),
    "launch.rms_norm_num_warps_by_block": Range(1, 1 << 20, "as launch.num_warps_by_block"),
    "launch.rms_norm_num_warps_by_block_32bit": Range(1, 1 << 20,
                                                      "as launch.num_warps_by_block"),
    "launch.layer_norm_tiled_num_warps_by_block": Range(1, 1 << 20,
                                                        "as launch.num_warps_by_block"),
    "launch.layer_norm_backward_num_warps_by_block": Range(1, 1 << 20,
                                                           "as launch.num_warps_by_block"),
    "launch.layer_norm_backward_num_warps_by_block_32bit": Range(
        1, 1 << 20, "as launch.num_warps_by_block"),
    "launch.tile_row_min_bytes": Range(0, 4 * KiB, "bytes of a padded tile row: 32 on the 910B"),
    "io.vector_load_bytes": Range(1, 256, "bytes of one load: 16 on GPUs, 32 on the 910B"),
    "launch.column_sum_tile": Range(1, 1 << 20, "rows, columns and warps of one program"),
    "launch.layer_norm_backward_column_tile": Range(1, 1 << 20,
                                                    "rows, columns, warps and programs a unit"),
    "launch.layer_norm_backward_column_tile_32bit": Range(
        1, 1 << 20, "rows, columns, warps and programs a unit"),
    "launch.layer_norm_backward_row_group_tile": Range(
        1, 1 << 20, "rows a meeting, columns, warps and programs a unit"),
    "launch.layer_norm_backward_row_group_tile_32bit": Range(
        1, 1 << 20, "rows a meeting, columns, warps and programs a unit"),
    "launch.layer_norm_forward_row_group_tile": Range(
        1, 1 << 20, "rows a meeting, columns, warps and programs a unit"),
    "launch.layer_norm_forward_row_group_tile_32bit": Range(
        1, 1 << 20, "rows a meeting, columns, warps and programs a unit"),
    "peak.memory_bandwidth_gbs": Range(0, 100_000, "GB/s: about 8,000 at most today"),
    "peak.dense_tflops": Range(0, 100_000, "TFLOP/s: about 10,000 (fp4) at most today"),
    "compile.simds_per_cu": Range(1, 64, "SIMDs or warp schedulers per SM/CU: 4 today"),
    "compile.max_waves_per_simd": Range(1, 64, "resident waves per SIMD: 8 to 16 today"),
    "compile.shared_memory_per_cu": Range(1 * KiB, 64 * MiB,
                                          "on-chip memory of one SM/CU: 64 to 228 KiB today"),
    "compile.max_blocks_per_cu": Range(1, 1024, "resident blocks per SM/CU: 32 today"),
    "compile.register_allocation_unit": Range(1, 4096, "registers: 256 on NVIDIA GPUs"),
    "compile.min_occupancy_waves": Range(0, 64, "waves per SIMD"),
    "autotune": Range(1, 1 << 20, "block sizes, warps and stages: a Triton block holds at "
                                  "most 2^20 elements"),
    "math_ulp": Range(0, 1 << 20, "ULPs from the correctly rounded result: 0 to a few "
                                  "thousand for approximations"),
}


def _numbers(value: Any, path: str):
    """(path, number) for every number in ``value``, lists and tables included."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield path, value
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _numbers(v, f"{path}[{i}]")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _numbers(v, f"{path}.{k}")


def _fmt(x: float) -> str:
    return f"{x:,}" if isinstance(x, int) else f"{x:g}"
