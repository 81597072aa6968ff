"""Random numbers of the Triton language: ``tl.randint``, ``tl.rand`` and ``tl.randn`` at
a seed and a block of offsets (loaded, so any offset can be checked: past 2^32 with
int64 offsets, where the counter's high word is used).
"""
import torch
import triton
import triton.language as tl

from . import elementwise_launch
from ..grid_stride import block_range
from triton_cts.execution.input_checks import UnsupportedDtypeError, check_inputs
from triton_cts.profiles import Profile


@triton.jit
def _random_kernel(
    OFFSETS,                    # pointer to the Philox offsets, int32 or int64
    OUT,                        # pointer to the output: int64 (randint) or float32
    seed,                       # the Philox seed (a scalar)
    n_elements,
    KIND: tl.constexpr,         # "randint", "rand" or "randn"
    BLOCK_SIZE: tl.constexpr,
    GRID_STRIDE: tl.constexpr,
):
    pid = tl.program_id(0)
    step, stop = block_range(pid, tl.cdiv(n_elements, BLOCK_SIZE), GRID_STRIDE)
    for block in range(pid, stop, step):
        offs = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offs < n_elements
        philox_offsets = tl.load(OFFSETS + offs, mask=mask, other=0)
        if KIND == "randint":  # the word, zero-extended (Tritons before 3.4 give 64-bit
            r = tl.randint(seed, philox_offsets).to(tl.int64)  # words for int64 offsets)
        elif KIND == "rand":
            r = tl.rand(seed, philox_offsets)
        else:
            tl.static_assert(KIND == "randn", "unknown random primitive")
            r = tl.randn(seed, philox_offsets)
        tl.store(OUT + offs, r, mask=mask)


def _random(kind: str, offsets: torch.Tensor, seed: int, profile: Profile) -> torch.Tensor:
    check_inputs(f"tl_{kind}", profile, (torch.int32, torch.int64), offsets=offsets)
    if offsets.dtype == torch.int64 and profile.rng_counter_bits < 64:
        raise UnsupportedDtypeError(
            f"tl_{kind}: profile {profile.name} lowers Philox with {profile.rng_counter_bits}-"
            f"bit counters only (target.rng_counter_bits): no int64 offsets")
    if not 0 <= seed < 2**63:
        raise ValueError(f"tl_{kind}: seed must be in [0, 2^63), got {seed}")
    offsets = offsets.contiguous()
    out = torch.empty(offsets.shape, device=offsets.device,
                      dtype=torch.int64 if kind == "randint" else torch.float32)
    n = out.numel()
    if n:
        grid, launch = elementwise_launch(profile, n, offsets.dtype)
        _random_kernel[grid](offsets, out, seed, n, KIND=kind, **launch)
    return out


def randint(offsets: torch.Tensor, *, seed: int, profile: Profile) -> torch.Tensor:
    """``tl.randint(seed, offsets)``: the unsigned word, as int64."""
    return _random("randint", offsets, seed, profile)


def rand(offsets: torch.Tensor, *, seed: int, profile: Profile) -> torch.Tensor:
    """``tl.rand(seed, offsets)``: float32 in [0, 1)."""
    return _random("rand", offsets, seed, profile)


def randn(offsets: torch.Tensor, *, seed: int, profile: Profile) -> torch.Tensor:
    """``tl.randn(seed, offsets)``: float32, standard normal."""
    return _random("randn", offsets, seed, profile)
