"""`python manage.py duetime_migrate`: create or upgrade duetime's tables in the database of
a TASKS backend (duetime.django.DuetimeBackend), as `duetime migrate` does for a URL."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from duetime.django.management import add_backend_flag, backend_named


class Command(BaseCommand):
    help = "Create or upgrade duetime's tables in the database of a TASKS backend."

    def add_arguments(self, parser: CommandParser) -> None:
        add_backend_flag(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        applied = backend_named(options["backend"]).app.migrate()
        if options["verbosity"]:
            self.stdout.write(
                f"duetime: applied migrations {applied}" if applied else "duetime: up to date"
            )
