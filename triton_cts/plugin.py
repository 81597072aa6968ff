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
from triton_cts.execution import (coverage, device_set, launches, lost_context, pace,
                                  sanitizer)
from triton_cts.execution.modes import MODE_CHOICES, unsupported_reason
from triton_cts.execution.size_budget import boundary_shapes
from triton_cts.results.status import NOT_SUPPORTED, parse_reproduce_failure
from triton_cts.targets import (CHECK_PROPERTY, SELECTION_KEY, CheckTarget, Selection,
                                build_selection, check_fields, dtype_gap, is_check,
                                is_suite_test_id, selection)

pytest_plugins = ["triton_cts.results.plugin"]  # result records, expectations, shards, reports
REQUIRABLE_MODES = tuple(m for m in MODE_CHOICES if m != "auto")  # --require-mode


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
    # ci with fresh examples: drawn from --hypothesis-seed (derandomized ci ignores the
    # seed), no example database, so the same seed draws the same examples again
    settings.register_profile("ci-seeded", parent=settings.get_profile("ci"),
                              derandomize=False, database=None)
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
                         "'all', or 'auto' (the attached device's profile, or every profile on a "
                         "CPU-only machine). Default: 'auto', but one profile per family on a "
                         "CPU-only machine. Repeatable.")
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
    group.addoption("--op-module", action="append", default=[], metavar="MODULE",
                    dest="op_module",
                    help="add the ops a module declares (its OPS: OpSpecs with their own "
                         "kernels), or MODULE:ATTR; as installed packages do through the "
                         "entry-point group triton_cts.ops. Repeatable.")
    group.addoption("--require-mode", action="append", default=[], choices=REQUIRABLE_MODES,
                    metavar="MODE",
                    help="fail the run unless at least one check ran (passed or failed, not "
                         "merely 'not supported') in MODE: e.g. 'device' on a GPU job, so a "
                         "job that silently fell back to the CPU fails. Repeatable.")
    group.addoption("--reproduce-failure", metavar="BLOB", default=None,
                    help="replay exactly one failing hypothesis example: VERSION:BLOB, or "
                         "the \"@reproduce_failure('x.y.z', b'...')\" a report's record holds "
                         "(\"reproduce_failure\"; as --reproduce-failure=@..., since pytest "
                         "reads a separate argument starting with @ as a file). Give it with "
                         "the record's repro command: the record's \"replay\" is that command.")
    group.addoption("--devices", default=None, metavar="I,J",
                    help="device mode's accelerators: indices of the devices torch sees "
                         "(after CUDA_VISIBLE_DEVICES or the backend's equivalent), e.g. 0,2. "
                         "Under -n N the workers spread over them round robin. Default: every "
                         "visible device; all must match the same profile.")
    group.addoption("--sanitize", default=None, choices=sanitizer.TOOLS, metavar="TOOL",
                    help="run device checks under NVIDIA's compute-sanitizer with TOOL: "
                         "memcheck (out-of-bounds and misaligned accesses), racecheck "
                         "(shared-memory races), initcheck (reads of uninitialized device "
                         "memory) or synccheck (invalid barriers). Each error it reports "
                         "fails its check; where it cannot run, device checks are reported "
                         "as not supported.")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cts_targets(predicate=f): run this suite test only for "
                                       "check targets for which predicate(target) is true")
    config.addinivalue_line("markers", "cts_modes(*modes): run this suite test only in these "
                                       "execution modes")
    workerinput = getattr(config, "workerinput", None)
    controller = workerinput is None and bool(config.getoption("numprocesses", None)) \
        and config.getoption("dist", "no") != "no"  # the xdist controller runs no checks
    try:
        # before anything starts the device: a worker's device is where its context goes
        device_set.configure(config.getoption("devices"), workerinput,
                             runs_checks=not controller)
        config.stash[SELECTION_KEY] = build_selection(config, _relation_names())
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    if controller and not config.pluginmanager.has_plugin(device_set.SLOT_KEY):
        config.pluginmanager.register(device_set.Slots(), device_set.SLOT_KEY)
    lost_context.register(config)
    if not config.pluginmanager.has_plugin(coverage.__name__):  # every check's launches
        config.pluginmanager.register(coverage, coverage.__name__)
    _share_cpu_threads()
    launches.brief_tuning()  # the checks need every config run, not the fastest one found
    sanitizer.register(config, config.stash[SELECTION_KEY])
    _pace(config, config.stash[SELECTION_KEY])


