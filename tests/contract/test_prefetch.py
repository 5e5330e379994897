"""Jobs claimed ahead of the free slots (prefetch): held under lease, never run past the
concurrency limit, not run once cancelled, and given back when the worker stops."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextvars import ContextVar

import pytest

import duetime
from duetime.core.retry import ErrorCategory
from duetime.core.states import AttemptStatus, JobStatus
from duetime.runtime.worker import Worker
from duetime.store.base import Store
from jobhelpers import run_until, until


@pytest.fixture
def app(store_url: str, make_store: Callable[[], Store]) -> Iterator[duetime.App]:
    application = duetime.App(database_url=store_url)
    yield application
    application.close()


def holding(worker: Worker, ahead: int) -> None:
    """Make the worker hold `ahead` claimed jobs ready whatever its pace (the pace of these
    tests' blocked handlers would ask for none)."""
    worker.slots.ahead = lambda: ahead  # type: ignore[method-assign]


def test_prefetched_jobs_never_run_past_the_concurrency_limit(app: duetime.App) -> None:
    running: list[int] = []
    most = 0
    done: list[int] = []

    @app.task(name="quick")
    async def quick(i: int) -> None:
        nonlocal most
        running.append(i)
        most = max(most, len(running))
        await asyncio.sleep(0.001)
        running.remove(i)
        done.append(i)

    app.enqueue_many("quick", [{"i": i} for i in range(60)])
    worker = Worker(app, concurrency=3, poll_interval=0.02)
    holding(worker, 7)
    asyncio.run(run_until(worker, lambda: len(done) == 60))
    assert sorted(done) == list(range(60))  # each once
    assert most <= 3
    assert worker.stats.claimed == 60


def test_a_job_started_in_the_slot_another_freed_has_a_context_of_its_own(
    app: duetime.App,
) -> None:
    """An async handler runs in its attempt's own task (runtime/attempt.py
    AttemptRunner._inline), and a job held ready starts from the task of the attempt whose
    handler freed its slot: what that handler set in its context does not reach it."""
    probe: ContextVar[int | None] = ContextVar("probe", default=None)
    seen: list[tuple[int, int | None]] = []

    @app.task(name="setter")
    async def setter(i: int) -> None:
        seen.append((i, probe.get()))
        probe.set(i)

    jobs = app.enqueue_many("setter", [{"i": i} for i in range(4)])
    worker = Worker(app, concurrency=1, poll_interval=0.02)
    holding(worker, 3)  # one claim takes all four: each next one waits ready for the slot
    asyncio.run(run_until(worker, lambda: len(seen) == 4))
    assert sorted(seen) == [(i, None) for i in range(len(jobs))]
    assert worker.stats.claimed == 4


def test_prefetched_jobs_are_given_back_when_the_worker_stops(app: duetime.App) -> None:
    go = asyncio.Event()  # bound to asyncio.run's loop when first awaited
    started: list[int] = []

    @app.task(name="hold")
    async def hold(i: int) -> None:
        started.append(i)
        await go.wait()

    jobs = app.enqueue_many("hold", [{"i": i} for i in range(6)])
    worker = Worker(app, concurrency=2, poll_interval=0.02, grace=10)
    holding(worker, 3)

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        await until(lambda: len(started) == 2 and len(worker.slots.ready) == 3)
        ready = [r.claim.job.id for r in worker.slots.ready]
        stop.set()
        await until(lambda: worker.slots.draining.count > 0)
        go.set()  # the running handlers end within the grace period
        await asyncio.wait_for(task, 30)
        released.extend(ready)

    released: list[int] = []
    asyncio.run(scenario())
    assert sorted(started) == [0, 1]  # the ready ones never started
    assert len(released) == 3
    for job in jobs:
        after = app.get_job(job.id)
        if job.id in released:
            assert after.status is JobStatus.SCHEDULED
            assert after.due_at <= app.clock.now()
            [attempt] = after.attempt_history
            assert attempt.status is AttemptStatus.FAILED
            assert attempt.error_category is ErrorCategory.INTERRUPTED
            assert "before the job started" in (attempt.error_message or "")
        elif after.attempt_history:
            assert after.status is JobStatus.SUCCEEDED
        else:
            assert after.status is JobStatus.SCHEDULED  # the sixth: never claimed
    assert worker.in_flight == 0


def test_prefetched_jobs_keep_their_leases(app: duetime.App) -> None:
    go = asyncio.Event()  # bound to asyncio.run's loop when first awaited
    started: list[int] = []

    @app.task(name="hold", lease=30)
    async def hold(i: int) -> None:
        started.append(i)
        await go.wait()

    app.enqueue_many("hold", [{"i": i} for i in range(3)])
    worker = Worker(app, concurrency=1, poll_interval=0.02, grace=10)
    holding(worker, 2)

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        await until(lambda: len(started) == 1 and len(worker.slots.ready) == 2)
        ready = list(worker.slots.ready)
        before = {r.claim.job.id: app.get_job(r.claim.job.id).attempt_history[-1] for r in ready}
        for running in worker.slots.running.values():
            running.last_beat = 0.0  # every lease due for renewal
        await worker.heartbeat_once()
        for job_id, attempt in before.items():
            renewed = app.get_job(job_id).attempt_history[-1]
            assert renewed.id == attempt.id
            assert renewed.lease_expires_at > attempt.lease_expires_at
        go.set()
        await until(lambda: len(started) == 3)  # then they run, in the slot, one by one
        stop.set()
        await asyncio.wait_for(task, 30)

    asyncio.run(scenario())
    assert worker.stats.succeeded == 3


def test_a_prefetched_job_cancelled_before_it_starts_does_not_run(app: duetime.App) -> None:
    go = asyncio.Event()  # bound to asyncio.run's loop when first awaited
    started: list[int] = []

    @app.task(name="hold")
    async def hold(i: int) -> None:
        started.append(i)
        await go.wait()

    first, second = app.enqueue_many("hold", [{"i": 0}, {"i": 1}])
    worker = Worker(app, concurrency=1, poll_interval=0.02, grace=10)
    holding(worker, 1)

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        await until(lambda: started == [0] and len(worker.slots.ready) == 1)
        app.cancel(second.id)  # held ready: the request waits for this worker to see it
        for running in worker.slots.running.values():
            running.last_beat = 0.0
        await worker.heartbeat_once()  # the heartbeat tells of the request
        go.set()
        await until(lambda: worker.stats.cancelled == 1)
        stop.set()
        await asyncio.wait_for(task, 30)

    asyncio.run(scenario())
    assert started == [0]
    assert app.get_job(first.id).status is JobStatus.SUCCEEDED
    cancelled = app.get_job(second.id)
    assert cancelled.status is JobStatus.CANCELLED
    assert "before the handler started" in (cancelled.attempt_history[-1].error_message or "")


def test_nothing_is_held_ahead_while_limits_exist(app: duetime.App) -> None:
    @app.task(name="quick")
    async def quick(i: int) -> None:
        pass

    app.enqueue_many("quick", [{"i": i} for i in range(40)])
    worker = Worker(app, concurrency=2, poll_interval=0.02)
    slots = worker.slots
    slots.tasks = ["quick"]
    slots.more_due, slots._pace, slots._claim_seconds = True, 1000.0, 0.005  # a fast backlog
    slots._claim(2, app.clock.now())
    assert slots.ahead() == 20  # 4 claims' worth at this pace
    app.set_queue("default", concurrency=30)  # a cap counts held jobs: they may be held
    slots._claim(2, app.clock.now())
    assert slots.ahead() == 20
    app.set_limit("payments-api", rate="100/s")  # held jobs started at once could outrun it
    slots._claim(2, app.clock.now())
    assert slots.controlled and slots.ahead() == 0


def test_outcomes_waiting_to_be_recorded_past_a_batch_hold_their_slots(app: duetime.App) -> None:
    """While the store is slow to record outcomes (a finish waiting on a lock, a transaction
    held open), a worker lets at most one finish batch of outcomes (or its concurrency, if
    more) wait beyond its running handlers: it stops claiming instead of piling up attempts
    whose leases it must keep renewing (seen under pressure: 55,000 attempts held by two
    workers of 16, their renewals running for minutes)."""
    import threading

    done: list[int] = []

    @app.task(name="quick")
    async def quick(i: int) -> None:
        done.append(i)

    worker = Worker(app, concurrency=3, poll_interval=0.02)
    holding(worker, 0)
    bound = max(3, worker.completer.max_batch)
    assert worker.slots.max_unrecorded == bound
    total = 2 * bound  # more than the bound lets wait: a worker that ignored it would take them
    app.enqueue_many("quick", [{"i": i} for i in range(total)])
    release = threading.Event()
    finish_many = app.store.finish_many

    def slow_finish(*args: object, **kwargs: object) -> object:
        release.wait(30)
        return finish_many(*args, **kwargs)  # type: ignore[arg-type]

    app.store.finish_many = slow_finish  # type: ignore[method-assign]
    most = 0

    async def scenario() -> None:
        nonlocal most
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        await until(lambda: len(done) >= bound)
        for _ in range(60):  # 0.3 s: the worker would have claimed more by now
            most = max(most, len(worker.slots.running))
            await asyncio.sleep(0.005)
        release.set()
        await until(lambda: len(done) == total, timeout=60)
        stop.set()
        await asyncio.wait_for(task, 30)

    asyncio.run(scenario())
    # the outcomes waiting, and at most one more per slot, held in its slot
    assert bound <= most <= bound + 3, most
    assert sorted(done) == list(range(total))


def test_while_outcomes_cannot_be_written_only_the_concurrency_waits(app: duetime.App) -> None:
    """While the store refuses the outcomes' writes (an outage), the bound falls to the
    concurrency: a claim made then is worth nothing and would hold a store thread until the
    pool gives up, delaying the first claims once the store is back (the pg_auto_failover
    drill: a worker started nothing in the 20 s after the promotion)."""
    from duetime.core.errors import StoreUnavailable

    done: list[int] = []

    @app.task(name="quick")
    async def quick(i: int) -> None:
        done.append(i)

    total = 100
    app.enqueue_many("quick", [{"i": i} for i in range(3)])  # their outcomes fail first
    worker = Worker(app, concurrency=3, poll_interval=0.02)
    holding(worker, 0)
    failing = True
    finish_many = app.store.finish_many

    def refused(*args: object, **kwargs: object) -> object:
        if failing:
            raise StoreUnavailable("the store is down (test)")
        return finish_many(*args, **kwargs)  # type: ignore[arg-type]

    app.store.finish_many = refused  # type: ignore[method-assign]
    most = 0

    async def scenario() -> None:
        nonlocal most, failing
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        await until(lambda: worker.completer.failing)
        app.enqueue_many("quick", [{"i": i} for i in range(3, total)])
        for _ in range(100):  # 0.5 s: the worker would have claimed more by now
            most = max(most, len(worker.slots.running))
            await asyncio.sleep(0.005)
        failing = False
        await until(lambda: len(done) == total, timeout=60)
        stop.set()
        await asyncio.wait_for(task, 30)

    asyncio.run(scenario())
    assert most <= 2 * 3 + 3, most  # waiting outcomes, one more per slot, the batch retried
    assert sorted(set(done)) == list(range(total))
