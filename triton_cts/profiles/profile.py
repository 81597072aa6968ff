"""The :class:`Profile` object the launchers and suites read hardware constants from, and
the loader of profile files (``vendor_profiles/*.toml``), validated against
:mod:`triton_cts.profiles.schema` on load.
"""
from __future__ import annotations

import functools
import tomllib
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import torch

from triton_cts import PROFILE_DIR
from triton_cts.profiles.schema import SCHEMA, ProfileError
from triton_cts.profiles.validation import validate


class EmptyProfileDirWarning(UserWarning):
    """A ``--profile-dir`` folder holds no ``*.toml`` file: likely the wrong folder."""

# --------------------------------------------------------------------------------------
# The Profile object the launchers and suites use.
# --------------------------------------------------------------------------------------
def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative ints, for launchers: ``triton.cdiv`` is a constexpr
    function whose host-side call costs a few microseconds, several times per launch.
    Written as Triton writes it, (a + b - 1) // b: a heuristic or grid may also be handed
    the interpreter's integer tensors, whose // truncates, and -(-a // b) then gives 0."""
    return (a + b - 1) // b


#: A kernel's own num_warps table -> the tables it falls back to, in order, before
#: ``num_warps_by_block`` (each with its ``_32bit`` counterpart on 32-bit data).
_WARPS_TABLE_FALLBACKS = {"rms_norm_num_warps_by_block": ("layer_norm_num_warps_by_block",)}


