"""Faulty language-op launchers: each breaks one rule the language-ops suite must catch,
and is otherwise the reference launcher."""
import torch
import triton
import triton.language as tl

from kernels.language import atomics as la
from kernels.language import dot as ld
from kernels.language import scans as ls


def atomic_max_from_zero(values, initial, mask=None, cmp=None, *, orders=(("acq_rel", "gpu"),),
                         profile):
    """tl.atomic_max into slots started at 0 instead of the given values: right for
    non-negative data, wrong wherever every value is negative."""
    return la.atomic(values, torch.zeros_like(initial), mask, cmp, op="max", orders=orders,
                     profile=profile)


@triton.jit
def _swapped_affine(a_l, b_l, a_r, b_r):
    # the right operand's map applied first: the combine order dropped
    return a_r * a_l, b_r * a_l + b_l


@triton.jit
def _swapped_scan_kernel(B, A, FWD, REV, R, C, stride_r, BLOCK_R: tl.constexpr,
                         BLOCK_C: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_C)
    mask = (rows[:, None] < R) & (cols[None, :] < C)
    offs = rows[:, None] * stride_r + cols[None, :]
    b = tl.load(B + offs, mask=mask, other=0)
    a = tl.load(A + offs, mask=mask, other=1)
    _, fwd = tl.associative_scan((a, b), 1, _swapped_affine)
    _, rev = tl.associative_scan((a, b), 1, _swapped_affine, reverse=True)
    tl.store(FWD + rows[:, None] * C + cols[None, :], fwd, mask=mask)
    tl.store(REV + rows[:, None] * C + cols[None, :], rev, mask=mask)


def scan_drops_combine_order(b, a, *, profile):
    """tl.associative_scan whose combine applies its operands in the wrong order."""
    R, C, block_r, block_c, grid = ls._rows("scan_drops_combine_order", b, profile)
    b, a = b.contiguous(), a.contiguous()
    fwd, rev = torch.empty_like(b), torch.empty_like(b)
    _swapped_scan_kernel[grid](b, a, fwd, rev, R, C, b.stride(0), BLOCK_R=block_r,
                               BLOCK_C=block_c)
    return fwd, rev


def dot_drops_ragged_k(a, b, *, profile):
    """tl.dot over the whole BLOCK_K steps of K only: the ragged tail of K is lost."""
    block_k = ld._tile(profile, a.shape[1], max(ld.MIN_DOT, ld.MIN_K_BYTES // a.element_size()),
                       "BLOCK_SIZE_K")
    whole = a.shape[1] // block_k * block_k
    return ld.dot(a[:, :whole], b[:whole], profile=profile)
