"""The layer-norm family's tuning (layer norm, RMS norm, fused add + RMS norm, forward and
backward): its fields, declared once with their defaults, and the functions its launchers
read them through. A profile sets the values its target overrides in
``[tuning.layer_norm]``; where absent, each field's default is what the launchers did
before it was measured (the generic ``[launch]`` constants).
"""
from __future__ import annotations

import torch

from triton_cts.profiles import Profile
from triton_cts.profiles.fields import (BLOCK_ELEMENTS, Field, column_tile, count, flag,
                                        is_list_of, is_pow2, pow2_bytes, row_group_tile,
                                        warps_table as _warps_field)
from triton_cts.profiles.plausible import Range
from triton_cts.profiles.tuning import declare_tuning

FAMILY = "layer_norm"

FIELDS = declare_tuning(FAMILY, {
    "partials_per_compute_unit_16bit": count(
        "as launch.partials_per_compute_unit, for 16-bit rows short enough to stack several "
        "a program; launch.partials_per_compute_unit where absent",
        default_text="launch.partials_per_compute_unit", unit="programs per compute unit"),
    "normalize_tile_bytes": pow2_bytes(
        "bytes of a tile of the layer-norm tiled forward's normalizing walk on data "
        "narrower than 32 bits, RMS norm excluded; the walk takes the forward's tile where "
        "absent or larger", default_text="absent (the summing walk's tile)"),
    "backward_last_sum_bytes": pow2_bytes(
        "bytes of the partial-sum backward's dweight partials, programs x columns x "
        "accumulator size, up to which the program that finishes last adds them itself "
        "instead of a second launch; a second launch always where absent",
        default_text="absent (a second launch)"),
    "rms_norm_weight_first_max_block": count(
        "elements of a row up to which the fused RMS-norm forward (the fused add + RMS norm "
        "too), where a program holds one row of 16-bit data, loads the weight with the row, "
        "before the statistics, rather than after them; never where absent",
        plausible=BLOCK_ELEMENTS, default=0, default_text="0 (never)", unit="elements"),
    "rms_norm_weight_first_max_block_32bit": count(
        "as rms_norm_weight_first_max_block, on 32-bit data (64-bit data keep the weight "
        "after)", plausible=BLOCK_ELEMENTS, default=0, default_text="0 (never)",
        unit="elements"),
    "weight_first_max_block": count(
        "as rms_norm_weight_first_max_block, for the fused layer-norm forward (weight and "
        "bias); never where absent", plausible=BLOCK_ELEMENTS, default=0,
        default_text="0 (never)", unit="elements"),
    "weight_first_max_block_32bit": count(
        "as weight_first_max_block, on 32-bit data (64-bit data keep the weight after)",
        plausible=BLOCK_ELEMENTS, default=0, default_text="0 (never)", unit="elements"),
    "backward_prefetch": flag(
        "whether the fused backward, where a program holds one row of 32-bit or narrower "
        "data, loads the next row's x and dy before the row's sums; false where absent"),
    "num_warps_by_block": _warps_field(
        "the layer-norm fused forward on 16-bit data", "launch.num_warps_by_block"),
    "num_warps_by_block_32bit": _warps_field(
        "the layer-norm fused forward on 32-bit or wider data",
        "launch.num_warps_by_block_32bit"),
    "rms_norm_num_warps_by_block": _warps_field(
        "the RMS-norm fused forward on 16-bit data (the fused add + RMS norm too)",
        "num_warps_by_block"),
    "rms_norm_num_warps_by_block_32bit": _warps_field(
        "the same on 32-bit or wider data", "num_warps_by_block_32bit"),
    "tiled_num_warps_by_block": _warps_field(
        "the layer-norm tiled forward on 16-bit data, rows past the fused tile",
        "launch.num_warps_by_block"),
    "backward_num_warps_by_block": _warps_field(
        "the backward's dx kernels on 16-bit data (fused: rows x columns of a program; "
        "tiled: twice its tile)", "launch.num_warps_by_block"),
    "backward_num_warps_by_block_32bit": _warps_field(
        "as backward_num_warps_by_block, on 32-bit or wider data",
        "launch.num_warps_by_block_32bit"),
    "column_sum_tile": Field(
        lambda v: is_list_of(is_pow2)(v) and len(v) == 3,
        "a list of 3 powers of two: [rows, columns, num_warps] of a program that sums "
        "columns over rows", required=False, tile_warps=True,
        plausible=Range(1, 1 << 20, "rows, columns and warps of one program"),
        default_text="absent (the launcher sizes it)"),
    "backward_column_tile": column_tile(
        "of the column backward on 16-bit data (all data where the _32bit field is absent)"),
    "backward_column_tile_32bit": column_tile(
        "of the column backward on 32-bit and wider data"),
    "backward_row_group_tile": row_group_tile(
        "of the row-group backward on 16-bit data (all data where the _32bit field is "
        "absent)"),
    "backward_row_group_tile_32bit": row_group_tile("of the row-group backward on 32-bit data"),
    "forward_row_group_tile": column_tile(
        "of the row-group forward (a row split over a group of resident programs) on 16-bit "
        "data (all data where the _32bit field is absent)", group=True),
    "forward_row_group_tile_32bit": column_tile("of the row-group forward on 32-bit data",
                                                group=True),
})

