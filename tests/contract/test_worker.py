"""The worker's behaviour on each store, in-process, with real time and short leases."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

import duetime
from duetime.core.clock import ManualClock, SystemClock
from duetime.core.models import Attempt, Lease
from duetime.core.retry import ErrorCategory
from duetime.core.states import AttemptStatus, JobStatus
from duetime.runtime.attempt import refusal_reason
from duetime.runtime.reaper import Reaper
from duetime.runtime.worker import Worker
from duetime.store.base import Store
from duetime.store.sql.shared import new_job_record
from jobhelpers import new, run_until, until
from kit import DialectKit


@pytest.fixture
def app(store_url: str, make_store: Callable[[], Store]) -> Iterator[duetime.App]:
    application = duetime.App(database_url=store_url)
    yield application
    application.close()


def status_of(app: duetime.App, job_id: int) -> JobStatus:
    return app.get_job(job_id).status


def cancel_once_started(
    app: duetime.App, job_id: int, started: threading.Event
) -> Callable[[], bool]:
    """run_until's condition: the job cancelled once its handler started, until it ended
    cancelled or succeeded."""

    def done() -> bool:
        if started.is_set() and status_of(app, job_id) is JobStatus.RUNNING:
            app.cancel(job_id)
        return status_of(app, job_id).value in {"cancelled", "succeeded"}

    return done


def test_handler_sees_its_attempt(app: duetime.App) -> None:
    seen: dict[str, Any] = {}
    # the fencing token: the database's epoch (PostgreSQL: its timeline, 1 on a fresh cluster;
    # 0 elsewhere) above the generation (docs/at-least-once.md)
    epoch = 1 if app.store.dialect == "postgres" else 0

    @app.task(name="look")
    def look(n: int) -> None:
        ctx = duetime.current()
        seen.update(
            n=n,
            job_id=ctx.job_id,
            attempt=ctx.attempt,
            token=ctx.fencing_token,
            key=ctx.business_key,
        )

    job = look.enqueue({"n": 5}, key="order-5")
    worker = Worker(app, poll_interval=0.02)
    asyncio.run(run_until(worker, lambda: status_of(app, job.id) is JobStatus.SUCCEEDED))
    assert seen == {
        "n": 5,
        "job_id": job.id,
        "attempt": 1,
        "token": (epoch << 32) | 1,
        "key": "default/look:order-5",
    }
    with pytest.raises(RuntimeError, match="only available inside"):
        duetime.current()


def test_a_worker_refuses_an_event_loop_it_does_not_know(app: duetime.App) -> None:
    """At once, not when serve() would start it (runtime/node.py EVENT_LOOPS)."""
    with pytest.raises(duetime.InvalidRequest, match="one of auto, asyncio, uvloop, not 'tokio'"):
        Worker(app, loop="tokio")
    assert Worker(app).loop == "auto" and Worker(app, loop="asyncio").loop == "asyncio"


def test_classified_failures(app: duetime.App) -> None:
    @app.task(name="permanent")
    def permanent() -> None:
        raise duetime.PermanentError("card declined")

    @app.task(name="limited")
    def limited() -> None:
        if duetime.current().attempt == 1:
            raise duetime.Retry(after=0.5, reason="HTTP 429")

    @app.task(name="slow", timeout=0.2, max_attempts=1)
    async def slow() -> None:
        await asyncio.sleep(10)

    p = permanent.enqueue()
    r = limited.enqueue()
    s = slow.enqueue()
    ids = [p.id, r.id, s.id]
    worker = Worker(app, poll_interval=0.02)
    asyncio.run(run_until(worker, lambda: all(app.get_job(i).terminal for i in ids)))

    dead = app.get_job(p.id)
    assert dead.status is JobStatus.DEAD and dead.attempts == 1
    assert dead.attempt_history[0].error_category is ErrorCategory.PERMANENT
    assert "card declined" in (dead.attempt_history[0].error_traceback or "")

    lim = app.get_job(r.id)
    assert lim.status is JobStatus.SUCCEEDED
    first, second = lim.attempt_history
    assert first.error_category is ErrorCategory.RATE_LIMITED and first.finished_at
    assert second.started_at - first.finished_at >= timedelta(seconds=0.5)

    timed = app.get_job(s.id)
    assert timed.status is JobStatus.DEAD
    assert timed.attempt_history[0].error_category is ErrorCategory.TIMEOUT


def test_args_that_do_not_bind_are_dead_after_one_attempt(app: duetime.App, store_url: str) -> None:
    """Stored by an app that could not check them (it registers no task), args the handler
    cannot take fail for good at once, saying why: running again cannot help."""
    producer = duetime.App(database_url=store_url)
    job = producer.enqueue("greet", {"nam": "Ada"}, max_attempts=5)
    producer.close()

    @app.task(name="greet")
    def greet(name: str) -> None:
        pass

    worker = Worker(app, poll_interval=0.02)
    asyncio.run(run_until(worker, lambda: app.get_job(job.id).terminal))
    dead = app.get_job(job.id)
    assert dead.status is JobStatus.DEAD and dead.attempts == 1
    [attempt] = dead.attempt_history
    assert attempt.error_category is ErrorCategory.PERMANENT
    assert "args do not fit task 'greet'" in (attempt.error_message or "")
    assert "missing a required argument: 'name'" in (attempt.error_message or "")


def test_cancel_stops_an_async_handler(app: duetime.App) -> None:
    started = threading.Event()

    @app.task(name="long")
    async def long() -> None:
        started.set()
        await asyncio.sleep(60)

    job = long.enqueue()

    async def scenario() -> None:
        worker = Worker(app, poll_interval=0.02)

        def done() -> bool:
            if started.is_set() and status_of(app, job.id) is JobStatus.RUNNING:
                app.cancel(job.id)
            return status_of(app, job.id) is JobStatus.CANCELLED

        await run_until(worker, done)

    asyncio.run(scenario())
    final = app.get_job(job.id)
    assert final.cancel_requested_at is not None
    assert final.attempt_history[-1].status is AttemptStatus.CANCELLED


def test_an_async_handler_that_finishes_anyway_after_a_cancel_succeeds(app: duetime.App) -> None:
    """An async handler without a timeout runs in its attempt's own task (docs/workers.md,
    "Where a handler runs"): the cancel raises CancelledError at its await; one that catches
    it and returns is recorded by what it returned, once, as a sync handler's is."""
    started = threading.Event()
    caught: list[bool] = []

    @app.task(name="stubborn")
    async def stubborn() -> str:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            caught.append(duetime.current().cancel_requested)
            await asyncio.sleep(0.01)  # its clean-up awaits too
        return "done anyway"

    job = stubborn.enqueue()
    worker = Worker(app, poll_interval=0.02)

    asyncio.run(run_until(worker, cancel_once_started(app, job.id, started)))
    final = app.get_job(job.id)
    assert caught == [True]
    assert final.status is JobStatus.SUCCEEDED and final.result == "done anyway"
    assert [a.status for a in final.attempt_history] == [AttemptStatus.SUCCEEDED]


