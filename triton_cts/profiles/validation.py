"""A loaded profile's validation (:func:`validate`): the schema's field checks
(:mod:`triton_cts.profiles.schema`), then the cross-field checks, values each well-typed
that together describe impossible hardware or launches (warps past the block's threads,
tables out of order, register caps on a target without them, unknown math functions),
then the tolerance ceilings and plausible ranges. Each error names the file, the field and
what was expected (:class:`~triton_cts.profiles.schema.ProfileError`)."""
from __future__ import annotations

from triton_cts.profiles import tuning
from triton_cts.profiles.schema import (ATOMIC_OPS, ATTENTION_TILES, BACKENDS, CONFIG_CHOICES,
                                        DTYPES, MATH_FUNCTIONS, RESERVED_NAMES, SCHEMA,
                                        ProfileError, _check_finite, _check_plausible,
                                        _check_tolerance_ceiling, _is_int, _is_list_of,
                                        _is_number, _is_pos_int, _is_pow2, _is_table,
                                        _is_threshold_table, _walk)


def _check_resident_programs(source: str, where: str, programs: int, warps: int,
                             d: dict) -> None:
    """A table entry's third number: programs kept resident per compute unit, whose
    registers a launcher caps with Triton's CUDA option ``maxnreg``."""
    t, lim, comp = d["target"], d["limits"], d["compile"]
    if t["backend"] != "cuda":
        raise ProfileError(source, where, f"resident programs {programs}: a register cap "
                           f"(maxnreg) is a CUDA option, target.backend is '{t['backend']}'")
    if not lim["registers_per_sm"]:
        raise ProfileError(source, where, f"resident programs {programs} need "
                           "limits.registers_per_sm, which is 0 (not modelled)")
    slots = comp["simds_per_cu"] * comp["max_waves_per_simd"]
    if programs * warps > slots:
        raise ProfileError(source, where, f"{programs} programs of {warps} warps exceed the "
                           f"{slots} warps a compute unit holds (compile.simds_per_cu x "
                           "compile.max_waves_per_simd)")


def _launch_tables(d: dict):
    """(prefix, values, declared fields) of [launch] and of each [tuning.<family>]."""
    yield "launch", d["launch"], SCHEMA["launch"]
    for family, values in d.get("tuning", {}).items():
        yield f"tuning.{family}", values, tuning.declaration(family)


def check_tuning_tables(d: dict, source: str) -> None:
    """``[tuning.<family>]``: known families, each table held to its family's fields."""
    for family, values in d.get("tuning", {}).items():
        if family not in tuning.FAMILY_MODULES:
            raise ProfileError(source, f"tuning.{family}", "unknown tuning family (known: "
                               + ", ".join(sorted(tuning.FAMILY_MODULES)) + ")")
        _walk(tuning.declaration(family), values, f"tuning.{family}.", source)


def _check_launch_table(prefix: str, la: dict, fields: dict, d: dict, source: str) -> None:
    """Warps tables ascending with powers of two within the limit, tiles' warps within it,
    row-group programs resident together."""
    lim = d["limits"]
    for table in (name for name, f in fields.items() if f.check is _is_threshold_table):
        prev = 0
        for i, (block, warps, *resident) in enumerate(la.get(table, ())):
            where = f"{prefix}.{table}[{i}]"
            if block <= prev:
                raise ProfileError(source, where, "thresholds must be strictly ascending")
            if warps & (warps - 1) or warps > lim["max_num_warps"]:
                raise ProfileError(source, where,
                                   f"num_warps {warps} must be a power of two and at most "
                                   f"limits.max_num_warps = {lim['max_num_warps']}")
            if resident:
                _check_resident_programs(source, where, resident[0], warps, d)
            prev = block
    for tile in (name for name, f in fields.items() if f.tile_warps):
        if tile in la and la[tile][2] > lim["max_num_warps"]:
            raise ProfileError(source, f"{prefix}.{tile}[2]",
                               f"num_warps {la[tile][2]} exceeds "
                               f"limits.max_num_warps = {lim['max_num_warps']}")
    for tile in (name for name, f in fields.items() if f.group):
        # the programs of a group wait for each other: all must be resident at once
        if tile in la:
            _check_resident_programs(source, f"{prefix}.{tile}[3]", la[tile][3], la[tile][2], d)


