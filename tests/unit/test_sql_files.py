"""Both dialects define the same named statements and the same migration versions."""

from __future__ import annotations

from duetime.store.sql import load_migrations, load_queries


def test_dialects_define_the_same_query_names() -> None:
    assert set(load_queries("sqlite")) == set(load_queries("postgres"))


def test_dialects_have_the_same_migrations() -> None:
    sqlite = [(v, name) for v, name, _ in load_migrations("sqlite")]
    postgres = [(v, name) for v, name, _ in load_migrations("postgres")]
    assert sqlite == postgres
    assert [v for v, _ in sqlite] == list(range(1, len(sqlite) + 1))
