"""The fast enqueue paths keep every behaviour of the slow ones, on every dialect.

One job without a caller's transaction is one statement committing on its own; enqueue_many
sends one insert per slice of jobs (store.sql.front.BATCH_SLICE), pipelined on PostgreSQL, and
checks each slice's args as it goes. Whatever is returned is what the store holds, a bad job
anywhere in a batch leaves nothing behind, and a batch wakes listeners once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import timedelta
from typing import Any

import pytest

import duetime
from duetime.core.clock import ManualClock
from duetime.core.errors import ArgsMismatch, InvalidRequest, StoreError
from duetime.store.base import Store
from duetime.store.sql.front import BATCH_SLICE
from kit import DialectKit

MANY = 2 * BATCH_SLICE + 17  # three inserts, the last one short


@pytest.fixture
def app(store: Store, store_url: str, clock: ManualClock) -> Iterator[duetime.App]:
    application = duetime.App(store_url, clock=clock)
    yield application
    application.close()


def test_one_job_is_returned_as_stored(app: duetime.App, clock: ManualClock) -> None:
    due = clock.now() + timedelta(minutes=2)
    job = app.enqueue(
        "mail",
        {"to": "a@example.com", "tags": ["x", {"y": 1}]},
        at=due,
        queue="q",
        priority=-4,
        deadline=due + timedelta(hours=1),
        business_key="order-7",
    )
    assert app.get_job(job.id) == job
    assert job.args == {"to": "a@example.com", "tags": ["x", {"y": 1}]}
    plain = app.enqueue("mail", {"n": 1.5, "ok": True, "none": None})
    assert app.get_job(plain.id) == plain


def test_an_idempotency_key_met_by_a_single_enqueue_returns_the_original(
    app: duetime.App,
) -> None:
    first = app.submit("mail", {"n": 1}, key="k1")
    again = app.submit("mail", {"n": 1}, key="k1")
    assert first.created and not again.created
    assert again.job == first.job
    with pytest.raises(duetime.IdempotencyConflict):
        app.enqueue("mail", {"n": 2}, key="k1")
    assert len(app.list_jobs()) == 1


def test_a_bulk_enqueue_of_several_inserts_returns_the_jobs_as_stored(
    app: duetime.App, clock: ManualClock
) -> None:
    start = clock.now() + timedelta(minutes=1)
    args = [{"i": i} if i % 2 else {"i": i, "nested": {"list": [i, "é"]}} for i in range(MANY)]
    dues = [start + timedelta(milliseconds=i) for i in range(MANY)]
    jobs = app.enqueue_many("report", args, queue="bulk", priority=2, at_each=dues)
    assert [j.args for j in jobs] == args
    assert [j.due_at for j in jobs] == dues
    ids = [j.id for j in jobs]
    assert ids == sorted(ids) and len(set(ids)) == MANY  # in the request's order
    assert len({j.business_key for j in jobs}) == MANY
    for job in (jobs[0], jobs[BATCH_SLICE - 1], jobs[BATCH_SLICE], jobs[-1]):
        assert app.get_job(job.id) == job
    assert len(app.list_jobs(limit=1000)) == MANY


def test_batches_enqueued_at_once_each_get_their_own_jobs_ids(app: duetime.App) -> None:
    # batches of several threads at once: each job's id is matched to its own args, in the
    # batch's order (PostgreSQL numbers each insert's jobs in it; the others reserve the ids
    # first, and on MariaDB two reservations at once once deadlocked)
    threads, rounds = 4, 2
    start = threading.Barrier(threads)
    made: dict[int, list[list[duetime.Job]]] = {}

    def enqueue(t: int) -> None:
        start.wait()
        made[t] = [
            app.enqueue_many("report", [{"t": t, "r": r, "i": i} for i in range(MANY)])
            for r in range(rounds)
        ]

    workers = [threading.Thread(target=enqueue, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert sorted(made) == list(range(threads))
    stored = {j.id: j for j in app.list_jobs(limit=threads * rounds * MANY + 1)}
    assert len(stored) == threads * rounds * MANY
    for t, batches in made.items():
        for r, jobs in enumerate(batches):
            assert [j.args for j in jobs] == [{"t": t, "r": r, "i": i} for i in range(MANY)]
            ids = [j.id for j in jobs]
            assert ids == sorted(ids)  # in the request's order
            assert [stored[i].args for i in ids] == [j.args for j in jobs]


@pytest.mark.parametrize("size", [3, MANY])
def test_a_bulk_enqueue_into_a_queue_with_a_backlog_bound_returns_the_jobs_as_stored(
    app: duetime.App, size: int
) -> None:
    # a max_backlog is counted first, in a transaction of the pool's: the inserts (on
    # PostgreSQL pipelined in it, their ids read when the pipeline ends) go the other way
    app.set_queue("bounded", max_backlog=10 * MANY)
    args = [{"i": i} for i in range(size)]
    jobs = app.enqueue_many("report", args, queue="bounded")
    assert [j.args for j in jobs] == args
    ids = [j.id for j in jobs]
    assert ids == sorted(ids) and len(set(ids)) == size
    assert [app.get_job(i) for i in ids] == jobs


def test_text_that_json_escapes_comes_back_from_a_bulk_enqueue_as_given(
    app: duetime.App,
) -> None:
    # the batch travels as one JSON document holding each job's args as JSON text: escapes
    # of both layers (quotes, backslashes, \u sequences, pairs of surrogates) must survive
    tricky = [
        'say "hi"',
        "back\\slash \\u00e9 \\n not an escape",
        "tab\tnew\nline",
        "é\u2603\U0001f600",
        "\u007f\u0001",
        "[1, {",
    ]
    args = [{"t": t, "key \"'\\": [t, {"k": t}], "n": i} for i, t in enumerate(tricky * 3)]
    jobs = app.enqueue_many("report", args)
    assert [j.args for j in jobs] == args
    assert [app.get_job(j.id).args for j in jobs] == args


def test_a_bulk_enqueue_shares_one_due_time_unless_given_one_each(
    app: duetime.App, clock: ManualClock
) -> None:
    jobs = app.enqueue_many("report", [{"i": i} for i in range(MANY)], delay=30)
    assert {j.due_at for j in jobs} == {clock.now() + timedelta(seconds=30)}
    assert app.get_job(jobs[-1].id) == jobs[-1]


def test_a_bad_job_past_the_first_insert_leaves_nothing_behind(app: duetime.App) -> None:
    args: list[dict[str, object]] = [{"i": i} for i in range(MANY)]
    args[-3] = {"i": {1, 2}}  # not JSON: refused after two inserts were sent
    with pytest.raises(InvalidRequest, match="plain JSON"):
        app.enqueue_many("report", args)
    assert app.list_jobs() == []
    app.enqueue("report", {"i": -1})  # the store goes on working
    assert len(app.list_jobs()) == 1


def test_args_a_handler_cannot_take_past_the_first_insert_leave_nothing_behind(
    store: Store, store_url: str, clock: ManualClock
) -> None:
    app = duetime.App(store_url, clock=clock)

    @app.task(name="greet")
    def greet(name: str) -> None: ...

    try:
        args = [{"name": str(i)} for i in range(MANY)]
        args[BATCH_SLICE + 5] = {"nam": "typo"}
        with pytest.raises(ArgsMismatch, match=f"job {BATCH_SLICE + 6} of {MANY}"):
            app.enqueue_many("greet", args)
        assert app.list_jobs() == []
    finally:
        app.close()


def test_a_failed_batch_after_single_enqueues_still_rolls_back_as_one(
    app: duetime.App,
) -> None:
    # a single enqueue's connection commits each statement on its own; a batch on the same
    # pooled connection afterwards must not (the pool hands its connections out in turn)
    kept = [app.enqueue("report", {"i": i}) for i in range(3)]
    args: list[dict[str, object]] = [{"i": i} for i in range(MANY)]
    args[-1] = {"i": float("nan")}
    for _ in range(3):
        with pytest.raises(InvalidRequest):
            app.enqueue_many("report", args)
    assert sorted(j.id for j in app.list_jobs()) == [j.id for j in kept]


# a trigger that refuses a job whose args name "boom": a failure of the database's own, in
# the middle of a batch, after inserts of it have run
REFUSE_BOOM = {
    "postgres": [
        """CREATE OR REPLACE FUNCTION test_refuse_boom() RETURNS trigger AS $$
        BEGIN
            IF NEW.args -> 'boom' IS NOT NULL THEN RAISE EXCEPTION 'boom refused'; END IF;
            RETURN NEW;
        END $$ LANGUAGE plpgsql""",
        """CREATE TRIGGER test_refuse_boom BEFORE INSERT ON duetime_jobs
        FOR EACH ROW EXECUTE FUNCTION test_refuse_boom()""",
    ],
    "sqlite": [
        """CREATE TRIGGER test_refuse_boom BEFORE INSERT ON duetime_jobs
        WHEN json_extract(NEW.args, '$.boom') IS NOT NULL
        BEGIN SELECT RAISE(ABORT, 'boom refused'); END""",
    ],
    "mysql": [
        """CREATE TRIGGER test_refuse_boom BEFORE INSERT ON duetime_jobs FOR EACH ROW
        BEGIN
            IF JSON_EXTRACT(NEW.args, '$.boom') IS NOT NULL THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'boom refused';
            END IF;
        END""",
    ],
}
DROP_REFUSE_BOOM = {
    "postgres": [
        "DROP TRIGGER IF EXISTS test_refuse_boom ON duetime_jobs",
        "DROP FUNCTION IF EXISTS test_refuse_boom()",
    ],
    "sqlite": ["DROP TRIGGER IF EXISTS test_refuse_boom"],
    "mysql": ["DROP TRIGGER IF EXISTS test_refuse_boom"],
}


@pytest.fixture
def refusing(store: Store, kit: DialectKit, store_url: str) -> Iterator[None]:
    """duetime_jobs (of the store, migrated) refuses a job whose args name "boom" for the
    test (the schema outlives it on PostgreSQL and MariaDB/MySQL: the trigger is dropped
    after)."""
    for statement in DROP_REFUSE_BOOM[kit.name] + REFUSE_BOOM[kit.name]:
        kit.execute(store_url, statement)
    try:
        yield
    finally:
        for statement in DROP_REFUSE_BOOM[kit.name]:
            kit.execute(store_url, statement)


def _pooled(app: duetime.App) -> list[tuple[int, bool]]:
    """PostgreSQL: each pooled connection's backend pid and autocommit, all held at once."""
    driver: Any = app.store.driver  # type: ignore[attr-defined]
    with ExitStack() as stack:
        held = [
            stack.enter_context(driver.transaction())
            for _ in range(driver._pool.get_stats()["pool_size"])
        ]
        return sorted(
            (c.native.execute("SELECT pg_backend_pid()").fetchone()[0], c.native.autocommit)
            for c in held
        )


