"""The loop every capped-grid kernel runs over its blocks of work, and its launch grid."""
import triton
import triton.language as tl

from triton_cts.profiles import Profile


@triton.jit
def block_range(pid, num_blocks, GRID_STRIDE: tl.constexpr):
    """(step, stop) of program ``pid``'s loop ``range(pid, stop, step)`` over blocks.

    With GRID_STRIDE (the launcher capped the grid below ``num_blocks``) a grid-stride
    loop; otherwise exactly one block, as a loop the compiler can see runs once: a loop
    it could not see through cost a fifth of the layer-norm forward's bandwidth (bf16
    16384x4096 on an H200: 74% -> 90% of copy)."""
    if GRID_STRIDE:
        return tl.num_programs(0), num_blocks
    else:
        return 1, pid + 1


def launch_grid(profile: Profile, blocks: int) -> tuple[tuple[int], bool]:
    """(grid, GRID_STRIDE) of a launch over ``blocks`` blocks of work: the grid capped at
    the profile's MAX_GRID_NUM, and whether its programs must then walk several blocks."""
    programs = profile.capped_grid(blocks)
    return (programs,), programs < blocks
