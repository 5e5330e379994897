"""Stores: one contract (base.Store), one implementation per database dialect."""

from __future__ import annotations

import os
from pathlib import Path

from duetime.core.errors import ConfigurationError
from duetime.store.base import Store

DEFAULT_URL = "sqlite:///duetime.db"


def resolve_url(url: str | None) -> str:
    """The database URL to use: the argument, else DUETIME_DATABASE_URL, else ./duetime.db."""
    return url or os.environ.get("DUETIME_DATABASE_URL") or DEFAULT_URL


def open_store(url: str | None = None) -> Store:
    """Open the store a URL names: sqlite:///relative.db, sqlite:////abs.db, postgresql://..."""
    url = resolve_url(url)
    if url.startswith("sqlite:///"):
        from duetime.store.sqlite.store import SQLiteStore

        path = url.removeprefix("sqlite:///")
        if not path:
            raise ConfigurationError("sqlite URL has no file name; use sqlite:///duetime.db")
        return SQLiteStore(Path(path))
    if url.startswith(("postgresql://", "postgres://")):
        try:
            from duetime.store.postgres.store import PostgresStore
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ConfigurationError(
                f"PostgreSQL needs psycopg ({exc}); install it: pip install 'duetime[postgres]'"
            ) from None
        return PostgresStore(url)
    raise ConfigurationError(
        f"unsupported database URL {url.split(':', 1)[0]!r}; "
        "use sqlite:///path.db or postgresql://user@host/dbname"
    )


__all__ = ["DEFAULT_URL", "Store", "open_store", "resolve_url"]