@pytest.mark.parametrize("finish_anyway", [False, True])
def test_cancel_is_visible_to_a_sync_handler(app: duetime.App, finish_anyway: bool) -> None:
    started = threading.Event()

    @app.task(name="poller", lease=1)
    def poller() -> None:
        started.set()
        ctx = duetime.current()
        assert ctx.wait_cancelled(timeout=20), "cancellation never arrived"
        if not finish_anyway:
            ctx.raise_if_cancelled()

    job = poller.enqueue()
    worker = Worker(app, poll_interval=0.02)

    asyncio.run(run_until(worker, cancel_once_started(app, job.id, started)))
    final = app.get_job(job.id)
    # the final record says whether the work finished
    if finish_anyway:
        assert final.status is JobStatus.SUCCEEDED
        assert final.attempt_history[-1].status is AttemptStatus.SUCCEEDED
    else:
        assert final.status is JobStatus.CANCELLED
        assert final.attempt_history[-1].status is AttemptStatus.CANCELLED
    assert final.cancel_requested_at is not None


def test_shutdown_past_grace_interrupts_and_requeues(app: duetime.App) -> None:
    started = threading.Event()

    @app.task(name="stuck")
    async def stuck() -> None:
        started.set()
        await asyncio.sleep(60)

    job = stuck.enqueue()
    worker = Worker(app, poll_interval=0.02, grace=0.3)
    asyncio.run(run_until(worker, started.is_set))
    after = app.get_job(job.id)
    assert after.status is JobStatus.SCHEDULED
    assert after.attempt_history[0].error_category is ErrorCategory.INTERRUPTED


