"""Vendor profiles: one TOML file per hardware target, validated on load.

A profile is plain data (``vendor_profiles/*.toml``). This module holds its schema, the
loader that checks every field (unknown, missing, wrong type, impossible value: each error
names the file, the field and what was expected) and the :class:`Profile` object whose
helpers the launchers call for every hardware-dependent constant.
"""
from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import torch

from triton_cts import PROFILE_DIR

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


# --------------------------------------------------------------------------------------
# The Profile object the launchers and suites use.
# --------------------------------------------------------------------------------------
def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative ints, for launchers: ``triton.cdiv`` is a constexpr
    function whose host-side call costs a few microseconds, several times per launch.
    Written as Triton writes it, (a + b - 1) // b: a heuristic or grid may also be handed
    the interpreter's integer tensors, whose // truncates, and -(-a // b) then gives 0."""
    return (a + b - 1) // b


@dataclass(frozen=True)
class Profile:
    """One hardware target. Launchers take every hardware constant from here."""

    name: str
    vendor: str
    description: str
    source: str
    data: Mapping[str, Any] = field(repr=False, compare=False)

    def __repr__(self) -> str:
        return f"Profile({self.name})"

    def _repr_pretty_(self, printer, cycle) -> None:  # hypothesis' falsifying-example printer
        printer.text(repr(self))

    # ---- plain fields -----------------------------------------------------------------
    def __getitem__(self, dotted: str) -> Any:
        """``profile["limits.grid_max"]``: raw access to any field by its dotted path."""
        node: Any = self.data
        for part in dotted.split("."):
            node = node[part]
        return node

    @property
    def backend(self) -> str:
        return self.data["target"]["backend"]

    @property
    def arch(self) -> int | str:
        return self.data["target"]["arch"]

    @property
    def warp_size(self) -> int:
        return self.data["target"]["warp_size"]

    @property
    def rng_counter_bits(self) -> int:
        """Width of the Philox counters kernels give tl.rand (64 unless the backend lacks it)."""
        return self.data["target"].get("rng_counter_bits", 64)

    @property
    def multi_operand_reduce(self) -> bool:
        """Whether kernels may fuse several sums into one ``tl.reduce`` over a tuple."""
        return self.data["target"].get("multi_operand_reduce", True)

    @property
    def compute_units(self) -> int:
        return self.data["limits"]["compute_units"]

    @property
    def max_grid_num(self) -> int:
        return self.data["launch"]["max_grid_num"]

    @property
    def max_num_warps(self) -> int:
        return self.data["limits"]["max_num_warps"]

    @property
    def grid_max(self) -> tuple[int, int, int]:
        return tuple(self.data["limits"]["grid_max"])

    @property
    def grid_max_product(self) -> int:
        return self.data["limits"]["grid_max_product"]

    @property
    def select_loads(self) -> bool:
        """True where masked-off lanes must still read valid addresses (SIMD-style NPUs)."""
        return self.data["io"]["load"] == "select"

    @property
    def slice_broadcast(self) -> bool:
        """True where per-row constants are loaded once as a vector, then broadcast."""
        return self.data["io"]["row_constants"] == "slice_broadcast"

    # ---- helpers for launchers --------------------------------------------------------
    def max_fused_elements(self, dtype: torch.dtype) -> int:
        """Most elements of ``dtype`` one program may hold (MAX_FUSED_SIZE is in bytes)."""
        return max(1, self.data["launch"]["max_fused_size_bytes"] // dtype.itemsize)

    def elementwise_block(self, dtype: torch.dtype, n: int | None = None) -> int:
        """Elements per program for an elementwise kernel over ``n`` elements."""
        block = max(1, self.data["launch"]["elementwise_block_bytes"] // dtype.itemsize)
        return block if n is None else min(block, next_power_of_2(max(n, 1)))

    def row_stack_elements(self, dtype: torch.dtype) -> int:
        """Elements of ``dtype`` that row-wise kernels stack into one program when rows are
        short (whole rows, never past MAX_FUSED_SIZE); a longer row gets a program alone."""
        stack = min(self.data["launch"]["row_stack_bytes"],
                    self.data["launch"]["max_fused_size_bytes"])
        return max(1, stack // dtype.itemsize)

    @property
    def partials_per_compute_unit(self) -> int:
        return self.data["launch"]["partials_per_compute_unit"]

    def num_warps_for(self, block: int, dtype: torch.dtype | None = None) -> int:
        """num_warps for a program of ``block`` elements, by the profile's threshold table.
        ``dtype`` is the dtype of the data the program holds (its input): 32-bit and wider
        data take ``num_warps_by_block_32bit`` where the profile has one, and elements are
        counted in 32-bit registers (a float64 element counts twice, as it takes two)."""
        launch = self.data["launch"]
        table = launch["num_warps_by_block"]
        if dtype is not None:
            if dtype.itemsize >= 4:
                table = launch.get("num_warps_by_block_32bit", table)
            block *= max(1, dtype.itemsize // 4)
        warps = launch["default_num_warps"]
        for threshold, w in table:
            if block >= threshold:
                warps = w
        return min(warps, self.max_num_warps)

    @property
    def tile_row_min_bytes(self) -> int:
        """Bytes the innermost row of an on-chip tile occupies at least: a tile whose
        innermost axis is narrower is padded to it (0: no padding, as in registers)."""
        return self.data["launch"].get("tile_row_min_bytes", 0)

    @property
    def column_sum_tile(self) -> tuple[int, int, int] | None:
        """(rows, columns, num_warps) of a program that sums a column block over all rows
        (the layer-norm dweight/dbias kernel), where the profile measured one; None where
        the launcher sizes the tile itself."""
        tile = self.data["launch"].get("column_sum_tile")
        return None if tile is None else tuple(tile)

    def capped_grid(self, programs: int) -> int:
        """Programs to launch for ``programs`` units of work: launchers loop inside above it."""
        return max(1, min(programs, self.max_grid_num))

    def supports_dtype(self, dtype: torch.dtype) -> bool:
        return dtype in self._supported_dtypes

    @functools.cached_property
    def _supported_dtypes(self) -> frozenset:
        # launchers ask on every call: a set lookup keeps the check off the launch path
        return frozenset(getattr(torch, name) for name in self.data["dtypes"]["supported"]
                         if isinstance(getattr(torch, name, None), torch.dtype))

    def supports_atomic(self, op: str, dtype: torch.dtype) -> bool:
        return str(dtype).removeprefix("torch.") in self.data["atomics"][op]

    def supported_dtypes(self, candidates: Iterable[torch.dtype]) -> list[torch.dtype]:
        return [d for d in candidates if self.supports_dtype(d)]

    def tolerance_override(self, op: str, dtype: torch.dtype) -> tuple[float, float] | None:
        tol = self.data.get("tolerances", {}).get(op, {}).get(str(dtype).removeprefix("torch."))
        return None if tol is None else (float(tol["rtol"]), float(tol["atol"]))

    def autotune_configs(self, op: str) -> list[dict[str, int]] | None:
        configs = self.data.get("autotune", {}).get(op)
        return None if configs is None else [dict(c) for c in configs]

    def peak_bandwidth_gbs(self) -> float:
        return float(self.data["peak"]["memory_bandwidth_gbs"])

    def gpu_target(self):
        """Triton's GPUTarget for cross-compiling (CUDA and HIP only)."""
        from triton.backends.compiler import GPUTarget
        if self.backend == "npu":
            raise NotImplementedError("upstream Triton has no Ascend target")
        return GPUTarget(self.backend, self.arch, self.warp_size)

    def derive(self, name: str | None = None, **changes: Any) -> "Profile":
        """A copy with some fields changed, validated like a file: ``derive(**{"launch.max_grid_num": 2})``."""
        data = _deepcopy(self.data)
        for dotted, value in changes.items():
            node = data
            *parents, last = dotted.replace("__", ".").split(".")
            for part in parents:
                node = node[part]
            if last not in node:
                raise ProfileError(f"derived from {self.name}", dotted, "unknown field")
            node[last] = value
        data["name"] = name or f"{self.name}~derived"
        return profile_from_dict(data, source=f"derived from {self.name}")


def _deepcopy(obj):
    if isinstance(obj, Mapping):
        return {k: _deepcopy(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_deepcopy(v) for v in obj]
    return obj


def profile_from_dict(data: dict, source: str = "<dict>") -> Profile:
    _walk(SCHEMA, data, "", source)
    _check_consistency(data, source)
    return Profile(name=data["name"], vendor=data["vendor"], description=data["description"],
                   source=source, data=_deepcopy(data))


def load_profile(path: str | Path) -> Profile:
    path = Path(path)
    source = str(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ProfileError(source, "", f"cannot read file: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ProfileError(source, "", f"not UTF-8 text: {exc}") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(source, "", f"not valid TOML: {exc}") from exc
    profile = profile_from_dict(data, source)
    if profile.name != path.stem:
        raise ProfileError(source, "name",
                           f"expected the file's stem '{path.stem}', got '{profile.name}'")
    return profile


def load_profiles(extra_dirs: Iterable[str | Path] = ()) -> dict[str, Profile]:
    """Every bundled profile plus those in ``extra_dirs``; a later dir may not shadow a name."""
    profiles: dict[str, Profile] = {}
    for directory in (PROFILE_DIR, *map(Path, extra_dirs)):
        if not directory.is_dir():
            raise ProfileError(str(directory), "", "profile directory does not exist")
        for path in sorted(directory.glob("*.toml")):
            profile = load_profile(path)
            if profile.name in profiles:
                raise ProfileError(str(path), "name", f"profile '{profile.name}' is already "
                                                      f"defined in {profiles[profile.name].source}")
            profiles[profile.name] = profile
    return profiles


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


__all__ = [
    "Profile", "ProfileError", "load_profile", "load_profiles", "profile_from_dict",
    "next_power_of_2", "ceil_div", "VENDOR_FAMILIES", "DTYPES", "SCHEMA",
]
