"""The accelerators of a run: under ``-n N`` the xdist workers spread over them.

- Which devices: every one torch sees (``torch.accelerator.device_count()``; the backend's
  visibility variable, ``CUDA_VISIBLE_DEVICES``, ``HIP_VISIBLE_DEVICES``,
  ``ZE_AFFINITY_MASK``, ``ASCEND_RT_VISIBLE_DEVICES``, narrows it as torch applies it, and
  indices count the visible devices), or those ``--devices 0,2`` names.
- Which device a worker uses: worker slot K (``gwK``) takes the set's device K modulo its
  size, set (``torch.accelerator.set_device_index``) in the worker's ``pytest_configure``,
  before anything starts the device. A worker that replaces one lost to a sticky device
  error (:mod:`~triton_cts.execution.lost_context`) gets a new id from xdist; the
  controller hands it the slot of the worker it replaces (:class:`Slots`), so each device
  keeps its count of workers and its memory budget.
- The memory budget: a worker's share is its own device's memory over the workers on it
  (:func:`workers_on_this_device`, read by ``size_budget.device_memory_problem``).
- One profile: every device of the run must match the same profile (:func:`survey`); a
  mixed node stops with a usage error listing each device, unless ``--devices`` selects a
  uniform set.

With one device and no ``--devices`` nothing is set: the run is the one it always was.
"""
from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass

import pytest

from triton_cts.errors import UsageError
from triton_cts.results.records import DEVICE_PROPERTY as PROPERTY  # the record's "device"

OPTION = "--devices"
#: The workerinput key that carries a worker's slot from the controller.
SLOT_KEY = "triton_cts_device_slot"


@dataclass(frozen=True)
class Assignment:
    """This process's place in the run's device set."""

    indices: tuple[int, ...]   # the run's devices (torch indices of the visible devices)
    slot: int | None           # the xdist worker slot, None outside xdist
    index: int | None          # the device this process uses, None where none was set


#: Set by :func:`configure`; None before (tests, tools that never configured a run).
_current: Assignment | None = None


def current() -> Assignment | None:
    return _current


def _torch(torch_module=None):
    if torch_module is not None:
        return torch_module
    import torch
    return torch


def _kind(torch) -> str | None:
    from triton_cts.profiles.vendor_selection import NO_TRITON_BACKEND, accelerator_type
    try:
        kind = accelerator_type(torch)
    except Exception:  # a broken driver: no accelerator, as attached_device says
        return None
    return None if kind in NO_TRITON_BACKEND else kind


def device_count(torch_module=None) -> int:
    """Accelerators torch sees (after the backend's visibility variable), 0 without one."""
    torch = _torch(torch_module)
    kind = _kind(torch)
    if kind is None:
        return 0
    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "device_count"):
        return int(acc.device_count())
    module = getattr(torch, kind, None)
    return int(module.device_count()) if hasattr(module, "device_count") else 1


def set_device(index: int, torch_module=None) -> None:
    """Make ``index`` this process's current device (before anything allocates on it)."""
    torch = _torch(torch_module)
    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "set_device_index"):
        acc.set_device_index(index)
    else:  # torch before 2.6: the backend's own set_device
        getattr(torch, _kind(torch) or "cuda").set_device(index)


def current_index(torch_module=None) -> int:
    """The index of this process's current device (0 where the backend does not say)."""
    torch = _torch(torch_module)
    acc = getattr(torch, "accelerator", None)
    try:
        if acc is not None and hasattr(acc, "current_device_index"):
            return int(acc.current_device_index())
        return int(getattr(torch, _kind(torch) or "cuda").current_device())
    except Exception:  # a backend without either: its first device
        return 0


def parse_devices(text: str | None, count: int) -> tuple[int, ...] | None:
    """The indices ``--devices`` names ("0,2"), checked against the ``count`` devices torch
    sees; None where it was not given. Anything else is a :class:`UsageError`."""
    if text is None:
        return None
    where = f"{OPTION} {text!r}"
    if count == 0:
        raise UsageError(f"{where}: no accelerator is attached (torch sees 0 devices)")
    words = [w.strip() for w in str(text).split(",")]
    bad = [w for w in words if not re.fullmatch(r"\d+", w)]
    if bad:
        raise UsageError(f"{where}: {', '.join(repr(w) for w in bad)} is not a device index; "
                         f"give indices separated by commas, e.g. {OPTION} 0,2")
    indices = tuple(int(w) for w in words)
    outside = [i for i in indices if i >= count]
    if outside:
        raise UsageError(f"{where}: device {', '.join(map(str, outside))} out of range: torch "
                         f"sees {count} device(s), indices 0 to {count - 1} (after the "
                         f"backend's visibility variable, e.g. CUDA_VISIBLE_DEVICES)")
    twice = sorted({i for i in indices if indices.count(i) > 1})
    if twice:
        raise UsageError(f"{where}: device {', '.join(map(str, twice))} given more than once")
    return indices