def test_graceful_shutdown_lets_in_flight_jobs_finish(app: duetime.App) -> None:
    started = threading.Event()

    @app.task(name="short")
    def short() -> None:
        started.set()
        time.sleep(0.5)

    job = short.enqueue()
    worker = Worker(app, poll_interval=0.02, grace=10)
    asyncio.run(run_until(worker, started.is_set))
    assert status_of(app, job.id) is JobStatus.SUCCEEDED


def test_a_worker_that_lost_its_lease_has_its_outcome_rejected(
    app: duetime.App, store: Store
) -> None:
    started = threading.Event()
    release = threading.Event()

    @app.task(name="paused", lease=1, max_attempts=3)
    def paused() -> None:
        started.set()
        assert release.wait(20)

    job = paused.enqueue()
    # another node's reaper whose clock is a minute ahead sees this lease as lapsed
    ahead = ManualClock(SystemClock().now())
    worker = Worker(app, poll_interval=0.02)

    def done() -> bool:
        if started.is_set() and not release.is_set():
            ahead.set(SystemClock().now() + timedelta(minutes=1))
            if Reaper(store, ahead).run_once().reaped == 1:
                release.set()
        return worker.stats.stale_rejected == 1

    asyncio.run(run_until(worker, done))
    final = app.get_job(job.id)
    lost = final.attempt_history[0]
    assert lost.status is AttemptStatus.LOST
    assert lost.error_category is ErrorCategory.LEASE_EXPIRED
    assert lost.late_outcome == "succeeded"
    assert final.status is not JobStatus.SUCCEEDED or len(final.attempt_history) == 2


def test_async_twins_and_task_enqueue(app: duetime.App) -> None:
    @app.task(name="twin", queue="q1", priority=4)
    def twin(x: int) -> None:
        pass

    async def scenario() -> None:
        job = await app.aenqueue("twin", {"x": 1})
        same = await twin.aenqueue({"x": 1})
        assert job.queue == same.queue == "q1" and job.priority == 4
        fetched = await app.aget_job(job.id)
        assert fetched.id == job.id
        cancelled = await app.acancel(same.id)
        assert cancelled.status is JobStatus.CANCELLED
        many = await twin.aenqueue_many([{"x": i} for i in range(3)])
        assert len(many) == 3

    asyncio.run(scenario())


def test_bad_enqueues_store_nothing(app: duetime.App) -> None:
    now = app.clock.now()
    bad: list[dict[str, Any]] = [
        {"args": [1]},
        {"at": "2026-01-01T09:00:00"},
        {"at": "next tuesday"},
        {"args": {"big": "x" * (1024 * 1024 + 1)}},
        {"deadline": now - timedelta(seconds=1)},
        {"at": now, "delay": 3},
    ]
    for options in bad:
        with pytest.raises(duetime.InvalidRequest):
            app.enqueue("t", **options)
    with pytest.raises(duetime.InvalidRequest):
        app.enqueue_many("t", [{"ok": 1}, [2]])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        app.enqueue("t", colour="red")  # type: ignore[call-arg]
    assert app.list_jobs() == []


