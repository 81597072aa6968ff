"""The layer-norm forward's launch, decided in one place: :func:`forward_plan` reads the
profile and its ``[tuning.layer_norm]`` table and returns a :class:`ForwardPlan` (the
strategy, its tiles, warps, grid and the other constexprs) that the launchers
(:mod:`.forward`, :mod:`.row_groups`) launch as it is.

Three strategies: ``fused`` where a row fits the profile's fused tile (a program holds
whole rows, several when they are short), ``row_groups`` for longer plain layer-norm rows
where the profile has a row-group tile and a row's programs fit the resident ones (each
row split over a group of programs that meet, :mod:`.row_groups`), ``tiled`` otherwise
(a program walks its row in column tiles). The row-group layout (:func:`group_layout`) is
the backward's too (its plan: :mod:`.plan_backward`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from triton import knobs

from triton_cts.execution import launches
from triton_cts.profiles import Profile, cdiv, next_power_of_2
from ..grid_stride import launch_grid
from ..l2_hints import l2_hints
from ..row_align import row_align
from . import tuning
from .tiles import _row_block, _row_tile
from .tuning import FORWARD_WARPS, RMS_FORWARD_WARPS, TILED_WARPS

FUSED, TILED, ROW_GROUPS = "fused", "tiled", "row_groups"


class LaunchMeta:
    """What a planned launch is launched with, for a dataclass with ``tiles`` (block
    constexprs), ``constexprs`` (the others) and ``options`` (num_warps, any num_stages
    or register cap): the forward's and the backward's plans share it."""
    tiles: dict
    constexprs: dict
    options: dict

    @property
    def num_warps(self) -> int:
        return self.options["num_warps"]

    @property
    def meta(self) -> dict:
        """Every keyword the kernel is launched with."""
        return {**self.constexprs, **self.tiles, **self.options}


@dataclass(frozen=True)
class ForwardPlan(LaunchMeta):
    """One forward launch: ``strategy`` names its kernel; ``tiles`` are its block
    constexprs, ``constexprs`` the others, ``options`` num_warps and any register cap;
    ``groups`` is (groups, parts a row, elements of the statistics' buffer) of the
    row-group strategy, () otherwise. Callers must not mutate its dicts."""
    strategy: str
    grid: tuple[int, ...]
    tiles: dict = field(default_factory=dict)
    constexprs: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    groups: tuple = ()


# --------------------------------------------------------------------------------------
# Tiles of the fused and tiled forward.
# --------------------------------------------------------------------------------------
def _forward_row_tile(dtype: torch.dtype, profile: Profile, dropout: bool) -> int:
    """Most elements a fused forward program holds: the row tile, half of it with dropout,
    whose Philox rounds keep about as many 32-bit words live again (one 4096-column float32
    row with dropout needed 278560 bytes of the NPU's 196608-byte unified buffer, bishengir
    UB check, triton-ascend 3.2; without dropout it fits)."""
    tile = _row_tile(dtype, profile)
    return max(1, tile // 2) if dropout else tile


def _fits_fused(n_cols: int, dtype: torch.dtype, profile: Profile, dropout: bool) -> bool:
    return n_cols <= _forward_row_tile(dtype, profile, dropout)


def _tiled_forward_block(n_cols: int, dtype: torch.dtype, profile: Profile,
                         dropout: bool) -> tuple[int, dict[str, int]]:
    """(columns per tile, launch options) of the tiled forward. It reduces each tile to scalars
    at once and keeps no tile-wide accumulator, so a tile is as long as a fused row; but
    with dropout its first pass also keeps the Philox state and stores x' and the
    keep-mask: half the dropout row tile overflowed the NPU's unified buffer (2048 float16
    columns: 294944 of 196608 bytes, bishengir, triton-ascend 3.2), so dropout takes a
    quarter. Warps are those of twice the tile (x' and its centred copy are live
    together), four times with dropout: at the tile's own warps bf16 spilled 8-16 bytes a
    thread on sm_100 and sm_120, and the dropout quarter 16-24 bytes on sm_90, where 16
    and 32 warps ran alike (benchmarks/results/h100.jsonl, experiment "comments"). The
    warps (and a register cap, where the entry keeps several programs resident) come from
    ``tuning.layer_norm.tiled_num_warps_by_block``."""
    tile = _forward_row_tile(dtype, profile, dropout) // (2 if dropout else 1)
    block = max(1, min(tile, next_power_of_2(n_cols)))
    return block, profile.launch_options_for((4 if dropout else 2) * block, dtype,
                                             tuning.warps_table(profile, TILED_WARPS, dtype))


def _forward_tile(dtype: torch.dtype, profile: Profile, dropout: bool) -> int:
    # short rows stacked up to the row stack, longer ones a program each (faster)
    # measured: benchmarks/results/h200.jsonl, experiment "comments"
    stack = profile.row_stack_elements(dtype)
    return min(stack, _forward_row_tile(dtype, profile, True)) if dropout else stack


# --------------------------------------------------------------------------------------
# Row groups: where they run and their layout (forward and backward).
# --------------------------------------------------------------------------------------
#: device index -> its compute units (the device may have fewer than its profile says:
#: a PCIe H100 has 114 SMs, a MIG slice fewer still)
_DEVICE_UNITS: dict[int, int] = {}


def _resident_units(profile: Profile, device: torch.device) -> int:
    """Compute units every program of a group can be resident on: the profile's, and no
    more than the attached device has."""
    if device.type != "cuda":
        return profile.compute_units
    index = device.index if device.index is not None else torch.cuda.current_device()
    units = _DEVICE_UNITS.get(index)
    if units is None:
        units = _DEVICE_UNITS[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return min(units, profile.compute_units)


def group_units(device: torch.device, profile: Profile) -> tuple[int, bool]:
    """(the compute units a group's programs can be resident on, whether the interpreter
    runs the launch): what a row-group plan depends on besides the profile and shapes."""
    return (_resident_units(profile, device),
            bool(knobs.runtime.interpret) and not launches.capturing())


def group_layout(tile, n_rows: int, n_cols: int, dtype: torch.dtype, profile: Profile,
                 units: int, interpreting: bool):
    """(rows a meeting, columns a program, parts a row, groups, next_power_of_2(parts)) of
    a row-group kernel with the profile's ``tile`` for ``dtype``, or None where it does
    not apply: no tile (64-bit data never: their arithmetic takes register pairs), or rows
    longer than the programs ``units`` compute units keep resident (or than MAX_GRID_NUM)."""
    if tile is None or dtype.itemsize > 4:
        return None
    rows, block_n, _, per_unit, *_ = tile
    # programs run one after another in the interpreter: a group is one program there
    block_n = next_power_of_2(n_cols) if interpreting else min(block_n, next_power_of_2(n_cols))
    # the grid is every group's programs at once: no more than are resident, nor than
    # the profile's grid cap (a group cannot loop over its programs)
    slots = profile.capped_grid(units * per_unit)
    n_parts = cdiv(n_cols, block_n)
    if n_parts > slots:
        return None
    rows = min(rows, next_power_of_2(n_rows))
    n_groups = max(1, min(cdiv(n_rows, rows), slots // n_parts))
    return rows, block_n, n_parts, n_groups, next_power_of_2(n_parts)


def group_options(tile, dtype: torch.dtype, n_cols: int, profile: Profile,
                  interpreting: bool) -> dict:
    """What both row-group kernels take from the tile and the dtype."""
    _, _, num_warps, per_unit, *_ = tile
    return dict(RECONVERT=dtype.itemsize == 2,
                F16_ASM=dtype == torch.float16 and not interpreting,
                ROW_ALIGN=row_align(n_cols, profile.vector_elements(dtype)),
                num_warps=num_warps, **profile.register_cap(per_unit, num_warps))


def why_no_groups(dtype: torch.dtype, n_cols: int, profile: Profile,
                  direction: str = "forward") -> str:
    """Why the row-group ``direction`` ("forward", "backward") does not take these rows."""
    name = f"{direction}_row_group_tile"
    if dtype.itemsize > 4:
        return f"{dtype} is not taken (64-bit arithmetic takes register pairs)"
    if tuning.tile_for(profile, name, dtype) is None:
        return (f"profile '{profile.name}' has no tuning.{tuning.FAMILY}.{name} for {dtype} "
                f"({profile.source})")
    return f"a row of {n_cols} columns needs more programs than the device keeps resident"


def _split_options(meta: dict) -> tuple[dict, dict]:
    """(constexprs, launch options) of a launch's keywords."""
    options = {k: meta.pop(k) for k in ("num_warps", "num_stages", "maxnreg") if k in meta}
    return meta, options


