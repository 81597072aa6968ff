"""Small Triton kernels, one per language primitive (or a few per family), each with a
launcher that reads every hardware constant from the profile: the math functions,
conversions, integer semantics and random numbers, ``tl.dot``, atomics, scans and sorts,
block pointers and memory hints. Each launcher is the ``reference_kernel`` of a primitive
op in ``triton_cts/ops/language/``; the language suites (``suites/test_language_*.py``)
hold it to the primitive's exact definition, and the compile suite cross-compiles it for
every profile.

Kernels stay small (one block of work per program, a grid-stride loop where the grid is
capped) so interpreter checks cost milliseconds.
"""
import torch

from ..grid_stride import launch_grid
from triton_cts.profiles import Profile, cdiv


def elementwise_launch(profile: Profile, n: int, dtype: torch.dtype) -> tuple[tuple, dict]:
    """(grid, launch keywords) of an elementwise kernel over ``n`` elements of ``dtype``:
    ``BLOCK_SIZE`` from the profile's elementwise block, the grid capped at its
    MAX_GRID_NUM with ``GRID_STRIDE`` set when programs must walk several blocks, and
    ``num_warps`` by the profile's rule. Kernels take ``BLOCK_SIZE`` and ``GRID_STRIDE``
    constexprs and loop with ``kernels.grid_stride.block_range``."""
    block = profile.elementwise_block(dtype, n)
    grid, grid_stride = launch_grid(profile, cdiv(n, block))
    return grid, {"BLOCK_SIZE": block, "GRID_STRIDE": grid_stride,
                  "num_warps": profile.num_warps_for(block, dtype)}
