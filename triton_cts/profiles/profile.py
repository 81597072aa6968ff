"""The :class:`Profile` object the launchers and suites read hardware constants from, and
the loader of profile files (``vendor_profiles/*.toml``), validated against
:mod:`triton_cts.profiles.schema` on load.
"""
from __future__ import annotations

import copy
import functools
import tomllib
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping

import torch

from triton_cts import PROFILE_DIR
from triton_cts.profiles import tuning
from triton_cts.profiles.fields import Field
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
        """``profile["limits.grid_max"]``: any field by its dotted path; an optional field
        the profile lacks takes its declared default (:mod:`triton_cts.profiles.schema`)."""
        node: Any = self.data
        for part in dotted.split("."):
            if not isinstance(node, Mapping) or part not in node:
                spec = field_at(dotted)
                if spec is None or spec.required:
                    raise KeyError(dotted)
                return spec.default_for(self)
            node = node[part]
        return node

    def tuning(self, family: str) -> Mapping[str, Any]:
        """Kernel family ``family``'s tuning (:mod:`triton_cts.profiles.tuning`): every
        field it declares, the profile's ``[tuning.<family>]`` value or the declared
        default derived from this profile's facts. Computed once per profile."""
        cache = self._tuning_cache
        if family not in cache:
            declared = tuning.declaration(family)
            values = self.data.get("tuning", {}).get(family, {})
            cache[family] = MappingProxyType({
                name: values[name] if name in values else spec.default_for(self)
                for name, spec in declared.items()})
        return cache[family]

    def tuning_overrides(self, family: str) -> Mapping[str, Any]:
        """The fields of ``[tuning.<family>]`` the profile itself sets (no defaults)."""
        return MappingProxyType(self.data.get("tuning", {}).get(family, {}))

    @functools.cached_property
    def _tuning_cache(self) -> dict:
        return {}

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
        return self["target.rng_counter_bits"]

    @property
    def multi_operand_reduce(self) -> bool:
        """Whether kernels may fuse several sums into one ``tl.reduce`` over a tuple."""
        return self["target.multi_operand_reduce"]

    @property
    def tf32_k_major(self) -> bool:
        """Whether tf32 dots read both operands K-major only (false unless the profile says)."""
        return self["dtypes.tf32_k_major"]

    @property
    def l2_eviction_hints(self) -> bool:
        """Whether the two-pass row kernels give their loads and stores L2 eviction hints
        (false unless the profile says)."""
        return self["io.l2_eviction_hints"]

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

    def online_grid(self, n_rows: int, dtype: torch.dtype) -> int:
        """Programs of a long-row kernel that walks each of ``n_rows`` rows more than once
        (the online softmax forward, the layer-norm tiled forward): one per row (capped at
        MAX_GRID_NUM), or on 32-bit data at most ``online_programs_per_compute_unit_32bit``
        per compute unit where the profile has it. Fewer programs keep fewer rows in
        flight, so a row's second walk finds it in the cache."""
        per_unit = self.data["launch"].get("online_programs_per_compute_unit_32bit")
        return self.grid_per_unit(n_rows, per_unit if dtype.itemsize == 4 else None)

    def grid_per_unit(self, work: int, per_unit: int | None) -> int:
        """Programs for ``work`` units: one each (capped at MAX_GRID_NUM), or at most
        ``per_unit`` per compute unit where not None."""
        grid = self.capped_grid(work)
        return grid if per_unit is None else min(grid, per_unit * self.compute_units)

    def num_warps_for(self, block: int, dtype: torch.dtype | None = None,
                      table: list | None = None) -> int:
        """num_warps for a program of ``block`` elements, by a threshold table: ``table``,
        a kernel family's own (its tuning), where given; else ``launch.num_warps_by_block``
        (``launch.num_warps_by_block_32bit`` for 32-bit and wider data). ``dtype`` is the
        dtype of the data the program holds (its input): elements are counted in 32-bit
        registers (a float64 element counts twice, as it takes two)."""
        return self._warps_entry(block, dtype, table)[0]

    def launch_options_for(self, block: int, dtype: torch.dtype | None = None,
                           table: list | None = None) -> dict[str, int]:
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
        unit = self["compile.register_allocation_unit"]
        per_warp = self.data["limits"]["registers_per_sm"] // (programs * warps)
        cap = per_warp // unit * unit // self.warp_size
        return {"maxnreg": min(self.registers_per_thread or cap, cap)}

    def _warps_entry(self, block: int, dtype: torch.dtype | None,
                     table: list | None) -> tuple[int, int]:
        """(num_warps, resident programs per compute unit or 0) of the table's entry."""
        rows = table
        if dtype is not None:
            if rows is None and dtype.itemsize >= 4:
                rows = self["launch.num_warps_by_block_32bit"]
            block *= max(1, dtype.itemsize // 4)
        if rows is None:
            rows = self.data["launch"]["num_warps_by_block"]
        warps, programs = self.data["launch"]["default_num_warps"], 0
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
        return self["launch.tile_row_min_bytes"]

    @property
    def registers_per_thread(self) -> int:
        """The most 32-bit registers one thread may address (0: not modelled)."""
        return self["limits.registers_per_thread"]

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
        """A copy with some fields changed, validated like a file:
        ``derive(**{"launch.max_grid_num": 2, "tuning.softmax.row_tile_bytes": 4096})``;
        None removes an optional field (TOML has no null)."""
        data = copy.deepcopy(dict(self.data))
        for dotted, value in changes.items():
            dotted = dotted.replace("__", ".")
            *parents, last = dotted.split(".")
            if field_at(dotted) is None and not _in_open_table(dotted):
                raise ProfileError(f"derived from {self.name}", dotted, "unknown field")
            node = data
            for part in parents:
                node = node.setdefault(part, {})
            if value is None:
                node.pop(last, None)
            else:
                node[last] = value  # an optional field the profile lacks may be added
        data["name"] = name or f"{self.name}~derived"
        return profile_from_dict(data, source=f"derived from {self.name}")


def field_at(dotted: str) -> Field | None:
    """The declaration of the field at a dotted path (``launch.max_grid_num``,
    ``tuning.layer_norm.backward_prefetch``), or None where nothing is declared there."""
    parts = dotted.split(".")
    if len(parts) == 3 and parts[0] == "tuning" and parts[1] in tuning.FAMILY_MODULES:
        return tuning.declaration(parts[1]).get(parts[2])
    node: Any = SCHEMA
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, Field) else None


def _in_open_table(dotted: str) -> bool:
    """Whether ``dotted`` lies inside a free-form table (``autotune.matmul``)."""
    head, _, rest = dotted.partition(".")
    spec = SCHEMA.get(head)
    return bool(rest) and isinstance(spec, Field) and head != "tuning"


def profile_from_dict(data: dict, source: str = "<dict>") -> Profile:
    validate(data, source)
    return Profile(name=data["name"], vendor=data["vendor"], description=data["description"],
                   source=source, data=copy.deepcopy(data))


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

