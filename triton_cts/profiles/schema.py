"""The vendor profile schema: every field a profile TOML file holds, each declared once
(:class:`~triton_cts.profiles.fields.Field`: what it must be, its unit, plausible range,
default and meaning), and the ceiling of tolerance overrides, each checked by a function
here; :func:`triton_cts.profiles.validation.validate` runs them with the cross-field
checks. Each error names the file, the field and what was expected (:class:`ProfileError`).
"""
from __future__ import annotations

import math
import re
from typing import Any

import torch

from triton_cts.profiles.fields import (BLOCK_BYTES, KiB, MiB, PER_UNIT, TABLE, TiB,
                                        WARPS_TABLE, Field, count, flag, is_flag, is_int,
                                        is_list_of, is_number, is_pos_int, is_pow2, is_str,
                                        is_table, is_threshold_table, one_of)
from triton_cts.profiles.plausible import Range, _fmt, _numbers  # noqa: F401 (re-exported)

#: ``other``: an accelerator PyTorch reaches through its PrivateUse1 mechanism, whose
#: profile's ``target.backend`` is its own torch device type.
VENDOR_FAMILIES = ("nvidia", "rocm", "npu", "intel", "other")
#: The backend each family's profiles name (``other``: any backend but these).
BACKENDS = {"nvidia": "cuda", "rocm": "hip", "npu": "npu", "intel": "xpu"}
LOAD_STRATEGIES = ("masked", "select")
ROW_CONSTANT_STRATEGIES = ("pointer", "slice_broadcast")
ATOMIC_OPS = ("add", "max", "min", "cas", "xchg")
#: Tile sizes an attention config table must give (``autotune.attention[_backward]``).
ATTENTION_TILES = {"attention": ("BLOCK_M", "BLOCK_N"),
                   "attention_backward": ("BLOCK_M1", "BLOCK_N1", "BLOCK_M2", "BLOCK_N2")}
#: Config keys an autotune table may give only some values of (the kernel takes no
#: other): ``autotune.matmul_tma``'s C tile split and loop flattening (kernels/matmul/kernels.py).
CONFIG_CHOICES = {"matmul_tma": {"C_SPLIT": (1, 2), "FLATTEN": (0, 1)}}
#: Math functions a ``[math_ulp]`` table may bound (triton_cts/ops/language/math.py).
MATH_FUNCTIONS = ("exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "sin", "cos",
                  "erf", "sigmoid", "tanh", "fdiv", "div_rn", "fma")

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

#: What ``--vendor`` reads as a family or a special choice before it looks for a profile
#: of that name: a profile named so could never be selected by name.
SPECIAL_SELECTORS = ("all", "auto")
RESERVED_NAMES = (*VENDOR_FAMILIES, *SPECIAL_SELECTORS)

#: torch.testing.assert_close's default (rtol, atol) per floating dtype. The tolerance
#: policy (``triton_cts.ops.tolerances``) falls back to these, and a profile's
#: ``[tolerances]`` override is held against a multiple of them: one table serves both.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
}
#: Other floating dtypes (fp8): one 3-bit mantissa step.
OTHER_FLOAT_TOLERANCE = (1.25e-1, 1e-1)
#: A profile may loosen a dtype's default this many times at most: beyond it an override
#: no longer describes rounding a target may do, and a wrong result would pass.
TOLERANCE_CEILING_FACTOR = 100


def default_tolerance(dtype_name: str) -> tuple[float, float]:
    """torch's default (rtol, atol) for a dtype name from :data:`DTYPES`; integers and
    bool compare exactly."""
    if dtype_name in DEFAULT_TOLERANCES:
        return DEFAULT_TOLERANCES[dtype_name]
    return OTHER_FLOAT_TOLERANCE if DTYPES[dtype_name].is_floating_point else (0.0, 0.0)


def tolerance_ceiling(dtype_name: str) -> tuple[float, float]:
    """The loosest (rtol, atol) a profile override may give ``dtype_name``."""
    return tuple(TOLERANCE_CEILING_FACTOR * x for x in default_tolerance(dtype_name))


class ProfileError(ValueError):
    """A profile file is unreadable, malformed or describes impossible hardware."""

    def __init__(self, source: str, field_path: str, message: str):
        self.source, self.field, self.message = source, field_path, message
        where = f"field '{field_path}': " if field_path else ""
        super().__init__(f"{source}: {where}{message}")



# --------------------------------------------------------------------------------------
# Schema: every field of a profile file, declared once (triton_cts/profiles/fields.py).
# Kernel families declare their own tuning fields beside their launchers
# (triton_cts/profiles/tuning.py); a profile's [tuning.<family>] tables hold its values.
# --------------------------------------------------------------------------------------
_is_int, _is_pos_int, _is_number, _is_str = is_int, is_pos_int, is_number, is_str
_is_list_of, _is_table, _is_pow2, _is_threshold_table = (is_list_of, is_table, is_pow2,
                                                         is_threshold_table)
