"""Enqueue inside the application's own transaction: the job exists iff that commits.

On every dialect that can join an application's transaction (PostgreSQL with psycopg, MySQL
with PyMySQL), with the driver's own connection and with a SQLAlchemy session on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from sqlalchemy.orm import Session

import duetime
from duetime.core.errors import ConfigurationError
from kit import DialectKit, kit_named

JOINING = ["postgres", "mysql"]
SQLALCHEMY_SCHEME = {"postgres": "postgresql+psycopg", "mysql": "mysql+pymysql"}


@pytest.fixture(params=JOINING)
def kit(request: pytest.FixtureRequest) -> DialectKit:
    return kit_named(request.param)


@pytest.fixture
def orders(kit: DialectKit, tmp_path: Path) -> Iterator[str]:
    """A migrated database with an application table of its own."""
    url = kit.fresh_url(tmp_path)
    duetime.App(database_url=url).migrate()
    kit.execute(url, "DROP TABLE IF EXISTS app_orders")
    kit.execute(url, "CREATE TABLE app_orders (id int PRIMARY KEY)")
    yield url
    kit.execute(url, "DROP TABLE IF EXISTS app_orders")


@pytest.fixture
def app(orders: str) -> Iterator[duetime.App]:
    application = duetime.App(database_url=orders)
    yield application
    application.close()


def native(kit: DialectKit, url: str) -> Any:
    """The driver's own connection, in a transaction (not autocommit)."""
    conn = kit.connect(url)
    if kit.name == "postgres":
        conn.autocommit = False
    else:
        conn.autocommit(False)
    return conn


def count_orders(kit: DialectKit, url: str) -> int:
    return int(kit.execute(url, "SELECT count(*) FROM app_orders")[0][0])


@pytest.mark.parametrize("commit", [True, False])
def test_the_drivers_own_connection(
    app: duetime.App, kit: DialectKit, orders: str, commit: bool
) -> None:
    with closing(native(kit, orders)) as conn:
        conn.cursor().execute("INSERT INTO app_orders VALUES (1)")
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
    assert count_orders(kit, orders) == (1 if commit else 0)


@pytest.mark.parametrize("commit", [True, False])
def test_a_chain_and_a_group_join_the_application_transaction(
    app: duetime.App, kit: DialectKit, orders: str, commit: bool
) -> None:
    with closing(native(kit, orders)) as conn:
        conn.cursor().execute("INSERT INTO app_orders VALUES (1)")
        chained = app.chain(duetime.step("pick"), duetime.step("ship"), connection=conn)
        group = app.group(
            [duetime.step("pack", {"box": i}) for i in range(3)],
            then=duetime.step("notify"),
            depends_on=[chained[-1].id],
            connection=conn,
        )
        assert app.store.get_job(chained[0].id) is None  # not committed on its own
        if commit:
            conn.commit()
        else:
            conn.rollback()
    assert group.callback is not None
    ids = [j.id for j in chained] + group.ids + [group.callback.id]
    found = [app.store.get_job(i) for i in ids]
    assert all(j is not None for j in found) if commit else all(j is None for j in found)
    if commit:
        callback = found[-1]
        assert callback is not None and [p.id for p in callback.parents] == group.ids


@pytest.mark.parametrize("commit", [True, False])
def test_the_enqueue_may_be_the_first_statement_of_the_transaction(
    app: duetime.App, kit: DialectKit, orders: str, commit: bool
) -> None:
    # a connection out of autocommit whose transaction has run nothing yet (psycopg: idle), as
    # in a Django `transaction.atomic()` block that enqueues before it writes its model
    with closing(native(kit, orders)) as conn:
        job = app.enqueue("ship", {"order": 1}, connection=conn)
        assert app.store.get_job(job.id) is None  # not committed on its own
        conn.cursor().execute("INSERT INTO app_orders VALUES (1)")
        if commit:
            conn.commit()
        else:
            conn.rollback()
    assert (app.store.get_job(job.id) is not None) == commit
    assert count_orders(kit, orders) == (1 if commit else 0)


@pytest.mark.parametrize("commit", [True, False])
def test_sqlalchemy_session(app: duetime.App, kit: DialectKit, orders: str, commit: bool) -> None:
    rest = orders.split("://", 1)[1]
    engine = sqlalchemy.create_engine(f"{SQLALCHEMY_SCHEME[kit.name]}://{rest}")
    try:
        with Session(engine) as session:
            session.execute(sqlalchemy.text("INSERT INTO app_orders VALUES (7)"))
            job = app.enqueue("ship", {"order": 7}, connection=session)
            if commit:
                session.commit()
            else:
                session.rollback()
        assert (app.store.get_job(job.id) is not None) == commit
        assert count_orders(kit, orders) == (1 if commit else 0)
    finally:
        engine.dispose()


