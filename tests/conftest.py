"""Fixtures shared by every suite: a manual clock and a store of each dialect."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from duetime.core.clock import ManualClock
from duetime.store.base import Store

STORE_KINDS = ["sqlite", "postgres"]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(scope="session")
def pg_database_url() -> Iterator[str]:
    """One fresh PostgreSQL database for this test run (a private server is started if needed)."""
    import pgserver

    url = pgserver.create_database()
    yield url
    pgserver.drop_database(url)


def reset_postgres(url: str) -> None:
    """Drop every duetime table so the next migrate() builds a clean schema (tests may break it)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
            "AND tablename LIKE 'duetime%%'"
        ).fetchall()
        if rows:
            names = ", ".join(f'"{name}"' for (name,) in rows)
            conn.execute(f"DROP TABLE IF EXISTS {names} CASCADE")


@pytest.fixture(params=STORE_KINDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database URL of each dialect, migrated and empty."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'duetime.db'}"
    url: str = request.getfixturevalue("pg_database_url")
    reset_postgres(url)
    return url


@pytest.fixture
def make_store(store_url: str) -> Iterator[Callable[[], Store]]:
    """Opens more stores (connections) on the same database; all are closed after the test."""
    from duetime.store import open_store

    opened: list[Store] = []

    def make() -> Store:
        s = open_store(store_url)
        opened.append(s)
        return s

    first = make()
    first.migrate()
    yield make
    for s in opened:
        s.close()


@pytest.fixture
def store(make_store: Callable[[], Store]) -> Store:
    return make_store()
