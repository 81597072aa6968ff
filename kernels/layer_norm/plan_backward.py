"""The layer-norm backward's launch, decided in one place: :func:`backward_plan` reads the
profile and its ``[tuning.layer_norm]`` table and returns a :class:`BackwardPlan` (the
strategy, each of its kernel launches' grid, tiles, warps and other constexprs, and the
plan of the column sums of its partial rows) that the launchers (:mod:`.backward`,
:mod:`.long_rows`, :mod:`.row_groups`, :mod:`.column_sums`) launch as it is.

Five strategies (the module docstring of :mod:`.backward` says how they differ):
``partial`` (the default) and ``atomic`` where a row fits the fused backward (half the
fused tile); past it both take ``row_groups`` where the profile has a row-group tile and a
row's programs fit the resident ones (:func:`.plan.group_layout`), ``columns`` otherwise.
``tiled``, ``columns`` and ``row_groups`` may also be asked for whatever the row length.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from triton_cts.profiles import Profile, cdiv, next_power_of_2
from ..l2_hints import l2_hints
from ..row_align import row_align
from . import tuning
from .plan import LaunchMeta, _split_options, group_layout, group_options
from .tiles import (_acc_dtype, _backward_flags, _backward_row_tile, _backward_tile,
                    _column_block, _column_tile, _column_sum_tile, _fits_fused_backward,
                    _row_block, _tiled_backward_block)
from .tuning import BACKWARD_WARPS

ATOMIC, PARTIAL, TILED = "atomic", "partial", "tiled"
COLUMNS, ROW_GROUPS = "columns", "row_groups"
#: Rows past which the dweight/dbias sums are compensated (Kahan): a lane then adds
#: hundreds of row blocks or more, and a plain float32 sum drifts past the float32 bound;
#: below it the plain sums are exact enough and keep the kernels' registers (the
#: compensation costs 25 to 50 more a thread on sm_90).
COMPENSATE_ROWS = 1 << 15
#: Meetings of a row group past which its dweight/dbias sums are compensated (a plain
#: sum missed the bound)
#: measured: benchmarks/results/h100.jsonl, experiment "comments"
COMPENSATE_MEETINGS = 1024
#: Partial sums a row group stores per row and part (three used; four keeps a part's
#: slot aligned)
SUMS_PER_ROW = 4
#: Rows per program the atomic backward tries when the profile lists no
#: ``autotune.layer_norm_backward`` configs (filtered to those whose tile fits).
DEFAULT_ROWS_PER_PROGRAM = (1, 4, 16, 64)
#: ``units, interpreting`` of a plan that does not read where it runs (see :func:`placed`)
UNPLACED = (0, False)


@dataclass(frozen=True)
class KernelPlan(LaunchMeta):
    """One kernel launch: ``kernel`` is the kernel's name; ``tiles`` are its block
    constexprs, ``constexprs`` the others, ``options`` num_warps and any num_stages or
    register cap. Callers must not mutate its dicts."""
    kernel: str
    grid: tuple[int, ...]
    tiles: dict = field(default_factory=dict)
    constexprs: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SumPlan:
    """The column sums of partial rows (:mod:`.column_sums`): ``launch`` takes dweight's
    and dbias's partials at once, its grid ``programs`` a pair; with ``separate`` (the
    profile's grid cap is below a program a pair) it is launched once a pair."""
    programs: int
    separate: bool
    launch: KernelPlan


@dataclass(frozen=True)
class BackwardPlan:
    """One backward call's launches: ``launches`` in order (the atomic strategy's are its
    autotune configs, one of which runs); then ``sums``, the column sums of the
    ``partials`` rows of dweight/dbias partials they write (None where they write the
    gradients themselves). ``scalars`` are the integer arguments the main launch takes
    after the usual ones (row groups: groups, parts a row; columns: column blocks, rows a
    split, (column block, split) pairs), ``scratch`` the elements of the row groups' sums
    buffer. ``last_sums`` (partial strategy only, else None) is ``launches[0]`` with its
    last program adding the partial rows: launched alone, in place of ``launches`` and
    ``sums``, where the partials are within the profile's
    ``tuning.layer_norm.backward_last_sum_bytes`` and no CUDA graph is captured."""
    strategy: str
    launches: tuple[KernelPlan, ...]
    sums: SumPlan | None = None
    partials: int = 0
    scalars: tuple[int, ...] = ()
    scratch: int = 0
    last_sums: KernelPlan | None = None


