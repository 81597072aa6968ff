"""The vendor profile schema: every field a profile TOML file holds, what each must be,
the plausible range of every number (the ranges are in
:mod:`triton_cts.profiles.plausible`) and the ceiling of tolerance overrides, each checked
by a function here; :func:`triton_cts.profiles.validation.validate` runs them with the
cross-field checks. Each error names the file, the field and what was expected
(:class:`ProfileError`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch

from triton_cts.profiles.plausible import PLAUSIBLE, _fmt, _numbers  # noqa: F401 (re-exported)

VENDOR_FAMILIES = ("nvidia", "rocm", "npu", "intel")
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


_is_dtype_list = _is_list_of(DTYPES.__contains__)


def _is_table(v):
    return isinstance(v, dict)


def _is_pow2(v):
    return _is_pos_int(v) and (v & (v - 1)) == 0


def _column_tile_field(what: str) -> "Field":
    return Field(
        lambda v: _is_list_of(_is_int)(v) and len(v) == 4
        and all(_is_pow2(n) for n in v[:3]) and v[3] >= 1,
        f"a list of 4 ints: [rows, columns, num_warps] (powers of two) and programs per "
        f"compute unit (>= 1) {what}", required=False)


def _row_group_tile_field(what: str) -> "Field":
    return Field(
        lambda v: _is_list_of(_is_int)(v) and len(v) in (4, 5)
        and all(_is_pow2(n) for n in v[:3]) and v[3] >= 1 and v[4:] in ([], [1], [2]),
        f"a list of 4 or 5 ints: [rows a meeting, columns, num_warps] (powers of two), "
        f"programs kept resident per compute unit (>= 1) and optionally row blocks in "
        f"flight (1, or 2: the next rows' loads issued before each meeting) {what}",
        required=False)


def _is_threshold_table(v):
    return _is_list_of(lambda p: _is_list_of(_is_pos_int)(p) and len(p) in (2, 3))(v)


#: What a [min_block_elements, num_warps] table holds, and its optional third number.
_TABLE = ("a list of [min_block_elements, num_warps] pairs, ascending; an entry may add a "
          "third number, the programs kept resident per compute unit (their registers are "
          "capped to fit: CUDA only)")


def _optional_count(use: str) -> Field:
    return Field(_is_pos_int, f"a positive int ({use})", required=False)


def _optional_flag(use: str) -> Field:
    return Field(lambda v: isinstance(v, bool), f"true or false ({use})", required=False)


def _warps_table(use: str) -> Field:
    """An optional warps table of some programs (``use``), and what stands in where absent."""
    return Field(_is_threshold_table, f"{_TABLE} ({use})", required=False)


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
        "backend": Field(_one_of("cuda", "hip", "npu", "xpu"),
                         "one of ('cuda', 'hip', 'npu', 'xpu')"),
        "arch": Field(lambda v: _is_pos_int(v) or _is_str(v),
                      "an int (CUDA compute capability, e.g. 90) or a string (e.g. 'gfx942')"),
        "warp_size": Field(_is_pow2, "a power of two (threads per warp or wavefront)"),
        "rng_counter_bits": Field(
            _one_of(32, 64), "32 or 64 (the widest Philox counter tl.rand lowers to; 64 "
            "where absent)", required=False),
        "multi_operand_reduce": _optional_flag(
            "whether the backend lowers a tl.reduce over a tuple of arrays in general, "
            "beyond the arg-max/min form; true where absent"),
        "sub_group_sizes": Field(
            lambda v: _is_list_of(_is_pow2)(v) and len(v) > 0,
            "a list of powers of two (the sub-group sizes an Intel GPU supports; the xpu "
            "backend needs it)", required=False),
        "extensions": Field(
            _is_list_of(_is_str), "a list of OpenCL extension names the device reports "
            "(the xpu backend reads 2D block IO, DPAS and bf16 conversions from them)",
            required=False),
    },
    "limits": {
        "max_threads_per_block": Field(_is_pos_int, "a positive int"),
        "max_num_warps": Field(_is_pow2, "a power of two"),
        "shared_memory_per_block": Field(_is_pos_int,
                                         "a positive int (bytes of shared memory, LDS or UB)"),
        "registers_per_sm": Field(lambda v: _is_int(v) and v >= 0,
                                  "an int >= 0 (32-bit registers; 0 where not modelled)"),
        "registers_per_thread": Field(
            lambda v: _is_int(v) and v >= 0,
            "an int >= 0 (the most 32-bit registers one thread may address; 0 or absent "
            "where not modelled)", required=False),
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
        "partials_per_compute_unit_16bit": _optional_count(
            "as partials_per_compute_unit, for 16-bit rows short enough to stack several a "
            "program; partials_per_compute_unit where absent"),
        "online_programs_per_compute_unit_32bit": _optional_count(
            "programs per compute unit of the kernels that walk a long row more than once "
            "(online softmax forward, layer-norm tiled forward) on 32-bit data; a program "
            "per row where absent"),
        "reduction_programs_per_compute_unit": _optional_count(
            "programs per compute unit of a whole-tensor reduction's first stage on data "
            "narrower than 32 bits; a program per block where absent"),
        "reduction_programs_per_compute_unit_32bit": _optional_count(
            "as reduction_programs_per_compute_unit, on 32-bit or wider data; "
            "reduction_programs_per_compute_unit where absent"),
        "row_reduction_step_bytes": Field(_is_pow2, "a power of two (bytes of a row a max_dim "
                                          "program reads a step on data narrower than 32 "
                                          "bits; elementwise_block_bytes where absent)", False),
        "row_reduction_step_bytes_32bit": Field(_is_pow2, "a power of two (the same on 32-bit "
                                                "or wider data)", required=False),
        "softmax_row_tile_bytes": Field(_is_pow2, "a power of two (bytes of a row one program "
                                        "of the softmax forward holds on data narrower than "
                                        "32 bits: rows up to it fused, longer rows online in "
                                        "tiles of it; max_fused_size_bytes where absent or "
                                        "larger)", required=False),
        "layer_norm_normalize_tile_bytes": Field(
            _is_pow2, "a power of two (bytes of a tile of the layer-norm tiled forward's "
            "normalizing walk on data narrower than 32 bits, RMS norm excluded; the walk "
            "takes the forward's tile where absent or larger)", required=False),
        "layer_norm_backward_last_sum_bytes": Field(
            _is_pow2, "a power of two (bytes of the partial-sum layer-norm backward's "
            "dweight partials, programs x columns x accumulator size, up to which the "
            "program that finishes last adds them itself instead of a second launch; a "
            "second launch always where absent)", required=False),
        "rms_norm_weight_first_max_block": _optional_count(
            "elements of a row up to which the fused RMS-norm forward (the fused add + RMS "
            "norm too), where a program holds one row of 16-bit data, loads the weight with "
            "the row, before the statistics, rather than after them; never where absent"),
        "rms_norm_weight_first_max_block_32bit": _optional_count(
            "as rms_norm_weight_first_max_block, on 32-bit data (64-bit data keep the "
            "weight after)"),
        "layer_norm_weight_first_max_block": _optional_count(
            "as rms_norm_weight_first_max_block, for the fused layer-norm forward (weight and "
            "bias); never where absent"),
        "layer_norm_weight_first_max_block_32bit": _optional_count(
            "as layer_norm_weight_first_max_block, on 32-bit data (64-bit data keep the "
            "weight after)"),
        "cross_entropy_one_launch_elements": _optional_count(
            "logits (rows x classes) up to which a cross-entropy reduced to a sum or mean is "
            "one launch: every program counts the labels not ignored and the last to finish "
            "sums the losses; a count, the loss kernel and a sum where absent"),
        "attention_backward_single_launch": _optional_flag(
            "whether attention's backward launches its dk/dv and dq tiles in one launch where "
            "all of them fit one program per compute unit (limits.compute_units); two "
            "launches always where absent"),
        "layer_norm_backward_prefetch": _optional_flag(
            "whether the fused layer-norm backward, where a program holds one row of 32-bit "
            "or narrower data, loads the next row's x and dy before the row's sums; false "
            "where absent"),
        "row_reduction_programs_per_compute_unit": _optional_count(
            "programs per compute unit the max_dim row kernel keeps before it stacks rows; 1 "
            "where absent"),
        "matmul_added_c_tiles": _optional_count(
            "float32 C tiles [BLOCK_SIZE_M, BLOCK_SIZE_N] the epilogue of a matmul added into "
            "its output holds on chip at once (the matmul pruner's bound); 1 where absent"),
        "matmul_pointer_max_work": _optional_count(
            "M*N*K up to which matmul runs its pointer kernel where the profile also has "
            "[[autotune.matmul_tma]] configs; every size takes those where absent"),
        "default_num_warps": Field(_is_pow2, "a power of two"),
        "num_warps_by_block": Field(_is_threshold_table, _TABLE),
        "num_warps_by_block_32bit": _warps_table(
            "programs holding 32-bit or wider data; num_warps_by_block where absent"),
        "layer_norm_num_warps_by_block": _warps_table(
            "the layer-norm fused forward on 16-bit data; num_warps_by_block where absent"),
        "layer_norm_num_warps_by_block_32bit": _warps_table(
            "the layer-norm fused forward on 32-bit or wider data; num_warps_by_block_32bit "
            "where absent"),
        "rms_norm_num_warps_by_block": _warps_table(
            "the RMS-norm fused forward on 16-bit data (the fused add + RMS norm too); "
            "layer_norm_num_warps_by_block where absent"),
        "rms_norm_num_warps_by_block_32bit": _warps_table(
            "the same on 32-bit or wider data; layer_norm_num_warps_by_block_32bit where "
            "absent"),
        "layer_norm_tiled_num_warps_by_block": _warps_table(
            "the layer-norm tiled forward on 16-bit data, rows past the fused tile; "
            "num_warps_by_block where absent"),
        "layer_norm_backward_num_warps_by_block": _warps_table(
            "the layer-norm backward's dx kernels on 16-bit data (fused: rows x columns of a "
            "program; tiled: twice its tile); num_warps_by_block where absent"),
        "layer_norm_backward_num_warps_by_block_32bit": _warps_table(
            "as layer_norm_backward_num_warps_by_block, on 32-bit or wider data; "
            "num_warps_by_block_32bit where absent"),
        "tile_row_min_bytes": Field(
            lambda v: _is_int(v) and v >= 0,
            "an int >= 0 (bytes the innermost row of an on-chip tile takes at least; 0 "
            "where absent)", required=False),
        "column_sum_tile": Field(
            lambda v: _is_list_of(_is_pow2)(v) and len(v) == 3,
            "a list of 3 powers of two: [rows, columns, num_warps] of a program that sums "
            "columns over rows", required=False),
        "layer_norm_backward_column_tile": _column_tile_field(
            "of the layer-norm column backward on 16-bit data (all data where the _32bit "
            "field is absent)"),
        "layer_norm_backward_column_tile_32bit": _column_tile_field(
            "of the layer-norm column backward on 32-bit and wider data"),
        "layer_norm_backward_row_group_tile": _row_group_tile_field(
            "of the layer-norm row-group backward on 16-bit data (all data where the _32bit "
            "field is absent)"),
        "layer_norm_backward_row_group_tile_32bit": _row_group_tile_field(
            "of the layer-norm row-group backward on 32-bit data"),
        "layer_norm_forward_row_group_tile": _column_tile_field(
            "of the layer-norm row-group forward (a row split over a group of resident "
            "programs) on 16-bit data (all data where the _32bit field is absent)"),
        "layer_norm_forward_row_group_tile_32bit": _column_tile_field(
            "of the layer-norm row-group forward on 32-bit data"),
    },
    "io": {
        "load": Field(_one_of(*LOAD_STRATEGIES), f"one of {LOAD_STRATEGIES}"),
        "row_constants": Field(_one_of(*ROW_CONSTANT_STRATEGIES),
                               f"one of {ROW_CONSTANT_STRATEGIES}"),
        "vector_load_bytes": Field(_is_pow2, "a power of two (bytes of the widest load one "
                                             "thread or lane issues)"),
        "l2_eviction_hints": _optional_flag(
            "whether the two-pass row kernels hint the L2 to keep what they read again and "
            "evict what they do not: Triton's eviction_policy; false where absent"),
    },
    "dtypes": {
        "supported": Field(_is_dtype_list, DTYPE_LIST),
        "dot": Field(_is_dtype_list, DTYPE_LIST),
        "tf32": Field(lambda v: isinstance(v, bool), "true or false"),
        "tf32_k_major": _optional_flag(
            "whether tf32 dots read both operands K-major only, so a matmul copies an "
            "operand that is not K-major first; false where absent"),
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
    # Optional: {function: {dtype: ulp or {ulp, per_abs_x}}}, checked in consistency.check_math_ulp;
    # a profile without it is held to the OpenCL C bounds (triton_cts/ops/language/math.py).
    "math_ulp": Field(_is_table, "a table function -> dtype -> ULP bound", required=False),
}


def _check_finite(data: dict, source: str) -> None:
    """TOML reads ``inf`` and ``nan``: no profile number may be either."""
    for path, x in _numbers(data, ""):
        if isinstance(x, float) and not math.isfinite(x):
            raise ProfileError(source, path.lstrip("."), f"expected a finite number, got {x!r}")


def _check_plausible(data: dict, source: str) -> None:
    for dotted, rng in PLAUSIBLE.items():
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
