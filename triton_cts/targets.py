"""What a run checks: one :class:`CheckTarget` per selected op x implementation x profile x
mode, resolved once from the command line into a :class:`Selection`.

The registry a run selects from is assembled here: the catalog's ops with their reference
kernels, every library adapter's implementations (``triton_cts/adapters/``), then the
entry points of installed packages.
"""
from __future__ import annotations

import shlex
import warnings
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import pytest

from triton_cts import adapters
from triton_cts.errors import UsageError, did_you_mean
from triton_cts.execution.modes import Mode, parse_modes
from triton_cts.ops import catalog
from triton_cts.ops.implementation import Implementation
from triton_cts.ops.registry import Registry
from triton_cts.ops.spec import OpSpec
from triton_cts.profiles import EmptyProfileDirWarning, Profile, ProfileError, load_profiles
from triton_cts.profiles.schema import BACKENDS
from triton_cts.profiles.vendor_selection import (DeviceInfo, UnknownDeviceWarning,
                                                  attached_device, match_device,
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
    #: the attached device fell back to the nearest profile of its family: why (or None)
    device_warning: str | None = None
    #: --op-module values (a repro command must load the same ops)
    op_modules: list[str] = field(default_factory=list)
    #: the run's devices in device mode, each {"index", "name", "profile"}; [] without
    devices: list[dict] = field(default_factory=list)

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
        opts += [f"--op-module {shlex.quote(m)}" for m in self.op_modules]
        return " ".join(opts)


SELECTION_KEY = pytest.StashKey[Selection]()


def build_selection(config: pytest.Config, relations=None) -> Selection:
    """Resolve the options; every bad value is a UsageError naming the known choices.
    ``relations``: the metamorphic relations' names, against which users' ops are
    checked (None: not checked)."""
    profile_dirs = [str(Path(d)) for d in config.getoption("profile_dir")]
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", EmptyProfileDirWarning)
            profiles = load_profiles(profile_dirs)
    except ProfileError as exc:
        raise UsageError(f"invalid vendor profile: {exc}") from exc
    for w in caught:  # through pytest: its warnings summary and -W filters
        try:
            config.issue_config_time_warning(w.message, stacklevel=2)
        except Warning as exc:  # -W error::...: a usage error, not an internal one
            raise UsageError(str(exc)) from None
    modes = parse_modes(config.getoption("mode"))
    device, device_profile, device_warning = _detect(config, profiles, modes)
    with warnings.catch_warnings():  # said once, by _detect
        warnings.simplefilter("ignore", UnknownDeviceWarning)
        selected = select_profiles(config.getoption("vendor"), profiles, device)
    registry = default_registry()
    registry.load_entry_points()
    registry.load_ops(config.getoption("op_module", None) or [], relations)
    impls = registry.select(config.getoption("impl"))
    ops_filter = config.getoption("op")
    unknown = [o for o in ops_filter if o not in registry.ops]
    if unknown:
        hints = "".join(did_you_mean(o, registry.ops) for o in unknown)
        raise UsageError(f"unknown op(s) {', '.join(unknown)}{hints}; known ops: "
                         f"{', '.join(sorted(registry.ops))}")
    return Selection(selected, modes, registry, impls, device, device_profile, ops_filter,
                     profile_dirs, device_warning,
                     list(config.getoption("op_module", None) or []),
                     _run_devices(profiles, modes, device, device_profile))


def _run_devices(profiles, modes, device, device_profile) -> list[dict]:
    """The run's devices in device mode (``device_set.survey``: a mixed set stops the run);
    the current device alone where no device set was configured."""
    from triton_cts.execution import device_set
    if device is None or Mode.DEVICE not in modes:
        return []
    assignment = device_set.current()
    if assignment is None or (len(assignment.indices) <= 1 and assignment.index is None):
        return [{"index": device_set.current_index(), "name": device.name,
                 "profile": device_profile}]
    return device_set.survey(assignment.indices, profiles)


def _detect(config: pytest.Config, profiles, modes):
    """(device, its profile's name, the fallback warning or None). A device no profile
    fits stops a run that selects device mode (UsageError saying what torch reported and
    how to add a profile); a run without device mode goes on as on a CPU-only machine. A
    fallback to the nearest profile of the device's architecture family is warned
    through pytest (its warnings summary; -W error makes it a usage error)."""
    device = attached_device()
    if device is None:
        return None, None, None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnknownDeviceWarning)
        try:
            profile = match_device(device, profiles)
        except UsageError:
            if Mode.DEVICE in modes:
                raise
            return None, None, None
    warning = None
    for w in caught:
        if issubclass(w.category, UnknownDeviceWarning):
            warning = str(w.message)
        try:
            config.issue_config_time_warning(w.message, stacklevel=2)
        except Warning as exc:
            raise UsageError(str(exc)) from None
    return device, profile.name, warning


