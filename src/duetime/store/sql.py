"""Load named SQL statements from a dialect's queries.sql (`-- name: x` starts a block)."""

from __future__ import annotations

import re
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


def load_queries(dialect: str) -> dict[str, str]:
    text = resources.files("duetime.store").joinpath(dialect, "queries.sql").read_text()
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"{dialect}/queries.sql defines {name} twice")
        queries[name] = body.strip().rstrip(";")
    return queries


def load_migrations(dialect: str) -> list[tuple[int, str, str]]:
    """(version, name, sql) for each migrations/NNNN_name.sql, in version order."""
    folder = resources.files("duetime.store").joinpath(dialect, "migrations")
    found = []
    for entry in folder.iterdir():
        match = re.fullmatch(r"(\d{4})_(\w+)\.sql", entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.read_text()))
    return sorted(found)
