"""Transitions between two reports: new failures (most out of bounds first), fixes,
other status changes, checks no longer run, compile-stat regressions, and what is wrong
with the new run as evidence (interrupted, incomplete, nothing checked). Between runs of
two Triton versions (or any two runs) it also lists every codegen change, better or worse:
registers, spills, shared memory, occupancy, the limit and quality verdicts of each
compiled kernel, and kernels compiled by one run only."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from reports.selection import left_out, selection_changes
from triton_cts.results.records import error_ratio, run_problems
from triton_cts.results.status import Status

#: A compile stat whose name matches is worse when it grows (registers, spills, memory,
#: time) or, for occupancy, when it shrinks.
HIGHER_IS_WORSE = re.compile(r"reg|spill|shared|lds|smem|scratch|stack|bytes|time|_ms\b|_s\b|instr", re.I)
LOWER_IS_WORSE = re.compile(r"occupancy", re.I)
#: A compiled kernel's verdicts: lists of limit violations and quality warnings. They are
#: compared, not part of the kernel's identity.
VERDICTS = ("violations", "quality")
#: Environment fields whose change explains codegen changes.
TOOLCHAIN = ("triton", "torch", "python")


@dataclass
class Diff:
    new_failures: list = field(default_factory=list)   # (test id, old status or None, new)
    fixes: list = field(default_factory=list)
    changed: list = field(default_factory=list)
    added: list = field(default_factory=list)
    removed: list = field(default_factory=list)          # checks no longer run, unexplained
    #: checks no longer run that the changed selection explains (a profile, mode or
    #: implementation not selected any more, another command), or --allow-removed accepts
    removed_accepted: list = field(default_factory=list)
    selection_changed: list = field(default_factory=list)  # "profiles: -amd-gfx942", ...
    compile_regressions: list = field(default_factory=list)  # (test id, kernel key, stat, old, new)
    #: every codegen difference, better or worse: (test id, kernel key, stat, old, new);
    #: a verdict's old/new are the messages only one run gave, a kernel compiled by one
    #: run only has stat "compiled"
    codegen_changes: list = field(default_factory=list)
    toolchain_changed: list = field(default_factory=list)   # "triton 3.6.0 -> 3.9.0", ...
    new_run_problems: list = field(default_factory=list)     # the new run: interrupted, ...
    ratios: dict = field(default_factory=dict)               # test id -> |error| / bound

    @property
    def regressed(self) -> bool:
        return bool(self.new_failures or self.compile_regressions or self.removed
                    or self.new_run_problems)


def diff(old: dict, new: dict, allow_removed: bool = False) -> Diff:
    """``allow_removed``: checks that no longer ran are not a regression (the selection
    changed on purpose); otherwise only those the environments' selection change explains
    are accepted."""
    before = {r["test_id"]: r for r in old["records"]}
    after = {r["test_id"]: r for r in new["records"]}
    d = Diff()
    for tid, rec in after.items():
        now = Status(rec["status"])
        prev = before.get(tid)
        was = Status(prev["status"]) if prev else None
        if prev is None:
            d.added.append((tid, None, now))
        if not now.conforms and (was is None or was.conforms):
            d.new_failures.append((tid, was, now))
        elif now.conforms and was is not None and not was.conforms:
            d.fixes.append((tid, was, now))
        elif was is not None and was is not now:
            d.changed.append((tid, was, now))
        if prev is not None:
            d.compile_regressions += compile_regressions(tid, prev.get("compile_stats") or [],
                                                         rec.get("compile_stats") or [])
            d.codegen_changes += codegen_changes(tid, prev.get("compile_stats") or [],
                                                 rec.get("compile_stats") or [])
    d.ratios = {tid: error_ratio(r) for tid, r in after.items() if error_ratio(r) is not None}
    # most out of bounds first (a failure without a measured ratio after them)
    d.new_failures.sort(key=lambda t: -d.ratios.get(t[0], float("-inf")))
    old_env, new_env = old.get("environment") or {}, new.get("environment") or {}
    d.selection_changed = selection_changes(old_env, new_env)
    d.toolchain_changed = [f"{k} {old_env.get(k)} -> {new_env.get(k)}" for k in TOOLCHAIN
                           if old_env.get(k) != new_env.get(k)]
    for tid, r in before.items():
        if tid not in after:
            why = "--allow-removed" if allow_removed else left_out(r, old_env, new_env)
            if why:
                d.removed_accepted.append((tid, Status(r["status"]), why))
            else:
                d.removed.append((tid, Status(r["status"]), None))
    d.new_run_problems = run_problems(new["records"], new.get("run"))
    return d


def _stats_key(stats: dict) -> str:
    """A compiled kernel's identity: its non-numeric fields (kernel, dtype, shape, ...) but
    its verdicts."""
    return ", ".join(f"{k}={v}" for k, v in sorted(stats.items())
                     if not _is_number(v) and k not in VERDICTS) or "-"


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def compile_regressions(test_id: str, old: list[dict], new: list[dict]) -> list[tuple]:
    old_by_key = {_stats_key(s): s for s in old if isinstance(s, dict)}
    out = []
    for stats in new:
        if not isinstance(stats, dict):
            continue
        key = _stats_key(stats)
        prev = old_by_key.get(key)
        if prev is None:
            continue
        for name, value in stats.items():
            was = prev.get(name)
            if not (_is_number(value) and _is_number(was)) or value == was:
                continue
            worse = value < was if LOWER_IS_WORSE.search(name) else \
                value > was if HIGHER_IS_WORSE.search(name) else False
            if worse:
                out.append((test_id, _label(stats), name, was, value))
    return out


def codegen_changes(test_id: str, old: list[dict], new: list[dict]) -> list[tuple]:
    """Every difference between the kernels two runs compiled for one check: numeric stats
    that changed (either way), verdict messages only one run gave, kernels only one run
    compiled."""
    old_by_key = {_stats_key(s): s for s in old if isinstance(s, dict)}
    new_by_key = {_stats_key(s): s for s in new if isinstance(s, dict)}
    out = []
    for key, stats in new_by_key.items():
        prev = old_by_key.get(key)
        key = _label(stats)
        if prev is None:
            out.append((test_id, key, "compiled", "no", "yes"))
            continue
        for name, value in stats.items():
            was = prev.get(name)
            if _is_number(value) and _is_number(was) and value != was:
                out.append((test_id, key, name, was, value))
        where = f"{stats.get('kernel')} [{stats.get('config')}]: "  # each message's prefix
        for name in VERDICTS:  # by kind: a spill count that changed is a stat change
            before = _kinds(m.removeprefix(where) for m in prev.get(name) or [])
            after = _kinds(m.removeprefix(where) for m in stats.get(name) or [])
            if set(before) != set(after):
                out.append((test_id, key, name,
                            "; ".join(before[k] for k in sorted(set(before) - set(after))) or "-",
                            "; ".join(after[k] for k in sorted(set(after) - set(before))) or "-"))
    out += [(test_id, _label(stats), "compiled", "yes", "no")
            for key, stats in old_by_key.items() if key not in new_by_key]
    return out


def _label(stats: dict) -> str:
    """``kernel [config] dtype shape``: a compiled kernel, short enough for a table."""
    parts = [str(stats.get("kernel", "-")), f"[{stats['config']}]" if stats.get("config") else "",
             str(stats.get("dtype") or ""), str(stats.get("shape") or "")]
    return " ".join(p for p in parts if p)


def _kinds(messages) -> dict[str, str]:
    """Verdict messages by kind: the message with its numbers masked."""
    return {re.sub(r"\d+(\.\d+)?", "#", m): m for m in messages or []}