def selection(config: pytest.Config) -> Selection:
    return config.stash[SELECTION_KEY]


def dtype_gap(target: CheckTarget, dtype) -> str | None:
    """Why ``dtype`` cannot be checked for this target, or None."""
    if not target.profile.supports_dtype(dtype):
        return (f"profile {target.profile.name} does not support "
                f"{str(dtype).removeprefix('torch.')} (dtypes.supported)")
    return target.op.mode_gaps.get((target.mode.value, dtype))


# ---- attributing suite tests to what they check ----------------------------------------
#: The user property (set on every suite item at collection) that carries what the item
#: checks; reports carry it to wherever records are built (the xdist controller too).
CHECK_PROPERTY = "cts_check"


def is_suite_test_id(nodeid: str) -> bool:
    """Whether a test id is a conformance suite's (its file lies in a ``suites`` folder),
    as opposed to the harness's own tests. Used where only the id is known: a worker crash
    reported by xdist before any report of the test arrived."""
    return "suites" in PurePosixPath(nodeid.split("::")[0]).parts


def is_check(item: pytest.Item) -> bool:
    """A suite test: it takes a check target, or it is collected from a suite file."""
    return ("target" in getattr(item, "fixturenames", ()) or is_suite_test_id(item.nodeid)
            or "suites" in Path(str(getattr(item, "path", ""))).parts)


def check_fields(item: pytest.Item, sel: Selection) -> dict:
    """What ``item`` checks, from its parameters (never from its id): suite and test
    function, op, implementation, profile, vendor, mode, dtype, and ``params`` with every
    other parameter (the metamorphic relation, say). A suite test without a target that
    runs in one mode only (a probe of the attached device) is attributed to that mode and,
    for device mode, the device's profile. Anything else gets ``unattributed``: its record
    is a harness error."""
    params = dict(item.callspec.params) if hasattr(item, "callspec") else {}
    target, dtype = params.pop("target", None), params.pop("dtype", None)
    fields = {"suite": PurePosixPath(item.nodeid.split("::")[0]).stem,
              "test": getattr(item, "originalname", item.name),
              "params": {k: v if isinstance(v, (str, int, float, bool)) or v is None else str(v)
                         for k, v in params.items()}}
    if isinstance(target, CheckTarget):
        return {**fields, "op": target.op.name, "impl": target.impl.name,
                "profile": target.profile.name, "vendor": target.profile.vendor,
                "mode": target.mode.value,
                "dtype": str(dtype).removeprefix("torch.") if dtype is not None else None}
    marker = item.get_closest_marker("cts_modes")
    modes = tuple(marker.args) if marker else ()
    if len(modes) == 1 and "target" not in getattr(item, "fixturenames", ()):
        profile = sel.device_profile if modes[0] == Mode.DEVICE.value else None
        vendor = next((v for v, b in BACKENDS.items()
                       if sel.device is not None and b == sel.device.backend), None)
        return {**fields, "op": None, "impl": None, "profile": profile,
                "vendor": vendor if profile else None, "mode": modes[0], "dtype": None}
    why = ("it takes 'target' but got no check target" if "target" in params or
           "target" in getattr(item, "fixturenames", ()) else
           "it takes no check target and is not marked with exactly one cts_modes mode")
    return {**fields, "unattributed": f"cannot attribute {item.nodeid} to a check: {why}"}
