"""Hypothesis strategies: shapes, dtypes and input values for any registered op.

Sizes are bounded per execution mode (``triton_cts.execution.size_budget``: small in the
interpreter, which costs about half a millisecond per program; a million elements on a
device; ``TRITON_CTS_MAX_NUMEL`` overrides both).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
from hypothesis import strategies as st

from triton_cts.execution.size_budget import max_numel
from triton_cts.profiles import Profile
from triton_cts.ops.spec import OpSpec

MAX_NUMEL = max_numel("interpreter")
#: Derived profiles have tiny blocks, so the same tensor takes many more loop steps.
FUZZ_NUMEL = max(1, MAX_NUMEL // 4)

#: Sizes that break kernels: 1, primes, powers of two and their neighbours.
INTERESTING_DIMS = (1, 2, 3, 5, 7, 13, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257,
                    509, 1000, 1023, 1024, 1025, 4093)

#: Value distributions, each a function (shape, dtype, generator) -> tensor.
VALUE_KINDS = ("normal", "large_offset", "wide_range", "tiny", "with_specials", "ties",
               "neg_inf_rows")


#: The dim hypothesis' simplest example draws (its first, in every profile): long enough
#: for a ragged tail and for gaps between elements to matter (see LAYOUTS).
FIRST_DIM = 33


def dims(max_size: int = MAX_NUMEL, extra: tuple[int, ...] = ()) -> st.SearchStrategy[int]:
    interesting = sorted({d for d in INTERESTING_DIMS + extra if 1 <= d <= max_size},
                         key=lambda d: (d != FIRST_DIM, d))
    return st.one_of(st.sampled_from(interesting), st.integers(1, min(max_size, 300)))


def profile_dims(profile: Profile | None, dtype: torch.dtype | None) -> tuple[int, ...]:
    """Row lengths at and around the profile's block sizes for ``dtype``: one element
    either side of MAX_FUSED_SIZE (fused kernel vs tiled fallback) and of half of it (the
    layer-norm backward's fused limit, the tiled kernels' tile), and of the elementwise
    block (the masked tail), counted in ``dtype`` and in float32, the dtype kernels
    compute 16-bit inputs in (and may size their tiles by)."""
    if profile is None or dtype is None:
        return ()
    return tuple(dict.fromkeys(n for _, n in named_boundaries(profile, dtype)))


def named_boundaries(profile: Profile, dtype: torch.dtype) -> list[tuple[str, int]]:
    """profile_dims' row lengths with their names, in its order: ``fused-1``, ``fused``,
    ``fused+1`` (MAX_FUSED_SIZE), ``fused/2-1`` ..., ``block-1`` ... (the elementwise
    block), then the same counted in float32 for a 16-bit dtype, named with `` (f32)``."""
    out = []
    for counted_in in dict.fromkeys((dtype, torch.float32 if dtype.itemsize < 4 else dtype)):
        suffix = "" if counted_in == dtype else " (f32)"
        fused = profile.max_fused_elements(counted_in)
        for name, size in (("fused", fused), ("fused/2", fused // 2),
                           ("block", profile.elementwise_block(counted_in))):
            out += [(f"{name}{step}{suffix}", size + d)
                    for step, d in (("-1", -1), ("", 0), ("+1", 1))]
    return out


def is_prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, int(n ** 0.5) + 1))


def boundary_labels(n: int, profile: Profile, dtype: torch.dtype) -> tuple[str, ...]:
    """The special row lengths ``n`` is: ``1``, ``prime``, and its names among the
    profile's boundaries (named_boundaries)."""
    labels = ["1"] if n == 1 else ["prime"] if is_prime(n) else []
    return tuple(labels + [name for name, size in named_boundaries(profile, dtype) if size == n])


def reachable_boundaries(profile: Profile, dtype: torch.dtype, max_numel: int) -> tuple[str, ...]:
    """The boundaries (boundary_labels' names) a shape of at most ``max_numel`` elements
    can have as its row length: what the shapes strategy offers."""
    return ("1", "prime") + tuple(name for name, size in named_boundaries(profile, dtype)
                                  if size <= max_numel)