def placed(strategy: str, fused: bool) -> bool:
    """Whether the plan of ``strategy`` reads where it runs (``units``, ``interpreting``
    of :func:`.plan.group_units`): the row-group strategy, asked for, or taken by the
    partial and atomic strategies for rows past the fused backward (``fused`` False)."""
    return strategy == ROW_GROUPS or (not fused and strategy in (PARTIAL, ATOMIC))


def backward_plan(profile: Profile, n_rows: int, n_cols: int, dtype: torch.dtype, rms: bool,
                  has_bias: bool, has_rowscale: bool, has_dropout: bool,
                  has_dresidual_out: bool, has_residual: bool, units: int,
                  interpreting: bool, strategy: str = PARTIAL) -> BackwardPlan | None:
    """The backward launches of ``n_rows`` rows of ``n_cols`` elements (both > 0) with
    these operands, for the ``strategy`` asked for; ``units``, ``interpreting`` say where
    a row-group launch may run (:func:`.plan.group_units`; :data:`UNPLACED` where
    :func:`placed` says the plan does not read them). None where the strategy asked for
    does not run: row groups where :func:`.plan.group_layout` does not apply, atomic where
    the profile has no atomic_add in the accumulator's dtype."""
    flag_key = (rms, has_bias, has_rowscale, has_dropout, has_dresidual_out, has_residual)
    flags = _backward_flags(profile, dtype, *flag_key)
    if strategy == TILED:
        return _tiled(profile, n_rows, n_cols, dtype, flags)
    if strategy == COLUMNS:
        return _columns(profile, n_rows, n_cols, dtype, flags)
    if strategy == ROW_GROUPS:
        return _row_groups(profile, n_rows, n_cols, dtype, flags, units, interpreting)
    if strategy not in (PARTIAL, ATOMIC):
        raise ValueError(f"no layer-norm backward strategy '{strategy}'")
    if not _fits_fused_backward(n_cols, dtype, profile):
        # rows past the fused backward: row groups where they run, else the columns
        return (_row_groups(profile, n_rows, n_cols, dtype, flags, units, interpreting)
                or _columns(profile, n_rows, n_cols, dtype, flags))
    if strategy == ATOMIC:
        return _atomic(profile, n_rows, n_cols, dtype, flags)
    return _partial(profile, n_rows, n_cols, dtype, flags)