def worker_slot(workerinput: dict | None, env=os.environ) -> int | None:
    """This worker's slot: the controller's (:class:`Slots`), else K of ``gwK``; None
    outside xdist."""
    if workerinput and isinstance(workerinput.get(SLOT_KEY), int):
        return workerinput[SLOT_KEY]
    match = re.fullmatch(r"gw(\d+)", env.get("PYTEST_XDIST_WORKER", ""))
    return int(match.group(1)) if match else None


def assign(text: str | None, workerinput: dict | None = None, env=os.environ,
           torch_module=None, runs_checks: bool = True) -> Assignment:
    """This process's device: ``--devices`` checked, the worker's device chosen round robin
    and made current. Nothing is set with one device and no ``--devices``, without an
    accelerator, or where the process runs no checks (the xdist controller: setting a
    device starts it)."""
    count = device_count(torch_module)
    chosen = parse_devices(text, count)
    indices = chosen if chosen is not None else tuple(range(count))
    slot = worker_slot(workerinput, env)
    index = None
    if runs_checks and indices and (chosen is not None or len(indices) > 1):
        index = indices[(slot or 0) % len(indices)]
        set_device(index, torch_module)
    return Assignment(indices, slot, index)


def configure(text: str | None, workerinput: dict | None = None, env=os.environ,
              torch_module=None, runs_checks: bool = True) -> Assignment:
    """:func:`assign`, remembered for :func:`current` and the memory budget."""
    global _current
    _current = assign(text, workerinput, env, torch_module, runs_checks)
    return _current


def workers_on_this_device(env=os.environ, assignment: Assignment | None = None) -> int:
    """How many of the run's ``PYTEST_XDIST_WORKER_COUNT`` workers share this process's
    device (slots K with the same K modulo the set's size); 1 outside xdist."""
    workers = max(1, int(env.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1))
    a = assignment if assignment is not None else _current
    if a is None or len(a.indices) <= 1 or a.slot is None:
        return workers
    size = len(a.indices)
    return max(1, sum(1 for k in range(workers) if k % size == a.slot % size))


def survey(indices, profiles, torch_module=None) -> list[dict]:
    """Each device of the run: ``{"index", "name", "profile"}``. Devices that match
    different profiles (or none) stop the run with a :class:`UsageError` listing them."""
    from triton_cts.profiles.vendor_selection import (UnknownDeviceWarning, attached_device,
                                                      match_device)
    torch = _torch(torch_module)
    out, problems = [], []
    for i in indices:
        info = attached_device(torch, index=i)
        if info is None:
            problems.append(f"device {i}: torch reports no properties")
            continue
        try:
            with warnings.catch_warnings():  # the current device's fallback is warned once
                warnings.simplefilter("ignore", UnknownDeviceWarning)
                profile = match_device(info, profiles).name
        except UsageError:
            profile = None
        out.append({"index": i, "name": info.name, "profile": profile})
    names = {d["profile"] for d in out}
    if problems or len(names) > 1 or None in names:
        listing = "; ".join([f"device {d['index']}: '{d['name']}' -> "
                             f"{d['profile'] or 'no profile'}" for d in out] + problems)
        uniform = sorted({p for p in names if p})
        hint = "; ".join(f"{OPTION} " + ",".join(str(d["index"]) for d in out
                                                 if d["profile"] == p) for p in uniform)
        raise UsageError(f"the run's devices do not all match one profile ({listing}); every "
                         f"device of a run must match the same profile: choose a uniform set "
                         f"with {OPTION}" + (f" ({hint})" if hint else ""))
    return out


def record_field(devices: list[dict], assignment: Assignment | None = None,
                 torch_module=None) -> dict | None:
    """What a device check's record says it ran on, ``{"index", "name"}``: this process's
    device among the run's ``devices`` (``Selection.devices``); None without any."""
    if not devices:
        return None
    a = assignment if assignment is not None else _current
    index = a.index if a is not None and a.index is not None else current_index(torch_module)
    entry = next((d for d in devices if d["index"] == index), devices[0])
    return {"index": index, "name": entry["name"]}


class Slots:
    """The xdist controller's record of which slot each worker holds: a worker replacing
    one that went down takes its slot (its device), a new one its own K of ``gwK``."""

    def __init__(self):
        self.by_node: dict[str, int] = {}
        self.free: list[int] = []

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:
        name = node.gateway.id
        slot = self.free.pop(0) if self.free else worker_slot(None, {"PYTEST_XDIST_WORKER": name})
        if slot is not None:
            self.by_node[name] = slot
            node.workerinput[SLOT_KEY] = slot

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        slot = self.by_node.pop(node.gateway.id, None)
        if error is not None and slot is not None:  # a worker that ended early: replaced
            self.free.append(slot)
            self.free.sort()