def _row_groups_forward(profile: Profile, n_rows: int, n_cols: int, dtype: torch.dtype,
                        rms: bool, has_bias: bool, units: int,
                        interpreting: bool) -> ForwardPlan | None:
    """The row-group forward of plain rows (no residual, rowscale nor dropout), or None
    where it does not apply (:func:`group_layout`)."""
    tile = tuning.forward_row_group_tile(profile, dtype)
    layout = group_layout(tile, n_rows, n_cols, dtype, profile, units, interpreting)
    if layout is None:
        return None
    rows, block_n, n_parts, n_groups, parts_block = layout
    constexprs, options = _split_options(dict(
        IS_RMS=rms, HAS_BIAS=has_bias, PAIRED_SUMS=profile.multi_operand_reduce,
        SELECT_LOADS=profile.select_loads,
        **group_options(tile, dtype, n_cols, profile, interpreting)))
    return ForwardPlan(ROW_GROUPS, (n_groups * n_parts,),
                       dict(PARTS_BLOCK=parts_block, ROWS=rows, BLOCK_N=block_n),
                       constexprs, options,
                       (n_groups, n_parts, n_groups * 2 * parts_block * rows * 2))


# --------------------------------------------------------------------------------------
# The forward's plan.
# --------------------------------------------------------------------------------------
def forward_plan(profile: Profile, n_rows: int, n_cols: int, dtype: torch.dtype,
                 has_dropout: bool, rms: bool, has_bias: bool, has_residual: bool,
                 store_residual_out: bool, has_rowscale: bool, store_dropout_mask: bool,
                 units: int, interpreting: bool, groups_only: bool) -> ForwardPlan | None:
    """The forward launch of ``n_rows`` rows of ``n_cols`` elements (both > 0) with these
    options: ``units``, ``interpreting`` say where a row-group launch may run
    (:func:`group_units`); ``groups_only`` asks for the row-group strategy, None where it
    does not apply."""
    if groups_only:
        return _row_groups_forward(profile, n_rows, n_cols, dtype, rms, has_bias, units,
                                   interpreting)
    flags = dict(RNG_32BIT=profile.rng_counter_bits == 32, SELECT_LOADS=profile.select_loads,
                 COMPUTE_FP64=dtype == torch.float64, IS_RMS=rms, HAS_BIAS=has_bias,
                 HAS_RESIDUAL=has_residual, STORE_RESIDUAL_OUT=store_residual_out,
                 HAS_ROWSCALE=has_rowscale, HAS_DROPOUT=has_dropout,
                 STORE_DROPOUT_MASK=store_dropout_mask,
                 ROW_ALIGN=row_align(n_cols, profile.vector_elements(dtype)),
                 PAIRED_SUMS=profile.multi_operand_reduce)
    if _fits_fused(n_cols, dtype, profile, has_dropout):
        block_n = next_power_of_2(n_cols)
        block_m = _row_block(n_rows, block_n, _forward_tile(dtype, profile, has_dropout),
                             profile)
        grid, grid_stride = launch_grid(profile, cdiv(n_rows, block_m))
        return ForwardPlan(FUSED, grid, dict(BLOCK_M=block_m, BLOCK_N=block_n), dict(
            flags, SLICE_BROADCAST=profile.slice_broadcast, GRID_STRIDE=grid_stride,
            # layer norm without masks where the tile is the rows (RMS norm: spills)
            # measured: benchmarks/results/h200.jsonl, experiment "comments"
            EVEN_ROWS=not rms and n_rows % block_m == 0, EVEN_N=not rms and n_cols == block_n,
            WEIGHT_FIRST=block_m == 1 and tuning.weight_first(
                profile, "rms_norm" if rms else "layer_norm", block_n, dtype)),
            profile.launch_options_for(
                block_m * block_n, dtype,
                tuning.warps_table(profile, RMS_FORWARD_WARPS if rms else FORWARD_WARPS,
                                   dtype)))
    if not (rms or store_residual_out or has_dropout):
        # long layer-norm rows in row groups (row_groups.py); RMS norm stays tiled (faster)
        # measured: benchmarks/results/h100.jsonl, experiment "comments"
        groups = _row_groups_forward(profile, n_rows, n_cols, dtype, rms, has_bias, units,
                                     interpreting)
        if groups is not None:
            return groups
    block_n, options = _tiled_forward_block(n_cols, dtype, profile, has_dropout)
    # L2 hints: layer norm's first pass unhinted, programs capped on 32-bit data
    # measured: benchmarks/results/h100.jsonl, experiment "comments"
    grid = profile.capped_grid(n_rows) if rms else profile.online_grid(n_rows, dtype)
    # the normalizing walk in the profile's shorter tiles, layer norm only
    # measured: benchmarks/results/h200.jsonl, experiment "comments"
    norm_block = block_n if rms else tuning.normalize_tile(profile, dtype, block_n)
    return ForwardPlan(TILED, (grid,), dict(BLOCK_N=block_n, NORM_BLOCK=norm_block), dict(
        flags,
        # the third per-tile sum on float64 only
        # measured: benchmarks/results/h200.jsonl, experiment "comments"
        THIRD_SUM=dtype.itemsize >= 8,
        FIRST_TILE_SUMMED=rms and dtype.itemsize == 4,
        # layer norm without masks where the tile divides the row
        # measured: benchmarks/results/h200.jsonl, experiment "comments"
        EVEN_N=not rms and n_cols % block_n == 0,
        **l2_hints(profile, keep=rms)), dict(options))