def _relation_names() -> set[str] | None:
    """The metamorphic relations users' ops may declare (suites/relations.py), or None
    where the suites are not importable (then no relation test runs either)."""
    try:
        from suites.relations import RELATIONS
    except ImportError:
        return None
    return set(RELATIONS)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser, args: list[str]) -> None:
    """Without ``-n``, a run on a machine with pytest-xdist gets ``-n auto``, one worker
    per core (``pace.default_workers`` says when not; the count reaches xdist through
    :func:`pytest_xdist_auto_num_workers`); on workers, idle ones steal queued checks
    unless the command chose a ``--dist`` (``pace.default_dist``)."""
    xdist = early_config.pluginmanager.has_plugin("xdist")
    workers = pace.default_workers(args, xdist_loaded=xdist)
    if workers:
        early_config.stash[DEFAULT_WORKERS_KEY] = workers
        args[:] = ["-n", "auto", *args]
    if xdist:
        args[:] = [*pace.default_dist(args, workers=workers), *args]


#: The worker count of the ``-n auto`` that pytest_load_initial_conftests added.
DEFAULT_WORKERS_KEY = pytest.StashKey[int]()


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """The count of the ``-n auto`` this plugin added; None (xdist's own count:
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` or the cores) for an ``-n auto`` the command gave."""
    return config.stash.get(DEFAULT_WORKERS_KEY, None)


def _pace(config: pytest.Config, sel: Selection) -> None:
    """The quick hypothesis profile where no accelerator is attached (unless one was
    chosen), progress lines and the replay summary."""
    if not pace.hypothesis_profile_chosen(config):
        from hypothesis import settings
        settings.load_profile(pace.default_hypothesis_profile(sel.device is not None))
    if not config.pluginmanager.has_plugin(pace.ReplaySummary.KEY):
        config.pluginmanager.register(pace.ReplaySummary(), pace.ReplaySummary.KEY)
    if not hasattr(config, "workerinput") and not config.pluginmanager.has_plugin("cts-progress"):
        config.pluginmanager.register(pace.Progress(config, cpu_only=sel.device is None),
                                      "cts-progress")


def _share_cpu_threads() -> None:
    """Under ``-n N`` each worker's torch takes a share of the cores for its CPU work (the
    float64 references, input values): by default every worker starts a thread per core,
    and 14 workers on 16 cores ran their references several times slower."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if workers > 1:
        import torch
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


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
        *([f"triton-cts: ops from packages: {', '.join(sorted(sel.registry.op_sources))}"]
          if sel.registry.op_sources else []),
        *(["triton-cts: devices: " + ", ".join(f"{d['index']} {d['name']}" for d in sel.devices)
           + " (workers spread over them)"] if len(sel.devices) > 1 else []),
        *([f"triton-cts: warning: {sel.device_warning}"] if sel.device_warning else []),
        f"triton-cts: hypothesis profile: {_hypothesis_profile_line(config)}",
    ]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter, config: pytest.Config):
    """A run without --vendor on a CPU-only machine checked one profile per family: say
    which it left out and the command that checks them all, after pytest's own summary."""
    result = yield
    sel = config.stash.get(SELECTION_KEY, None)
    if sel is None or config.getoption("vendor") or sel.device is not None:
        return result
    if not any(is_suite_test_id(getattr(r, "nodeid", None) or "")
               for reports in terminalreporter.stats.values() for r in reports):
        return result  # no suite check ran: the harness's own tests, say
    from triton_cts.profiles import load_profiles
    from triton_cts.profiles.vendor_selection import left_out_note
    note = left_out_note(sel.profiles, load_profiles(sel.profile_dirs))
    if note:
        terminalreporter.write_line(note)
    return result


def _hypothesis_profile_line(config: pytest.Config) -> str:
    from hypothesis import settings
    name = settings.get_current_profile_name()
    line = f"{name} ({settings().max_examples} examples per test id)"
    if not pace.hypothesis_profile_chosen(config):
        line += " by default here; --hypothesis-profile dev or thorough for more"
    return line


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "target" not in metafunc.fixturenames:
        return
    sel = selection(metafunc.config)
    marker = metafunc.definition.get_closest_marker("cts_modes")
    modes = set(marker.args) if marker else None
    per_dtype = "dtype" in metafunc.fixturenames
    # a test that takes "relation" runs once per metamorphic relation the op declares, one
    # that takes "boundary" once per shape at the profile's real boundaries
    extra = next((n for n in EXTRA_PARAMS if n in metafunc.fixturenames), None) \
        if per_dtype else None
    params = []
    wanted = metafunc.definition.get_closest_marker("cts_targets")
    suite = metafunc.definition.path.stem  # primitives name the suites they apply to
    for target in sel.targets(modes=modes):
        if not target.op.checked_by(suite):
            continue
        if wanted is not None and not wanted.kwargs["predicate"](target):
            continue
        reason = (unsupported_reason(target.mode, target.profile, sel.device_profile)
                  or target.impl.unsupported_reason(target.mode, target.profile))
        if not per_dtype:
            marks = [pytest.mark.skip(reason=NOT_SUPPORTED + reason)] if reason else []
            params.append(pytest.param(target, id=target.id, marks=marks))
            continue
        for dtype in target.op.dtypes:
            why = reason or dtype_gap(target, dtype)
            marks = [pytest.mark.skip(reason=NOT_SUPPORTED + why)] if why else []
            name = str(dtype).removeprefix("torch.")
            for value in EXTRA_PARAMS[extra](target, dtype) if extra else (None,):
                values, ident = (target, dtype), f"{target.id}-{name}"
                if extra:
                    values, ident = values + (value,), f"{ident}-{value}"
                params.append(pytest.param(*values, id=ident, marks=marks))
    names = f"target,dtype,{extra}" if extra else "target,dtype"
    metafunc.parametrize(names if per_dtype else "target", params)


