"""Errors every stage raises for bad input, before any check runs."""


class UsageError(ValueError):
    """A command-line choice names something that does not exist, or is malformed; the
    plugin turns it into pytest's usage error (exit 4) with this message."""


def did_you_mean(name: str, known) -> str:
    """`` (did you mean a, b?)``: the nearest of ``known`` names to a misspelt ``name``
    (difflib's close matches), or ""."""
    import difflib
    near = difflib.get_close_matches(str(name), sorted(map(str, known)), n=3, cutoff=0.6)
    return f" (did you mean {', '.join(near)}?)" if near else ""
