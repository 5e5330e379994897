"""The management commands' shared part: the TASKS backend they act on."""

from __future__ import annotations

from django.core.management.base import CommandError, CommandParser

from duetime.django.backend import DuetimeBackend
from duetime.django.compat import task_backends


def add_backend_flag(parser: CommandParser) -> None:
    parser.add_argument(
        "--backend",
        default="default",
        metavar="ALIAS",
        help="the TASKS alias of a duetime.django.DuetimeBackend (default: default)",
    )


def backend_named(alias: str) -> DuetimeBackend:
    """The DuetimeBackend of TASKS[alias], or a CommandError saying what to give."""
    if alias not in task_backends.settings:
        raise CommandError(f"no TASKS backend {alias!r}; give --backend one of settings.TASKS")
    backend = task_backends[alias]
    if not isinstance(backend, DuetimeBackend):
        raise CommandError(
            f"TASKS[{alias!r}] is {type(backend).__name__}, not "
            "duetime.django.DuetimeBackend; give --backend the alias of one"
        )
    return backend
