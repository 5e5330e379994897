"""Enqueue inside the application's own transaction: the job exists iff that commits."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy
from sqlalchemy.orm import Session

import duetime
from duetime.core.errors import ConfigurationError


@pytest.fixture
def orders(pg_database_url: str) -> Iterator[str]:
    """A migrated PostgreSQL database with an application table of its own."""
    from conftest import reset_postgres

    reset_postgres(pg_database_url)
    duetime.App(database_url=pg_database_url).migrate()
    with psycopg.connect(pg_database_url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS app_orders")
        conn.execute("CREATE TABLE app_orders (id int PRIMARY KEY)")
    yield pg_database_url
    with psycopg.connect(pg_database_url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS app_orders")


@pytest.fixture
def app(orders: str) -> Iterator[duetime.App]:
    application = duetime.App(database_url=orders)
    yield application
    application.close()


@pytest.mark.parametrize("commit", [True, False])
def test_psycopg_transaction(app: duetime.App, orders: str, commit: bool) -> None:
    with psycopg.connect(orders) as conn:
        conn.execute("INSERT INTO app_orders VALUES (1)")
        job = app.enqueue("ship", {"order": 1}, connection=conn)
        many = app.enqueue_many("ship", [{"order": 2}, {"order": 3}], connection=conn)
        # not visible to anyone else before the commit
        assert app.store.get_job(job.id) is None
        if commit:
            conn.commit()
        else:
            conn.rollback()
    ids = [job.id, *[j.id for j in many]]
    found = [app.store.get_job(i) for i in ids]
    assert all(j is not None for j in found) if commit else all(j is None for j in found)


@pytest.mark.parametrize("commit", [True, False])
def test_sqlalchemy_session(app: duetime.App, orders: str, commit: bool) -> None:
    engine = sqlalchemy.create_engine(orders.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with Session(engine) as session:
            session.execute(sqlalchemy.text("INSERT INTO app_orders VALUES (7)"))
            job = app.enqueue("ship", {"order": 7}, connection=session)
            if commit:
                session.commit()
            else:
                session.rollback()
        assert (app.store.get_job(job.id) is not None) == commit
        with engine.connect() as sa_conn:
            n = sa_conn.execute(sqlalchemy.text("SELECT count(*) FROM app_orders")).scalar()
        assert n == (1 if commit else 0)
    finally:
        engine.dispose()


def test_an_idempotency_conflict_leaves_the_application_transaction_usable(
    app: duetime.App, orders: str
) -> None:
    app.enqueue("ship", {"order": 1}, key="k")
    with psycopg.connect(orders) as conn:
        conn.execute("INSERT INTO app_orders VALUES (1)")
        with pytest.raises(duetime.IdempotencyConflict):
            app.enqueue("ship", {"order": 2}, key="k", connection=conn)
        conn.execute("INSERT INTO app_orders VALUES (2)")  # still usable: only a savepoint
        conn.commit()
        assert conn.execute("SELECT count(*) FROM app_orders").fetchone() == (2,)


def test_sqlite_refuses_a_foreign_connection(tmp_path: Path) -> None:
    app = duetime.App(database_url=f"sqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(ConfigurationError, match="needs PostgreSQL"):
        app.enqueue("ship", connection=object())
    assert app.list_jobs() == []
    app.close()


def test_an_unsupported_connection_object_is_refused(app: duetime.App, orders: str) -> None:
    with pytest.raises(ConfigurationError, match="psycopg 3 connection"):
        app.enqueue("ship", connection=object())
