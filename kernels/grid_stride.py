"""The loop every capped-grid kernel runs over its blocks of work, its launch grid, and
how a launch's last program to finish is told apart (a reduction it finishes alone)."""
import torch
import triton
import triton.language as tl

from triton_cts.profiles import Profile, cdiv
from .fast_launch import launch_plan


@triton.jit
def block_range(pid, num_blocks, GRID_STRIDE: tl.constexpr):
    """(step, stop) of program ``pid``'s loop ``range(pid, stop, step)`` over blocks.

    With GRID_STRIDE (the launcher capped the grid below ``num_blocks``) a grid-stride
    loop; otherwise exactly one block, as a loop the compiler can see runs once: a loop
    it could not see through cost a fifth of the layer-norm forward's bandwidth
    (benchmarks/results/h200.jsonl, experiment "comments")."""
    if GRID_STRIDE:
        return tl.num_programs(0), num_blocks
    else:
        return 1, pid + 1


@triton.jit
def last_to_finish(ARRIVED):
    """Called by every program of a launch once its stores are done: whether it is the last
    to arrive at ARRIVED (an int32 counter, zero at launch), and then sees every other
    program's stores (its acquire pairs with their release). The last program must call
    :func:`rearm` when it is done, so that the next launch finds the counter at zero."""
    # every thread's stores before the release
    tl.debug_barrier()
    return tl.atomic_add(ARRIVED, 1, sem="acq_rel", scope="gpu") == tl.num_programs(0) - 1


@triton.jit
def rearm(ARRIVED):
    """The last program's counter back to zero for the next launch (:func:`last_to_finish`)."""
    tl.atomic_xchg(ARRIVED, 0, sem="relaxed", scope="gpu")


def launch_grid(profile: Profile, blocks: int) -> tuple[tuple[int], bool]:
    """(grid, GRID_STRIDE) of a launch over ``blocks`` blocks of work: the grid capped at
    the profile's MAX_GRID_NUM, and whether its programs must then walk several blocks."""
    programs = profile.capped_grid(blocks)
    return (programs,), programs < blocks


@launch_plan
def elementwise_plan(profile: Profile, n: int, dtype: torch.dtype) -> tuple:
    """(grid, constexprs and num_warps) of an elementwise launch over ``n`` elements of
    ``dtype``: BLOCK_SIZE, COMPUTE_FP64, GRID_STRIDE, VECTOR and TAIL (see
    :func:`vector_split`), computed once per profile, size and dtype."""
    block = profile.elementwise_block(dtype, n)
    grid, grid_stride = launch_grid(profile, cdiv(n, block))
    vector, tail = vector_split(n, profile.vector_elements(dtype))
    return grid, dict(BLOCK_SIZE=block, COMPUTE_FP64=dtype == torch.float64,
                      GRID_STRIDE=grid_stride, VECTOR=vector, TAIL=tail,
                      num_warps=profile.num_warps_for(block))


def vector_split(n: int, vector: int) -> tuple[int, bool]:
    """(VECTOR, TAIL) of an elementwise kernel over ``n`` elements, ``vector`` of which
    fill the widest load a thread issues.

    Triton knows of an integer only whether 16 divides it. A mask ``offs < n`` with any
    other ``n`` is known constant over no two lanes, so every element loads alone (GELU:
    benchmarks/results/h100.jsonl, experiment "comments"). The
    kernels mask their blocks by ``n`` rounded down to whole vectors (``aligned(n,
    VECTOR)``), which vectorizes, and where that leaves a tail (TAIL) program 0 does the
    last ``n % VECTOR`` elements alone. Where 16 divides ``n``, VECTOR is 1, no tail, and
    the code is the one without the split."""
    if n % 16 == 0:
        return 1, False
    return vector, n % vector != 0