@st.composite
def shapes(draw, op: OpSpec, max_numel: int = MAX_NUMEL, profile: Profile | None = None,
           dtype: torch.dtype | None = None) -> tuple[int, ...]:
    """A shape the op accepts, with at most ``max_numel`` elements; the last dim is the
    one kernels block over, so it is drawn first, gets most of the budget, and may sit
    at the profile's block sizes (see profile_dims)."""
    ndim = draw(st.integers(op.min_ndim, min(op.max_ndim, 4)))
    if ndim == 0:
        return ()
    budget = max_numel
    last = draw(dims(budget, profile_dims(profile, dtype)))
    out = [last]
    budget //= last
    for _ in range(ndim - 1):
        d = draw(dims(max(1, budget)))
        out.insert(0, d)
        budget = max(1, budget // d)
    return tuple(out)


def effective_kind(kind: str, dtype: torch.dtype) -> str:
    """The value kind make_values gives for ``kind`` in ``dtype``: integers have no
    subnormals, inf or NaN, so those kinds are normal values there."""
    if not dtype.is_floating_point and kind in ("tiny", "with_specials", "neg_inf_rows"):
        return "normal"
    return kind


def make_values(shape, dtype: torch.dtype, kind: str, seed: int,
                device: str = "cpu") -> torch.Tensor:
    """Input values of one named distribution, made in float64 on ``device`` then rounded
    to ``dtype``, and left there. ``device``: the accelerator for the millions of elements
    of device mode's boundary cases (one CPU thread per worker took seconds per 64M
    elements, for each copy and pass a check makes). The values depend on the seed and
    where they are drawn."""
    gen = torch.Generator(device).manual_seed(seed)
    f64 = {"dtype": torch.float64, "device": device}
    kind = effective_kind(kind, dtype)
    x = torch.randn(shape, generator=gen, **f64)
    if kind == "large_offset":    # mean >> spread: catastrophic cancellation in E[x^2]-E[x]^2
        x = 1e3 * (1 + 9 * torch.rand((), generator=gen, **f64)) + x * 1e-1
    elif kind == "wide_range":    # magnitudes from 1e-4 to 1e4
        x = x * torch.pow(10.0, torch.empty(shape, **f64).uniform_(-4, 4, generator=gen))
    elif kind == "tiny":          # near the dtype's smallest normal, subnormals included
        x = x * torch.finfo(dtype).tiny * 4
    elif kind == "with_specials": # a few inf, -inf and NaN among normal values
        flat = x.reshape(-1)
        if flat.numel():
            idx = torch.randint(0, flat.numel(), (3,), generator=gen, device=device)
            flat[idx[0]], flat[idx[1]], flat[idx[2]] = float("inf"), float("-inf"), float("nan")
    elif kind == "ties":          # a handful of distinct values: exact ties for max/argmax
        x = torch.round(x.clamp(-2.5, 2.5))
    elif kind == "neg_inf_rows":  # normal values, with whole rows of -inf (softmax: NaN rows)
        if x.dim() and x.numel():
            rows = x.reshape(-1, x.shape[-1])
            rows[torch.randint(0, rows.shape[0], (max(1, rows.shape[0] // 4),), generator=gen,
                               device=device)] = float("-inf")
        elif x.numel():
            x.fill_(float("-inf"))
    elif kind != "normal":
        raise ValueError(f"unknown value kind '{kind}'; known: {VALUE_KINDS}")
    if not dtype.is_floating_point:
        info = torch.iinfo(dtype)
        return (x * 100).round().clamp(info.min, info.max).to(dtype)
    finfo = torch.finfo(dtype)
    keeps_inf = kind in ("with_specials", "neg_inf_rows")
    return x.to(dtype) if keeps_inf else x.clamp(-finfo.max, finfo.max).to(dtype)


#: Memory layouts of the drawn input: the same values, laid out differently.
#: Listed non-contiguous first: hypothesis' simplest example, which it runs first, is then a
#: strided input of FIRST_DIM elements, so even a 3-example run sees a kernel that ignores
#: strides read the gaps.
LAYOUTS = ("strided", "transposed", "contiguous")


def with_layout(x: torch.Tensor, layout: str) -> torch.Tensor:
    """``x``'s values in a non-contiguous view: every other element of a wider buffer
    (``strided``) or the transpose of a transposed copy (``transposed``)."""
    if layout == "contiguous" or x.dim() == 0:
        return x
    if layout == "strided":
        wide = torch.empty((*x.shape[:-1], 2 * x.shape[-1]), dtype=x.dtype, device=x.device)
        wide[..., ::2] = x
        wide[..., 1::2] = 7  # a value the op must never see
        return wide[..., ::2]
    if layout == "transposed":
        if x.dim() < 2:
            return with_layout(x, "strided")
        return x.transpose(-1, -2).contiguous().transpose(-1, -2)
    raise ValueError(f"unknown layout '{layout}'; known: {LAYOUTS}")


class Case(NamedTuple):
    """One drawn input: enough to rebuild it exactly."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    kind: str
    seed: int
    layout: str
    args: tuple
    kwargs: dict

    def describe(self) -> str:
        return (f"{str(self.dtype).removeprefix('torch.')}, shape {self.shape}, values "
                f"'{self.kind}', layout '{self.layout}', seed {self.seed}")


@st.composite
def cases(draw, op: OpSpec, profile: Profile, dtype: torch.dtype,
          max_numel: int = MAX_NUMEL, kinds: tuple[str, ...] = VALUE_KINDS) -> Case:
    return draw(cases_at(op, dtype, draw(shapes(op, max_numel, profile, dtype)), kinds))


@st.composite
def cases_at(draw, op: OpSpec, dtype: torch.dtype, shape: tuple[int, ...],
             kinds: tuple[str, ...] = VALUE_KINDS, device: str = "cpu") -> Case:
    """A case of a given shape (a profile boundary, say): values, seed and layout drawn;
    the values drawn on ``device`` (see make_values)."""
    kind = draw(st.sampled_from(kinds))
    seed = draw(st.integers(0, 2**31 - 1))
    layout = draw(st.sampled_from(LAYOUTS))
    return build_case(op, dtype, shape, kind, seed, layout, device)


def build_case(op: OpSpec, dtype: torch.dtype, shape: tuple[int, ...], kind: str, seed: int,
               layout: str, device: str = "cpu") -> Case:
    """The case of these values (make_values, drawn on ``device``), laid out so
    (with_layout), built into the op's arguments from ``seed + 1``; every tensor of the
    case on ``device`` (make_args may make small ones on the CPU)."""
    x = with_layout(make_values(shape, dtype, kind, seed, device), layout)
    args, kwargs = op.make_args(x, torch.Generator().manual_seed(seed + 1))
    return Case(shape, dtype, kind, seed, layout, beside(args, x.device),
                {k: beside(v, x.device) for k, v in kwargs.items()})


def beside(value, device):
    """``value`` with its tensors on ``device``, strides kept (a tuple or list: each item)."""
    from triton_cts.execution.modes import copy_with_layout
    if isinstance(value, torch.Tensor):
        return value if value.device == device else copy_with_layout(value, device)
    if isinstance(value, (tuple, list)):
        return type(value)(beside(v, device) for v in value)
    return value


def effective_layout(shape: tuple[int, ...], layout: str) -> str:
    """The layout an input of ``shape`` laid out as ``layout`` (with_layout) really has: a
    0-d or 1-element input is contiguous whatever was asked, a 1-D ``transposed`` one is
    strided, and a view whose gaps fall only along dims of size 1 is contiguous."""
    if layout == "contiguous" or math.prod(shape) <= 1:
        return "contiguous"
    if layout == "transposed" and len(shape) >= 2:
        return "contiguous" if 1 in shape[-2:] else layout
    # strided (asked, or a 1-D transposed): gaps after every element of the last dim
    return "contiguous" if shape[-1] == 1 and math.prod(shape[:-1]) == 1 else "strided"


@st.composite
def derived_profiles(draw, profile: Profile) -> Profile:
    """A profile with the real one's target and capabilities but tiny hardware constants,
    so fallback (row beyond MAX_FUSED_SIZE), multi-row and grid-stride paths run on small
    tensors: MAX_FUSED_SIZE from 64 bytes, one or several short rows per program,
    MAX_GRID_NUM from 1, few cores, either IO strategy, load widths of 4 to 32 bytes,
    few partial sums (and reduction programs) per core, small dweight/dbias tiles, one
    small matmul tile with small groups, and peaks that give the fused linear
    cross-entropy chunks of a few rows."""
    fused = draw(st.sampled_from([64, 128, 256, 512, 1024]))
    # a target with the tensor-descriptor matmul keeps it, with a small tile too; one with
    # its own 16-bit partial count keeps that, drawn small like the other
    optional = {name: [draw(small_matmul_configs(profile))] if name == MATMUL_TMA
                else draw(st.integers(1, 3)) for name in _targets_own_fields(profile)}
    derived = profile.derive(
        name=f"{profile.name}~fuzzed",
        **optional,
        **{
            "launch.max_fused_size_bytes": fused,
            "launch.elementwise_block_bytes": draw(st.sampled_from([64, 256, 1024])),
            "launch.row_stack_bytes": draw(st.sampled_from([16, 256, 1024])),
            "launch.max_grid_num": draw(st.integers(1, 8)),
            "limits.compute_units": draw(st.integers(1, 8)),
            "io.load": draw(st.sampled_from(["masked", "select"])),
            "io.row_constants": draw(st.sampled_from(["pointer", "slice_broadcast"])),
            # elementwise tails of 1 to 7 elements and row alignments up to 32 bytes
            "io.vector_load_bytes": draw(st.sampled_from([4, 16, 32])),
            # every other launch constant a kernel takes from the profile, small enough
            # that small inputs span several tiles, groups and partial sums
            "launch.partials_per_compute_unit": draw(st.integers(1, 3)),
            "tuning.layer_norm.column_sum_tile": [draw(st.sampled_from([1, 2, 4, 8])),
                                       draw(st.sampled_from([2, 4, 8, 16])),
                                       draw(_small_warps(profile))],
            "autotune.matmul": [draw(small_matmul_configs(profile))],
            # 16- or 32-row attention tiles: a few keys span several blocks (online softmax)
            "autotune.attention": [{"BLOCK_M": draw(st.sampled_from([16, 32])),
                                    "BLOCK_N": draw(st.sampled_from([16, 32])),
                                    "num_warps": draw(_small_warps(profile)), "num_stages": 1}],
            "autotune.attention_backward": [
                {k: draw(st.sampled_from([16, 32])) for k in ("BLOCK_M1", "BLOCK_N1",
                                                               "BLOCK_M2", "BLOCK_N2")}
                | {"num_warps": draw(_small_warps(profile)), "num_stages": 1}],
            # the fused linear cross-entropy's compute-bound floor on its chunk rows
            # (peak flops over bandwidth): none, or a few rows
            "peak.dense_tflops": draw(st.sampled_from([
                {}, {k: v / 256 for k, v in profile["peak.dense_tflops"].items()}])),
        })
    return _with_small_tiles(profile, derived)


#: The tensor-descriptor matmul's autotune field, which only some targets have.
MATMUL_TMA = "autotune.matmul_tma"


def _targets_own_fields(profile: Profile) -> list[str]:
    """Fields of ``profile`` a derived profile sets small that only some targets have: the
    tensor-descriptor matmul's configs, the layer norm's 16-bit partial count, the
    reductions' programs per compute unit."""
    names = [MATMUL_TMA] if profile.autotune_configs("matmul_tma") is not None else []
    if "partials_per_compute_unit_16bit" in profile.tuning_overrides("layer_norm"):
        names.append("tuning.layer_norm.partials_per_compute_unit_16bit")
    names += [f"tuning.reductions.{field}" for field in ("programs_per_compute_unit",
                                                         "programs_per_compute_unit_32bit")
              if field in profile.tuning_overrides("reductions")]
    return names


def _with_small_tiles(profile: Profile, derived: Profile) -> Profile:
    """``derived`` with the layer norm's column and row-group tiles made from its small
    column_sum_tile and partial count (where ``profile`` has them)."""
    # the layer-norm column backward: the dweight/dbias tile and partial count drawn above
    # (several column blocks and row splits, a ragged last split), with no draw of its
    # own, so that every other example stays what it was
    column_sum_tile = derived.tuning("layer_norm")["column_sum_tile"]
    column_tile = [*column_sum_tile, derived.partials_per_compute_unit]
    tiles = {f"tuning.layer_norm.backward_column_tile{suffix}": column_tile
             for suffix in ("", "_32bit")}
    if "backward_row_group_tile" in profile.tuning_overrides("layer_norm"):
        # the row-group backward likewise: slices of 2 to 16 columns, so that short rows
        # are split over groups of several programs (on few compute units: some rows
        # need more programs than are resident and take the column strategy), one or two
        # rows a meeting, the next rows loaded ahead where four or eight were drawn
        rows, cols, warps = column_sum_tile
        group_tile = [min(rows, 2), cols, warps, derived.partials_per_compute_unit,
                      2 if rows >= 4 else 1]
        tiles |= {f"tuning.layer_norm.backward_row_group_tile{suffix}": group_tile
                  for suffix in ("", "_32bit")}
    if "forward_row_group_tile_32bit" in profile.tuning_overrides("layer_norm"):
        # the row-group forward likewise (32-bit data, as the profile)
        rows, cols, warps = column_sum_tile
        tiles["tuning.layer_norm.forward_row_group_tile_32bit"] = [
            min(rows, 2), cols, warps, derived.partials_per_compute_unit]
    return derived.derive(name=derived.name, **tiles)


def _small_warps(profile: Profile) -> st.SearchStrategy[int]:
    return st.sampled_from([w for w in (1, 2, 4) if w <= profile.max_num_warps])


@st.composite
def small_matmul_configs(draw, profile: Profile) -> dict[str, int]:
    """A matmul tile of 16 or 32 a side, with groups of 1 to 3 tile rows (a ragged last
    group on most inputs), so a small product spans several tiles and groups."""
    return {"BLOCK_SIZE_M": draw(st.sampled_from([16, 32])),
            "BLOCK_SIZE_N": draw(st.sampled_from([16, 32])),
            "BLOCK_SIZE_K": draw(st.sampled_from([16, 32])),
            "GROUP_SIZE_M": draw(st.integers(1, 3)),
            "num_warps": draw(_small_warps(profile)),
            "num_stages": draw(st.sampled_from([1, 2]))}


# ---- covering cases: every value class, layout and boundary in every run --------------
#: Rows of each covering case: several programs for row kernels, more rows than the
#: covering profile's grid cap (so grid-stride loops loop), and finite rows beside the
#: -inf ones of neg_inf_rows.
COVERING_ROWS = 3
#: The covering cases' seeds: this plus the case's index, the same for every target, so a
#: launch identical under two targets is interpreted once (execution/launch_memo.py).
COVERING_SEED = 0x5EED
#: A prime row length for a profile whose boundaries hold none.
COVERING_PRIME = 13
_SMALL_MATMUL = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16,
                 "GROUP_SIZE_M": 2, "num_warps": 1, "num_stages": 1}
#: The covering profile's constants: derived_profiles' tiny ones, each at one fixed value.
#: MAX_FUSED_SIZE and the elementwise block of 128 bytes make the boundaries few (the two
#: coincide) and every covering row span a few tiles; a grid cap of 2 under COVERING_ROWS
#: rows makes grid-stride loops loop.
COVERING_CONSTANTS = {
    "launch.max_fused_size_bytes": 128,
    "launch.elementwise_block_bytes": 128,
    "launch.row_stack_bytes": 16,
    "launch.max_grid_num": 2,
    "limits.compute_units": 2,
    "launch.partials_per_compute_unit": 2,
    "tuning.layer_norm.column_sum_tile": [2, 4, 1],
    "autotune.matmul": [_SMALL_MATMUL],
    "autotune.attention": [{"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 1, "num_stages": 1}],
    "autotune.attention_backward": [{"BLOCK_M1": 16, "BLOCK_N1": 16, "BLOCK_M2": 16,
                                     "BLOCK_N2": 16, "num_warps": 1, "num_stages": 1}],
}


def covering_profile(profile: Profile) -> Profile:
    """The profile the covering cases run under: ``profile``'s target, capabilities and IO
    strategy with COVERING_CONSTANTS (the fields only some targets have set small too), so
    a few short rows reach the fused and tiled paths, several tiles, programs and partial
    sums, and grid-stride loops, in interpreter mode as on a device."""
    own = {name: [_SMALL_MATMUL] if name == MATMUL_TMA else 2
           for name in _targets_own_fields(profile)}
    derived = profile.derive(name=f"{profile.name}~covering", **own, **COVERING_CONSTANTS)
    return _with_small_tiles(profile, derived)


def covering_shape(op: OpSpec, rows: int, n: int) -> tuple[int, ...]:
    """``rows`` rows of ``n`` as ``op`` takes them: 2-D, or with leading dims of 1 for an
    op of more dims (the last two stay (rows, n), so a transposed view is one), or one row
    of ``n`` for an op of one dim."""
    if op.max_ndim < 2:
        return (n,)
    return (1,) * (max(2, op.min_ndim) - 2) + (rows, n)


def covering_lengths(profile: Profile, dtype: torch.dtype) -> list[int]:
    """The covering cases' row lengths: every boundary of ``profile`` (named_boundaries),
    longest first, with COVERING_PRIME where none is a prime, then 1."""
    lengths = sorted({n for _, n in named_boundaries(profile, dtype) if n > 1}, reverse=True)
    return lengths + ([] if any(map(is_prime, lengths)) else [COVERING_PRIME]) + [1]


def covering_cases(op: OpSpec, profile: Profile, dtype: torch.dtype,
                   kinds: tuple[str, ...] = VALUE_KINDS) -> list[Case]:
    """A fixed list of cases that meets every value class in ``kinds`` on a row longer than
    1, every layout and every row length of covering_lengths (the boundaries of
    ``profile``, a prime, 1) at least once, each in COVERING_ROWS rows: case i has the
    i-th class (normal values last), the i-th length longer than 1 and the i-th layout of
    LAYOUTS, each list taken cyclically, as many cases as the longer of the classes and
    the lengths; then a case of normal values on rows of 1."""
    *lengths, one = covering_lengths(profile, dtype)
    kinds = tuple(dict.fromkeys(effective_kind(k, dtype) for k in kinds))
    kinds = tuple(k for k in kinds if k != "normal") + tuple(k for k in kinds if k == "normal")
    specs = [(kinds[i % len(kinds)], lengths[i % len(lengths)])
             for i in range(max(len(kinds), len(lengths), len(LAYOUTS)))]
    specs.append(("normal" if "normal" in kinds else kinds[-1], one))
    return [build_case(op, dtype, covering_shape(op, COVERING_ROWS, n), kind,
                       COVERING_SEED + i, LAYOUTS[i % len(LAYOUTS)])
            for i, (kind, n) in enumerate(specs)]


# ---- atomics x autotune: inputs where a clobbered accumulator shows -----------------
#: A value kind beside VALUE_KINDS: every element negative, so a max accumulator reset
#: to 0 instead of -inf gives a wrong answer.
TUNING_KINDS = ("normal", "all_negative", "with_specials")


def negative_values(shape, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Values in (-inf, -0.5]: -(|N(0, 1)| + 0.5), rounded to ``dtype``."""
    gen = torch.Generator().manual_seed(seed)
    x = -(torch.randn(shape, generator=gen, dtype=torch.float64).abs() + 0.5)
    return (x * 100).round().to(dtype) if not dtype.is_floating_point else x.to(dtype)


@st.composite
def tuning_cases(draw, op: OpSpec, dtype: torch.dtype, max_numel: int = FUZZ_NUMEL,
                 kinds: tuple[str, ...] = TUNING_KINDS) -> Case:
    """A contiguous case whose values may all be negative (see TUNING_KINDS)."""
    shape = draw(shapes(op, max_numel))
    kind = draw(st.sampled_from(kinds))
    seed = draw(st.integers(0, 2**31 - 1))
    x = negative_values(shape, dtype, seed) if kind == "all_negative" \
        else make_values(shape, dtype, kind, seed)
    args, kwargs = op.make_args(x, torch.Generator().manual_seed(seed + 1))
    return Case(shape, dtype, kind, seed, "contiguous", args, kwargs)


# ---- grid limits: tiny limits, and shapes at and around them ------------------------
@st.composite
def grid_limited_profiles(draw, profile: Profile) -> Profile:
    """A profile with tiny grid limits (MAX_GRID_NUM 1 to 8, per-axis limits up to 8,
    a product limit) and tiny blocks, so a few dozen rows cross every limit."""
    cap = draw(st.integers(1, 8))
    axes = [draw(st.integers(cap, 8)), draw(st.integers(1, 8)), draw(st.integers(1, 8))]
    product = draw(st.integers(max(axes[0], axes[1], axes[2], cap), 64))
    return profile.derive(
        name=f"{profile.name}~grid",
        **{
            "limits.grid_max": axes,
            "limits.grid_max_product": product,
            "launch.max_grid_num": cap,
            "launch.max_fused_size_bytes": draw(st.sampled_from([64, 256])),
            "launch.elementwise_block_bytes": draw(st.sampled_from([64, 256])),
            "limits.compute_units": draw(st.integers(1, 8)),
        })


def grid_limits(profile: Profile) -> tuple[int, ...]:
    """The program counts a launcher must not cross: MAX_GRID_NUM and each axis limit."""
    return tuple(sorted({profile.max_grid_num, *profile.grid_max}))


def rows_around(limit: int) -> tuple[int, ...]:
    """limit - 1, limit, limit + 1 (at least 1)."""
    return tuple(sorted({max(1, limit - 1), limit, limit + 1}))


@st.composite
def grid_edge_shapes(draw, op: OpSpec, profile: Profile, dtype: torch.dtype,
                     max_rows: int | None = None) -> tuple[int, ...]:
    """A 2-D shape (rows, N) (or the op's own ndim) whose row count, or block count for
    elementwise launchers, sits at a grid limit of ``profile`` minus one, at it, one
    past it, or far beyond the grid cap; N is 1, a prime, one elementwise block, or one
    element past MAX_FUSED_SIZE (the fallback path)."""
    # listed hardest first: hypothesis' first (simplest) example is far beyond the cap
    # with rows past MAX_FUSED_SIZE
    limit = draw(st.sampled_from(grid_limits(profile)))
    far = 3 * profile.max_grid_num + 1
    rows = draw(st.sampled_from((far,) + rows_around(limit)))
    if max_rows is not None:
        rows = min(rows, max_rows)
    n = draw(st.sampled_from([profile.max_fused_elements(dtype) + 1, 1, 7,
                              profile.elementwise_block(dtype)]))
    if op.max_ndim < 2:
        return (rows * n,)
    if op.min_ndim > 2:
        return (rows, 1) + (1,) * (op.min_ndim - 3) + (n,)
    return (rows, n)


def empty_shapes(op: OpSpec) -> tuple[tuple[int, ...], ...]:
    """Shapes with no elements the op accepts: (0,), (0, 5), (5, 0)."""
    out = [s for s in ((0,), (0, 5), (5, 0), (0, 0), (2, 0, 5))
           if op.min_ndim <= len(s) <= op.max_ndim]
    return tuple(out)
