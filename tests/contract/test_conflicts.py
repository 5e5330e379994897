"""Transactions that contend for rows, on the dialects with row locks (SQLite has one writer
at a time): PostgreSQL and MySQL/MariaDB.

A deadlock the database breaks is a StoreConflict, and the store runs the transaction again:
two transactions lock two jobs' rows in opposite orders; the database rolls one of them back,
and the store's retry makes the same work succeed on its next run.

The lower priority classes keep their share when another claim holds some of the rows a claim
chose (docs/flow-control.md, "Priorities"): a second connection holds the oldest
high-priority rows locked, as a concurrent worker's claim does between its read and its
commit. A claim that chose them starts fewer jobs than its slots, yet more were due, so its
lower classes' credit must not be dropped as if it had taken every due job.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import duetime
from duetime.core.clock import ManualClock
from duetime.core.errors import IllegalTransition, StoreConflict
from duetime.core.outbox import Dispatch
from duetime.core.states import Event, JobStatus
from duetime.runtime.fairness import ClaimFairness
from duetime.store import open_store
from duetime.store.sql.front import SQLStore
from duetime.store.sql.shared import conflicts_retried
from jobhelpers import enqueue
from kit import DialectKit, kit_named

ROW_LOCKING = ["postgres", "mysql"]


@pytest.fixture(params=ROW_LOCKING)
def kit(request: pytest.FixtureRequest) -> DialectKit:
    return kit_named(request.param)


@pytest.fixture
def sql_store(kit: DialectKit, tmp_path: Path) -> Iterator[SQLStore]:
    url = kit.fresh_url(tmp_path)
    app = duetime.App(database_url=url)
    app.migrate()
    app.close()
    store = open_store(url)
    assert isinstance(store, SQLStore)
    yield store
    store.close()


def _lock_in_order(
    kit: DialectKit, store: SQLStore, first: str, second: str, both_hold: threading.Barrier
) -> None:
    with store.driver.transaction() as c, store.driver.translated():
        kit.execute_on(c.native, "UPDATE duetime_deadlock_probe SET v = v + 1 WHERE k = ?", [first])
        both_hold.wait(timeout=10)
        kit.execute_on(
            c.native, "UPDATE duetime_deadlock_probe SET v = v + 1 WHERE k = ?", [second]
        )


def test_a_deadlock_is_a_store_conflict_and_rerunning_it_succeeds(
    kit: DialectKit, sql_store: SQLStore
) -> None:
    url = sql_store.driver.url  # type: ignore[attr-defined]
    kit.execute(url, "DROP TABLE IF EXISTS duetime_deadlock_probe")
    kit.execute(url, "CREATE TABLE duetime_deadlock_probe (k varchar(8) PRIMARY KEY, v int)")
    kit.execute(url, "INSERT INTO duetime_deadlock_probe (k, v) VALUES ('a', 0), ('b', 0)")
    other = open_store(url)
    assert isinstance(other, SQLStore)
    both_hold = threading.Barrier(2)
    raised: list[BaseException] = []
    runs = {"main": 0}

    class Probe:
        @conflicts_retried
        def bump(self, first: str, second: str, store: SQLStore) -> None:
            runs["main"] += 1
            _lock_in_order(kit, store, first, second, both_hold if runs["main"] == 1 else idle)

    idle = threading.Barrier(1)

    def against() -> None:
        try:
            _lock_in_order(kit, other, "b", "a", both_hold)
        except BaseException as exc:
            raised.append(exc)

    try:
        t = threading.Thread(target=against)
        t.start()
        try:
            Probe().bump("a", "b", sql_store)
        except BaseException as exc:
            raised.append(exc)
        t.join(timeout=30)
        # exactly one side was chosen as the victim, and it is told as a StoreConflict
        assert len(raised) <= 1, raised
        if raised:  # the other thread was the victim: it ran once and was refused
            assert isinstance(raised[0], StoreConflict), repr(raised[0])
            assert runs["main"] == 1
            rows = dict(kit.execute(url, "SELECT k, v FROM duetime_deadlock_probe"))
            assert rows == {"a": 1, "b": 1}  # only main's transaction counted
        else:  # main was the victim: the decorator ran it again, and both committed
            assert runs["main"] == 2
            rows = dict(kit.execute(url, "SELECT k, v FROM duetime_deadlock_probe"))
            assert rows == {"a": 2, "b": 2}
    finally:
        other.close()
        kit.execute(url, "DROP TABLE IF EXISTS duetime_deadlock_probe")


def test_the_retry_gives_up_after_a_few_runs_and_leaves_a_callers_transaction_alone() -> None:
    calls: list[Any] = []

    class Flaky:
        @conflicts_retried
        def write(self, *, connection: Any = None) -> str:
            calls.append(connection)
            raise StoreConflict("deadlock")

    with pytest.raises(StoreConflict):
        Flaky().write()
    assert len(calls) == 5
    calls.clear()
    with pytest.raises(StoreConflict):
        Flaky().write(connection=object())
    assert len(calls) == 1


def test_a_claim_that_lost_chosen_rows_to_another_keeps_the_lower_class_share(
    kit: DialectKit, sql_store: SQLStore, clock: ManualClock
) -> None:
    low = [enqueue(sql_store, clock, priority=0).id for _ in range(10)]
    high = [enqueue(sql_store, clock, priority=10).id for _ in range(80)]
    fair = ClaimFairness(0.1)  # a worker's claim policy: claims of 10 slots, one low slot each
    url = sql_store.driver.url  # type: ignore[attr-defined]
    with closing(kit.connect(url)) as other:  # a concurrent claim, between read and commit
        marks = ", ".join("?" for _ in high[:4])
        kit.execute_on(other, "BEGIN")  # the kit's connections autocommit
        kit.execute_on(
            other, f"SELECT id FROM duetime_jobs WHERE id IN ({marks}) FOR UPDATE", high[:4]
        )
        lows = []
        for _ in range(6):
            got = fair.claim(
                sql_store, worker_id="w", queues=None, limit=10, now=clock.now()
            ).claims
            lows.append(sum(1 for c in got if c.job.priority == 0))
        kit.execute_on(other, "ROLLBACK")
    # every claim keeps the low class's slot; dropping the credit after a claim that came
    # short under contention gave 1, 0, 1, 0, ...
    assert lows == [1] * 6
    assert (
        sorted(
            c.job.id
            for c in fair.claim(
                sql_store, worker_id="w", queues=None, limit=100, now=clock.now()
            ).claims
            if c.job.priority == 0
        )
        == low[6:]
    )


def test_a_withdraw_that_waits_on_a_workers_accept_leaves_the_attempt_to_the_worker(
    kit: DialectKit, sql_store: SQLStore, clock: ManualClock
) -> None:
    # docs/outbox.md, "Withdrawn dispatches": an operator's reschedule of a dispatched job
    # races a worker's accept_dispatch on the job's row lock; the worker took the attempt
    # first (its transaction commits while the reschedule waits): the reschedule is refused
    sql_store.set_queue("q", clock.now(), dispatch=Dispatch.OUTBOX)
    job = enqueue(sql_store, clock, queue="q")
    [event] = sql_store.dispatch_outbox(clock.now(), 10, lease_seconds=300)
    url = sql_store.driver.url  # type: ignore[attr-defined]
    outcome: list[BaseException | None] = []

    def reschedule() -> None:
        try:
            sql_store.transition(job.id, Event.RESCHEDULE, clock.now(), due_at=clock.now())
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    with closing(kit.connect(url)) as worker:  # accept_dispatch, between its lock and commit
        kit.execute_on(worker, "BEGIN")  # the kit's connections autocommit
        kit.execute_on(worker, "SELECT id FROM duetime_jobs WHERE id = ? FOR UPDATE", [job.id])
        # the dispatched attempt is its job's row's (migration 22)
        kit.execute_on(
            worker,
            "UPDATE duetime_jobs SET worker_id = 'w' WHERE id = ? AND attempt_id = ?",
            [job.id, event.attempt_id],
        )
        racing = threading.Thread(target=reschedule)
        racing.start()
        racing.join(timeout=1.0)
        assert racing.is_alive()  # it waits for the job's row
        kit.execute_on(worker, "COMMIT")
        racing.join(timeout=10)
    [error] = outcome
    assert isinstance(error, IllegalTransition)
    found = sql_store.get_job(job.id)
    assert found is not None and found.status is JobStatus.RUNNING and found.dispatched_at is None
    assert found.attempts == 1 and found.attempt_history[-1].worker_id == "w"
