"""``python -m triton_cts``: what exists.

- ``ops [OP]``: every op (its dtypes and the libraries that implement it), or one op's
  arguments and outputs, dtypes, tolerance and error model, relations, variants and
  libraries; ``--markdown`` writes the page docs/ops.md;
- ``profiles``: each profile's family, device, target and how it is detected.
"""
from __future__ import annotations

import argparse
import sys

from triton_cts import describe
from triton_cts.errors import UsageError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m triton_cts",
                                     description="What the suites check: ops and profiles.")
    commands = parser.add_subparsers(dest="command", required=True)
    ops = commands.add_parser("ops", help="every op, or one op's signature and checks")
    ops.add_argument("op", nargs="?", help="an op name (see the list without it)")
    ops.add_argument("--markdown", action="store_true",
                     help=f"print the generated page instead ({describe.REGENERATE})")
    profiles = commands.add_parser("profiles", help="every profile: family, target, detection")
    profiles.add_argument("--profile-dir", action="append", default=[], metavar="DIR",
                          help="also list the profiles in DIR (as pytest's --profile-dir)")
    args = parser.parse_args(argv)
    try:
        if args.command == "ops":
            if args.markdown and args.op:
                raise UsageError("--markdown writes the whole page: give no op with it")
            text = describe.ops_markdown() if args.markdown else describe.ops_text(args.op)
        else:
            text = describe.profiles_text(args.profile_dir)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a profile that does not load, say: its message, no trace
        from triton_cts.profiles import ProfileError
        if not isinstance(exc, ProfileError):
            raise
        print(f"error: invalid vendor profile: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
