"""The order checks run in on xdist workers: the slow ones first, spread over the workers.

Checks take from a millisecond to minutes (the fused linear cross-entropy's first tuning
call on a GPU: 137 s). pytest-xdist's work stealing (:func:`~triton_cts.execution.pace.
default_dist`) first gives each worker a contiguous slice of the collection, then lets an
idle worker take the tail of the longest queue. A slow check late in a slice starts late
and the run waits for it: the reference device run on 14 workers took 376-389 s for
296-323 s of work per worker.

So on a worker under ``--dist worksteal`` the collection is reordered (every worker
computes the same order, as xdist requires): the checks whose recorded cost is at least
:data:`HEAVY_S` are dealt to the slices longest first, each to the slice with the least
work so far (LPT), and the rest fill the slices in their collected order. Each worker then
starts on its slow checks and ends on cheap ones, which are what stealing moves. Costs are
measured ones, kept in :data:`COSTS_PATH` (mean seconds per test, op, implementation,
mode and dtype); a check with no entry counts as cheap. A stale file only gives a worse
order, never a different result. Refresh it from reports of full runs::

    python -m triton_cts.execution.scheduling refresh REPORT.json [REPORT.json.gz ...]
"""
from __future__ import annotations

import heapq
import json
import sys
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

import pytest

from triton_cts import CHECKOUT
from triton_cts.targets import CHECK_PROPERTY

COSTS_PATH = CHECKOUT / "suites" / "check_costs.json"
#: A check at least this slow (seconds) is placed by cost; the rest keep their order.
HEAVY_S = 1.0
#: Costs below this are not kept in the file.
KEEP_S = 0.5


def cost_key(fields: dict, with_dtype: bool = True) -> str:
    parts = [fields.get("test"), fields.get("op"), fields.get("impl"), fields.get("mode")]
    if with_dtype:
        parts.append(fields.get("dtype"))
    return "|".join(str(p or "") for p in parts)


@lru_cache(maxsize=1)
def load_costs(path: Path = COSTS_PATH) -> dict[str, float]:
    """The recorded costs; {} where the file is missing (every check counts as cheap).
    A malformed file names itself."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
        costs = data["costs"]
        return {str(k): float(v) for k, v in costs.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: expected {{'costs': {{key: seconds}}}} ({exc}); rebuild it "
                         f"with `python -m triton_cts.execution.scheduling refresh REPORT`") \
            from None


def estimated_cost(fields: dict | None, costs: dict[str, float]) -> float:
    if not fields:
        return 0.0
    return costs.get(cost_key(fields), costs.get(cost_key(fields, with_dtype=False), 0.0))


def slice_sizes(count: int, workers: int) -> list[int]:
    """The slices pytest-xdist's work stealing first sends: each idle worker in turn gets
    the pending items over the workers still to serve."""
    sizes, left = [], count
    for i in range(workers):
        size = left // (workers - i)
        sizes.append(size)
        left -= size
    return sizes


def worksteal_order(costs: list[float], workers: int, heavy: float = HEAVY_S) -> list[int]:
    """Indices of the items in the order to collect them (see the module docstring)."""
    n = len(costs)
    if workers < 2 or n < workers:
        return list(range(n))
    room = slice_sizes(n, workers)
    slices: list[list[int]] = [[] for _ in range(workers)]
    heap = [(0.0, j) for j in range(workers)]  # (work so far, slice) of slices with room
    heavy_items = sorted((i for i in range(n) if costs[i] >= heavy), key=lambda i: (-costs[i], i))
    for i in heavy_items:
        load, j = heapq.heappop(heap)
        slices[j].append(i)
        room[j] -= 1
        if room[j]:
            heapq.heappush(heap, (load + costs[i], j))
    placed = set(heavy_items)
    rest = iter(i for i in range(n) if i not in placed)
    for j in range(workers):
        slices[j].extend(next(rest) for _ in range(room[j]))
    return [i for s in slices for i in s]


class WorkerOrder:
    """Reorders a worker's collection (registered on xdist workers under work stealing),
    after every other plugin has selected and deselected items."""

    NAME = "cts-worker-order"

    def __init__(self, workers: int):
        self.workers = workers

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]):
        result = yield
        costs = load_costs()
        if costs:
            estimates = [estimated_cost(dict(item.user_properties).get(CHECK_PROPERTY), costs)
                         for item in items]
            items[:] = [items[i] for i in worksteal_order(estimates, self.workers)]
        return result


def register(config: pytest.Config) -> None:
    """On an xdist worker under ``--dist worksteal``: order the collection by cost."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or config.getvalue("dist") != "worksteal" \
            or config.pluginmanager.has_plugin(WorkerOrder.NAME):
        return
    config.pluginmanager.register(WorkerOrder(int(workerinput.get("workercount", 1))),
                                  WorkerOrder.NAME)


def refresh(reports: list[str], path: Path = COSTS_PATH) -> dict[str, float]:
    """Mean duration per key (with and without the dtype) over the reports' records."""
    from triton_cts.results.report_io import load_report

    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for report in reports:
        for record in load_report(report, any_version=True)["records"]:
            if not record.get("op") or record.get("status") == "not_supported":
                continue
            for key in (cost_key(record), cost_key(record, with_dtype=False)):
                sums[key][0] += record.get("duration_s") or 0.0
                sums[key][1] += 1
    costs = {k: round(s / c, 2) for k, (s, c) in sorted(sums.items()) if s / c >= KEEP_S}
    path.write_text(json.dumps({"about": "mean seconds per check, for ordering checks on "
                                         "workers; python -m triton_cts.execution.scheduling "
                                         "refresh REPORT...", "costs": costs}, indent=0) + "\n")
    return costs


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "refresh":
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    costs = refresh(argv[1:])
    print(f"{COSTS_PATH.relative_to(CHECKOUT)}: {len(costs)} costs from {len(argv) - 1} report(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