@pytest.mark.usefixtures("refusing")
@pytest.mark.parametrize("size", [3, MANY])  # one insert (PostgreSQL: one statement), several
def test_a_batch_the_database_refuses_leaves_nothing_behind(
    app: duetime.App, kit: DialectKit, size: int
) -> None:
    # on PostgreSQL a batch of several inserts sends BEGIN, the inserts, the wake-up and COMMIT
    # as one pipeline on a connection in autocommit mode, and a batch of one insert is one
    # statement committing alone, its wake-up in it: the refusal (past the first insert, or
    # in the one) must leave nothing, and the connection must go back to the pool as it was
    # (not in autocommit, no transaction open: not closed and replaced either)
    pooled = _pooled(app) if kit.name == "postgres" else []
    listener = app.store.listen()
    try:
        if listener is not None:
            listener.wait(0.01)  # whatever happened while the store was set up
        args: list[dict[str, object]] = [{"i": i} for i in range(size)]
        args[min(BATCH_SLICE + 5, size - 2)] = {"boom": 1}
        for _ in range(3):
            with pytest.raises(StoreError, match="boom refused"):
                app.enqueue_many("report", args)
        assert app.list_jobs() == []
        if listener is not None and kit.wakeups == "due":
            assert listener.wait(0.2) == []  # the wake-up went with the rolled-back batch
    finally:
        if listener is not None:
            listener.close()
    if kit.name == "postgres":  # the same connections (the pool may have opened more)
        after = _pooled(app)
        assert set(pooled) <= set(after)
        assert not any(autocommit for _, autocommit in after)
    kept = app.enqueue_many("report", [{"i": i} for i in range(size)])
    bad: list[dict[str, object]] = [{"i": i} for i in range(size)]
    bad[-1] = {"i": float("nan")}
    for _ in range(3):  # a batch refused by the client still rolls back as one
        with pytest.raises(InvalidRequest):
            app.enqueue_many("report", bad)
    assert sorted(j.id for j in app.list_jobs(limit=1000)) == [j.id for j in kept]


@pytest.mark.parametrize("size", [3, MANY])  # one insert (PostgreSQL: one statement), several
def test_a_bulk_enqueue_wakes_listeners_once_with_its_earliest_due_time(
    app: duetime.App, kit: DialectKit, clock: ManualClock, size: int
) -> None:
    listener = app.store.listen()
    if listener is None:
        assert kit.wakeups == "none"
        return
    try:
        listener.wait(0.01)  # whatever happened while the store was set up
        start = clock.now() + timedelta(seconds=5)
        dues = [start + timedelta(seconds=size - i) for i in range(size)]
        app.enqueue_many("report", [{"i": i} for i in range(size)], queue="mail", at_each=dues)
        heard = listener.wait(10)
        assert heard
        if kit.wakeups == "due":
            assert [(w.queue, w.due_at) for w in heard] == [("mail", min(dues))]
    finally:
        listener.close()
