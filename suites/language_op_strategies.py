"""Hypothesis strategies of the language-ops suite (``tl.dot``, atomics, scans and sorts,
memory): small inputs (at most a few hundred elements, a few programs), so interpreter
checks cost milliseconds; the shapes and values are where these primitives go wrong:
ragged K, all lanes on one address, ties, NaN, blocks hanging over a matrix's edge.

Every strategy draws a seed and builds its tensors from it, so a failure names the seed
and the kind of values that reproduce it.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
from hypothesis import strategies as st

#: Dot sizes: M and N from 16 (tl.dot's smallest), K ragged around 16 and 32.
DOT_DIMS = (16, 17, 24, 33, 48)
DOT_K = (17, 16, 31, 32, 33, 48, 64, 95)
#: Lanes of an atomic launch: one, around a warp, two warps.
LANES = (33, 1, 2, 31, 32, 64)
#: Slots the lanes share: one first (every program on one address).
ADDRESSES = (1, 2, 3, 7)
ROWS = (3, 1, 2, 5)
COLS = (33, 1, 2, 7, 16, 64, 100)
POW2_COLS = (16, 2, 4, 32)
SEMS = ("relaxed", "acquire", "release", "acq_rel")
SCOPES = ("gpu", "cta", "sys")

seeds = st.integers(0, 2**31 - 1)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _ints(shape, low: int, high: int, dtype, gen) -> torch.Tensor:
    """Integers in [low, high) of ``dtype`` (drawn in int64: torch draws no unsigned)."""
    return torch.randint(low, high, shape, generator=gen, dtype=torch.int64).to(dtype)


# ---- tl.dot ------------------------------------------------------------------------------
class DotCase(NamedTuple):
    a: torch.Tensor
    b: torch.Tensor
    acc: torch.Tensor | None
    kind: str
    seed: int

    def describe(self) -> str:
        m, k = self.a.shape
        return (f"M={m} N={self.b.shape[1]} K={k} {self.kind} values, seed {self.seed}"
                + (f", acc {self.acc.dtype}" if self.acc is not None else ""))


DOT_KINDS = ("normal", "integers", "offset")


def _dot_operand(shape, dtype, kind, gen) -> torch.Tensor:
    if dtype == torch.int8:
        return _ints(shape, -128, 128, dtype, gen)
    x = torch.randn(shape, generator=gen, dtype=torch.float64)
    if kind == "integers":  # exact products and sums: only the dot's own error shows
        x = x.mul(3).round()
    elif kind == "offset":  # every term of one sign: no cancellation, large sums
        x = x.abs() + 1
    return x.to(dtype)


@st.composite
def dot_cases(draw, dtype: torch.dtype, acc_dtype: torch.dtype | None) -> DotCase:
    m = draw(st.sampled_from(DOT_DIMS), label="M")
    n = draw(st.sampled_from(DOT_DIMS), label="N")
    k = draw(st.sampled_from(DOT_K), label="K")
    kind = draw(st.sampled_from(DOT_KINDS), label="values")
    seed = draw(seeds, label="seed")
    gen = _gen(seed)
    a = _dot_operand((m, k), dtype, kind, gen)
    b = _dot_operand((k, n), dtype, kind, gen)
    acc = None
    if acc_dtype is not None:
        acc = (_ints((m, n), -2**20, 2**20, acc_dtype, gen) if not acc_dtype.is_floating_point
               else torch.randn((m, n), generator=gen, dtype=torch.float64).mul(4).to(acc_dtype))
    return DotCase(a, b, acc, kind, seed)


# ---- atomics -----------------------------------------------------------------------------
class AtomicCase(NamedTuple):
    values: torch.Tensor
    initial: torch.Tensor
    mask: torch.Tensor | None
    cmp: torch.Tensor | None
    kind: str
    seed: int

    def describe(self) -> str:
        return (f"{self.values.numel()} lanes on {self.initial.numel()} slot(s), {self.kind} "
                f"values, {'masked' if self.mask is not None else 'no mask'}, seed {self.seed}")


def _float_step(dtype: torch.dtype) -> float:
    """Largest integer value a float add is drawn with such that every partial sum of up
    to max(LANES) lanes stays an exact integer in ``dtype``."""
    exact = 2.0 ** (round(-math.log2(torch.finfo(dtype).eps)) + 1)
    return max(1.0, math.floor(exact / (2 * max(LANES))))


def atomic_values(op: str, dtype: torch.dtype, kind: str, n: int, gen) -> torch.Tensor:
    """Values for ``n`` lanes of ``tl.atomic_<op>``: exact under every order of the lanes
    (integer-valued floats for add); ``kind`` "negative" makes every value negative where
    the dtype has negatives, the case an accumulator started at 0 gets wrong."""
    signed = dtype.is_floating_point or torch.iinfo(dtype).min < 0
    if dtype.is_floating_point:
        if op == "add":
            step = _float_step(dtype)
            x = torch.randint(-int(step), int(step) + 1, (n,), generator=gen).double()
        else:
            x = torch.randn(n, generator=gen, dtype=torch.float64) * 100
        if kind == "negative":
            x = -x.abs() - 1
        return x.to(dtype)
    info = torch.iinfo(dtype)
    if op in ("and", "or", "xor"):  # every bit pattern
        return _ints((n,), max(info.min, -2**62), min(info.max, 2**62), dtype, gen)
    if op == "add":
        low = -50 if signed else 0
        x = _ints((n,), low, 51, torch.int64, gen)
    else:
        x = _ints((n,), max(info.min, -2**40), min(info.max, 2**40), torch.int64, gen)
    if kind == "negative" and signed:
        x = -x.abs() - 1
    return x.to(dtype)


@st.composite
def atomic_cases(draw, op: str, dtype: torch.dtype) -> AtomicCase:
    n = draw(st.sampled_from(LANES), label="lanes")
    slots = draw(st.sampled_from(ADDRESSES), label="addresses")
    kind = draw(st.sampled_from(("negative", "mixed")), label="values")
    masked = draw(st.booleans(), label="masked")
    seed = draw(seeds, label="seed")
    gen = _gen(seed)
    values = atomic_values(op, dtype, kind, n, gen)
    initial = atomic_values(op, dtype, kind, slots, gen)
    cmp = None
    if op == "cas":  # lanes compare with values the slots may hold: chains of swaps
        start = torch.randint(0, 4, (slots,), generator=gen)
        initial = start.to(dtype)
        cmp = torch.randint(0, 6, (n,), generator=gen)
        values = (cmp + 1).to(dtype)
        cmp = cmp.to(dtype)
    mask = torch.rand(n, generator=gen) < 0.7 if masked else None
    return AtomicCase(values, initial, mask, cmp, kind, seed)


def orders(draw_all: bool):
    """(sem, scope) pairs: every one (device mode), or one drawn."""
    every = tuple((s, c) for s in SEMS for c in SCOPES)
    return st.just(every) if draw_all else st.sampled_from(every).map(lambda o: (o,))


def float_extremes(dtype: torch.dtype, n: int, gen, sign: float = -1.0) -> torch.Tensor:
    """Both zeros among values of one ``sign`` (negative for max, positive for min, so a
    zero is the answer): where float atomic max/min are undefined or differ between
    targets (the suite adds a NaN)."""
    x = sign * (torch.rand(n, generator=gen, dtype=torch.float64) * 10 + 1)
    x[torch.randint(0, n, (1,), generator=gen)] = -0.0
    x[torch.randint(0, n, (1,), generator=gen)] = 0.0
    return x.to(dtype)


# ---- scans, sorts, reductions ------------------------------------------------------------
class RowsCase(NamedTuple):
    x: torch.Tensor
    kind: str
    seed: int

    def describe(self) -> str:
        return f"shape {tuple(self.x.shape)}, {self.kind} values, seed {self.seed}"


def row_values(shape, dtype: torch.dtype, kind: str, gen) -> torch.Tensor:
    """``kind``: "normal"; "ties" (a few distinct values); "factors" (floats near 1 whose
    products stay finite; small integers); "nan" (normal with NaN at random places)."""
    if not dtype.is_floating_point:
        if kind == "factors":
            return _ints(shape, -3, 4, dtype, gen)
        if kind == "ties":
            return _ints(shape, -2, 3, dtype, gen)
        return _ints(shape, -1000, 1000, dtype, gen)
    x = torch.randn(shape, generator=gen, dtype=torch.float64)
    if kind == "ties":
        x = x.mul(1.5).round()
    elif kind == "factors":
        x = torch.exp(x / math.sqrt(max(shape[-1], 1))) * torch.where(
            torch.rand(shape, generator=gen) < 0.2, -1.0, 1.0).double()
    elif kind == "nan":
        x[torch.rand(shape, generator=gen) < 0.15] = math.nan
        x.view(-1)[torch.randint(0, x.numel(), (1,), generator=gen)] = math.nan
    return x.to(dtype)


@st.composite
def rows_cases(draw, dtype: torch.dtype, kinds: tuple[str, ...], pow2: bool = False,
               one_d: bool = False) -> RowsCase:
    rows = draw(st.sampled_from(ROWS), label="rows")
    cols = draw(st.sampled_from(POW2_COLS if pow2 else COLS), label="cols")
    kind = draw(st.sampled_from(kinds), label="values")
    seed = draw(seeds, label="seed")
    shape = (rows * cols,) if one_d else (rows, cols)
    return RowsCase(row_values(shape, dtype, kind, _gen(seed)), kind, seed)


# ---- memory ------------------------------------------------------------------------------
class BlockCase(NamedTuple):
    x: torch.Tensor
    row0: int
    col0: int
    seed: int

    def describe(self) -> str:
        return (f"matrix {tuple(self.x.shape)} (row stride {self.x.stride(0)}), block at "
                f"({self.row0}, {self.col0}), seed {self.seed}")


@st.composite
def block_cases(draw, dtype: torch.dtype, block: tuple[int, int]) -> BlockCase:
    """A matrix (contiguous, or a view with wider rows) and a block origin anywhere from
    inside to past its bottom-right corner; the column offset on 16 bytes (descriptors
    need it)."""
    m = draw(st.sampled_from((1, 5, 16, 17, 40)), label="M")
    n = draw(st.sampled_from((8, 16, 24, 33, 40)), label="N")
    per_row = max(1, 16 // dtype.itemsize)
    row0 = draw(st.integers(0, m + 2), label="row0")
    col0 = draw(st.integers(0, (n + 4) // per_row), label="col0") * per_row
    wide = draw(st.booleans(), label="wider rows")
    seed = draw(seeds, label="seed")
    full = torch.randn((m, n + (8 if wide else 0)), generator=_gen(seed), dtype=torch.float64)
    return BlockCase(full.to(dtype)[:, :n], row0, col0, seed)


@st.composite
def hint_cases(draw, dtype: torch.dtype):
    """(x, other, seed): 1-D ``x`` of a length whose block has masked lanes, and the value
    masked-off lanes load."""
    n = draw(st.sampled_from((5, 1, 31, 64, 100)), label="n")
    if dtype.is_floating_point:
        other = draw(st.sampled_from((-3.5, 0.0, math.inf, math.nan, -0.0)), label="other")
    else:
        other = draw(st.sampled_from((-3, 0, 2**31 - 1, -2**31)), label="other")
    seed = draw(seeds, label="seed")
    x = row_values((n,), dtype, "normal", _gen(seed))
    return x, other, seed
