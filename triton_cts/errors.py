"""Errors every stage raises for bad input, before any check runs."""


class UsageError(ValueError):
    """A command-line choice names something that does not exist, or is malformed; the
    plugin turns it into pytest's usage error (exit 4) with this message."""
