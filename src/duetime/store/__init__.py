"""Stores: one contract (base.Store), implemented once (sql.SQLStore) over a driver per
database dialect. A dialect is registered here by the URL schemes it answers to."""

from __future__ import annotations

import importlib
import os
from typing import Any

from duetime.core.errors import ConfigurationError
from duetime.store.base import Store

DEFAULT_URL = "sqlite:///duetime.db"

# URL scheme -> (the module whose open_driver(url, pool_timeout) opens it, the pip extra it
# needs); the module may also have missing_database(url) (see missing_database below)
DIALECTS: dict[str, tuple[str, str | None]] = {
    "sqlite": ("duetime.store.sqlite.driver", None),
    "postgresql": ("duetime.store.postgres.driver", "postgres"),
    "postgres": ("duetime.store.postgres.driver", "postgres"),
    "mysql": ("duetime.store.mysql.driver", "mysql"),
    "mariadb": ("duetime.store.mysql.driver", "mysql"),
}


def resolve_url(url: str | None) -> str:
    """The database URL to use: the argument, else DUETIME_DATABASE_URL, else ./duetime.db."""
    return url or os.environ.get("DUETIME_DATABASE_URL") or DEFAULT_URL


def open_store(url: str | None = None, *, pool_timeout: float | None = None) -> Store:
    """Open the store a URL names: sqlite:///relative.db, sqlite:////abs.db,
    postgresql://user@host/db, mysql://user:password@host:3306/db (or mariadb://)."""
    from duetime.store.sql.front import SQLStore

    url = resolve_url(url)
    driver = _dialect(url).open_driver(url, pool_timeout=pool_timeout)
    return SQLStore(driver)


def missing_database(url: str | None = None) -> str | None:
    """Why the database a URL names does not exist, when its dialect can tell without creating
    it (SQLite: the file is not there, and opening it would create an empty one); else None
    (a server reports a missing database when it is opened)."""
    url = resolve_url(url)
    check = getattr(_dialect(url), "missing_database", None)
    return check(url) if check is not None else None


def url_scheme(url: str) -> str:
    """The scheme of a database URL, one of DIALECTS, or a ConfigurationError."""
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme not in DIALECTS:
        raise ConfigurationError(
            f"unsupported database URL {scheme or url!r}; use sqlite:///path.db, "
            "postgresql://user@host/dbname or mysql://user@host/dbname"
        )
    return scheme


def _dialect(url: str) -> Any:
    """The module of the dialect a URL's scheme names (see DIALECTS)."""
    scheme = url_scheme(url)
    module_name, extra = DIALECTS[scheme]
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigurationError(
            f"{scheme} needs a driver that is not installed ({exc}); "
            f"install it: pip install 'duetime[{extra}]'"
        ) from None


__all__ = [
    "DEFAULT_URL",
    "DIALECTS",
    "Store",
    "missing_database",
    "open_store",
    "resolve_url",
    "url_scheme",
]
