"""The reductions family's tuning (max_all, prod_all and the row kernels of max_dim and
prod_dim): its fields, declared once with their defaults, and the functions its launchers
read them through. A profile sets the values its target overrides in
``[tuning.reductions]``."""
from __future__ import annotations

import torch

from triton_cts.profiles import Profile, cdiv, next_power_of_2
from triton_cts.profiles.fields import count, pow2_bytes
from triton_cts.profiles.tuning import declare_tuning

FAMILY = "reductions"


def _own(name: str, fallback):
    """A default: the family's ``name`` where the profile sets it, else ``fallback(profile)``."""
    return lambda profile: profile.tuning_overrides(FAMILY).get(name, fallback(profile))


FIELDS = declare_tuning(FAMILY, {
    "programs_per_compute_unit": count(
        "programs per compute unit of a whole-tensor reduction's first stage on data "
        "narrower than 32 bits; a program per block where absent",
        default_text="absent (a program per block)", unit="programs per compute unit"),
    "programs_per_compute_unit_32bit": count(
        "as programs_per_compute_unit, on 32-bit or wider data; programs_per_compute_unit "
        "where absent", default=_own("programs_per_compute_unit", lambda p: None),
        default_text="programs_per_compute_unit", unit="programs per compute unit"),
    "row_step_bytes": pow2_bytes(
        "bytes of a row a max_dim program reads a step on data narrower than 32 bits; "
        "launch.elementwise_block_bytes where absent",
        default=lambda p: p["launch.elementwise_block_bytes"],
        default_text="launch.elementwise_block_bytes"),
    "row_step_bytes_32bit": pow2_bytes(
        "the same on 32-bit or wider data; row_step_bytes where absent",
        default=_own("row_step_bytes", lambda p: p["launch.elementwise_block_bytes"]),
        default_text="row_step_bytes"),
    "row_programs_per_compute_unit": count(
        "programs per compute unit the max_dim row kernel keeps before it stacks rows; 1 "
        "where absent", default=1, unit="programs per compute unit"),
})


def reduction_grid(profile: Profile, blocks: int, dtype: torch.dtype) -> int:
    """Programs of a whole-tensor reduction's first stage over ``blocks`` blocks of
    ``dtype`` data: one per block (capped at MAX_GRID_NUM), or at most
    ``programs_per_compute_unit`` (``_32bit`` for 32-bit and wider data) per compute unit
    where the profile has it, each walking several blocks. Every program writes a partial
    that one program of the second stage folds, so fewer partials shorten that stage."""
    tuned = profile.tuning(FAMILY)
    per_unit = tuned["programs_per_compute_unit_32bit" if dtype.itemsize >= 4
                     else "programs_per_compute_unit"]
    return profile.grid_per_unit(blocks, per_unit)


def row_reduction_tile(profile: Profile, n_rows: int, n_cols: int,
                       dtype: torch.dtype) -> tuple[int, int]:
    """(rows, columns) of the tile a row-reduction program reads a step: an elementwise
    block of ``dtype`` elements, walking each row in steps of ``row_step_bytes``
    (``_32bit`` on 32-bit and wider data) or the whole row where shorter; the rest of the
    block stacks rows, but only while at least ``row_programs_per_compute_unit`` programs
    per compute unit remain, and rows left unstacked lengthen the step instead."""
    tuned = profile.tuning(FAMILY)
    block = profile.elementwise_block(dtype)
    step = tuned["row_step_bytes_32bit" if dtype.itemsize >= 4 else "row_step_bytes"]
    step = max(1, step // dtype.itemsize)
    block_n = min(next_power_of_2(max(n_cols, 1)), step, block)
    per_unit = tuned["row_programs_per_compute_unit"]
    block_m = max(1, block // block_n)
    while block_m > 1 and cdiv(n_rows, block_m) < per_unit * profile.compute_units:
        block_m //= 2
    return block_m, min(next_power_of_2(max(n_cols, 1)), max(block_n, block // block_m))
