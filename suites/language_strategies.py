"""Hypothesis strategies of the language suites (math, conversions, integers, random):
values over a dtype's whole range with its special values always included, and the
launch profiles a primitive runs under. Inputs are small (a few hundred elements): the
point is the values, and interpreter checks stay cheap.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
from hypothesis import strategies as st

from triton_cts.ops.dtypes import int_dtype
from triton_cts.profiles import Profile

#: Elements per drawn input (specials come on top): one program's worth or a few.
SIZES = (61, 200)


def special_values(dtype: torch.dtype) -> list[float]:
    """±0, ±1, ±inf, NaN, the smallest and largest subnormals and normals, the largest
    finite values and their neighbourhood of ties."""
    fi = torch.finfo(dtype)
    sub_min = fi.tiny * fi.eps  # the smallest subnormal: 2^(emin - mantissa bits)
    return [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, math.inf, -math.inf, math.nan,
            sub_min, -sub_min, fi.tiny - sub_min, fi.tiny, -fi.tiny, fi.max, -fi.max,
            1.0 + fi.eps, 1.0 - fi.eps / 2]


def _domain_specials(domain: str, dtype: torch.dtype) -> list[float]:
    """The edges a function's domain adds: exp's overflow and underflow thresholds,
    huge sin/cos arguments (where range reduction must be exact)."""
    fi = torch.finfo(dtype)
    if domain == "exp":
        top = math.log(fi.max)                       # e^x overflows just above
        low = math.log(fi.tiny)                      # results turn subnormal below
        return [top * (1 - 1e-7), top * (1 + 1e-7), low, low * 1.1, top * -1.2, 1e-8, -1e-8]
    if domain == "trig":
        return [math.pi, -math.pi, math.pi / 2, 2 * math.pi, 1e4, -1e5, 1e6 + 0.5, 1e10,
                1e22, 2.0 ** 60, fi.max / 4, 6381956970095103.0 * 2.0 ** 797
                if dtype == torch.float64 else 1.5e38]
    if domain == "positive":
        return [1e-30 if dtype != torch.float16 else 1e-5, 0.25, 1e30 if dtype != torch.float16 else 6e4]
    return []


def whole_range(n: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """``n`` values of ``dtype`` with random bit patterns: every sign, exponent (subnormals,
    infinities and NaNs included) and significand equally likely."""
    gen = torch.Generator().manual_seed(seed)
    bits = int_dtype(dtype.itemsize)
    info = torch.iinfo(bits)
    raw = torch.randint(info.min, info.max, (n,), generator=gen, dtype=torch.int64)
    return raw.to(bits).view(dtype)


def moderate(n: int, dtype: torch.dtype, domain: str, seed: int) -> torch.Tensor:
    """``n`` values where a function's result is neither 0 nor infinite: exp's arguments
    up to its overflow, trig arguments within a few hundred periods, magnitudes from
    1e-3 to 1e3 elsewhere (positive for log and sqrt)."""
    gen = torch.Generator().manual_seed(seed)
    u = torch.rand(n, generator=gen, dtype=torch.float64) * 2 - 1
    if domain == "exp":
        x = u * math.log(torch.finfo(dtype).max)
    elif domain == "trig":
        x = u * 1000.0
    else:
        x = torch.sign(u) * torch.pow(10.0, torch.rand(n, generator=gen, dtype=torch.float64) * 6 - 3)
        if domain == "positive":
            x = x.abs()
    return x.to(dtype)


class MathCase(NamedTuple):
    """Drawn inputs of a math function: ``inputs`` (one tensor per argument, specials
    first), how they were made (``kind``, ``seed``) for the failure message."""
    inputs: tuple[torch.Tensor, ...]
    kind: str
    seed: int

    def describe(self) -> str:
        return f"{self.inputs[0].numel()} {self.kind} values (seed {self.seed})"


@st.composite
def math_cases(draw, function, dtype: torch.dtype) -> MathCase:
    """Inputs of ``function`` (a ``MathFunction``): its special values (every argument
    paired with every special of the first), then ``whole_range`` or ``moderate``
    values."""
    kind = draw(st.sampled_from(["whole_range", "moderate"]), label="values")
    n = draw(st.sampled_from(SIZES), label="elements")
    seed = draw(st.integers(0, 2**31 - 1), label="seed")
    specials = special_values(dtype) + _domain_specials(function.domain, dtype)
    head = torch.tensor(specials, dtype=torch.float64).to(dtype)
    inputs = []
    for arg in range(function.arity):
        body = whole_range(n, dtype, seed + arg) if kind == "whole_range" \
            else moderate(n, dtype, function.domain, seed + arg)
        if function.function in ("fdiv", "div_rn") and arg == 1:
            first = torch.full_like(head, 3.0)  # x / 3: ties and inexact quotients
            first[len(specials) // 2:] = head.flip(0)[len(specials) // 2:]
        elif arg == 0:
            first = head
        else:
            first = torch.roll(head, arg)  # specials meet other specials
        inputs.append(torch.cat([first, body]))
    return MathCase(tuple(inputs), kind, seed)


@st.composite
def launch_profiles(draw, profile: Profile) -> Profile:
    """One with 64-byte blocks and a grid of 1 to 3 programs (so a few hundred elements
    span several blocks and programs walk them in a grid-stride loop), or the real
    profile."""
    if draw(st.booleans(), label="the real profile"):  # hypothesis tries False first
        return profile
    return profile.derive(name=f"{profile.name}~small-grid", **{
        "launch.elementwise_block_bytes": 64,
        "launch.max_grid_num": draw(st.integers(1, 3), label="max_grid_num")})


def flush_subnormals(t: torch.Tensor) -> torch.Tensor:
    """``t`` with subnormals replaced by zero of the same sign (what a flush-to-zero
    target reads)."""
    tiny = torch.finfo(t.dtype).tiny
    sub = (t != 0) & (t.abs() < tiny)
    return torch.where(sub, torch.copysign(torch.zeros_like(t), t), t)


# ---- conversions -------------------------------------------------------------------------
def _step_up(t: torch.Tensor) -> torch.Tensor:
    """The next representable value above each (positive, finite) element."""
    bits = int_dtype(t.dtype.itemsize)
    return (t.view(bits) + 1).view(t.dtype)


def narrowing_inputs(dtype: torch.dtype, seed: int, n: int) -> torch.Tensor:
    """float32 values to convert to the narrow float ``dtype``: its special values, exact
    ties (halfway between neighbours, both signs), values around its largest finite value
    and its smallest subnormal, and ``n`` random values of its range."""
    fi = torch.finfo(dtype)
    gen = torch.Generator().manual_seed(seed)
    grid = whole_range(n, dtype, seed)
    grid = grid[torch.isfinite(grid.float())].float().abs()
    above = _step_up(grid.to(dtype)).float()
    ties = (grid + above) / 2                           # exactly halfway: RNE picks the even
    top = torch.tensor([fi.max], dtype=torch.float32)
    step = float(top) - float(torch.tensor([fi.max], dtype=torch.float64).to(dtype).view(
        int_dtype(dtype.itemsize)).sub(1).view(dtype).double())
    edges = [fi.max, fi.max + step / 4, fi.max + step / 2, fi.max + step, 2 * fi.max, 1e30,
             fi.tiny, fi.tiny * fi.eps, fi.tiny * fi.eps / 2, fi.tiny * fi.eps * 0.75,
             fi.tiny * fi.eps / 4, 1e-30, math.inf, -math.inf, math.nan, 0.0, -0.0]
    sizes = torch.rand(n, generator=gen, dtype=torch.float64) * math.log2(fi.max / fi.tiny)
    moderate = (fi.tiny * torch.pow(2.0, sizes)).float()
    body = torch.cat([ties, grid, moderate, torch.tensor(edges, dtype=torch.float32)])
    return torch.cat([body, -body]).float()


def widening_inputs(dtype: torch.dtype) -> torch.Tensor:
    """Bit patterns of the narrow float ``dtype`` to convert to float32: all 256 of a
    float8 format; every exponent with spread significands (and NaN and the infinities)
    of a 16-bit one."""
    bits = int_dtype(dtype.itemsize)
    if dtype.itemsize == 1:
        return torch.arange(-128, 128, dtype=torch.int16).to(bits).view(dtype)
    patterns = torch.arange(0, 65536, 37, dtype=torch.int64)
    patterns = torch.cat([patterns, torch.tensor([0x7C00, 0xFC00, 0x7E00, 0x7F80, 0xFF80,
                                                  0x7FC0, 0x0001, 0x8001, 0x7BFF, 0x7F7F])])
    return patterns.to(torch.int32).to(torch.int16).view(dtype)


def float_to_int_inputs(dtype: torch.dtype, seed: int, n: int) -> tuple[torch.Tensor, dict]:
    """float32 values to convert to the integer ``dtype``: fractions of both signs,
    values up to its limits (those float32 holds), and the undefined ones by name (NaN,
    the infinities, just above and below the range) for the behaviour table."""
    info = torch.iinfo(dtype)
    gen = torch.Generator().manual_seed(seed)
    span = min(float(info.max), 2.0 ** 60)
    low = -span if info.min < 0 else 0.0
    body = (torch.rand(n, generator=gen, dtype=torch.float64) * (span - low) + low).float()
    fractions = torch.tensor([0.5, -0.5, 0.99, -0.99, 1.5, -1.5, 2.5, -2.5, 7.75, -7.75],
                             dtype=torch.float32)
    if info.min == 0:
        fractions = fractions.abs()
    top = torch.tensor([float(info.max)], dtype=torch.float32)
    if float(top) > info.max:                           # float32 rounded it up: step down
        top = (top.view(torch.int32) - 1).view(torch.float32)
    limits = torch.cat([top, torch.tensor([float(info.min)], dtype=torch.float32)])
    undefined = {"nan": math.nan, "+inf": math.inf, "-inf": -math.inf,
                 "above range": float(info.max) * 2 + 4, "below range":
                 float(info.min) * 2 - 4 if info.min < 0 else -1.0}
    return torch.cat([fractions, limits, body]), undefined


def int_to_float_inputs(dtype: torch.dtype, seed: int, n: int) -> torch.Tensor:
    """Integers to convert to float32: exact ties above 2^24 (halfway between two floats:
    RNE picks the even), the type's limits and ``n`` random values of its range."""
    info = torch.iinfo(dtype)
    gen = torch.Generator().manual_seed(seed)
    ties = [2**24 + 1, 2**24 + 3, -(2**24 + 1), 2**25 + 2, 2**30 + 64, 2**31 - 64]
    if info.bits == 64:
        ties += [2**40 + 2**16, 2**62 + 2**38, -(2**62 + 2**38 * 3), 2**53 + 1]
    body = torch.randint(info.min, info.max, (n,), generator=gen, dtype=torch.int64)
    extra = torch.tensor([t for t in ties if info.min <= t <= info.max] + [info.min, info.max],
                         dtype=torch.int64)
    return torch.cat([extra, body]).to(dtype)


