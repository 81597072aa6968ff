"""Rows whose length is not a multiple of 16: telling the compiler what divides it.

Triton specializes an integer argument on whether 16 divides it, and on nothing finer.
Rows of 3000 bf16 elements are 6000 bytes, so every row starts 16-byte aligned, but with
nothing known to divide N the compiler cannot prove it: ``row * N + cols`` and the mask
``cols < N`` load one element at a time (sm_90 PTX: ``ld.global.b16`` where a multiple of
16 gets ``ld.global.v4.b32``), and ran at a fraction of the aligned shapes' bandwidth
(benchmarks/results/h100.jsonl, experiment "comments").

A launcher passes :func:`row_align` as the constexpr ``ROW_ALIGN``; the kernel rebuilds
its row length with :func:`aligned`, the same value whose divisibility the compiler now
sees.
"""
import triton
import triton.language as tl


def row_align(n: int, vector: int) -> int:
    """The largest power of two dividing ``n``, up to ``vector``, the elements of the
    widest load a thread issues (the profile's ``io.vector_load_bytes``; more buys no wider
    load); 1 where 16 divides ``n`` (Triton knows that already, and the kernel's code stays
    as it was: the rebuilt length moved registers by a few either way and spilled 8 bytes
    in one sm_90 kernel) and for 0."""
    if n <= 0 or n % 16 == 0:
        return 1
    return min(n & -n, vector)


@triton.jit
def aligned(N, ROW_ALIGN: tl.constexpr):
    """N rounded down to a multiple of ROW_ALIGN, as a value the compiler knows ROW_ALIGN
    divides: N itself where ROW_ALIGN divides N (a row length from :func:`row_align`)."""
    return N // ROW_ALIGN * ROW_ALIGN