#: A kernel's own warps table -> the tables of this family it falls back to, in order,
#: before the generic ``launch`` ones (each with its ``_32bit`` counterpart on 32-bit data).
_WARPS_FALLBACKS = {"rms_norm_num_warps_by_block": ("num_warps_by_block",)}
FORWARD_WARPS, RMS_FORWARD_WARPS = "num_warps_by_block", "rms_norm_num_warps_by_block"
TILED_WARPS, BACKWARD_WARPS = "tiled_num_warps_by_block", "backward_num_warps_by_block"


def warps_table(profile: Profile, table: str, dtype: torch.dtype | None) -> list | None:
    """The rows of ``[tuning.layer_norm]``'s ``table`` (its ``_32bit`` counterpart on 32-bit
    and wider data) or of the table it refines; None where the profile has none of them:
    the generic ``launch`` tables then apply (:meth:`Profile.num_warps_for`)."""
    tuned = profile.tuning(FAMILY)
    names = (table, *_WARPS_FALLBACKS.get(table, ()))
    if dtype is not None and dtype.itemsize >= 4:
        names = tuple(f"{name}_32bit" for name in names)
    return next((tuned[name] for name in names if tuned.get(name) is not None), None)


def weight_first(profile: Profile, op: str, block: int, dtype: torch.dtype) -> bool:
    """Whether a program of ``op``'s fused forward (``"rms_norm"`` or ``"layer_norm"``)
    that holds one row of ``block`` elements of ``dtype`` loads the weight (and bias) with
    the row, before the statistics, rather than after them: up to the profile's
    ``weight_first_max_block`` (``rms_norm_`` for RMS norm, ``_32bit`` on 32-bit data);
    never on 64-bit data (timed on none)."""
    if dtype.itemsize > 4:
        return False
    name = ("rms_norm_" if op == "rms_norm" else "") + "weight_first_max_block" + (
        "_32bit" if dtype.itemsize == 4 else "")
    return block <= profile.tuning(FAMILY)[name]


def backward_prefetch(profile: Profile) -> bool:
    """Whether the fused backward loads a program's next row while it reduces the current
    one, where a program holds one row."""
    return profile.tuning(FAMILY)["backward_prefetch"]


def normalize_tile(profile: Profile, dtype: torch.dtype, tile: int) -> int:
    """Elements of ``dtype`` a step of the tiled forward's normalizing walk takes, where its
    summing walk takes ``tile``: ``normalize_tile_bytes`` on data narrower than 32 bits
    (never past ``tile``), else ``tile``."""
    limit = profile.tuning(FAMILY)["normalize_tile_bytes"]
    if limit is None or dtype.itemsize >= 4:
        return tile
    return max(1, min(tile, limit // dtype.itemsize))


def backward_last_sum(profile: Profile, programs: int, n_cols: int, acc: torch.dtype) -> bool:
    """Whether the partial-sum backward's last program adds its ``programs`` rows of
    ``n_cols`` partials in ``acc`` itself (no second launch): ``backward_last_sum_bytes``
    covers them and the target has an int32 atomic_add to count the programs that are
    done."""
    limit = profile.tuning(FAMILY)["backward_last_sum_bytes"]
    return (limit is not None and programs * n_cols * acc.itemsize <= limit
            and profile.supports_atomic("add", torch.int32))


def partials_for(profile: Profile, dtype: torch.dtype, stacked: bool = True) -> int:
    """Programs per compute unit of a partial-sum backward on ``dtype`` data: 16-bit rows
    short enough that a program stacks several (``stacked``) take
    ``partials_per_compute_unit_16bit`` where the profile has one."""
    own = profile.tuning(FAMILY)["partials_per_compute_unit_16bit"]
    if stacked and dtype.itemsize == 2 and own is not None:
        return own
    return profile["launch.partials_per_compute_unit"]


def column_sum_tile(profile: Profile) -> tuple[int, int, int] | None:
    """(rows, columns, num_warps) of a program that sums a column block over all rows (the
    dweight/dbias kernel), where the profile measured one; None where the launcher sizes
    the tile itself."""
    tile = profile.tuning(FAMILY)["column_sum_tile"]
    return None if tile is None else tuple(tile)


def tile_for(profile: Profile, field: str, dtype: torch.dtype) -> tuple | None:
    """``[tuning.layer_norm]``'s ``field`` (``<field>_32bit`` for 32-bit and wider data,
    where present); None where the profile has neither."""
    tuned = profile.tuning(FAMILY)
    tile = tuned[field]
    if dtype.itemsize >= 4 and tuned.get(f"{field}_32bit") is not None:
        tile = tuned[f"{field}_32bit"]
    return None if tile is None else tuple(tile)


def backward_column_tile(profile: Profile, dtype: torch.dtype) -> tuple | None:
    """(rows, columns, num_warps, programs per compute unit) of the column backward's
    program on ``dtype`` data, where the profile measured one; None where the launcher
    derives it."""
    return tile_for(profile, "backward_column_tile", dtype)


def backward_row_group_tile(profile: Profile, dtype: torch.dtype) -> tuple | None:
    """(rows a meeting, columns a program, num_warps, programs kept resident per compute
    unit[, row blocks in flight]) of the row-group backward on ``dtype`` data; None where
    the profile has none: the strategy is then not taken."""
    return tile_for(profile, "backward_row_group_tile", dtype)


def forward_row_group_tile(profile: Profile, dtype: torch.dtype) -> tuple | None:
    """(rows a meeting, columns a program, num_warps, programs kept resident per compute
    unit) of the row-group forward on ``dtype`` data; None where the profile has none: the
    strategy is then not taken."""
    return tile_for(profile, "forward_row_group_tile", dtype)
