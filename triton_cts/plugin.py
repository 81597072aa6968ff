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

import pytest

from triton_cts.errors import UsageError
from triton_cts.execution import lost_context
from triton_cts.execution.modes import MODE_CHOICES, unsupported_reason
from triton_cts.results.status import NOT_SUPPORTED
from triton_cts.targets import (SELECTION_KEY, CheckTarget, Selection, build_selection, dtype_gap,
                                selection)

pytest_plugins = ["triton_cts.results.plugin"]  # result records, expectations, shards, reports


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
