"""The column sums of partial rows: dweight and dbias from the rows of partials that the
partial-sum, column and row-group backward strategies write, added in a fixed order, so
that those strategies are bitwise reproducible for a given profile and shape. Their
launch (tiles, grid, warps) is :func:`.plan_backward.column_sum_plan`'s."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .plan_backward import SumPlan
from .tiles import _load_with, _tile_offsets, _to_acc
from ..fast_launch import PlannedLaunch, stream_buffers
from ..grid_stride import last_to_finish, rearm
from ..row_align import aligned


@triton.jit
def _sum_columns(PARTIAL, OUT, program, n_programs, n_partials, N, BLOCK_P: tl.constexpr,
                 BLOCK_N: tl.constexpr, SELECT_LOADS: tl.constexpr, COMPUTE_FP64: tl.constexpr,
                 CACHE: tl.constexpr):
    # CACHE: the loads' cache modifier (".cg": from L2, for rows other programs just wrote)
    acc_ty = tl.float64 if COMPUTE_FP64 else tl.float32
    for block in range(program, tl.cdiv(N, BLOCK_N), n_programs):
        cols = block * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tl.zeros([BLOCK_P, BLOCK_N], dtype=acc_ty)
        # a fixed order of additions: the result is the same bits on every run
        for start in range(0, n_partials, BLOCK_P):
            rows = start + tl.arange(0, BLOCK_P)
            _, load_offs, mask = _tile_offsets(rows, cols, n_partials, N, SELECT_LOADS)
            acc += _to_acc(_load_with(PARTIAL, load_offs, mask, SELECT_LOADS, "", CACHE),
                           COMPUTE_FP64)
        tl.store(OUT + cols, tl.sum(acc, axis=0).to(OUT.dtype.element_ty), mask=cols < N)


@triton.jit
def _sum_if_last(PARTIAL, OUT, PARTIAL_2, OUT_2, ARRIVED, N, HAS_SECOND: tl.constexpr,
                 BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr, SELECT_LOADS: tl.constexpr,
                 COMPUTE_FP64: tl.constexpr):
    """Called by every program of a launch once it has stored its row of PARTIAL (and
    PARTIAL_2): the program that finishes last adds the rows as :func:`_sum_rows_kernel`
    does, and leaves ARRIVED (int32, zero at launch) zero again for the next launch."""
    n_partials = tl.num_programs(0)
    if last_to_finish(ARRIVED):
        _sum_columns(PARTIAL, OUT, 0, 1, n_partials, N, BLOCK_P, BLOCK_N, SELECT_LOADS,
                     COMPUTE_FP64, ".cg")
        if HAS_SECOND:
            _sum_columns(PARTIAL_2, OUT_2, 0, 1, n_partials, N, BLOCK_P, BLOCK_N, SELECT_LOADS,
                         COMPUTE_FP64, ".cg")
        rearm(ARRIVED)


@triton.jit
def _sum_rows_kernel(
    PARTIAL,                # pointer to the partial sums [n_partials, N], contiguous
    OUT,                    # pointer to the column sums [N]
    PARTIAL_2,              # a second [n_partials, N], like PARTIAL (programs n_programs and up)
    OUT_2,                  # its column sums [N]
    n_programs,             # programs per pair: the grid is one or two times this
    n_partials,             # rows of PARTIAL
    N,                      # columns of PARTIAL
    BLOCK_P: tl.constexpr,  # partial rows per tile
    BLOCK_N: tl.constexpr,  # columns per program
    SELECT_LOADS: tl.constexpr,
    COMPUTE_FP64: tl.constexpr,
    ROW_ALIGN: tl.constexpr,  # a power of two dividing N (kernels/row_align.py)
):
    N = aligned(N, ROW_ALIGN)
    # dweight and dbias in one launch (a launch costs more host time than this kernel
    # runs), split on grid axis 0: NPUs flatten the other axes
    pid = tl.program_id(0).to(tl.int64)
    if pid < n_programs:
        _sum_columns(PARTIAL, OUT, pid, n_programs, n_partials, N, BLOCK_P, BLOCK_N,
                     SELECT_LOADS, COMPUTE_FP64, "")
    else:
        _sum_columns(PARTIAL_2, OUT_2, pid - n_programs, n_programs, n_partials, N, BLOCK_P,
                     BLOCK_N, SELECT_LOADS, COMPUTE_FP64, "")


class ColumnSums:
    """The launch of a :class:`.plan_backward.SumPlan`: called with one or two (partial
    [n_partials, N], out [N]) pairs, dweight's and dbias's, it adds each partial's rows
    into its out."""
    __slots__ = ("planned", "programs", "separate")

    def __init__(self, plan: SumPlan):
        self.planned = PlannedLaunch(_sum_rows_kernel, plan.launch.grid, **plan.launch.meta)
        self.programs, self.separate = plan.programs, plan.separate

    def __call__(self, pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        if self.separate:
            for partial, out in pairs:
                self.planned(partial, out, partial, out, self.programs, *partial.shape)
            return
        partial, out = pairs[0]
        partial_2, out_2 = pairs[-1]
        self.planned(partial, out, partial_2, out_2, self.programs, *partial.shape)


def last_sum_buffers(device: torch.device, programs: int, n_cols: int, dtype: torch.dtype,
                     with_bias: bool) -> tuple | None:
    """(counter, dweight partials, dbias partials or None) for a backward whose last
    program adds the partial rows (:func:`_sum_if_last`), or None while a CUDA graph is
    captured: a graph replays two launches faster than one whose last program adds the
    rows alone (no host time to save there). The counter is zero and every launch leaves
    it so, and the partial rows are overwritten: a GPU stream's buffers are kept and
    handed to its next call of the same shape, which then allocates nothing
    (:func:`~kernels.fast_launch.stream_buffers`)."""
    return stream_buffers(device, ("layer_norm_backward", programs, n_cols, dtype, with_bias),
                          lambda: _new_last_sum_buffers(device, programs, n_cols, dtype,
                                                        with_bias))


def _new_last_sum_buffers(device, programs, n_cols, dtype, with_bias) -> tuple:
    return (torch.zeros(1, dtype=torch.int32, device=device),
            torch.empty(programs, n_cols, dtype=dtype, device=device),
            torch.empty(programs, n_cols, dtype=dtype, device=device) if with_bias else None)
