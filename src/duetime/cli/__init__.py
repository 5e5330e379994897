"""The `duetime` command line: the composition root that parses flags and wires services.

Exit status: 0 on success; 2 on usage errors, bad flag values included (argparse's usage and
one error line); 1 on any other error (one line on stderr); 141 when stdout is closed early
(`duetime jobs list | head -1`), quietly, as for a program SIGPIPE stops.

Each command group is a module that registers its own subcommands (`add_parsers`): migrate,
worker, enqueue, jobs, nodes, schedules (with backfill), queues, tenants, limits, outbox (with
relay), tokens, stats, dlq and serve; support holds what they share.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from duetime.cli import (
    dlq,
    enqueue,
    jobs,
    limits,
    migrate,
    nodes,
    outbox,
    queues,
    schedules,
    serve,
    stats,
    tenants,
    tokens,
    worker,
)
from duetime.cli.support import database_url
from duetime.version import __version__

# in the order `duetime --help` lists them
GROUPS = (
    migrate,
    worker,
    enqueue,
    jobs,
    nodes,
    schedules,
    queues,
    tenants,
    limits,
    outbox,
    tokens,
    stats,
    dlq,
    serve,
)

EXIT_STDOUT_CLOSED = 141  # 128 + SIGPIPE: what a shell reports for `seq 100000 | head -1`


def _common_options(defaults: bool) -> argparse.ArgumentParser:
    """--database-url and --tenant, accepted before and after the command.

    Only the top-level parser sets defaults: a subcommand's copy must not overwrite a value
    given before the command name.
    """
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument(
        "--database-url",
        type=database_url,
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
    parser.add_argument(
        "--version", action="version", version=f"duetime {__version__}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.add_parsers(sub, [common])
    _set_usage_errors(parser)
    return parser


def _set_usage_errors(parser: argparse.ArgumentParser) -> None:
    """Give every command `args.usage_error`: its own parser's error (usage, one line, exit 2),
    for the usage errors argparse cannot see (see support.flag_values)."""
    subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subcommands:
        if parser.get_default("usage_error") is None:
            parser.set_defaults(usage_error=parser.error)
        return
    for action in subcommands:
        for child in action.choices.values():
            _set_usage_errors(child)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
        sys.stdout.flush()  # now, where a reader that went away is handled, not at exit
        return result
    except BrokenPipeError:  # stdout's reader went away (`| head`): stop quietly
        _discard_stdout()
        return EXIT_STDOUT_CLOSED
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # one clear line; DUETIME_DEBUG=1 shows the traceback
        if os.environ.get("DUETIME_DEBUG"):
            raise
        message = str(exc) or type(exc).__name__
        sys.stderr.write(f"duetime: error: {message}\n")
        return 1


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so that flushing what is left of it at exit cannot fail
    again (Python would print "Exception ignored ... BrokenPipeError")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor (stdout replaced in-process)
        pass