def test_an_idempotency_conflict_leaves_the_application_transaction_usable(
    app: duetime.App, kit: DialectKit, orders: str
) -> None:
    app.enqueue("ship", {"order": 1}, key="k")
    with closing(native(kit, orders)) as conn:
        conn.cursor().execute("INSERT INTO app_orders VALUES (1)")
        with pytest.raises(duetime.IdempotencyConflict):
            app.enqueue("ship", {"order": 2}, key="k", connection=conn)
        conn.cursor().execute("INSERT INTO app_orders VALUES (2)")  # usable: only a savepoint
        conn.commit()
    assert count_orders(kit, orders) == 2


def test_the_same_key_in_the_application_transaction_returns_the_original(
    app: duetime.App, kit: DialectKit, orders: str
) -> None:
    first = app.enqueue("ship", {"order": 1}, key="k")
    with closing(native(kit, orders)) as conn:
        again = app.enqueue("ship", {"order": 1}, key="k", connection=conn)
        conn.commit()
    assert again.id == first.id


def test_sqlite_refuses_a_foreign_connection(tmp_path: Path) -> None:
    app = duetime.App(database_url=f"sqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(ConfigurationError, match="needs PostgreSQL or MySQL"):
        app.enqueue("ship", connection=object())
    assert app.list_jobs() == []
    app.close()


def test_an_unsupported_connection_object_is_refused(
    app: duetime.App, kit: DialectKit, orders: str
) -> None:
    expected = {"postgres": "psycopg 3 connection", "mysql": "PyMySQL connection"}[kit.name]
    with pytest.raises(ConfigurationError, match=expected):
        app.enqueue("ship", connection=object())


@pytest.mark.parametrize("commit", [True, False])
def test_a_batch_of_several_inserts_joins_the_application_transaction(
    app: duetime.App, kit: DialectKit, orders: str, commit: bool
) -> None:
    from duetime.store.sql.front import BATCH_SLICE

    count = 2 * BATCH_SLICE + 3
    with closing(native(kit, orders)) as conn:
        conn.cursor().execute("INSERT INTO app_orders VALUES (1)")
        many = app.enqueue_many("ship", [{"order": i} for i in range(count)], connection=conn)
        assert app.store.get_job(many[-1].id) is None  # not committed on its own
        conn.cursor().execute("INSERT INTO app_orders VALUES (2)")  # still usable
        if commit:
            conn.commit()
        else:
            conn.rollback()
    found = [app.store.get_job(j.id) for j in many]
    assert found == (many if commit else [None] * count)
    assert count_orders(kit, orders) == (2 if commit else 0)


def test_a_bad_job_late_in_a_batch_leaves_the_application_transaction_usable(
    app: duetime.App, kit: DialectKit, orders: str
) -> None:
    from duetime.store.sql.front import BATCH_SLICE

    args: list[dict[str, object]] = [{"order": i} for i in range(2 * BATCH_SLICE + 3)]
    args[-1] = {"order": float("inf")}
    with closing(native(kit, orders)) as conn:
        conn.cursor().execute("INSERT INTO app_orders VALUES (1)")
        with pytest.raises(duetime.InvalidRequest):
            app.enqueue_many("ship", args, connection=conn)
        conn.cursor().execute("INSERT INTO app_orders VALUES (2)")  # only a savepoint was lost
        conn.commit()
    assert app.list_jobs() == []
    assert count_orders(kit, orders) == 2


@pytest.mark.parametrize("commit", [True, False])
def test_a_sequence_and_a_unique_window_in_the_applications_transaction(
    app: duetime.App, kit: DialectKit, orders: str, commit: bool
) -> None:
    """Jobs of a sequence and a unique job join the application's transaction like any other:
    a rollback leaves no job and no sequence row; a commit, the sequence in order."""
    with closing(native(kit, orders)) as conn:
        first = app.enqueue("post", {"n": 1}, sequence="acct-1", connection=conn)
        second = app.enqueue("post", {"n": 2}, sequence="acct-1", connection=conn)
        unique = app.enqueue("mail", {"to": "a"}, unique_for="10m", connection=conn)
        again = app.submit("mail", {"to": "a"}, unique_for="10m", connection=conn)
        assert (first.status, second.status) == ("scheduled", "waiting")
        assert (again.created, again.job.id) == (False, unique.id)
        if commit:
            conn.commit()
        else:
            conn.rollback()
    found = [app.store.get_job(j.id) for j in (first, second, unique)]
    assert all(j is not None for j in found) if commit else all(j is None for j in found)
    rows = kit.execute(orders, "SELECT COUNT(*) FROM duetime_sequences")[0][0]
    assert rows == (1 if commit else 0)
    if not commit:  # the key is free again
        assert app.submit("mail", {"to": "a"}, unique_for="10m").created
