"""Local effects that apply once: a handler's writes commit with its fenced success."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest

import duetime
from duetime.core.clock import ManualClock, SystemClock
from duetime.core.models import Outcome
from duetime.core.retry import ErrorCategory
from duetime.core.states import AttemptStatus, Event, JobStatus
from duetime.runtime.completer import Completer
from duetime.runtime.reaper import Reaper
from duetime.runtime.service import BlockingCalls
from duetime.runtime.worker import Worker
from duetime.store import open_store
from duetime.store.base import Store
from jobhelpers import claim_one, enqueue, run_until
from kit import DialectKit, kit_named


def write_credit(store: Store, conn: Any, job_id: int) -> None:
    kit_named(store.dialect).execute_on(conn, "INSERT INTO credits (job_id) VALUES (?)", (job_id,))


@pytest.fixture
def ledger(store: Store, kit: DialectKit, store_url: str) -> Iterator[Store]:
    """The store, plus an application table `credits` in the same database."""
    kit.execute(store_url, "DROP TABLE IF EXISTS credits")
    kit.execute(store_url, "CREATE TABLE credits (job_id bigint NOT NULL)")
    yield store


@pytest.fixture
def credits(kit: DialectKit, store_url: str) -> Callable[[], list[int]]:
    """Reads the credits table (the application's own writes)."""
    return lambda: [r[0] for r in kit.execute(store_url, "SELECT job_id FROM credits")]


def test_the_effect_and_the_success_commit_together(
    ledger: Store, clock: ManualClock, credits: Callable[[], list[int]]
) -> None:
    enqueue(ledger, clock)
    job, lease = claim_one(ledger, clock)
    with ledger.completion(lease, Outcome(Event.SUCCEED), clock.now) as conn:
        write_credit(ledger, conn, job.id)
    done = ledger.get_job(job.id)
    assert done is not None and done.status is JobStatus.SUCCEEDED
    assert done.attempt_history[0].status is AttemptStatus.SUCCEEDED
    assert credits() == [job.id]


def test_a_fenced_out_attempt_applies_nothing(
    ledger: Store, clock: ManualClock, credits: Callable[[], list[int]]
) -> None:
    enqueue(ledger, clock)
    job, old = claim_one(ledger, clock, worker="paused")
    clock.advance(31)
    Reaper(ledger, clock).run_once()  # the lease lapsed: back to scheduled
    with pytest.raises(duetime.StaleAttempt, match="rolled back"):
        with ledger.completion(old, Outcome(Event.SUCCEED), clock.now) as conn:
            write_credit(ledger, conn, job.id)
    assert credits() == []
    lost = ledger.get_job(job.id)
    assert lost is not None and lost.attempt_history[0].late_outcome == "succeeded"
    clock.advance(3600)
    _, fresh = claim_one(ledger, clock, worker="fresh")
    with ledger.completion(fresh, Outcome(Event.SUCCEED), clock.now) as conn:
        write_credit(ledger, conn, job.id)
    assert credits() == [job.id]  # applied exactly once


def test_an_error_in_the_block_rolls_everything_back(
    ledger: Store, clock: ManualClock, credits: Callable[[], list[int]]
) -> None:
    enqueue(ledger, clock)
    job, lease = claim_one(ledger, clock)
    with pytest.raises(ZeroDivisionError):
        with ledger.completion(lease, Outcome(Event.SUCCEED), clock.now) as conn:
            write_credit(ledger, conn, job.id)
            _ = 1 / 0
    assert credits() == []
    still = ledger.get_job(job.id)
    assert still is not None and still.status is JobStatus.RUNNING


def test_a_handler_uses_the_completion_transaction(
    ledger: Store, store_url: str, credits: Callable[[], list[int]]
) -> None:
    app = duetime.App(database_url=store_url)
    started = threading.Event()
    release = threading.Event()

    @app.task(name="credit", lease=1, max_attempts=3)
    def credit() -> None:
        ctx = duetime.current()
        started.set()
        assert release.wait(20)
        with ctx.transaction() as conn:
            write_credit(ledger, conn, ctx.job_id)

    job = credit.enqueue()
    ahead = ManualClock(SystemClock().now())
    worker = Worker(app, poll_interval=0.02, reap_interval=3600)

    def done() -> bool:
        # first attempt: another node's reaper (a minute ahead) takes the lease away
        if started.is_set() and not release.is_set():
            ahead.set(SystemClock().now() + timedelta(minutes=1))
            if Reaper(ledger, ahead).run_once().reaped == 1:
                # that reaper's clock set the retry a minute ahead: bring it back to now
                app.reschedule(job.id, SystemClock().now())
                release.set()
        return app.get_job(job.id).status is JobStatus.SUCCEEDED

    asyncio.run(run_until(worker, done))
    final = app.get_job(job.id)
    first, second = final.attempt_history[:2]
    assert first.status is AttemptStatus.LOST and first.late_outcome == "succeeded"
    assert first.error_category is ErrorCategory.LEASE_EXPIRED
    assert second.status is AttemptStatus.SUCCEEDED
    assert credits() == [job.id]  # the stale attempt's write never landed
    assert worker.stats.stale_rejected == 1 and worker.stats.succeeded == 1
    app.close()


def test_outcomes_record_when_the_store_wrote_them_not_when_they_were_handed_over(
    tmp_path: Path,
) -> None:
    """SQLite: another writer holds the file while 30 s pass; the attempt that succeeds and
    the late report of a fenced-out one both carry the time of the write."""
    path = tmp_path / "slow.db"
    store = open_store(f"sqlite:///{path}")
    store.migrate()
    clock = ManualClock()
    done = enqueue(store, clock)
    _, lease = claim_one(store, clock)
    stale = enqueue(store, clock)
    _, stale_lease = claim_one(store, clock)
    assert store.finish(stale_lease, Outcome(Event.SUCCEED), clock.now())  # it moved on
    entered = threading.Event()

    class Watched:
        """The store, saying when the completer calls it (before the database answers)."""

        def finish_many(self, *args: Any, **kw: Any) -> list[bool]:
            entered.set()
            return store.finish_many(*args, **kw)

    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # the write lock: the completer's write must wait
    calls = BlockingCalls(1)

    async def scenario() -> list[bool | None]:
        completer = Completer(cast(Store, Watched()), clock, calls, linger=0)
        running = asyncio.create_task(completer.run())
        answers = asyncio.gather(
            completer.record(lease, Outcome(Event.SUCCEED), give_up_after=60),
            completer.record(stale_lease, Outcome(Event.SUCCEED), give_up_after=60),
        )
        assert await asyncio.to_thread(entered.wait, 10)
        clock.advance(30)  # the database kept the write waiting
        blocker.execute("ROLLBACK")
        got = await answers
        completer.stop()
        await running
        return got

    try:
        assert asyncio.run(scenario()) == [True, False]
    finally:
        calls.close()
        blocker.close()
    written = clock.now()
    finished = store.get_job(done.id)
    assert finished is not None and finished.attempt_history[-1].finished_at == written
    late = store.get_job(stale.id)
    assert late is not None and late.attempt_history[-1].late_reported_at == written
    store.close()


def test_a_retry_keeps_its_delay_from_the_instant_the_store_records(
    store: Store, clock: ManualClock
) -> None:
    job = enqueue(store, clock)
    _, lease = claim_one(store, clock)
    decided = clock.now()
    retry = Outcome(Event.RETRY, due_at=decided + timedelta(seconds=5), decided_at=decided)
    clock.advance(20)  # the write waited 20 s for the database
    assert store.finish_many([(lease, retry)], clock.now)
    again = store.get_job(job.id)
    assert again is not None and again.status is JobStatus.SCHEDULED
    assert again.due_at == clock.now() + timedelta(seconds=5)
    assert again.attempt_history[-1].finished_at == clock.now()
