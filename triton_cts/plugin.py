"""The pytest plugin: options, the selected (op, implementation, profile, mode) targets,
and their parametrization into every suite.

A suite test asks for the argument ``target`` and gets one :class:`CheckTarget` per
selected op x implementation x profile x mode. Markers narrow that:
``@pytest.mark.cts_modes("compile")`` keeps the listed modes. A mode this machine cannot
run for a profile still yields its test ids, each skipped with the reason prefixed
``not supported:``, so a CPU-only run shows what it could not check instead of hiding it.
"""
from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from triton_cts import CHECKOUT, lost_context
from triton_cts.modes import MODE_CHOICES, Mode, parse_modes, unsupported_reason
from triton_cts.profiles import Profile, ProfileError, load_profiles
from triton_cts.registry import Implementation, OpSpec, Registry, default_registry
from triton_cts.vendors import DeviceInfo, UsageError, attached_device, match_device, select_profiles

NOT_SUPPORTED = "not supported: "
pytest_plugins = ["triton_cts.reporting"]  # result records, expectations, shards, reports


# ---- hypothesis profiles (selected with pytest's --hypothesis-profile) ------------------
def _register_hypothesis_profiles() -> None:
    from hypothesis import HealthCheck, Phase, settings

    # Suite fixtures (repro command, record_property) are pure, so sharing them across
    # examples is safe.
    slow = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
            HealthCheck.function_scoped_fixture]
    # ci reports the first failing example without shrinking it (shrinking under the
    # interpreter can take many minutes); rerun the printed command with
    # --hypothesis-profile dev to get the minimal one.
    settings.register_profile("ci", max_examples=3, derandomize=True, deadline=None,
                              print_blob=True, suppress_health_check=slow,
                              phases=[Phase.explicit, Phase.reuse, Phase.generate])
    settings.register_profile("dev", max_examples=30, deadline=None, print_blob=True,
                              suppress_health_check=slow)
    settings.register_profile("thorough", max_examples=300, deadline=None, print_blob=True,
                              suppress_health_check=slow)
    settings.load_profile(os.environ.get("TRITON_CTS_HYPOTHESIS_PROFILE", "dev"))


_register_hypothesis_profiles()


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


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("triton-cts", "triton-cts conformance options")
    group.addoption("--vendor", action="append", default=[], metavar="SEL",
                    help="profiles to check: a family (nvidia, rocm, npu), a profile name, "
                         "'all', or 'auto' (default: the attached device's profile, or every "
                         "profile on a CPU-only machine). Repeatable.")
    group.addoption("--profile-dir", action="append", default=[], metavar="DIR",
                    help="extra folder of vendor profile TOML files. Repeatable.")
    group.addoption("--mode", action="append", default=[], choices=MODE_CHOICES,
                    help="execution modes: device, interpreter, compile, or 'auto' (default: "
                         "all three; those this machine cannot run are reported as not "
                         "supported). Repeatable.")
    group.addoption("--impl", action="append", default=[], metavar="IMPL",
                    help="implementations to check: 'reference' (default), 'all', a "
                         "registered name, or OP=module:function. Repeatable.")
    group.addoption("--op", action="append", default=[], metavar="OP",
                    help="check only these ops. Repeatable.")


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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cts_targets(predicate=f): run this suite test only for "
                                       "check targets for which predicate(target) is true")
    config.addinivalue_line("markers", "cts_modes(*modes): run this suite test only in these "
                                       "execution modes")
    try:
        config.stash[SELECTION_KEY] = build_selection(config)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    lost_context.register(config)


def selection(config: pytest.Config) -> Selection:
    return config.stash[SELECTION_KEY]