@dataclass(frozen=True)
class Profile:
    """One hardware target. Launchers take every hardware constant from here."""

    name: str
    vendor: str
    description: str
    source: str
    data: Mapping[str, Any] = field(repr=False, compare=False)

    def __repr__(self) -> str:
        return f"Profile({self.name})"

    def _repr_pretty_(self, printer, cycle) -> None:  # hypothesis' falsifying-example printer
        printer.text(repr(self))

    # ---- plain fields -----------------------------------------------------------------
    def __getitem__(self, dotted: str) -> Any:
        """``profile["limits.grid_max"]``: raw access to any field by its dotted path."""
        node: Any = self.data
        for part in dotted.split("."):
            node = node[part]
        return node

    @property
    def backend(self) -> str:
        return self.data["target"]["backend"]

    @property
    def arch(self) -> int | str:
        return self.data["target"]["arch"]

    @property
    def warp_size(self) -> int:
        return self.data["target"]["warp_size"]

    @property
    def rng_counter_bits(self) -> int:
        """Width of the Philox counters kernels give tl.rand (64 unless the backend lacks it)."""
        return self.data["target"].get("rng_counter_bits", 64)

    @property
    def multi_operand_reduce(self) -> bool:
        """Whether kernels may fuse several sums into one ``tl.reduce`` over a tuple."""
        return self.data["target"].get("multi_operand_reduce", True)

    @property
    def tf32_k_major(self) -> bool:
        """Whether tf32 dots read both operands K-major only (false unless the profile says)."""
        return self.data["dtypes"].get("tf32_k_major", False)

    @property
    def l2_eviction_hints(self) -> bool:
        """Whether the two-pass row kernels give their loads and stores L2 eviction hints
        (false unless the profile says)."""
        return self.data["io"].get("l2_eviction_hints", False)

    @property
    def attention_backward_single_launch(self) -> bool:
        """Whether attention's backward launches its dk/dv and dq tiles together where they
        all fit one program per compute unit (false unless the profile says)."""
        return self.data["launch"].get("attention_backward_single_launch", False)

    def weight_first(self, op: str, block: int, dtype: torch.dtype) -> bool:
        """Whether a program of ``op``'s fused forward (``"rms_norm"`` or
        ``"layer_norm"``) that holds one row of ``block`` elements of ``dtype`` loads the
        weight (and bias) with the row, before the statistics, rather than after them: up
        to ``launch.<op>_weight_first_max_block`` elements (the ``_32bit`` field on 32-bit
        data); never where the field is absent, nor on 64-bit data (timed on none)."""
        if dtype.itemsize > 4:
            return False
        name = f"{op}_weight_first_max_block" + ("_32bit" if dtype.itemsize == 4 else "")
        return block <= self.data["launch"].get(name, 0)

    @property
    def layer_norm_backward_prefetch(self) -> bool:
        """Whether the fused layer-norm backward loads a program's next row while it reduces
        the current one, where a program holds one row (false unless the profile says)."""
        return self.data["launch"].get("layer_norm_backward_prefetch", False)

    @property
    def compute_units(self) -> int:
        return self.data["limits"]["compute_units"]

    @property
    def max_grid_num(self) -> int:
        return self.data["launch"]["max_grid_num"]

    @property
    def max_num_warps(self) -> int:
        return self.data["limits"]["max_num_warps"]

    @property
    def grid_max(self) -> tuple[int, int, int]:
        return tuple(self.data["limits"]["grid_max"])

    @property
    def grid_max_product(self) -> int:
        return self.data["limits"]["grid_max_product"]

    @property
    def select_loads(self) -> bool:
        """True where masked-off lanes must still read valid addresses (SIMD-style NPUs)."""
        return self.data["io"]["load"] == "select"

    @property
    def slice_broadcast(self) -> bool:
        """True where per-row constants are loaded once as a vector, then broadcast."""
        return self.data["io"]["row_constants"] == "slice_broadcast"

    # ---- helpers for launchers --------------------------------------------------------
    def vector_elements(self, dtype: torch.dtype) -> int:
        """Elements of ``dtype`` in the widest load one thread issues (``io.vector_load_bytes``)."""
        return max(1, self.data["io"]["vector_load_bytes"] // dtype.itemsize)

    def max_fused_elements(self, dtype: torch.dtype) -> int:
        """Most elements of ``dtype`` one program may hold (MAX_FUSED_SIZE is in bytes)."""
        return max(1, self.data["launch"]["max_fused_size_bytes"] // dtype.itemsize)

    def _narrow_data_tile(self, field: str, dtype: torch.dtype, tile: int) -> int:
        """``tile`` elements of ``dtype``, shortened to ``launch.<field>`` bytes on data
        narrower than 32 bits where the profile has the field (never lengthened)."""
        limit = self.data["launch"].get(field)
        if limit is None or dtype.itemsize >= 4:
            return tile
        return max(1, min(tile, limit // dtype.itemsize))

    def softmax_row_tile(self, dtype: torch.dtype) -> int:
        """Elements of ``dtype`` one program of the softmax forward holds: rows up to it are
        fused, longer rows go online in tiles of it. ``launch.softmax_row_tile_bytes`` on
        data narrower than 32 bits (never past MAX_FUSED_SIZE), else MAX_FUSED_SIZE."""
        return self._narrow_data_tile("softmax_row_tile_bytes", dtype,
                                      self.max_fused_elements(dtype))

    def layer_norm_normalize_tile(self, dtype: torch.dtype, tile: int) -> int:
        """Elements of ``dtype`` a step of the layer-norm tiled forward's normalizing walk
        takes, where its summing walk takes ``tile``: ``launch.layer_norm_normalize_tile_bytes``
        on data narrower than 32 bits (never past ``tile``), else ``tile``."""
        return self._narrow_data_tile("layer_norm_normalize_tile_bytes", dtype, tile)

    def layer_norm_backward_last_sum(self, programs: int, n_cols: int, acc: torch.dtype) -> bool:
        """Whether the partial-sum layer-norm backward's last program adds its ``programs``
        rows of ``n_cols`` partials in ``acc`` itself (no second launch):
        ``launch.layer_norm_backward_last_sum_bytes`` covers them and the target has an
        int32 atomic_add to count the programs that are done."""
        limit = self.data["launch"].get("layer_norm_backward_last_sum_bytes")
        return (limit is not None and programs * n_cols * acc.itemsize <= limit
                and self.supports_atomic("add", torch.int32))

    def cross_entropy_one_launch(self, n_rows: int, n_cols: int) -> bool:
        """Whether a cross-entropy of ``n_rows`` rows of ``n_cols`` logits reduced to a sum
        or mean is one launch: every program counts the labels not ignored itself (in one
        step of ``elementwise_block(float32)`` labels, so no more rows than that) and the
        program that finishes last sums the losses. Up to
        ``launch.cross_entropy_one_launch_elements`` logits, and where the target has an
        int32 atomic_add to count the programs that are done; else a count, the loss
        kernel and a sum (three launches for a mean, two for a sum)."""
        limit = self.data["launch"].get("cross_entropy_one_launch_elements")
        return (limit is not None and n_rows * n_cols <= limit
                and n_rows <= self.elementwise_block(torch.float32)
                and self.supports_atomic("add", torch.int32))

    def elementwise_block(self, dtype: torch.dtype, n: int | None = None) -> int:
        """Elements per program for an elementwise kernel over ``n`` elements."""
        block = max(1, self.data["launch"]["elementwise_block_bytes"] // dtype.itemsize)
        return block if n is None else min(block, next_power_of_2(max(n, 1)))

    def row_stack_elements(self, dtype: torch.dtype) -> int:
        """Elements of ``dtype`` that row-wise kernels stack into one program when rows are
        short (whole rows, never past MAX_FUSED_SIZE); a longer row gets a program alone."""
        stack = min(self.data["launch"]["row_stack_bytes"],
                    self.data["launch"]["max_fused_size_bytes"])
        return max(1, stack // dtype.itemsize)

    @property
    def partials_per_compute_unit(self) -> int:
        return self.data["launch"]["partials_per_compute_unit"]

    def partials_for(self, dtype: torch.dtype, stacked: bool = True) -> int:
        """Programs per compute unit of a partial-sum backward on ``dtype`` data: 16-bit
        rows short enough that a program stacks several (``stacked``) take
        ``partials_per_compute_unit_16bit`` where the profile has one."""
        launch = self.data["launch"]
        if stacked and dtype.itemsize == 2 and "partials_per_compute_unit_16bit" in launch:
            return launch["partials_per_compute_unit_16bit"]
        return launch["partials_per_compute_unit"]

    def online_grid(self, n_rows: int, dtype: torch.dtype) -> int:
        """Programs of a long-row kernel that walks each of ``n_rows`` rows more than once
        (the online softmax forward, the layer-norm tiled forward): one per row (capped at
        MAX_GRID_NUM), or on 32-bit data at most ``online_programs_per_compute_unit_32bit``
        per compute unit where the profile has it. Fewer programs keep fewer rows in
        flight, so a row's second walk finds it in the cache."""
        per_unit = self.data["launch"].get("online_programs_per_compute_unit_32bit")
        return self._grid_per_unit(n_rows, per_unit if dtype.itemsize == 4 else None)

    def reduction_grid(self, blocks: int, dtype: torch.dtype) -> int:
        """Programs of a whole-tensor reduction's first stage over ``blocks`` blocks of
        ``dtype`` data: one per block (capped at MAX_GRID_NUM), or at most
        ``reduction_programs_per_compute_unit`` (``_32bit`` for 32-bit and wider data) per
        compute unit where the profile has it, each walking several blocks. Every program
        writes a partial that one program of the second stage folds, so fewer partials
        shorten that stage."""
        launch = self.data["launch"]
        per_unit = launch.get("reduction_programs_per_compute_unit")
        if dtype.itemsize >= 4:
            per_unit = launch.get("reduction_programs_per_compute_unit_32bit", per_unit)
        return self._grid_per_unit(blocks, per_unit)

    def row_reduction_tile(self, n_rows: int, n_cols: int, dtype: torch.dtype) -> tuple[int, int]:
        """(rows, columns) of the tile a row-reduction program reads a step: an
        elementwise block of ``dtype`` elements, walking each row in steps of
        ``row_reduction_step_bytes`` (``_32bit`` on 32-bit and wider data;
        ``elementwise_block_bytes`` where absent) or the whole row where shorter; the rest
        of the block stacks rows, but only while at least
        ``row_reduction_programs_per_compute_unit`` (1) programs per compute unit remain,
        and rows left unstacked lengthen the step instead."""
        launch = self.data["launch"]
        block = self.elementwise_block(dtype)
        step = launch.get("row_reduction_step_bytes", launch["elementwise_block_bytes"])
        if dtype.itemsize >= 4:
            step = launch.get("row_reduction_step_bytes_32bit", step)
        step = max(1, step // dtype.itemsize)
        block_n = min(next_power_of_2(max(n_cols, 1)), step, block)
        per_unit = launch.get("row_reduction_programs_per_compute_unit", 1)
        block_m = max(1, block // block_n)
        while block_m > 1 and cdiv(n_rows, block_m) < per_unit * self.compute_units:
            block_m //= 2
        return block_m, min(next_power_of_2(max(n_cols, 1)), max(block_n, block // block_m))

    def _grid_per_unit(self, work: int, per_unit: int | None) -> int:
        """Programs for ``work`` units: one each (capped at MAX_GRID_NUM), or at most
        ``per_unit`` per compute unit where not None."""
        grid = self.capped_grid(work)
        return grid if per_unit is None else min(grid, per_unit * self.compute_units)

    def num_warps_for(self, block: int, dtype: torch.dtype | None = None,
                      table: str = "num_warps_by_block") -> int:
        """num_warps for a program of ``block`` elements, by the profile's threshold table.
        ``dtype`` is the dtype of the data the program holds (its input): 32-bit and wider
        data take ``<table>_32bit``, else ``num_warps_by_block_32bit``, where the profile
        has one, and elements are counted in 32-bit registers (a float64 element counts
        twice, as it takes two). Narrower data take ``table``, a kernel's own table where
        the profile has one (``layer_norm_num_warps_by_block``), else
        ``num_warps_by_block``."""
        return self._warps_entry(block, dtype, table)[0]

    def launch_options_for(self, block: int, dtype: torch.dtype | None = None,
                           table: str = "num_warps_by_block") -> dict[str, int]:
        """The launch options of a program of ``block`` elements: ``num_warps`` as
        :meth:`num_warps_for` and, where the table's entry names a third number (programs
        kept resident per compute unit), ``maxnreg``: the registers a thread may use so
        that that many programs fit in ``limits.registers_per_sm``, a warp's registers
        counted in ``compile.register_allocation_unit`` as the occupancy model counts them.
        A second resident program overlaps one program's loads with the other's reductions
        where a single program would fill the compute unit alone.
        64-bit data are never capped: their arithmetic takes register pairs, and capped
        float64 layer norm ran slower (benchmarks/results/h100.jsonl, experiment "comments")."""
        warps, programs = self._warps_entry(block, dtype, table)
        options = {"num_warps": warps}
        if programs and (dtype is None or dtype.itemsize <= 4):
            options.update(self.register_cap(programs, warps))
        return options

    def register_cap(self, programs: int, warps: int) -> dict[str, int]:
        """``{"maxnreg": n}``: the registers a thread may use so that ``programs`` programs
        of ``warps`` warps fit in ``limits.registers_per_sm``, a warp's registers counted
        in ``compile.register_allocation_unit`` as the occupancy model counts them."""
        unit = self.data["compile"].get("register_allocation_unit", 1)
        per_warp = self.data["limits"]["registers_per_sm"] // (programs * warps)
        cap = per_warp // unit * unit // self.warp_size
        return {"maxnreg": min(self.registers_per_thread or cap, cap)}

    def _warps_entry(self, block: int, dtype: torch.dtype | None,
                     table: str) -> tuple[int, int]:
        """(num_warps, resident programs per compute unit or 0) of the table's entry."""
        launch = self.data["launch"]
        # a kernel's table falls back to the one it refines (rms_norm_ to layer_norm_)
        tables = (table, *_WARPS_TABLE_FALLBACKS.get(table, ()))
        names = (*tables, "num_warps_by_block")
        if dtype is not None:
            if dtype.itemsize >= 4:
                names = (*(f"{t}_32bit" for t in tables), "num_warps_by_block_32bit",
                         "num_warps_by_block")
            block *= max(1, dtype.itemsize // 4)
        rows = next(launch[name] for name in names if name in launch)
        warps, programs = launch["default_num_warps"], 0
        for threshold, w, *resident in rows:
            if block >= threshold:
                warps, programs = w, (resident[0] if resident else 0)
        if warps > self.max_num_warps:
            return self.max_num_warps, 0
        return warps, programs

    @property
    def tile_row_min_bytes(self) -> int:
        """Bytes the innermost row of an on-chip tile occupies at least: a tile whose
        innermost axis is narrower is padded to it (0: no padding, as in registers)."""
        return self.data["launch"].get("tile_row_min_bytes", 0)

    @property
    def registers_per_thread(self) -> int:
        """The most 32-bit registers one thread may address (0: not modelled)."""
        return self.data["limits"].get("registers_per_thread", 0)

    @property
    def column_sum_tile(self) -> tuple[int, int, int] | None:
        """(rows, columns, num_warps) of a program that sums a column block over all rows
        (the layer-norm dweight/dbias kernel), where the profile measured one; None where
        the launcher sizes the tile itself."""
        tile = self.data["launch"].get("column_sum_tile")
        return None if tile is None else tuple(tile)

    def layer_norm_backward_column_tile(
            self, dtype: torch.dtype) -> tuple[int, int, int, int] | None:
        """(rows, columns, num_warps, programs per compute unit) of the layer-norm column
        backward's program (dx and dweight/dbias partials of a column block of a split of
        the rows) on ``dtype`` data, where the profile measured one
        (``launch.layer_norm_backward_column_tile``, ``_32bit`` for 32-bit and wider data);
        None where the launcher derives it."""
        return self._tile_for("layer_norm_backward_column_tile", dtype)

    def layer_norm_backward_row_group_tile(
            self, dtype: torch.dtype) -> tuple[int, int, int, int] | None:
        """(rows a meeting, columns a program, num_warps, programs kept resident per compute
        unit[, row blocks in flight]) of the layer-norm row-group backward (a row split
        over a group of resident programs that exchange their partial sums) on ``dtype``
        data (``launch.layer_norm_backward_row_group_tile``, ``_32bit`` for 32-bit and
        wider data); None where the profile has none: the strategy is then not taken."""
        return self._tile_for("layer_norm_backward_row_group_tile", dtype)

    def layer_norm_forward_row_group_tile(
            self, dtype: torch.dtype) -> tuple[int, int, int, int] | None:
        """(rows a meeting, columns a program, num_warps, programs kept resident per compute
        unit) of the layer-norm row-group forward on ``dtype`` data
        (``launch.layer_norm_forward_row_group_tile``, ``_32bit`` for 32-bit and wider
        data); None where the profile has none: the strategy is then not taken."""
        return self._tile_for("layer_norm_forward_row_group_tile", dtype)

    def _tile_for(self, field: str, dtype: torch.dtype) -> tuple | None:
        """``launch.<field>`` (``<field>_32bit`` for 32-bit and wider data, where present)."""
        launch = self.data["launch"]
        tile = launch.get(field)
        if dtype.itemsize >= 4:
            tile = launch.get(f"{field}_32bit", tile)
        return None if tile is None else tuple(tile)

    def capped_grid(self, programs: int) -> int:
        """Programs to launch for ``programs`` units of work: launchers loop inside above it."""
        return max(1, min(programs, self.max_grid_num))

    def supports_dtype(self, dtype: torch.dtype) -> bool:
        return dtype in self._supported_dtypes

    @functools.cached_property
    def _supported_dtypes(self) -> frozenset:
        # launchers ask on every call: a set lookup keeps the check off the launch path
        return frozenset(getattr(torch, name) for name in self.data["dtypes"]["supported"]
                         if isinstance(getattr(torch, name, None), torch.dtype))

    def supports_atomic(self, op: str, dtype: torch.dtype) -> bool:
        return str(dtype).removeprefix("torch.") in self.data["atomics"][op]

    def supported_dtypes(self, candidates: Iterable[torch.dtype]) -> list[torch.dtype]:
        return [d for d in candidates if self.supports_dtype(d)]

    def tolerance_override(self, op: str, dtype: torch.dtype) -> tuple[float, float] | None:
        tol = self.data.get("tolerances", {}).get(op, {}).get(str(dtype).removeprefix("torch."))
        return None if tol is None else (float(tol["rtol"]), float(tol["atol"]))

    def tolerance_overrides(self) -> list[dict]:
        """Every ``[tolerances]`` override, for reports: a loosened bound must be visible."""
        return [{"op": op, "dtype": dt, "rtol": float(tol["rtol"]), "atol": float(tol["atol"])}
                for op, per_dtype in self.data.get("tolerances", {}).items()
                for dt, tol in per_dtype.items()]

    @property
    def matmul_added_c_tiles(self) -> int:
        """Float32 C tiles the epilogue of a matmul added into its output holds on chip at
        once, besides the pipelined A and B tiles (``launch.matmul_added_c_tiles``; 1 where
        absent: the tile crossing shared memory to the accumulator's layout)."""
        return self.data["launch"].get("matmul_added_c_tiles", 1)

    @property
    def matmul_pointer_max_work(self) -> int:
        """M*N*K up to which matmul runs its pointer kernel on a target that also has its
        tensor-descriptor kernel (``launch.matmul_pointer_max_work``; 0 where absent: every
        size the descriptors take runs that kernel)."""
        return self.data["launch"].get("matmul_pointer_max_work", 0)

    def has_autotune_configs(self, op: str) -> bool:
        """Whether ``[autotune]`` lists configs for ``op`` (without copying them)."""
        return self.data.get("autotune", {}).get(op) is not None

    def autotune_configs(self, op: str) -> list[dict[str, int]] | None:
        configs = self.data.get("autotune", {}).get(op)
        return None if configs is None else [dict(c) for c in configs]

    def peak_bandwidth_gbs(self) -> float:
        return float(self.data["peak"]["memory_bandwidth_gbs"])

    def gpu_target(self):
        """Triton's GPUTarget for cross-compiling (CUDA and HIP only)."""
        from triton.backends.compiler import GPUTarget
        if self.backend == "npu":
            raise NotImplementedError("upstream Triton has no Ascend target")
        return GPUTarget(self.backend, self.arch, self.warp_size)

    def derive(self, name: str | None = None, **changes: Any) -> "Profile":
        """A copy with some fields changed, validated like a file: ``derive(**{"launch.max_grid_num": 2})``;
        None removes an optional field (TOML has no null)."""
        data = _deepcopy(self.data)
        for dotted, value in changes.items():
            node, schema = data, SCHEMA
            *parents, last = dotted.replace("__", ".").split(".")
            for part in parents:
                node, schema = node.setdefault(part, {}), schema.get(part, {})
            if last not in node and not (isinstance(schema, dict) and last in schema):
                raise ProfileError(f"derived from {self.name}", dotted, "unknown field")
            if value is None:
                node.pop(last, None)
            else:
                node[last] = value  # an optional field the profile lacks may be added
        data["name"] = name or f"{self.name}~derived"
        return profile_from_dict(data, source=f"derived from {self.name}")



def _deepcopy(obj):
    if isinstance(obj, Mapping):
        return {k: _deepcopy(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_deepcopy(v) for v in obj]
    return obj


def profile_from_dict(data: dict, source: str = "<dict>") -> Profile:
    validate(data, source)
    return Profile(name=data["name"], vendor=data["vendor"], description=data["description"],
                   source=source, data=_deepcopy(data))


def load_profile(path: str | Path) -> Profile:
    path = Path(path)
    source = str(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ProfileError(source, "", f"cannot read file: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ProfileError(source, "", f"not UTF-8 text: {exc}") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(source, "", f"not valid TOML: {exc}") from exc
    profile = profile_from_dict(data, source)
    if profile.name != path.stem:
        raise ProfileError(source, "name",
                           f"expected the file's stem '{path.stem}', got '{profile.name}'")
    return profile


def load_profiles(extra_dirs: Iterable[str | Path] = ()) -> dict[str, Profile]:
    """Every bundled profile plus those in ``extra_dirs``; a later dir may not shadow a name."""
    profiles: dict[str, Profile] = {}
    for directory in (PROFILE_DIR, *map(Path, extra_dirs)):
        if directory.exists() and not directory.is_dir():
            raise ProfileError(str(directory), "", "is a file, not a folder: a profile "
                                                   "directory holds one *.toml file per profile")
        if not directory.is_dir():
            raise ProfileError(str(directory), "", "profile directory does not exist")
        paths = sorted(directory.glob("*.toml"))
        if not paths:
            warnings.warn(EmptyProfileDirWarning(
                f"profile directory {directory} holds no *.toml file; no profile was added "
                f"from it"), stacklevel=2)
        for path in paths:
            profile = load_profile(path)
            if profile.name in profiles:
                raise ProfileError(str(path), "name", f"profile '{profile.name}' is already "
                                                      f"defined in {profiles[profile.name].source}")
            profiles[profile.name] = profile
    return profiles


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)