# ---- integers ------------------------------------------------------------------------------
def int_operands(dtype: torch.dtype, seed: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Pairs of ``dtype`` values: every pair of the edge values (min, min + 1, -2, -1, 0,
    1, 2, max - 1, max), then ``n`` random pairs over the whole range."""
    info = torch.iinfo(dtype)
    edges = sorted({v for v in (info.min, info.min + 1, -2, -1, 0, 1, 2, 7, -7, info.max - 1,
                                info.max) if info.min <= v <= info.max})
    ex = torch.tensor([a for a in edges for _ in edges], dtype=torch.int64)
    ey = torch.tensor([b for _ in edges for b in edges], dtype=torch.int64)
    gen = torch.Generator().manual_seed(seed)
    hi = min(info.max, 2**63 - 2)
    rx = torch.randint(info.min, hi, (n,), generator=gen, dtype=torch.int64)
    ry = torch.randint(info.min, hi, (n,), generator=gen, dtype=torch.int64)
    small = torch.randint(-9, 10, (n,), generator=gen, dtype=torch.int64)
    if info.min == 0:
        small = small.abs()
    x = torch.cat([ex, rx, rx])
    y = torch.cat([ey, ry, small])  # small divisors: quotients far from 0 and +-1
    return _to_int(x, dtype), _to_int(y, dtype)


def _to_int(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """int64 values (in range for ``dtype``) as ``dtype``; torch lacks some unsigned casts."""
    if dtype in (torch.uint32, torch.uint64):
        return values.to(torch.int64).view(torch.int64).to(dtype) \
            if dtype == torch.uint32 else values.view(dtype)
    return values.to(dtype)


def as_python_ints(t: torch.Tensor) -> list[int]:
    """Tensor elements as Python ints, unsigned 32/64-bit ones too."""
    if t.dtype == torch.uint32:
        return [v % (1 << 32) for v in t.view(torch.int32).tolist()]
    if t.dtype == torch.uint64:
        return [v % (1 << 64) for v in t.view(torch.int64).tolist()]
    return t.tolist()


def from_python_ints(values: list[int], dtype: torch.dtype) -> torch.Tensor:
    """Python ints in ``dtype``'s range as a ``dtype`` tensor."""
    if dtype == torch.uint32:
        return torch.tensor([v - (1 << 32) if v >= 1 << 31 else v for v in values],
                            dtype=torch.int32).view(torch.uint32)
    if dtype == torch.uint64:
        return torch.tensor([v - (1 << 64) if v >= 1 << 63 else v for v in values],
                            dtype=torch.int64).view(torch.uint64)
    return torch.tensor(values, dtype=dtype)


# ---- random numbers ------------------------------------------------------------------------
@st.composite
def philox_inputs(draw, dtype: torch.dtype) -> tuple[int, torch.Tensor]:
    """A seed (small, or using the key's high word) and offsets of ``dtype``: a run of
    consecutive ones (what a dropout kernel uses) from a drawn start, past 2^32 for int64
    (the counter's high word)."""
    seed = draw(st.sampled_from([0, 1, 42]) | st.integers(2, 2**62), label="seed")
    top = 2**31 - 4096 if dtype == torch.int32 else 2**40
    start = draw(st.sampled_from([0, top]) | st.integers(0, top), label="first offset")
    n = draw(st.sampled_from([64, 1000]), label="offsets")
    return seed, torch.arange(start, start + n, dtype=dtype)