def pytest_report_header(config: pytest.Config) -> list[str]:
    sel = config.stash.get(SELECTION_KEY, None)
    if sel is None:
        return []
    device = (f"{sel.device.name} ({sel.device.backend} {sel.device.arch}) -> profile "
              f"{sel.device_profile}" if sel.device else "none (CPU only)")
    return [
        f"triton-cts: profiles: {', '.join(p.name for p in sel.profiles)}",
        f"triton-cts: modes: {', '.join(m.value for m in sel.modes)}; device: {device}",
        f"triton-cts: implementations: {', '.join(sorted({i.name for i in sel.impls}))}",
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "target" not in metafunc.fixturenames:
        return
    sel = selection(metafunc.config)
    marker = metafunc.definition.get_closest_marker("cts_modes")
    modes = set(marker.args) if marker else None
    per_dtype = "dtype" in metafunc.fixturenames
    per_relation = per_dtype and "relation" in metafunc.fixturenames
    params = []
    wanted = metafunc.definition.get_closest_marker("cts_targets")
    for target in sel.targets(modes=modes):
        if wanted is not None and not wanted.kwargs["predicate"](target):
            continue
        reason = (unsupported_reason(target.mode, target.profile, sel.device_profile)
                  or target.impl.unsupported_reason(target.mode, target.profile))
        if not per_dtype:
            marks = [pytest.mark.skip(reason=NOT_SUPPORTED + reason)] if reason else []
            params.append(pytest.param(target, id=target.id, marks=marks))
            continue
        # a test that takes "relation" runs once per metamorphic relation the op declares
        relations = target.op.relations if per_relation else (None,)
        for dtype in target.op.dtypes:
            why = reason or dtype_gap(target, dtype)
            marks = [pytest.mark.skip(reason=NOT_SUPPORTED + why)] if why else []
            name = str(dtype).removeprefix("torch.")
            for rel in relations:
                values, ident = (target, dtype), f"{target.id}-{name}"
                if per_relation:
                    values, ident = values + (rel,), f"{ident}-{rel}"
                params.append(pytest.param(*values, id=ident, marks=marks))
    names = "target,dtype,relation" if per_relation else "target,dtype"
    metafunc.parametrize(names if per_dtype else "target", params)


def dtype_gap(target: CheckTarget, dtype) -> str | None:
    """Why ``dtype`` cannot be checked for this target, or None."""
    if not target.profile.supports_dtype(dtype):
        return (f"profile {target.profile.name} does not support "
                f"{str(dtype).removeprefix('torch.')} (dtypes.supported)")
    return target.op.mode_gaps.get((target.mode.value, dtype))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A suite test with no target under this selection (e.g. a compile test when only
    interpreter mode was asked for) is deselected, not reported as an empty skip."""
    selected_modes = {m.value for m in selection(config).modes}
    keep, drop = [], []
    for item in items:
        wants = "target" in getattr(item, "fixturenames", ())
        has = hasattr(item, "callspec") and isinstance(item.callspec.params.get("target"),
                                                       CheckTarget)
        marker = item.get_closest_marker("cts_modes")
        # a suite test without targets (a device probe, say) runs only in its modes
        off_mode = not wants and marker is not None and not selected_modes & set(marker.args)
        (drop if (wants and not has) or off_mode else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Under ``-n N`` without ``--dist``, xdist's work stealing: a worker that runs out of
    tests takes half of another's queue. With the default ``load`` mode the compile checks
    (minutes of cross-compiling, early in the collection) stayed with the worker they were
    first sent to while the other worker finished everything else and waited."""
    if config.getvalue("dist") != "load" or _dist_chosen(config):
        return None
    try:
        from xdist.scheduler import WorkStealingScheduling
    except ImportError:  # pytest-xdist before 3.2
        return None
    return WorkStealingScheduling(config, log)


def _dist_chosen(config: pytest.Config) -> bool:
    """Whether ``--dist`` (or ``-d``) was given on the command line or in addopts."""
    args = [*config.invocation_params.args, *shlex.split(os.environ.get("PYTEST_ADDOPTS", "")),
            *config.getini("addopts")]
    return any(str(a).startswith("--dist") or a == "-d" for a in args)


@pytest.fixture
def cts_selection(request) -> Selection:
    return selection(request.config)


@pytest.fixture
def repro(request) -> str:
    """The command that reruns exactly this test with the same selection."""
    sel = selection(request.config)
    target = request.node.callspec.params.get("target") if hasattr(request.node, "callspec") else None
    nodeid = shlex.quote(request.node.nodeid)
    extra = f" {sel.repro_options(target)}" if target is not None else ""
    request.node.user_properties.append(("repro", f"pytest {nodeid}{extra}"))  # for reports
    return f"pytest {nodeid}{extra}"


__all__ = ["CheckTarget", "Selection", "NOT_SUPPORTED", "build_selection", "selection",
           "CHECKOUT"]
