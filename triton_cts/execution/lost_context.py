"""Checks after a device error that poisons the process run in a fresh one.

CUDA's sticky errors (an illegal memory access, a device-side assert, an unspecified
launch failure; HIP's equivalents; Level Zero's lost device on Intel GPUs) leave the
process's device context unusable: every later check in it fails with the same error,
whatever it runs. One kernel that writes far out of bounds would otherwise turn a whole
worker's share of the run into false failures.

- Under pytest-xdist, the worker ends itself once the check that hit the error has sent
  its reports, and xdist starts a fresh worker for the checks left. The controller files
  the worker's exit as that check's teardown, so the check counts once, as the failure it
  was, and nothing else is charged to it.
- Without xdist, later device-mode checks fail at setup, naming the check that lost the
  context; run with ``-n N`` to have them run in a fresh process.
"""
from __future__ import annotations

import os
import re
import sys

import pytest

#: The messages of errors after which the device context cannot be used again.
STICKY = re.compile(
    r"illegal memory access|illegal address|unspecified launch failure|device-side assert"
    r"|misaligned address|illegal instruction|hipErrorIllegalAddress|hipErrorLaunchFailure"
    # Intel GPUs: ZE_RESULT_ERROR_DEVICE_LOST (Level Zero specification, ze_result_t)
    r"|DEVICE_LOST",
    re.IGNORECASE)
LOST_KEY = pytest.StashKey[str]()
PROPERTY = "device_context_lost"


def is_sticky(exc: BaseException | None) -> bool:
    """Whether ``exc``, anything it was raised from, or an exception in its group is a
    sticky device error."""
    seen = set()
    stack = [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if STICKY.search(f"{type(e).__name__}: {e}"):
            return True
        stack += [e.__cause__, e.__context__, *getattr(e, "exceptions", ())]
    return False


def is_device_check(item: pytest.Item) -> bool:
    """Whether ``item`` runs on the device: its check target's mode, or for a suite test
    without one (a device probe), its ``cts_modes`` marker."""
    target = item.callspec.params.get("target") if hasattr(item, "callspec") else None
    if target is not None:
        return str(getattr(target, "mode", "")) == "device"
    marker = item.get_closest_marker("cts_modes")
    return marker is not None and "device" in marker.args


class LostContext:
    def __init__(self, config: pytest.Config):
        self.config = config
        self.on_worker = hasattr(config, "workerinput")
        self.lost_in: set[str] = set()  # controller: checks whose worker ended after them

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        """Wait for a device check's kernels before its call ends: a fault of a kernel it
        launched asynchronously (a stray write of a library kernel whose outputs were
        read on another stream, or not at all) then fails this check, not the next check
        the worker runs."""
        try:
            return (yield)
        finally:
            if is_device_check(item):
                synchronize_device()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        if call.excinfo is not None and is_sticky(call.excinfo.value) \
                and LOST_KEY not in self.config.stash:
            self.config.stash[LOST_KEY] = item.nodeid
            report.user_properties.append((PROPERTY, True))
            report.sections.append(("device context", (
                "This error leaves the process's device context unusable: "
                + ("this worker ends after the check and a fresh one runs the rest."
                   if self.on_worker else "later device checks in this process fail; "
                   "run with -n N to run them in a fresh process."))))
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        lost = self.config.stash.get(LOST_KEY, None)
        if lost and not self.on_worker and is_device_check(item):
            pytest.fail(f"not run: the device context was lost in {lost} (a sticky device "
                        f"error); run with -n N so a fresh process runs the checks after it",
                        pytrace=False)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item):
        if self.on_worker and self.config.stash.get(LOST_KEY, None) == item.nodeid:
            # the call report has been written to the controller's channel
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(3)

    # -- controller ------------------------------------------------------------------------
    def pytest_runtest_logreport(self, report):
        if (PROPERTY, True) in report.user_properties:
            self.lost_in.add(report.nodeid)

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem, report, sched):
        if crashitem in self.lost_in:
            # the worker ended on purpose after the check's failure: a clean teardown
            report.outcome = "passed"
            report.when = "teardown"
            report.longrepr = None


def synchronize_device() -> None:
    """Wait for every kernel queued on the current device, where torch has started one
    (any accelerator: the device layer's generic synchronize)."""
    from triton_cts.execution import devices
    if devices.initialized():
        devices.synchronize()


def register(config: pytest.Config) -> None:
    config.pluginmanager.register(LostContext(config), "triton_cts.execution.lost_context")
