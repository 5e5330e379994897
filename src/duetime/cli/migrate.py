"""`duetime migrate`: create or upgrade the database schema."""

from __future__ import annotations

import argparse
from typing import Any

from duetime.cli.support import make_app, out


def add_parsers(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("migrate", parents=parents, help="create or upgrade the database schema")
    p.set_defaults(func=cmd_migrate)


def cmd_migrate(args: argparse.Namespace) -> int:
    app = make_app(args, create=True)
    applied = app.migrate()
    out(f"applied migrations {applied}" if applied else "schema is up to date")
    return 0
