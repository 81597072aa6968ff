"""What a run checks: one :class:`CheckTarget` per selected op x implementation x profile x
mode, resolved once from the command line into a :class:`Selection`.

The registry a run selects from is assembled here: the catalog's ops with their reference
kernels, every library adapter's implementations (``triton_cts/adapters/``), then the
entry points of installed packages.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from triton_cts import adapters
from triton_cts.errors import UsageError
from triton_cts.execution.modes import Mode, parse_modes
from triton_cts.ops import catalog
from triton_cts.ops.implementation import Implementation
from triton_cts.ops.registry import Registry
from triton_cts.ops.spec import OpSpec
from triton_cts.profiles import Profile, ProfileError, load_profiles
from triton_cts.profiles.vendor_selection import (DeviceInfo, attached_device, match_device,
                                                  select_profiles)


def default_registry() -> Registry:
    """The catalog's ops with their reference kernels and every library's implementations
    (installed or not: a missing library's checks are reported as not supported)."""
    registry = Registry({op.name: op for op in catalog.ALL_OPS})
    registry.add_all(adapters.implementations(registry.ops))
    return registry


@dataclass(frozen=True)
class CheckTarget:
    """One thing a suite checks: an implementation of an op, under a profile, in a mode."""

    op: OpSpec
    impl: Implementation
    profile: Profile
    mode: Mode

    @property
    def id(self) -> str:
        return f"{self.op.name}-{self.impl.name}-{self.profile.name}-{self.mode}"

    def __repr__(self) -> str:
        return f"CheckTarget({self.id})"

    def _repr_pretty_(self, printer, cycle) -> None:  # hypothesis' falsifying-example printer
        printer.text(repr(self))


@dataclass
class Selection:
    """What this run covers, resolved once from the command line."""

    profiles: list[Profile]
    modes: list[Mode]
    registry: Registry
    impls: list[Implementation]
    device: DeviceInfo | None
    device_profile: str | None
    ops_filter: list[str] = field(default_factory=list)
    profile_dirs: list[str] = field(default_factory=list)

    def targets(self, modes=None, op_filter=None) -> list[CheckTarget]:
        out = []
        for impl in self.impls:
            op = self.registry.ops[impl.op]
            if self.ops_filter and op.name not in self.ops_filter:
                continue
            if op_filter is not None and not op_filter(op):
                continue
            for profile in self.profiles:
                for mode in self.modes:
                    if modes is None or mode.value in modes:
                        out.append(CheckTarget(op, impl, profile, mode))
        return out

    def repro_options(self, target: CheckTarget) -> str:
        opts = [f"--vendor {target.profile.name}", f"--mode {target.mode}"]
        if target.impl.name != "reference" and not target.impl.name.startswith("reference/"):
            opts.append(f"--impl {shlex.quote(target.impl.op + '=' + target.impl.target)}"
                        if ":" in target.impl.name else f"--impl {target.impl.name}")
        opts += [f"--profile-dir {shlex.quote(d)}" for d in self.profile_dirs]
        return " ".join(opts)


SELECTION_KEY = pytest.StashKey[Selection]()


def build_selection(config: pytest.Config) -> Selection:
    """Resolve the options; every bad value is a UsageError naming the known choices."""
    profile_dirs = [str(Path(d)) for d in config.getoption("profile_dir")]
    try:
        profiles = load_profiles(profile_dirs)
    except ProfileError as exc:
        raise UsageError(f"invalid vendor profile: {exc}") from exc
    device = attached_device()
    device_profile = match_device(device, profiles).name if device else None
    selected = select_profiles(config.getoption("vendor"), profiles, device)
    modes = parse_modes(config.getoption("mode"))
    registry = default_registry()
    registry.load_entry_points()
    impls = registry.select(config.getoption("impl"))
    ops_filter = config.getoption("op")
    unknown = [o for o in ops_filter if o not in registry.ops]
    if unknown:
        raise UsageError(f"unknown op(s) {', '.join(unknown)}; known ops: "
                         f"{', '.join(sorted(registry.ops))}")
    return Selection(selected, modes, registry, impls, device, device_profile, ops_filter,
                     profile_dirs)


def selection(config: pytest.Config) -> Selection:
    return config.stash[SELECTION_KEY]


def dtype_gap(target: CheckTarget, dtype) -> str | None:
    """Why ``dtype`` cannot be checked for this target, or None."""
    if not target.profile.supports_dtype(dtype):
        return (f"profile {target.profile.name} does not support "
                f"{str(dtype).removeprefix('torch.')} (dtypes.supported)")
    return target.op.mode_gaps.get((target.mode.value, dtype))