def test_a_sync_timeout_counts_from_when_the_handler_starts(app: duetime.App) -> None:
    @app.task(name="hog", timeout=0.2, max_attempts=1)
    def hog() -> None:
        time.sleep(1.0)  # times out, but its thread keeps running for a while

    @app.task(name="quick", timeout=0.5, max_attempts=1)
    def quick() -> None:
        pass

    first = hog.enqueue(priority=1)
    second = quick.enqueue()
    worker = Worker(app, concurrency=1, poll_interval=0.02)
    asyncio.run(run_until(worker, lambda: app.get_job(second.id).terminal))
    assert app.get_job(first.id).attempt_history[0].error_category is ErrorCategory.TIMEOUT
    # the second job waited for the only thread, then ran: it did not time out while waiting
    assert app.get_job(second.id).status is JobStatus.SUCCEEDED


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_sys_exit_in_a_handler_fails_the_attempt_not_the_worker(
    app: duetime.App, kind: str
) -> None:
    if kind == "sync":

        @app.task(name="quitter", max_attempts=1)
        def quitter() -> None:
            raise SystemExit(3)

    else:

        @app.task(name="quitter", max_attempts=1)
        async def quitter() -> None:
            raise SystemExit(3)

    @app.task(name="after")
    def after() -> None:
        pass

    bad = app.enqueue("quitter", priority=1)
    good = after.enqueue()
    worker = Worker(app, concurrency=1, poll_interval=0.02)
    asyncio.run(run_until(worker, lambda: app.get_job(good.id).terminal))
    failed = app.get_job(bad.id)
    assert failed.status is JobStatus.DEAD
    assert "SystemExit(3)" in (failed.attempt_history[0].error_message or "")
    assert app.get_job(good.id).status is JobStatus.SUCCEEDED


def test_a_stray_cancelled_error_fails_the_attempt_instead_of_stranding_it(
    app: duetime.App,
) -> None:
    @app.task(name="stray", max_attempts=1)
    async def stray() -> None:
        inner = asyncio.create_task(asyncio.sleep(10))
        inner.cancel()
        await inner

    job = stray.enqueue()
    worker = Worker(app, poll_interval=0.02)
    asyncio.run(run_until(worker, lambda: app.get_job(job.id).terminal))
    final = app.get_job(job.id)
    assert final.status is JobStatus.DEAD
    assert "CancelledError" in (final.attempt_history[0].error_message or "")


def test_a_claim_in_flight_at_shutdown_is_run_not_dropped(app: duetime.App) -> None:
    ran = threading.Event()

    @app.task(name="late")
    def late() -> None:
        ran.set()

    job = late.enqueue()
    worker = Worker(app, poll_interval=0.02, grace=10)
    real_claim = worker.store.claim_planned

    async def scenario() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def slow_claim(plan: Any, **kwargs: Any) -> Any:
            loop.call_soon_threadsafe(stop.set)  # the stop arrives while this claim is in the store
            time.sleep(0.5)  # a slow database
            return real_claim(plan, **kwargs)

        worker.store.claim_planned = slow_claim  # type: ignore[method-assign]
        await asyncio.wait_for(worker.run(stop), 30)

    asyncio.run(scenario())
    assert ran.is_set()
    assert app.get_job(job.id).status is JobStatus.SUCCEEDED


def test_a_worker_on_sqlite_warns_of_leases_shorter_than_the_busy_timeout(
    app: duetime.App, caplog: pytest.LogCaptureFixture
) -> None:
    @app.task(name="fast.ping", lease="5s")
    def ping() -> None: ...

    @app.task(name="slow.report", lease="10m")
    def report() -> None: ...

    @app.task(name="other.queue", lease="5s", queue="elsewhere")
    def elsewhere() -> None: ...

    worker = Worker(app, queues=["default"], planner=False)
    stop = asyncio.Event()
    stop.set()
    with caplog.at_level(logging.WARNING, logger="duetime.worker"):
        asyncio.run(worker.run(stop))
    warned = [r for r in caplog.records if "lease_shorter_than_busy_timeout" in r.getMessage()]
    if app.store.dialect == "sqlite":
        assert app.store.lock_wait == 20.0
        assert worker.short_leases() == {"fast.ping": 5.0}
        [record] = warned
        assert record.levelno == logging.WARNING
        assert "busy_timeout_s=20.0" in record.getMessage()
        assert '"fast.ping (5s)"' in record.getMessage()
    else:  # the server's lock waits are not bounded by a busy timeout
        assert app.store.lock_wait is None
        assert worker.short_leases() == {} and warned == []


