"""The vendor profile schema: every field a profile TOML file holds, what each must be,
and the cross-field checks of a loaded profile. Each error names the file, the field and
what was expected (:class:`ProfileError`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

VENDOR_FAMILIES = ("nvidia", "rocm", "npu")
BACKENDS = {"nvidia": "cuda", "rocm": "hip", "npu": "npu"}
LOAD_STRATEGIES = ("masked", "select")
ROW_CONSTANT_STRATEGIES = ("pointer", "slice_broadcast")
ATOMIC_OPS = ("add", "max", "min", "cas", "xchg")

#: Dtype names a profile may list, mapped to torch dtypes. The names are torch's.
DTYPES: dict[str, torch.dtype] = {
    name: getattr(torch, name)
    for name in (
        "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
        "float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2",
        "float8_e4m3fnuz", "float8_e5m2fnuz",
    )
    if hasattr(torch, name)
}


class ProfileError(ValueError):
    """A profile file is unreadable, malformed or describes impossible hardware."""

    def __init__(self, source: str, field_path: str, message: str):
        self.source, self.field, self.message = source, field_path, message
        where = f"field '{field_path}': " if field_path else ""
        super().__init__(f"{source}: {where}{message}")



# --------------------------------------------------------------------------------------
# Schema: each entry is (python type check, description of what is expected, required).
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Field:
    check: Callable[[Any], bool]
    expected: str
    required: bool = True


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_pos_int(v):
    return _is_int(v) and v > 0


def _is_number(v):
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and v >= 0


def _is_str(v):
    return isinstance(v, str) and v != ""


def _is_list_of(pred):
    return lambda v: isinstance(v, list) and all(pred(x) for x in v)


def _one_of(*choices):
    return lambda v: v in choices


def _is_dtype_list(v):
    return _is_list_of(lambda x: x in DTYPES)(v)


def _is_table(v):
    return isinstance(v, dict)


def _is_pow2(v):
    return _is_pos_int(v) and (v & (v - 1)) == 0


def _is_threshold_table(v):
    return _is_list_of(lambda p: _is_list_of(_is_pos_int)(p) and len(p) == 2)(v)


DTYPE_LIST = f"a list of dtype names from {sorted(DTYPES)}"

SCHEMA: dict[str, Any] = {
    "name": Field(_is_str, "a non-empty string (the profile's name)"),
    "vendor": Field(_one_of(*VENDOR_FAMILIES), f"one of {VENDOR_FAMILIES}"),
    "description": Field(_is_str, "a non-empty string"),
    "detect": {
        "device_names": Field(_is_list_of(_is_str),
                              "a list of device-name substrings, as torch reports them"),
    },
    "target": {
        "backend": Field(_one_of("cuda", "hip", "npu"), "one of ('cuda', 'hip', 'npu')"),
        "arch": Field(lambda v: _is_pos_int(v) or _is_str(v),
                      "an int (CUDA compute capability, e.g. 90) or a string (e.g. 'gfx942')"),
        "warp_size": Field(_is_pow2, "a power of two (threads per warp or wavefront)"),
        "rng_counter_bits": Field(
            _one_of(32, 64), "32 or 64 (the widest Philox counter tl.rand lowers to; 64 "
            "where absent)", required=False),
        "multi_operand_reduce": Field(
            lambda v: isinstance(v, bool),
            "true or false (whether the backend lowers a tl.reduce over a tuple of arrays "
            "in general, beyond the arg-max/min form; true where absent)", required=False),
    },
    "limits": {
        "max_threads_per_block": Field(_is_pos_int, "a positive int"),
        "max_num_warps": Field(_is_pow2, "a power of two"),
        "shared_memory_per_block": Field(_is_pos_int,
                                         "a positive int (bytes of shared memory, LDS or UB)"),
        "registers_per_sm": Field(lambda v: _is_int(v) and v >= 0,
                                  "an int >= 0 (32-bit registers; 0 where not modelled)"),
        "compute_units": Field(_is_pos_int, "a positive int (SMs, CUs or cores)"),
        "compute_unit_name": Field(_is_str, "a string such as 'SM', 'CU' or 'vector core'"),
        "device_memory_bytes": Field(_is_pos_int, "a positive int (bytes)"),
        "grid_max": Field(lambda v: _is_list_of(_is_pos_int)(v) and len(v) == 3,
                          "a list of 3 positive ints (x, y, z)"),
        "grid_max_product": Field(_is_pos_int, "a positive int (most programs in one launch)"),
    },
    "launch": {
        "max_fused_size_bytes": Field(_is_pow2, "a power of two (bytes)"),
        "max_grid_num": Field(_is_pos_int, "a positive int (programs a launcher may start)"),
        "elementwise_block_bytes": Field(_is_pow2, "a power of two (bytes per program)"),
        "row_stack_bytes": Field(_is_pow2, "a power of two (bytes of short rows per program)"),
        "partials_per_compute_unit": Field(
            _is_pos_int, "a positive int (programs per compute unit of a partial-sum backward)"),
        "default_num_warps": Field(_is_pow2, "a power of two"),
        "num_warps_by_block": Field(
            _is_threshold_table,
            "a list of [min_block_elements, num_warps] pairs, ascending"),
        "num_warps_by_block_32bit": Field(
            _is_threshold_table,
            "a list of [min_block_elements, num_warps] pairs, ascending (programs holding "
            "32-bit or wider data; num_warps_by_block where absent)", required=False),
        "tile_row_min_bytes": Field(
            lambda v: _is_int(v) and v >= 0,
            "an int >= 0 (bytes the innermost row of an on-chip tile takes at least; 0 "
            "where absent)", required=False),
        "column_sum_tile": Field(
            lambda v: _is_list_of(_is_pow2)(v) and len(v) == 3,
            "a list of 3 powers of two: [rows, columns, num_warps] of a program that sums "
            "columns over rows", required=False),
    },
    "io": {
        "load": Field(_one_of(*LOAD_STRATEGIES), f"one of {LOAD_STRATEGIES}"),
        "row_constants": Field(_one_of(*ROW_CONSTANT_STRATEGIES),
                               f"one of {ROW_CONSTANT_STRATEGIES}"),
    },
    "dtypes": {
        "supported": Field(_is_dtype_list, DTYPE_LIST),
        "dot": Field(_is_dtype_list, DTYPE_LIST),
        "tf32": Field(lambda v: isinstance(v, bool), "true or false"),
    },
    "atomics": {op: Field(_is_dtype_list, DTYPE_LIST) for op in ATOMIC_OPS},
    "peak": {
        "memory_bandwidth_gbs": Field(_is_number, "a number >= 0 (GB/s)"),
        "dense_tflops": Field(
            lambda v: _is_table(v) and all(k in DTYPES or k == "tf32" for k in v)
            and all(_is_number(x) for x in v.values()),
            "a table of dtype name (or 'tf32') -> TFLOP/s"),
    },
    # What a compiled kernel is held against beyond the hard limits: the occupancy model
    # (resident waves per SIMD / warp scheduler) and the quality floor.
    "compile": {
        "simds_per_cu": Field(_is_pos_int, "a positive int (SIMDs or warp schedulers per "
                                           "SM/CU/WGP: where waves are resident)"),
        "max_waves_per_simd": Field(_is_pos_int, "a positive int (resident waves/warps per SIMD)"),
        "shared_memory_per_cu": Field(_is_pos_int, "a positive int (bytes of shared memory, LDS "
                                                   "or UB the resident blocks share)"),
        "max_blocks_per_cu": Field(_is_pos_int, "a positive int (resident blocks/workgroups)"),
        "register_allocation_unit": Field(
            _is_pos_int, "a positive int (registers per warp are allocated in multiples of "
                         "this; used where the compiler reports no occupancy)", required=False),
        "min_occupancy_waves": Field(_is_number, "a number >= 0 (waves per SIMD below which "
                                                 "a kernel gets a quality warning)"),
    },
    # Optional tables: {op: {dtype: {rtol, atol}}} and {op: [config tables]}.
    "tolerances": Field(_is_table, "a table op -> dtype -> {rtol, atol}", required=False),
    "autotune": Field(_is_table, "a table op -> list of config tables", required=False),
}


def _walk(schema: dict, data: Any, prefix: str, source: str) -> None:
    if not isinstance(data, dict):
        raise ProfileError(source, prefix.rstrip("."), f"expected a table, got {data!r}")
    for key in data:
        if key not in schema:
            known = ", ".join(sorted(schema))
            raise ProfileError(source, prefix + key, f"unknown field (known here: {known})")
    for key, spec in schema.items():
        path = prefix + key
        if isinstance(spec, dict):
            if key not in data:
                raise ProfileError(source, path, "missing table")
            _walk(spec, data[key], path + ".", source)
            continue
        if key not in data:
            if spec.required:
                raise ProfileError(source, path, f"missing; expected {spec.expected}")
            continue
        value = data[key]
        if not spec.check(value):
            raise ProfileError(source, path,
                               f"expected {spec.expected}, got {type(value).__name__} {value!r}")


def _check_consistency(d: dict, source: str) -> None:
    """Cross-field checks: values that are well-typed but describe impossible hardware."""
    t, lim, la = d["target"], d["limits"], d["launch"]
    if BACKENDS[d["vendor"]] != t["backend"]:
        raise ProfileError(source, "target.backend",
                           f"vendor '{d['vendor']}' needs backend '{BACKENDS[d['vendor']]}', "
                           f"got '{t['backend']}'")
    if t["backend"] == "cuda" and not _is_int(t["arch"]):
        raise ProfileError(source, "target.arch", f"CUDA needs an int arch, got {t['arch']!r}")
    if t["backend"] != "cuda" and not isinstance(t["arch"], str):
        raise ProfileError(source, "target.arch",
                           f"{t['backend']} needs a string arch, got {t['arch']!r}")
    if lim["max_num_warps"] * t["warp_size"] > lim["max_threads_per_block"]:
        raise ProfileError(
            source, "limits.max_num_warps",
            f"max_num_warps * warp_size = {lim['max_num_warps']} * {t['warp_size']} exceeds "
            f"max_threads_per_block = {lim['max_threads_per_block']}")
    if la["default_num_warps"] > lim["max_num_warps"]:
        raise ProfileError(source, "launch.default_num_warps",
                           f"expected at most limits.max_num_warps = {lim['max_num_warps']}")
    for table in ("num_warps_by_block", "num_warps_by_block_32bit"):
        prev = 0
        for i, (block, warps) in enumerate(la.get(table, ())):
            where = f"launch.{table}[{i}]"
            if block <= prev:
                raise ProfileError(source, where, "thresholds must be strictly ascending")
            if warps & (warps - 1) or warps > lim["max_num_warps"]:
                raise ProfileError(source, where,
                                   f"num_warps {warps} must be a power of two and at most "
                                   f"limits.max_num_warps = {lim['max_num_warps']}")
            prev = block
    if "column_sum_tile" in la and la["column_sum_tile"][2] > lim["max_num_warps"]:
        raise ProfileError(source, "launch.column_sum_tile[2]",
                           f"num_warps {la['column_sum_tile'][2]} exceeds "
                           f"limits.max_num_warps = {lim['max_num_warps']}")
    if la["max_grid_num"] > min(lim["grid_max"][0], lim["grid_max_product"]):
        raise ProfileError(source, "launch.max_grid_num",
                           f"{la['max_grid_num']} exceeds the grid limit of axis 0 or the product")
    if lim["grid_max_product"] < max(lim["grid_max"][1:]):
        raise ProfileError(source, "limits.grid_max_product",
                           "smaller than the limit of axis 1 or 2")
    comp = d["compile"]
    if comp["min_occupancy_waves"] > comp["max_waves_per_simd"]:
        raise ProfileError(source, "compile.min_occupancy_waves",
                           f"expected at most compile.max_waves_per_simd = "
                           f"{comp['max_waves_per_simd']}")
    if comp["shared_memory_per_cu"] < lim["shared_memory_per_block"]:
        raise ProfileError(source, "compile.shared_memory_per_cu",
                           "smaller than limits.shared_memory_per_block")
    supported = set(d["dtypes"]["supported"])
    for group in ("dtypes.dot", *(f"atomics.{op}" for op in ATOMIC_OPS)):
        sect, key = group.split(".")
        extra = set(d[sect][key]) - supported
        if extra:
            raise ProfileError(source, group,
                               f"dtypes {sorted(extra)} are not in dtypes.supported")
    for op, per_dtype in d.get("tolerances", {}).items():
        if not isinstance(per_dtype, dict):
            raise ProfileError(source, f"tolerances.{op}", "expected a table dtype -> {rtol, atol}")
        for dt, tol in per_dtype.items():
            where = f"tolerances.{op}.{dt}"
            if dt not in DTYPES:
                raise ProfileError(source, where, f"unknown dtype; expected one of {sorted(DTYPES)}")
            if not (isinstance(tol, dict) and set(tol) == {"rtol", "atol"}
                    and all(_is_number(x) for x in tol.values())):
                raise ProfileError(source, where, "expected {rtol = number, atol = number}")
    for op, configs in d.get("autotune", {}).items():
        where = f"autotune.{op}"
        if not _is_list_of(_is_table)(configs) or not configs:
            raise ProfileError(source, where, "expected a non-empty list of config tables")
        for i, cfg in enumerate(configs):
            for k, v in cfg.items():
                if not _is_pos_int(v):
                    raise ProfileError(source, f"{where}[{i}].{k}", f"expected a positive int, got {v!r}")
            if cfg.get("num_warps", 1) > lim["max_num_warps"]:
                raise ProfileError(source, f"{where}[{i}].num_warps",
                                   f"exceeds limits.max_num_warps = {lim['max_num_warps']}")


def validate(data: dict, source: str) -> None:
    """Check a profile's data against :data:`SCHEMA` and the cross-field rules; raise
    :class:`ProfileError` naming ``source``, the field and what was expected."""
    _walk(SCHEMA, data, "", source)
    _check_consistency(data, source)
