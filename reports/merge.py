"""Join shard reports into one; shards must come from the same environment."""
from __future__ import annotations

from triton_cts.results.report_io import ReportError, document

#: Environment fields that must agree between shards (the schema is checked on load).
MUST_AGREE = ("triton", "torch")


def merge(docs: list[tuple[str, dict]], force: bool = False) -> dict:
    """``docs`` is [(file name, report)]. Refuses shards whose triton/torch versions or
    schema versions disagree, or that hold the same test id twice, unless ``force``."""
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
                       **{k: env.get(k) for k in ("triton", "torch", "device", "profiles",
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
                    merged_with_force=bool(problems))