_is_dtype_list = is_list_of(DTYPES.__contains__)
DTYPE_LIST = f"a list of dtype names from {sorted(DTYPES)}"
_WARPS = Range(1, 128, "warps of one program")


def _num_warps_by_block_32bit(profile) -> list:
    return profile["launch.num_warps_by_block"]


def is_backend_name(v) -> bool:
    """A torch device type: ``torch.utils.rename_privateuse1_backend`` takes a lowercase
    identifier-like name."""
    return is_str(v) and re.fullmatch(r"[a-z][a-z0-9_]*", v) is not None


SCHEMA: dict[str, Any] = {
    "name": Field(is_str, "a non-empty string (the profile's name)"),
    "vendor": Field(one_of(*VENDOR_FAMILIES), f"one of {VENDOR_FAMILIES}"),
    "description": Field(is_str, "a non-empty string"),
    "detect": {
        "device_names": Field(is_list_of(is_str),
                              "a list of device-name substrings, as torch reports them"),
    },
    "target": {
        "backend": Field(is_backend_name,
                         "'cuda', 'hip', 'npu', 'xpu', or (vendor 'other') the torch device "
                         "type of a PrivateUse1 backend: lowercase letters, digits and _"),
        "arch": Field(lambda v: is_pos_int(v) or is_str(v),
                      "an int (CUDA compute capability, e.g. 90) or a string (e.g. 'gfx942')",
                      plausible=Range(10, 999, "a CUDA compute capability, major * 10 + minor "
                                               "(90 = 9.0)")),
        "warp_size": Field(is_pow2, "a power of two (threads per warp or wavefront)",
                           plausible=Range(1, 128, "threads per warp or wavefront: 32 or 64 "
                                                   "on GPUs, 1 on NPUs"), unit="threads"),
        "rng_counter_bits": Field(
            one_of(32, 64), "32 or 64 (the widest Philox counter tl.rand lowers to; 64 "
            "where absent)", required=False, default=64, unit="bits",
            plausible=Range(32, 64, "a Philox counter width")),
        "multi_operand_reduce": flag(
            "whether the backend lowers a tl.reduce over a tuple of arrays in general, "
            "beyond the arg-max/min form; true where absent", default=True),
        "sub_group_sizes": Field(
            lambda v: is_list_of(is_pow2)(v) and len(v) > 0,
            "a list of powers of two (the sub-group sizes an Intel GPU supports; the xpu "
            "backend needs it)", required=False, unit="threads",
            plausible=Range(1, 128, "threads per sub-group: 8 to 32 today")),
        "extensions": Field(
            is_list_of(is_str), "a list of OpenCL extension names the device reports "
            "(the xpu backend reads 2D block IO, DPAS and bf16 conversions from them)",
            required=False, default_text="none"),
    },
    "limits": {
        "max_threads_per_block": Field(is_pos_int, "a positive int", unit="threads",
                                       plausible=Range(1, 4096, "1024 on every GPU today, "
                                                                "1 on NPUs")),
        "max_num_warps": Field(is_pow2, "a power of two", unit="warps",
                               plausible=Range(1, 128, "32 or 16 on GPUs today, 1 on NPUs")),
        "shared_memory_per_block": Field(
            is_pos_int, "a positive int (bytes of shared memory, LDS or UB)", unit="bytes",
            plausible=Range(1 * KiB, 64 * MiB, "on-chip memory of one block: 64 to 228 KiB "
                                               "today")),
        "registers_per_sm": Field(
            lambda v: is_int(v) and v >= 0,
            "an int >= 0 (32-bit registers; 0 where not modelled)", unit="registers",
            plausible=Range(0, 4 * MiB, "32-bit registers per SM/CU: 64K to 128K today")),
        "registers_per_thread": Field(
            lambda v: is_int(v) and v >= 0,
            "an int >= 0 (the most 32-bit registers one thread may address; 0 or absent "
            "where not modelled)", required=False, default=0, unit="registers",
            plausible=Range(0, 4096, "registers per thread: 128 to 512 today")),
        "compute_units": Field(is_pos_int, "a positive int (SMs, CUs or cores)",
                               plausible=Range(1, 16384, "SMs, CUs or cores of one device: "
                                                         "304 at most today")),
        "compute_unit_name": Field(is_str, "a string such as 'SM', 'CU' or 'vector core'"),
        "device_memory_bytes": Field(is_pos_int, "a positive int (bytes)", unit="bytes",
                                     plausible=Range(1 * MiB, 64 * TiB, "memory of one "
                                                     "device: under 300 GiB today")),
        "grid_max": Field(lambda v: is_list_of(is_pos_int)(v) and len(v) == 3,
                          "a list of 3 positive ints (x, y, z)", unit="programs",
                          plausible=Range(1, 2**32 - 1, "programs per grid axis: a 32-bit "
                                                        "count")),
        "grid_max_product": Field(is_pos_int, "a positive int (most programs in one launch)",
                                  unit="programs",
                                  plausible=Range(1, 2**63 - 1, "programs in one launch: a "
                                                                "64-bit count")),
    },
    # The generic launch constants every kernel family reads; a family's own tuning is
    # declared beside its launcher and set in [tuning.<family>].
    "launch": {
        "max_fused_size_bytes": Field(is_pow2, "a power of two (bytes)", unit="bytes",
                                      plausible=BLOCK_BYTES),
        "max_grid_num": Field(is_pos_int, "a positive int (programs a launcher may start)",
                              unit="programs",
                              plausible=Range(1, 2**32 - 1, "programs a launcher starts: a "
                                                            "32-bit count")),
        "elementwise_block_bytes": Field(is_pow2, "a power of two (bytes per program)",
                                         unit="bytes", plausible=BLOCK_BYTES),
        "row_stack_bytes": Field(is_pow2, "a power of two (bytes of short rows per program)",
                                 unit="bytes", plausible=BLOCK_BYTES),
        "partials_per_compute_unit": Field(
            is_pos_int, "a positive int (programs per compute unit of a partial-sum "
            "backward)", plausible=PER_UNIT, unit="programs per compute unit"),
        "online_programs_per_compute_unit_32bit": count(
            "programs per compute unit of the kernels that walk a long row more than once "
            "(online softmax forward, layer-norm tiled forward) on 32-bit data; a program "
            "per row where absent", default_text="absent (a program per row)",
            unit="programs per compute unit"),
        "default_num_warps": Field(is_pow2, "a power of two", unit="warps", plausible=_WARPS),
        "num_warps_by_block": Field(is_threshold_table, TABLE, plausible=WARPS_TABLE,
                                    unit="elements, warps"),
        "num_warps_by_block_32bit": Field(
            is_threshold_table, f"{TABLE} (programs holding 32-bit or wider data; "
            "num_warps_by_block where absent)", required=False, plausible=WARPS_TABLE,
            default=_num_warps_by_block_32bit, default_text="launch.num_warps_by_block",
            unit="elements, warps"),
        "tile_row_min_bytes": Field(
            lambda v: is_int(v) and v >= 0,
            "an int >= 0 (bytes the innermost row of an on-chip tile takes at least; 0 "
            "where absent)", required=False, default=0, unit="bytes",
            plausible=Range(0, 4 * KiB, "bytes of a padded tile row: 32 on the 910B")),
    },
    "io": {
        "load": Field(one_of(*LOAD_STRATEGIES), f"one of {LOAD_STRATEGIES}"),
        "row_constants": Field(one_of(*ROW_CONSTANT_STRATEGIES),
                               f"one of {ROW_CONSTANT_STRATEGIES}"),
        "vector_load_bytes": Field(is_pow2, "a power of two (bytes of the widest load one "
                                            "thread or lane issues)", unit="bytes",
                                   plausible=Range(1, 256, "bytes of one load: 16 on GPUs, "
                                                           "32 on the 910B")),
        "l2_eviction_hints": flag(
            "whether the two-pass row kernels hint the L2 to keep what they read again and "
            "evict what they do not: Triton's eviction_policy; false where absent"),
    },
    "dtypes": {
        "supported": Field(_is_dtype_list, DTYPE_LIST),
        "dot": Field(_is_dtype_list, DTYPE_LIST),
        "tf32": Field(is_flag, "true or false"),
        "tf32_k_major": flag(
            "whether tf32 dots read both operands K-major only, so a matmul copies an "
            "operand that is not K-major first; false where absent"),
    },
    "atomics": {op: Field(_is_dtype_list, DTYPE_LIST) for op in ATOMIC_OPS},
    "peak": {
        "memory_bandwidth_gbs": Field(is_number, "a number >= 0 (GB/s)", unit="GB/s",
                                      plausible=Range(0, 100_000, "GB/s: about 8,000 at "
                                                                  "most today")),
        "dense_tflops": Field(
            lambda v: is_table(v) and all(k in DTYPES or k == "tf32" for k in v)
            and all(is_number(x) for x in v.values()),
            "a table of dtype name (or 'tf32') -> TFLOP/s", unit="TFLOP/s",
            plausible=Range(0, 100_000, "TFLOP/s: about 10,000 (fp4) at most today")),
    },
    # What a compiled kernel is held against beyond the hard limits: the occupancy model
    # (resident waves per SIMD / warp scheduler) and the quality floor.
    "compile": {
        "simds_per_cu": Field(is_pos_int, "a positive int (SIMDs or warp schedulers per "
                                          "SM/CU/WGP: where waves are resident)",
                              plausible=Range(1, 64, "SIMDs or warp schedulers per SM/CU: "
                                                     "4 today")),
        "max_waves_per_simd": Field(is_pos_int, "a positive int (resident waves/warps per "
                                                "SIMD)",
                                    plausible=Range(1, 64, "resident waves per SIMD: 8 to "
                                                           "16 today")),
        "shared_memory_per_cu": Field(
            is_pos_int, "a positive int (bytes of shared memory, LDS or UB the resident "
            "blocks share)", unit="bytes",
            plausible=Range(1 * KiB, 64 * MiB, "on-chip memory of one SM/CU: 64 to 228 KiB "
                                               "today")),
        "max_blocks_per_cu": Field(is_pos_int, "a positive int (resident blocks/workgroups)",
                                   plausible=Range(1, 1024, "resident blocks per SM/CU: 32 "
                                                            "today")),
        "register_allocation_unit": Field(
            is_pos_int, "a positive int (registers per warp are allocated in multiples of "
                        "this; used where the compiler reports no occupancy)", required=False,
            default=1, unit="registers",
            plausible=Range(1, 4096, "registers: 256 on NVIDIA GPUs")),
        "min_occupancy_waves": Field(is_number, "a number >= 0 (waves per SIMD below which "
                                                "a kernel gets a quality warning)",
                                     plausible=Range(0, 64, "waves per SIMD")),
    },
    # Optional tables: {op: {dtype: {rtol, atol}}} and {op: [config tables]}.
    "tolerances": Field(is_table, "a table op -> dtype -> {rtol, atol}", required=False,
                        default_text="torch's defaults"),
    "autotune": Field(is_table, "a table op -> list of config tables", required=False,
                      default_text="the launcher's own configs",
                      plausible=Range(1, 1 << 20, "block sizes, warps and stages: a Triton "
                                                  "block holds at most 2^20 elements")),
    # Optional: {function: {dtype: ulp or {ulp, per_abs_x}}}, checked in consistency.check_math_ulp;
    # a profile without it is held to the OpenCL C bounds (triton_cts/ops/language/math.py).
    "math_ulp": Field(is_table, "a table function -> dtype -> ULP bound", required=False,
                      default_text="the OpenCL C bounds", unit="ULP",
                      plausible=Range(0, 1 << 20, "ULPs from the correctly rounded result: "
                                                  "0 to a few thousand for approximations")),
    # Optional: {family: {field: value}}, each family's fields declared beside its launcher.
    "tuning": Field(is_table, "a table family -> field -> value (the families in "
                    "triton_cts/profiles/tuning.py)", required=False,
                    default_text="every family's derived defaults"),
}


