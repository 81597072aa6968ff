"""Launch grids held against a profile's limits.

Triton validates no grid (seen on an H200, triton 3.6; HIP: third_party/amd/backend/driver.py): on CUDA (1, 65536, 1) fails with
"invalid argument", but (65536, 65536, 1) and (2**31 - 1, 2, 1) launch nothing and report
nothing, because the launcher multiplies the dims in a C int; HIP's launcher returns early
when that product wraps to 0. So every recorded launch
(:class:`triton_cts.execution.launches.Launch`) is checked here:

- no axis may be 0 (a zero grid crashes some backends and runs nothing on others), except
  for an input with no elements (``allow_empty``): Triton's CUDA and HIP launchers and its
  interpreter launch nothing for an empty grid, which is then the right outcome, so the
  empty-tensor check reports it as a quality warning rather than a failure;
- each axis at most ``limits.grid_max[axis]``;
- the product at most ``limits.grid_max_product`` (where the vendor counts programs in
  total, or the launcher multiplies the dims);
- for launchers meant to cap (those that take ``profile=`` and so read
  ``launch.max_grid_num``), the product at most ``launch.max_grid_num``.
"""
from __future__ import annotations

from typing import Iterable

from triton_cts.profiles import Profile

AXES = ("x", "y", "z")


def grid_violations(grid: Iterable[int], profile: Profile, *, capped: bool,
                    kernel: str = "kernel", allow_empty: bool = False) -> list[str]:
    """Why ``grid`` (1 to 3 dims) breaks ``profile``'s limits; empty when it does not.
    ``allow_empty``: an axis of 0 is not a violation (the input has no elements)."""
    dims = [int(g) for g in grid]
    if not 1 <= len(dims) <= 3:
        raise ValueError(f"{kernel}: a grid has 1 to 3 dims, got {tuple(dims)}")
    dims += [1] * (3 - len(dims))
    where = f"{kernel} launched with grid {tuple(dims)}"
    problems = []
    for axis, (n, limit) in enumerate(zip(dims, profile.grid_max)):
        if n < 1 and allow_empty:
            continue
        if n < 1:
            problems.append(f"{where}: axis {AXES[axis]} = {n} (an empty grid crashes some "
                            f"backends and launches nothing on others; return before launching)")
        elif n > limit:
            problems.append(f"{where}: axis {AXES[axis]} = {n} exceeds limits.grid_max"
                            f"[{axis}] = {limit} of {profile.name}")
    total = dims[0] * dims[1] * dims[2]
    if total > profile.grid_max_product:
        problems.append(f"{where}: {total} programs exceed limits.grid_max_product = "
                        f"{profile.grid_max_product} of {profile.name}")
    if capped and total > profile.max_grid_num:
        problems.append(f"{where}: {total} programs exceed launch.max_grid_num = "
                        f"{profile.max_grid_num} of {profile.name} (the launcher reads the "
                        f"profile, so it should cap its grid and loop inside)")
    return problems


def empty_grid(grid: Iterable[int]) -> bool:
    """Whether a grid has an axis of 0 (no program runs)."""
    return any(int(g) < 1 for g in grid)


def launch_violations(launches: Iterable, profile: Profile, *, capped: bool,
                      allow_empty: bool = False) -> list[str]:
    """Every problem of every recorded launch, each naming the kernel, grid and limit."""
    problems: list[str] = []
    for launch in launches:
        for p in grid_violations(launch.grid, profile, capped=capped, kernel=launch.name,
                                 allow_empty=allow_empty):
            if p not in problems:
                problems.append(p)
    return problems


__all__ = ["empty_grid", "grid_violations", "launch_violations"]