def column_sum_plan(profile: Profile, n_partials: int, n_cols: int, dtype: torch.dtype,
                    n_pairs: int) -> SumPlan:
    """The column sums of ``n_pairs`` (1 or 2) [n_partials, n_cols] tensors of partials in
    ``dtype``: one launch, or one a pair where the profile's grid cap is below a program
    a pair."""
    separate = n_pairs > profile.max_grid_num
    if separate:
        n_pairs = 1
    block_n = _column_block(n_cols, profile)
    block_p = max(1, min(next_power_of_2(n_partials),
                         profile.max_fused_elements(dtype) // block_n))
    n_programs = max(1, min(cdiv(n_cols, block_n), profile.max_grid_num // n_pairs))
    return SumPlan(n_programs, separate, KernelPlan(
        "_sum_rows_kernel", (n_programs * n_pairs,), dict(BLOCK_P=block_p, BLOCK_N=block_n),
        dict(SELECT_LOADS=profile.select_loads, COMPUTE_FP64=dtype == torch.float64,
             ROW_ALIGN=row_align(n_cols, profile.vector_elements(dtype))),
        dict(num_warps=profile.num_warps_for(block_p * block_n, dtype))))


def _sums(profile: Profile, n_partials: int, n_cols: int, dtype: torch.dtype,
          flags: dict) -> SumPlan:
    """The column sums of dweight's (and dbias's) partial rows of a ``dtype`` backward."""
    return column_sum_plan(profile, n_partials, n_cols, _acc_dtype(dtype),
                           2 if flags["HAS_BIAS"] else 1)


# --------------------------------------------------------------------------------------
# Rows that fit the fused backward: the partial and atomic strategies.
# --------------------------------------------------------------------------------------
def _fused_constexprs(profile: Profile, n_cols: int, dtype: torch.dtype, flags: dict,
                      **constexprs) -> dict:
    return dict(constexprs, SLICE_BROADCAST=profile.slice_broadcast,
                ROW_ALIGN=row_align(n_cols, profile.vector_elements(dtype)), **flags)


def _partial(profile: Profile, n_rows: int, n_cols: int, dtype: torch.dtype,
             flags: dict) -> BackwardPlan:
    """One row of dweight/dbias partials a program, summed by a second launch or, for few
    partial rows, by the program that finishes last."""
    block_n = next_power_of_2(n_cols)
    block_m = _row_block(n_rows, block_n, _backward_tile(dtype, profile), profile)
    # a few programs per compute unit: one left too few warps in flight
    # measured: benchmarks/results/h200.jsonl, experiment "comments"
    partials = profile.compute_units * tuning.partials_for(profile, dtype, stacked=block_m > 1)
    programs = profile.capped_grid(min(partials, cdiv(n_rows, block_m)))
    # without masks where a program holds one row (faster; stacked rows, RMS norm slower)
    # measured: benchmarks/results/h200.jsonl, experiment "comments"
    even = not flags["IS_RMS"] and block_m == 1 and n_cols == block_n
    # one row a program, where the profile says: the next row's x and dy are loaded before
    # this row's sums, so a program keeps loads in flight through them (stacked rows lost
    # so: see tuning.layer_norm.backward_prefetch in nvidia-sm90-h200.toml). Not on float64:
    # its spills at 4096 columns went from 48 to 176 bytes a thread with it (sm_90)
    prefetch = block_m == 1 and dtype.itemsize <= 4 and tuning.backward_prefetch(profile)
    constexprs = _fused_constexprs(profile, n_cols, dtype, flags, ATOMIC=False,
                                   COMPENSATED=n_rows > COMPENSATE_ROWS, EVEN_ROWS=even,
                                   EVEN_N=even, PREFETCH=prefetch)
    options = profile.launch_options_for(block_m * block_n, dtype,
                                         tuning.warps_table(profile, BACKWARD_WARPS, dtype))
    tiles = dict(ROWS_PER_PROGRAM=block_m, BLOCK_N=block_n)
    # few partial rows (tuning.layer_norm.backward_last_sum_bytes): the last program adds
    # them in tiles of its own rows (at least two), which keeps the kernel's registers
    # (sm_90, triton 3.9: 48 to 163 a thread at 64 to 4096 columns, within 3 of the
    # kernel without the sums; the whole partials in one tile took 64 -> 106-255 and
    # spilled, twice its rows 160 -> 202 at 32 stacked rows)
    last_sums = None
    if tuning.backward_last_sum(profile, programs, n_cols, _acc_dtype(dtype)):
        last_sums = KernelPlan(
            "_layer_norm_bwd_fused_kernel", (programs,),
            dict(tiles, SUM_BLOCK_P=min(next_power_of_2(programs), max(2, block_m))),
            dict(constexprs, LAST_SUMS=True), options)
    return BackwardPlan(PARTIAL, (KernelPlan(
        "_layer_norm_bwd_fused_kernel", (programs,), dict(tiles, SUM_BLOCK_P=1),
        dict(constexprs, LAST_SUMS=False), options),),
        _sums(profile, programs, n_cols, dtype, flags), programs, last_sums=last_sums)


def _atomic_configs(n_rows: int, block_n: int, dtype: torch.dtype, profile: Profile) -> tuple:
    """(rows, num_warps, num_stages) per config: the profile's autotune.layer_norm_backward
    table, or DEFAULT_ROWS_PER_PROGRAM; those whose tile exceeds the backward's row tile
    are dropped."""
    table = profile.autotune_configs("layer_norm_backward")
    if table is None:
        table = [{"ROWS_PER_PROGRAM": r} for r in DEFAULT_ROWS_PER_PROGRAM]
    limit = _backward_row_tile(dtype, profile)
    backward_warps = tuning.warps_table(profile, BACKWARD_WARPS, dtype)
    configs = []
    for cfg in table:
        unknown = set(cfg) - {"ROWS_PER_PROGRAM", "num_warps", "num_stages"}
        if "ROWS_PER_PROGRAM" not in cfg or unknown:
            raise ValueError(f"{profile.source}: autotune.layer_norm_backward configs take "
                             f"ROWS_PER_PROGRAM (required), num_warps, num_stages; got {cfg}")
        rows = next_power_of_2(cfg["ROWS_PER_PROGRAM"])
        if rows * block_n > limit or rows > next_power_of_2(n_rows):
            continue
        warps = profile.num_warps_for(rows * block_n, dtype, backward_warps)
        configs.append((rows, cfg.get("num_warps", warps),
                        cfg.get("num_stages", 3)))
    if not configs:  # one row per step always fits
        configs.append((1, profile.num_warps_for(block_n, dtype, backward_warps), 3))
    return tuple(dict.fromkeys(configs))


def _atomic(profile: Profile, n_rows: int, n_cols: int, dtype: torch.dtype,
            flags: dict) -> BackwardPlan | None:
    """The fused kernel adding its dweight/dbias partials atomically, one launch for each
    autotune config (rows a program, warps, stages); None without an atomic_add in the
    accumulator's dtype."""
    if not profile.supports_atomic("add", _acc_dtype(dtype)):
        return None
    block_n = next_power_of_2(n_cols)
    constexprs = _fused_constexprs(profile, n_cols, dtype, flags, ATOMIC=True,
                                   COMPENSATED=n_rows > COMPENSATE_ROWS, EVEN_ROWS=False,
                                   EVEN_N=False, PREFETCH=False, LAST_SUMS=False)
    # a few programs per compute unit walk the rows: each atomic add rounds the float32
    # sums once, and one per row block (65536 programs) erred by 2x the float32 bound
    programs = profile.compute_units * profile.partials_per_compute_unit
    return BackwardPlan(ATOMIC, tuple(
        KernelPlan("_layer_norm_bwd_fused_kernel",
                   (profile.capped_grid(min(programs, cdiv(n_rows, rows))),),
                   dict(ROWS_PER_PROGRAM=rows, BLOCK_N=block_n, SUM_BLOCK_P=1), constexprs,
                   dict(num_warps=warps, num_stages=stages))
        for rows, warps, stages in _atomic_configs(n_rows, block_n, dtype, profile)))


# --------------------------------------------------------------------------------------
# Rows of any length: the tiled, column and row-group strategies.
# --------------------------------------------------------------------------------------
def _tiled(profile: Profile, n_rows: int, n_cols: int, dtype: torch.dtype,
           flags: dict) -> BackwardPlan:
    """A dx kernel walking each row's column tiles twice, then a dweight/dbias kernel
    walking column blocks down the rows."""
    block_n, options = _tiled_backward_block(n_cols, dtype, profile)
    align = row_align(n_cols, profile.vector_elements(dtype))
    dx = KernelPlan(
        "_layer_norm_bwd_dx_tiled_kernel", (profile.capped_grid(n_rows),),
        dict(BLOCK_N=block_n),
        dict({k: v for k, v in flags.items() if k != "HAS_BIAS"},
             TRIPLE_SUMS=profile.multi_operand_reduce and dtype != torch.float64,
             ROW_ALIGN=align, **l2_hints(profile)), dict(options))
    block_m, block_n, num_warps = _column_sum_tile(n_rows, n_cols, dtype, profile)
    dwdb = KernelPlan(
        "_layer_norm_bwd_dwdb_kernel", (profile.capped_grid(cdiv(n_cols, block_n)),),
        dict(BLOCK_M=block_m, BLOCK_N=block_n),
        dict(IS_RMS=flags["IS_RMS"], HAS_BIAS=flags["HAS_BIAS"],
             COMPENSATED=n_rows > COMPENSATE_ROWS, SELECT_LOADS=profile.select_loads,
             SLICE_BROADCAST=profile.slice_broadcast, COMPUTE_FP64=flags["COMPUTE_FP64"],
             ROW_ALIGN=align), dict(num_warps=num_warps))
    return BackwardPlan(TILED, (dx, dwdb))


def _columns(profile: Profile, n_rows: int, n_cols: int, dtype: torch.dtype,
             flags: dict) -> BackwardPlan:
    """The row sums (one walk over each row), the column kernel (a column block of a split
    of the rows a program: dx and a row of dweight/dbias partials a split), then the
    partials' column sums."""
    align = row_align(n_cols, profile.vector_elements(dtype))
    # a forward tile's warps for the tiled backward (32 warps measured slower)
    # measured: benchmarks/results/h100.jsonl, experiment "comments"
    block_n, _ = _tiled_backward_block(n_cols, dtype, profile)
    row_sums = KernelPlan(
        "_layer_norm_bwd_row_sums_kernel", (profile.capped_grid(n_rows),),
        dict(BLOCK_N=block_n),
        dict(IS_RMS=flags["IS_RMS"], SELECT_LOADS=profile.select_loads,
             COMPUTE_FP64=flags["COMPUTE_FP64"],
             TRIPLE_SUMS=profile.multi_operand_reduce and dtype != torch.float64,
             ROW_ALIGN=align, EVICT=l2_hints(profile)["STREAM"]),
        profile.launch_options_for(block_n, dtype))
    block_m, block_n, num_warps, programs = _column_tile(n_rows, n_cols, dtype, profile)
    n_col_blocks = cdiv(n_cols, block_n)
    # row splits until the (column block, split) pairs give every compute unit its
    # programs; each split's rows are whole tiles
    n_splits = max(1, min(cdiv(n_rows, block_m), cdiv(programs, n_col_blocks)))
    rows_per_split = cdiv(cdiv(n_rows, n_splits), block_m) * block_m
    n_splits = cdiv(n_rows, rows_per_split)
    n_tasks = n_col_blocks * n_splits
    columns = KernelPlan(
        "_layer_norm_bwd_columns_kernel", (profile.capped_grid(n_tasks),),
        dict(BLOCK_M=block_m, BLOCK_N=block_n),
        dict(flags, COMPENSATED=rows_per_split > COMPENSATE_ROWS,
             SLICE_BROADCAST=profile.slice_broadcast, ROW_ALIGN=align),
        dict(num_warps=num_warps))
    return BackwardPlan(COLUMNS, (row_sums, columns),
                        _sums(profile, n_splits, n_cols, dtype, flags), n_splits,
                        (n_col_blocks, rows_per_split, n_tasks))


def _row_groups(profile: Profile, n_rows: int, n_cols: int, dtype: torch.dtype, flags: dict,
                units: int, interpreting: bool) -> BackwardPlan | None:
    """Each row split over a group of resident programs that meet, a row of dweight/dbias
    partials a group, then their column sums; None where :func:`.plan.group_layout` does
    not apply."""
    tile = tuning.backward_row_group_tile(profile, dtype)
    layout = group_layout(tile, n_rows, n_cols, dtype, profile, units, interpreting)
    if layout is None:
        return None
    rows, block_n, n_parts, n_groups, parts_block = layout
    even = not flags["IS_RMS"] and n_cols % block_n == 0
    constexprs, options = _split_options(dict(
        PREFETCH=tile[4:] == (2,),
        # layer norm without masks where its tiles divide the rows (measured faster)
        # measured: benchmarks/results/h200.jsonl, experiment "comments"
        EVEN_ROWS=even and n_rows % rows == 0, EVEN_N=even,
        COMPENSATED=cdiv(n_rows, n_groups * rows) > COMPENSATE_MEETINGS,
        TRIPLE_SUMS=profile.multi_operand_reduce, SLICE_BROADCAST=profile.slice_broadcast,
        **group_options(tile, dtype, n_cols, profile, interpreting), **flags))
    return BackwardPlan(ROW_GROUPS, (KernelPlan(
        "_layer_norm_bwd_row_groups_kernel", (n_groups * n_parts,),
        dict(PARTS_BLOCK=parts_block, ROWS=rows, BLOCK_N=block_n), constexprs, options),),
        _sums(profile, n_groups, n_cols, dtype, flags), n_groups, (n_groups, n_parts),
        n_groups * 2 * parts_block * rows * SUMS_PER_ROW)
