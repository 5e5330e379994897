"""`python manage.py duetime_worker`: a duetime worker that runs the Django tasks of one TASKS
backend (duetime.django.DuetimeBackend), with Django set up. Its flags are those of
`duetime worker` (docs/cli.md) but --app, --database-url and --tenant, which the backend's
OPTIONS give; --backend names the TASKS alias (default: default)."""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandError, CommandParser

from duetime.cli.worker import add_worker_flags, cmd_worker
from duetime.core.errors import InvalidRequest
from duetime.django.management import add_backend_flag, backend_named


class Command(BaseCommand):
    help = (
        "Run a duetime worker for Django's tasks: every installed app's tasks module (and "
        "the backend's OPTIONS MODULES) is imported, and their @task functions run until "
        "SIGTERM or SIGINT."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_backend_flag(parser)
        add_worker_flags(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        backend = backend_named(options["backend"])
        backend.load_tasks()

        def usage_error(message: str) -> NoReturn:
            raise CommandError(message)

        try:
            cmd_worker(argparse.Namespace(**options, usage_error=usage_error), app=backend.app)
        except InvalidRequest as exc:  # a flag's value refused (--loop uvloop without it)
            raise CommandError(str(exc)) from None