def _plausible(schema: dict, prefix: str = "") -> dict[str, Range]:
    out = {}
    for key, spec in schema.items():
        if isinstance(spec, dict):
            out |= _plausible(spec, f"{prefix}{key}.")
        elif spec.plausible is not None:
            out[prefix + key] = spec.plausible
    return out


#: The plausible range of every numeric field, dotted path -> range, from :data:`SCHEMA`.
PLAUSIBLE: dict[str, Range] = _plausible(SCHEMA)


def _check_finite(data: dict, source: str) -> None:
    """TOML reads ``inf`` and ``nan``: no profile number may be either."""
    for path, x in _numbers(data, ""):
        if isinstance(x, float) and not math.isfinite(x):
            raise ProfileError(source, path.lstrip("."), f"expected a finite number, got {x!r}")


def _check_plausible(data: dict, source: str, ranges: dict[str, Range] = PLAUSIBLE) -> None:
    for dotted, rng in ranges.items():
        node: Any = data
        for part in dotted.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        for path, x in _numbers(node, dotted):
            if not rng.low <= x <= rng.high:
                raise ProfileError(source, path, f"{_fmt(x)} is outside the plausible range "
                                                 f"[{_fmt(rng.low)}, {_fmt(rng.high)}] "
                                                 f"({rng.why})")


def _check_tolerance_ceiling(data: dict, source: str) -> None:
    """An override above :func:`tolerance_ceiling` would let a wrong result pass."""
    for op, per_dtype in data.get("tolerances", {}).items():
        for dt, tol in per_dtype.items():
            for key, ceiling, default in zip(("rtol", "atol"), tolerance_ceiling(dt),
                                             default_tolerance(dt)):
                if tol[key] > ceiling * (1 + 1e-9):
                    why = (f"{TOLERANCE_CEILING_FACTOR} x torch's default {_fmt(default)} for "
                           f"{dt}" if default else f"{dt} compares exactly")
                    raise ProfileError(source, f"tolerances.{op}.{dt}.{key}",
                                       f"{_fmt(tol[key])} is above the ceiling {_fmt(ceiling)} "
                                       f"({why})")


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