#: Parameters a suite test may take after ``dtype``, and their values per target and dtype.
EXTRA_PARAMS = {
    "relation": lambda target, dtype: target.op.relations,
    "boundary": lambda target, dtype: tuple(boundary_shapes(target.op, target.profile, dtype)),
}


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
    _group_by_op(items)
    # What each suite item checks travels with its reports (to the xdist controller too),
    # where its record is built: records never depend on parsing test ids.
    sel = selection(config)
    ran_on = device_set.record_field(sel.devices)  # the device this process's checks run on
    for item in items:
        if is_check(item):
            item.user_properties.append((CHECK_PROPERTY, check_fields(item, sel)))
            if ran_on is not None and lost_context.is_device_check(item):
                item.user_properties.append((device_set.PROPERTY, ran_on))


def _op_of(item: pytest.Item) -> str | None:
    target = item.callspec.params.get("target") if hasattr(item, "callspec") else None
    return target.op.name if isinstance(target, CheckTarget) else None


def _group_by_op(items: list[pytest.Item]) -> None:
    """Put an op's checks next to each other, across suites, in the slots checks held
    (a stable sort: each suite's order within an op stays). xdist hands each worker a
    contiguous share of the items, so one worker compiles an op's kernels for all its
    suites and its later checks find them in that process's cache, instead of several
    workers compiling the same kernels at once."""
    slots = [i for i, item in enumerate(items) if _op_of(item) is not None]
    ordered = sorted((items[i] for i in slots), key=_op_of)
    for i, item in zip(slots, ordered):
        items[i] = item


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
    """The command that reruns exactly this test with the same selection and the same
    hypothesis profile and seed (``ci`` is derandomized and keeps no example database: only
    the same profile draws the same examples again). It is also a :class:`Repro`, through
    which ``suites/assertions.py`` records a failure's measured error before raising."""
    sel = selection(request.config)
    target = request.node.callspec.params.get("target") if hasattr(request.node, "callspec") else None
    nodeid = shlex.quote(request.node.nodeid)
    extra = f" {sel.repro_options(target)}" if target is not None else ""
    command = f"pytest {nodeid}{extra}{hypothesis_options(request.config)}"
    request.node.user_properties.append(("repro", command))  # for reports
    return Repro(command, request.node.user_properties)


class Repro(str):
    """A repro command that can also record properties on its check (as
    ``record_property`` does)."""

    def __new__(cls, command: str, user_properties: list):
        self = super().__new__(cls, command)
        self._properties = user_properties
        return self

    def record(self, name: str, value) -> None:
        self._properties.append((name, value))


def hypothesis_options(config: pytest.Config) -> str:
    """`` --hypothesis-profile NAME`` (the profile in effect, however it was chosen) and
    `` --hypothesis-seed N`` when a seed was given."""
    try:
        from hypothesis import settings
        profile = settings.get_current_profile_name()
    except Exception:  # an older hypothesis
        profile = config.getoption("hypothesis_profile", None)
    seed = config.getoption("hypothesis_seed", None)
    return ((f" --hypothesis-profile {shlex.quote(profile)}" if profile else "")
            + (f" --hypothesis-seed {shlex.quote(str(seed))}" if seed is not None else ""))


REPLAY_KEY = pytest.StashKey[tuple]()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Check the report options that need the selection: every --require-mode mode is
    selected, --reproduce-failure is a blob."""
    config = session.config
    selected = {m.value for m in selection(config).modes}
    absent = [m for m in config.getoption("require_mode") or () if m not in selected]
    if absent:
        raise pytest.UsageError(f"--require-mode {', '.join(absent)}: not a selected mode "
                                f"(selected: {', '.join(sorted(selected))})")
    blob = config.getoption("reproduce_failure", None)
    if blob:
        try:
            config.stash[REPLAY_KEY] = parse_reproduce_failure(blob)
        except ValueError as exc:
            raise pytest.UsageError(f"--reproduce-failure: {exc}") from None


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item: pytest.Item):
    """Under --reproduce-failure a hypothesis test runs that one example (as hypothesis'
    ``@reproduce_failure`` decorator does): the failure again, or ``DidNotReproduce``."""
    replay = item.config.stash.get(REPLAY_KEY, None)
    test = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
    if replay is None or not getattr(test, "is_hypothesis_test", False):
        return (yield)
    test._hypothesis_internal_use_reproduce_failure = replay
    try:
        return (yield)
    finally:
        test._hypothesis_internal_use_reproduce_failure = None
