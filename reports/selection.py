"""What a run selected, read from its report's environment: the command without the
options that do not change which checks run (the shard, output files, parallelism and
the devices it spreads over, verbosity), and the profiles, modes and implementations.
Merge groups shards by it; diff tells checks the new selection leaves out from checks
that went missing."""
from __future__ import annotations

import shlex

#: Options that take a value (as the next argument or after "=").
WITH_VALUE = {"--vendor", "--mode", "--impl", "--op", "--profile-dir", "-k", "-m", "-p",
              "--deselect", "--ignore", "--ignore-glob", "--shard", "--report-json",
              "--report-html", "--junitxml", "--junit-xml", "--write-expectations", "-n",
              "--numprocesses", "--maxprocesses", "--dist", "--basetemp", "--tb", "--color",
              "--durations", "-W", "--hypothesis-profile", "--hypothesis-seed",
              "--expectations", "--require-mode", "--reproduce-failure", "--rootdir", "-c",
              "-o", "--timeout", "--maxfail", "--confcutdir", "--devices"}
#: Options (with their value) that do not change which checks a run selects.
NOT_SELECTION = {"--shard", "--report-json", "--report-html", "--junitxml", "--junit-xml",
                 "--write-expectations", "-n", "--numprocesses", "--maxprocesses", "--dist",
                 "--basetemp", "--tb", "--color", "--durations",
                 "--devices"}  # which devices a node uses: all match the run's profile
#: Flags that do not change which checks run: verbosity, output capture, summaries.
QUIET_FLAGS = {"-q", "--quiet", "-v", "--verbose", "-s", "-l", "--showlocals",
               "--full-trace", "--no-header", "--no-summary"}
FIELDS = ("profiles", "modes", "implementations")


def parse_command(command: str | None) -> list[tuple[str | None, str]]:
    """``[(option or None for a positional argument, value)]`` of a ``pytest ...``
    command, the leading ``pytest`` left out; a flag has the value ""."""
    try:
        args = shlex.split(command or "")
    except ValueError:
        args = (command or "").split()
    if args and args[0] in ("pytest", "py.test"):
        args = args[1:]
    out, i = [], 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if arg.startswith("-") and eq and name in WITH_VALUE:
            out.append((name, value))
        elif arg in WITH_VALUE:
            out.append((arg, args[i + 1] if i + 1 < len(args) else ""))
            i += 1
        elif arg[:2] in ("-n", "-p", "-k", "-m", "-W") and len(arg) > 2 and not arg.startswith("--"):
            out.append((arg[:2], arg[2:]))  # -n2, -pno:cacheprovider
        elif arg.startswith("-"):
            out.append((arg, ""))
        else:
            out.append((None, arg))
        i += 1
    return out


def normalized_command(command: str | None) -> str | None:
    """``command`` without the options and flags that do not change which checks run."""
    if not command:
        return None
    keep = []
    for opt, value in parse_command(command):
        if opt in NOT_SELECTION or opt in QUIET_FLAGS or (opt == "-p" and value == "no:cacheprovider"):
            continue
        if opt is not None and opt not in WITH_VALUE and opt.startswith(("-v", "-q", "-r")):
            continue  # -vv, -rs
        keep += [value] if opt is None else [opt, value] if opt in WITH_VALUE else [opt]
    return shlex.join(["pytest", *keep])


def selection_key(env: dict) -> tuple:
    return (normalized_command(env.get("command")),
            *(tuple(sorted(env.get(f) or [])) for f in FIELDS))


def describe(key: tuple) -> str:
    command, *fields = key
    listed = ", ".join(f"{f} {' '.join(v) or '-'}" for f, v in zip(FIELDS, fields))
    return f"`{command}` ({listed})" if command else f"the run of {listed}"


def commands(env: dict) -> set[str]:
    """The normalized commands of a run, or of every shard of a merged one."""
    shards = env.get("shards") or [env]
    return {c for c in (normalized_command(s.get("command")) for s in shards) if c}


def selection_changes(old_env: dict, new_env: dict) -> list[str]:
    """How the selection differs between two runs, one line per field: ``profiles:
    -amd-gfx942``, ``command: `A` -> `B```; empty when it is the same."""
    changes = []
    for f in FIELDS:
        a, b = set(old_env.get(f) or []), set(new_env.get(f) or [])
        if a != b:
            changes.append(f"{f}: " + " ".join([f"-{x}" for x in sorted(a - b)]
                                               + [f"+{x}" for x in sorted(b - a)]))
    a, b = commands(old_env), commands(new_env)
    if a and b and a != b:
        changes.append("command: " + ", ".join(f"`{c}`" for c in sorted(a)) + " -> "
                       + ", ".join(f"`{c}`" for c in sorted(b)))
    return changes


def left_out(record: dict, old_env: dict, new_env: dict) -> str | None:
    """Why the run of ``new_env`` did not select a check of the old run (its profile,
    mode, implementation or op is not selected any more, no test path given covers it, a
    -k/-m expression changed), or None when it should have run it."""
    for key, field in (("profile", "profiles"), ("mode", "modes"), ("impl", "implementations")):
        if record.get(key) and new_env.get(field) is not None and record[key] not in new_env[field]:
            return f"{key} {record[key]} not selected"
    runs = [parse_command(s.get("command")) for s in new_env.get("shards") or [new_env]
            if s.get("command")]
    if not runs:
        return None
    old_runs = [parse_command(s.get("command")) for s in old_env.get("shards") or [old_env]
                if s.get("command")]
    tid = record["test_id"]

    def selects(args) -> bool:
        values = lambda o: [v for opt, v in args if opt == o]
        if values("--op") and record.get("op") and record["op"] not in values("--op"):
            return False
        paths = values(None)
        if paths and not any(_covers(p, tid) for p in paths):
            return False
        return not any(_covers(p, tid) for p in values("--deselect") + values("--ignore"))

    if not any(selects(args) for args in runs):
        return "not selected by the new command"
    expressions = lambda rs: {tuple(v for o, v in args if o in ("-k", "-m")) for args in rs}
    if old_runs and expressions(old_runs) != expressions(runs):
        return "-k/-m changed"
    return None


def _covers(path: str, test_id: str) -> bool:
    path = path.removeprefix("./").rstrip("/")
    if path in ("", ".") or path.startswith("/"):
        return True  # the whole checkout, or a path this id cannot be compared with
    return test_id == path or test_id.startswith((path + "::", path + "/", path + "["))
