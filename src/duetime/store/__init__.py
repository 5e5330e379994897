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


def open_store(url: str | None = None, *, pool_timeout: float | None = None) -> Store:
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
        if pool_timeout is not None:
            return PostgresStore(url, pool_timeout=pool_timeout)
        return PostgresStore(url)
    raise ConfigurationError(
        f"unsupported database URL {url.split(':', 1)[0]!r}; "
        "use sqlite:///path.db or postgresql://user@host/dbname"
    )


__all__ = ["DEFAULT_URL", "Store", "is_unavailable", "open_store", "resolve_url"]


def is_unavailable(exc: BaseException) -> bool:
    """Whether an error means the database could not be reached or could not commit now
    (a restart, a dropped connection, a busy SQLite file): retrying later can succeed."""
    from duetime.core.errors import StoreUnavailable

    if isinstance(exc, StoreUnavailable):
        return True
    import sqlite3

    if isinstance(exc, sqlite3.OperationalError):
        return "locked" in str(exc) or "busy" in str(exc)
    try:
        import psycopg
        import psycopg_pool
    except ImportError:  # pragma: no cover - without the postgres extra
        return False
    return isinstance(exc, psycopg.OperationalError | psycopg_pool.PoolTimeout)
