"""The `duetime` command line: the composition root that parses flags and wires services.

Exit status: 0 on success, 2 on usage errors, 1 on any other error (one line on stderr).

Each command group is a module that registers its own subcommands (`add_parsers`): migrate,
worker, enqueue, jobs, nodes, schedules (with backfill), tokens, stats, dlq and serve; support
holds what they share.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from duetime.cli import dlq, enqueue, jobs, migrate, nodes, schedules, serve, stats, tokens, worker

# in the order `duetime --help` lists them
GROUPS = (migrate, worker, enqueue, jobs, nodes, schedules, tokens, stats, dlq, serve)


def _common_options(defaults: bool) -> argparse.ArgumentParser:
    """--database-url and --tenant, accepted before and after the command.

    Only the top-level parser sets defaults: a subcommand's copy must not overwrite a value
    given before the command name.
    """
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument(
        "--database-url",
        default=None if defaults else argparse.SUPPRESS,
        help="database URL (default: $DUETIME_DATABASE_URL, else sqlite:///duetime.db)",
    )
    parser.add_argument(
        "--tenant",
        default="default" if defaults else argparse.SUPPRESS,
        help="tenant to act as (default: default)",
    )
    return parser


def build_parser() -> argparse.ArgumentParser:
    common = _common_options(defaults=False)
    parser = argparse.ArgumentParser(
        prog="duetime",
        description="duetime: a durable, distributed job scheduler",
        parents=[_common_options(defaults=True)],
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.add_parsers(sub, [common])
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
        return result
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # one clear line; DUETIME_DEBUG=1 shows the traceback
        if os.environ.get("DUETIME_DEBUG"):
            raise
        message = str(exc) or type(exc).__name__
        sys.stderr.write(f"duetime: error: {message}\n")
        return 1