def check_consistency(d: dict, source: str) -> None:
    """Cross-field checks: values that are well-typed but describe impossible hardware."""
    t, lim, la = d["target"], d["limits"], d["launch"]
    if d["vendor"] in BACKENDS and BACKENDS[d["vendor"]] != t["backend"]:
        raise ProfileError(source, "target.backend",
                           f"vendor '{d['vendor']}' needs backend '{BACKENDS[d['vendor']]}', "
                           f"got '{t['backend']}'")
    if d["vendor"] not in BACKENDS and t["backend"] in BACKENDS.values():
        family = next(f for f, b in BACKENDS.items() if b == t["backend"])
        raise ProfileError(source, "vendor", f"backend '{t['backend']}' belongs to vendor "
                           f"'{family}'; vendor 'other' is for PrivateUse1 backends")
    if t["backend"] == "cuda" and not _is_int(t["arch"]):
        raise ProfileError(source, "target.arch", f"CUDA needs an int arch, got {t['arch']!r}")
    if t["backend"] != "cuda" and not isinstance(t["arch"], str):
        raise ProfileError(source, "target.arch",
                           f"{t['backend']} needs a string arch, got {t['arch']!r}")
    if t["backend"] == "xpu" and t["warp_size"] not in t.get("sub_group_sizes", ()):
        raise ProfileError(source, "target.sub_group_sizes",
                           f"xpu needs the sub-group sizes, including warp_size "
                           f"{t['warp_size']}, got {t.get('sub_group_sizes')!r}")
    if lim["max_num_warps"] * t["warp_size"] > lim["max_threads_per_block"]:
        raise ProfileError(
            source, "limits.max_num_warps",
            f"max_num_warps * warp_size = {lim['max_num_warps']} * {t['warp_size']} exceeds "
            f"max_threads_per_block = {lim['max_threads_per_block']}")
    if la["default_num_warps"] > lim["max_num_warps"]:
        raise ProfileError(source, "launch.default_num_warps",
                           f"expected at most limits.max_num_warps = {lim['max_num_warps']}")
    for prefix, values, fields in _launch_tables(d):
        _check_launch_table(prefix, values, fields, d, source)
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
                choices = CONFIG_CHOICES.get(op, {}).get(k)
                if choices is not None:
                    if not (type(v) is int and v in choices):
                        raise ProfileError(source, f"{where}[{i}].{k}",
                                           f"expected one of {choices}, got {v!r}")
                elif not _is_pos_int(v):
                    raise ProfileError(source, f"{where}[{i}].{k}", f"expected a positive int, got {v!r}")
            if cfg.get("num_warps", 1) > lim["max_num_warps"]:
                raise ProfileError(source, f"{where}[{i}].num_warps",
                                   f"exceeds limits.max_num_warps = {lim['max_num_warps']}")
            for k in ATTENTION_TILES.get(op, ()):  # kernels/attention/ reads these
                if not (_is_pow2(cfg.get(k)) and cfg[k] >= 16):
                    raise ProfileError(source, f"{where}[{i}].{k}", "expected a power of two "
                                       f">= 16 (the smallest tl.dot), got {cfg.get(k)!r}")


def check_math_ulp(data: dict, source: str) -> None:
    """``[math_ulp]``: known functions, floating dtypes, each bound a number of ULPs or
    ``{ulp = N, per_abs_x = K}`` (N + floor(K * |x|): an argument rounded before a
    hardware approximation, as in exp(x) = exp2(x * log2(e)))."""
    for fn, per_dtype in data.get("math_ulp", {}).items():
        if fn not in MATH_FUNCTIONS:
            raise ProfileError(source, f"math_ulp.{fn}",
                               f"unknown math function; expected one of {MATH_FUNCTIONS}")
        if not isinstance(per_dtype, dict) or not per_dtype:
            raise ProfileError(source, f"math_ulp.{fn}", "expected a table dtype -> bound")
        for dt, bound in per_dtype.items():
            where = f"math_ulp.{fn}.{dt}"
            if dt not in DTYPES or not DTYPES[dt].is_floating_point:
                raise ProfileError(source, where, "unknown or non-floating dtype; expected "
                                   "one of " + str(sorted(d for d, t in DTYPES.items()
                                                          if t.is_floating_point)))
            ok = _is_number(bound) or (isinstance(bound, dict) and set(bound) == {"ulp", "per_abs_x"}
                                       and all(_is_number(x) for x in bound.values()))
            if not ok:
                raise ProfileError(source, where, f"expected a number of ULPs >= 0 or "
                                                  f"{{ulp = N, per_abs_x = K}}, got {bound!r}")


def validate(data: dict, source: str) -> None:
    """Check a profile's data against :data:`SCHEMA` and its tuning families'
    declarations, the cross-field rules, the tolerance ceilings and the plausible ranges; raise :class:`ProfileError` naming
    ``source``, the field and what was expected."""
    if isinstance(data, dict):
        _check_finite(data, source)
    _walk(SCHEMA, data, "", source)
    check_tuning_tables(data, source)
    if data["name"].strip().lower() in RESERVED_NAMES:
        raise ProfileError(source, "name",
                           f"'{data['name']}' is what --vendor reads as a family or special "
                           f"choice ({', '.join(RESERVED_NAMES)}), so no run could select this "
                           f"profile by name: rename it (and its file)")
    check_consistency(data, source)
    check_math_ulp(data, source)
    _check_tolerance_ceiling(data, source)
    _check_plausible(data, source)
    for prefix, _, fields in _launch_tables(data):
        if prefix != "launch":
            _check_plausible(data, source, {f"{prefix}.{name}": f.plausible
                                            for name, f in fields.items() if f.plausible})