def test_a_refused_outcome_of_a_job_that_is_gone_says_so(
    app: duetime.App, kit: DialectKit, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    started, release = threading.Event(), threading.Event()

    @app.task(name="doomed")
    def doomed() -> None:
        started.set()
        assert release.wait(20)

    job = doomed.enqueue()
    worker = Worker(app, poll_interval=0.02, planner=False)

    def done() -> bool:
        if started.is_set() and not release.is_set():  # deleted while its handler runs
            kit.execute(store_url, "DELETE FROM duetime_attempts WHERE job_id = ?", (job.id,))
            kit.execute(store_url, "DELETE FROM duetime_jobs WHERE id = ?", (job.id,))
            release.set()
        return worker.stats.stale_rejected == 1

    with caplog.at_level(logging.WARNING, logger="duetime.worker"):
        asyncio.run(run_until(worker, done))
    [refused] = [
        r.getMessage() for r in caplog.records if "outcome.rejected_stale" in r.getMessage()
    ]
    assert (
        'reason="the job no longer exists (it was deleted, or pruned after it ended)"' in refused
    ), refused
    assert "another attempt" not in refused


def test_refusal_reasons_say_what_became_of_the_job(clock: ManualClock) -> None:
    lease = Lease(job_id=7, attempt_id=70, generation=1, claim_token=5)
    assert "no longer exists" in refusal_reason(None, lease)
    job = new_job_record(7, new(clock), clock.now())
    moved = replace(job, generation=2, status=JobStatus.RUNNING)
    assert refusal_reason(moved, lease) == (
        "another attempt holds the job now (generation 2; this worker's lease was lost)"
    )
    reaped = replace(job, generation=1, status=JobStatus.DEAD)
    assert refusal_reason(reaped, lease) == (
        "this worker's lease was lost and the job moved on without it (it is dead)"
    )
    # a lossy failover handed generation 1 out again, to another claim
    theirs = Attempt(71, 7, 1, "w2", AttemptStatus.RUNNING, clock.now(), clock.now(), claim_token=6)
    again = replace(job, generation=1, status=JobStatus.RUNNING, attempt_history=(theirs,))
    assert "another claim holds the job now (generation 1 with another claim token" in (
        refusal_reason(again, lease)
    )
    assert "no claim token" in refusal_reason(again, replace(lease, claim_token=None))


def test_a_trickle_of_jobs_costs_a_claim_each_not_two(app: duetime.App) -> None:
    """A claim that took fewer jobs than it had room for took every due one: the end of its
    attempt is no reason to claim again (new work wakes the loop, or the poll finds it)."""
    done: list[int] = []

    @app.task(name="tick")
    async def tick(i: int) -> None:
        done.append(i)

    worker = Worker(app, concurrency=10, poll_interval=3600)  # only wake-ups start work
    real_claim = worker.store.claim_planned
    sizes: list[int] = []

    def counted(plan: Any, **kwargs: Any) -> Any:
        claimed = real_claim(plan, **kwargs)
        sizes.append(len(claimed.claims))
        return claimed

    worker.store.claim_planned = counted  # type: ignore[method-assign]

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        await until(lambda: bool(sizes))  # the first claim: nothing due
        for i in range(8):
            tick.enqueue({"i": i})
            await until(lambda n=i + 1: len(done) == n and worker.in_flight == 0)
            await asyncio.sleep(0.05)  # whatever the attempt's end sets off
        stop.set()
        await asyncio.wait_for(task, 30)

    asyncio.run(scenario())
    assert sorted(done) == list(range(8))
    assert sum(sizes) == 8 and sizes.count(0) <= 2, sizes


def test_work_that_fell_due_while_every_slot_was_busy_starts_when_one_frees(
    app: duetime.App,
) -> None:
    release = threading.Event()
    started: list[str] = []

    @app.task(name="first")
    def first() -> None:
        started.append("first")
        release.wait(10)

    @app.task(name="second")
    def second() -> None:
        started.append("second")

    first.enqueue()
    worker = Worker(app, concurrency=1, poll_interval=3600)  # no poll would find the second

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        await until(lambda: started == ["first"])
        looked = worker.slots.idle.count
        second.enqueue()  # its wake-up finds no free slot
        await until(lambda: worker.slots.idle.count > looked)
        release.set()
        await until(lambda: started == ["first", "second"])
        stop.set()
        await asyncio.wait_for(task, 30)

    asyncio.run(scenario())


def test_a_claim_whose_answer_was_lost_is_given_back_at_once(app: duetime.App) -> None:
    """The connection drops after a claim commits: its attempts are running under this
    worker, which never heard of them. The next claim's loop gives them back (interrupted,
    due again now) instead of leaving them until their hour-long leases end."""
    runs: list[int] = []

    @app.task(name="once", lease="1h")
    def once(n: int) -> None:
        runs.append(n)

    store = app.store
    real_claim = store.claim_planned
    unanswered: list[int] = []

    def claim(plan: Any, **kw: Any) -> Any:
        claimed = real_claim(plan, **kw)
        if claimed.claims and not unanswered:
            unanswered.extend(c.job.id for c in claimed.claims)
            raise ConnectionError("server closed the connection unexpectedly")
        return claimed

    store.claim_planned = claim  # type: ignore[method-assign]
    jobs = [once.enqueue({"n": n}) for n in range(3)]
    worker = Worker(app, concurrency=4, poll_interval=0.05)
    asyncio.run(run_until(worker, lambda: sorted(runs) == [0, 1, 2], timeout=20))
    assert sorted(unanswered) == sorted(job.id for job in jobs)
    for job in jobs:
        full = app.get_job(job.id)
        assert full is not None and full.status is JobStatus.SUCCEEDED
        first, second = full.attempt_history
        assert first.error_category == ErrorCategory.INTERRUPTED, first
        assert "never heard back from the claim" in (first.error_message or "")
        assert second.status is AttemptStatus.SUCCEEDED
    assert worker.stats.succeeded == 3 and worker.stats.stale_rejected == 0


def test_recovery_leaves_attempts_alone_while_a_broker_message_is_being_accepted(
    app: duetime.App,
) -> None:
    """An attempt the broker feed took is unknown to the slots until it starts in its
    reserved slot: while a slot is reserved, recovery gives nothing back and looks again
    later."""

    @app.task(name="held")
    def held() -> None:
        pass

    worker = Worker(app, concurrency=2)
    job = held.enqueue()
    claims = app.store.claim(worker_id=worker.worker_id, queues=None, limit=1, now=app.clock.now())
    assert [c.job.id for c in claims] == [job.id]
    slots = worker.slots
    slots.unsure = True
    slots.reserved = 1  # what BrokerFeed._handle holds until the attempt starts
    asyncio.run(slots.recover())
    assert slots.unsure and not slots._giving_back
    assert app.store.held_leases(worker.worker_id) == [claims[0].lease]
    assert app.store.held_leases("another-worker") == []


def test_jobs_claimed_ahead_start_once_a_broker_message_gives_its_slot_back(
    app: duetime.App,
) -> None:
    """A claim may take jobs ahead of the free slots; one a broker message held (reserved)
    while its attempt was being accepted, then gave back without running one (a stale message:
    many at once after a withdraw, docs/outbox.md), frees no handler. The claimed jobs must
    still start: they stayed running under renewed leases, never executed, before."""
    runs: list[int] = []

    @app.task(name="ahead")
    def ahead(n: int) -> None:
        runs.append(n)

    worker = Worker(app, concurrency=1, poll_interval=0.05)
    job = ahead.enqueue({"n": 1})
    [claim] = app.store.claim(worker_id=worker.worker_id, queues=None, limit=1, now=app.clock.now())
    slots = worker.slots
    slots.ready.append(slots._take(claim))  # claimed ahead while a message held the slot
    asyncio.run(run_until(worker, lambda: runs == [1], timeout=5))
    assert status_of(app, job.id) is JobStatus.SUCCEEDED
