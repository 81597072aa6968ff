"""Join shard reports into one; shards must come from the same environment, and the
shards of each selection must all be there."""
from __future__ import annotations

from collections import defaultdict

from reports.selection import describe, selection_key
from triton_cts.results import behaviour, input_coverage
from triton_cts.results.expectations import parse_shard
from triton_cts.results.report_io import ReportError, document

#: Environment fields that must agree between shards (the schema is checked on load).
MUST_AGREE = ("triton", "torch")


def merge(docs: list[tuple[str, dict]], force: bool = False, allow_partial: bool = False) -> dict:
    """``docs`` is [(file name, report)]. Refuses shards whose triton/torch versions or
    schema versions disagree, or that hold the same test id twice, unless ``force``; and
    an incomplete shard set (see ``missing_shards``) unless ``allow_partial``, which marks
    the merged run incomplete (it never conforms)."""
    if not docs:
        raise ReportError("merge: no shard files given")
    first_name, first = docs[0]
    problems = []
    for name, doc in docs[1:]:
        if doc.get("schema_version") != first.get("schema_version"):
            problems.append(f"{name} has schema version {doc.get('schema_version')}, "
                            f"{first_name} has {first.get('schema_version')}")
        for key in MUST_AGREE:
            a, b = first["environment"].get(key), doc["environment"].get(key)
            if a != b:
                problems.append(f"{name} ran {key} {b}, {first_name} ran {key} {a}")
    seen: dict[tuple, str] = {}
    records, shards = [], []
    for index, (name, doc) in enumerate(docs):
        env = doc["environment"]
        shards.append({"file": name, "shard": env.get("shard"), "records": len(doc["records"]),
                       **{k: env.get(k) for k in ("triton", "torch", "device", "devices", "profiles",
                                                   "modes", "git_commit", "command")}})
        for rec in doc["records"]:
            key = (rec["test_id"],) + tuple(env.get(k) for k in MUST_AGREE)
            if key in seen and len(problems) < 20:
                problems.append(f"{rec['test_id']} is in both {seen[key]} and {name} "
                                f"(overlapping shards, or the same file twice?)")
            seen[key] = name
            records.append({**rec, "shard_index": index})
    if problems and not force:
        raise ReportError("merge: refusing shards that disagree (use --force to merge "
                          "anyway):\n  " + "\n  ".join(problems))
    missing = missing_shards(docs)
    if missing and not allow_partial:
        raise ReportError("merge: refusing an incomplete set of shards (use --allow-partial "
                          "to merge them into a report marked incomplete, which never "
                          "conforms):\n  " + "\n  ".join(missing))
    env = dict(first["environment"])
    for key in ("profiles", "modes", "implementations", "expectation_files"):
        env[key] = sorted({v for _, d in docs for v in d["environment"].get(key) or []})
    env["started"] = min((d["environment"].get("started") or "" for _, d in docs), default=None)
    env["finished"] = max((d["environment"].get("finished") or "" for _, d in docs), default=None)
    env["shard"] = None
    env["shards"] = shards
    # An entry is stale only if no shard matched it; unexpected passes add up.
    stale_sets = [set((d.get("expectations") or {}).get("stale", [])) for _, d in docs]
    stale = sorted(set.intersection(*stale_sets)) if stale_sets else []
    unexpected = sorted({t for _, d in docs for t in (d.get("expectations") or {}).get("unexpected_passes", [])})
    return document(env, records, expectations={"stale": stale, "unexpected_passes": unexpected},
                    merged_with_force=bool(problems), run=merged_run(docs, missing),
                    input_coverage=input_coverage.table(records),
                    **behaviour.tables(records))  # behaviour and ulp tables of the whole


def missing_shards(docs: list[tuple[str, dict]]) -> list[str]:
    """What a shard set lacks, one line each. Shards are grouped by their selection (the
    command apart from --shard, output paths and parallelism; profiles, modes,
    implementations: ``reports.selection``); each group must hold shards 1..N of one N,
    each once. A report of a whole run (no shard) is complete by itself."""
    groups: dict[tuple, list] = defaultdict(list)
    for name, doc in docs:
        shard = doc["environment"].get("shard")
        if shard:
            try:
                index, count = parse_shard(shard)
            except ValueError as exc:
                raise ReportError(f"{name}: {exc}") from None
            groups[selection_key(doc["environment"])].append((name, index, count))
    out = []
    for key, members in groups.items():
        counts = sorted({n for _, _, n in members})
        if len(counts) > 1:
            out.append(f"{describe(key)}: shards of different counts "
                       f"({', '.join(f'{i}/{n} in {f}' for f, i, n in members)})")
            continue
        count, given = counts[0], {i for _, i, _ in members}
        absent = [f"{i}/{count}" for i in range(1, count + 1) if i not in given]
        if absent:
            out.append(f"missing shard{'s' if len(absent) > 1 else ''} {', '.join(absent)} "
                       f"of {describe(key)} (given: {', '.join(f for f, _, _ in members)})")
    return out  # a shard given twice repeats its test ids: merge refuses that already


def merged_run(docs: list[tuple[str, dict]], missing: list[str]) -> dict:
    """The merged ``run``: interrupted if any shard was, incomplete if shards are missing
    (or a merged input was incomplete); the checks not run and required modes of all."""
    runs = [(name, doc.get("run") or {}) for name, doc in docs]
    stopped = [(name, r) for name, r in runs if r.get("interrupted")]
    missing = missing + [m for _, r in runs for m in r.get("missing") or []]
    return {"interrupted": bool(stopped),
            "signal": next((r.get("signal") for _, r in stopped if r.get("signal")), None),
            "reason": "; ".join(f"{name}: {r.get('reason') or r.get('signal') or 'interrupted'}"
                                for name, r in stopped) or None,
            "collected": sum(r.get("collected") or 0 for _, r in runs),
            "not_run": [t for _, r in runs for t in r.get("not_run") or []],
            "required_modes": list(dict.fromkeys(m for _, r in runs
                                                 for m in r.get("required_modes") or [])),
            "incomplete": bool(missing) or any(r.get("incomplete") for _, r in runs),
            "missing": missing}
