"""Building blocks for contract tests: make requests, drive a job into any status."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from duetime.core.clock import ManualClock
from duetime.core.models import Attempt, Claim, Job, JobFilter, Lease, NewJob, Outcome
from duetime.core.requests import TaskDefaults, build_new_job
from duetime.core.retry import ErrorCategory
from duetime.core.schedule_spec import build_spec
from duetime.core.schedules import NewOccurrence, Origin, Plan
from duetime.core.states import AttemptStatus, Event, JobStatus
from duetime.runtime.worker import Worker
from duetime.store.base import Store

T = TypeVar("T")


def new(
    clock: ManualClock, task: str = "t", args: dict[str, Any] | None = None, **kw: Any
) -> NewJob:
    defaults = kw.pop("defaults", TaskDefaults())
    tenant = kw.pop("tenant", "default")
    return build_new_job(task, args or {}, now=clock.now(), tenant=tenant, defaults=defaults, **kw)


def running_claim(due: datetime, started: datetime) -> Claim:
    """A claim made in memory (no store): job 1, due at `due`, its first attempt started at
    `started` with a 30 s lease."""
    job = Job(
        id=1, tenant="a", queue="default", task="t", args={}, priority=0, due_at=due,
        deadline_at=None, status=JobStatus.RUNNING, version=1, attempts=1, max_attempts=3,
        generation=1, retry_base=1, retry_cap=60, lease_seconds=30, timeout_seconds=None,
        idempotency_key=None, business_key="k", created_at=due, updated_at=started,
    )  # fmt: skip
    attempt = Attempt(1, 1, 1, "w", AttemptStatus.RUNNING, started + timedelta(seconds=30), started)
    return Claim(job, attempt)


def enqueue(store: Store, clock: ManualClock, **kw: Any) -> Job:
    return store.enqueue([new(clock, **kw)], clock.now())[0].job


def claim_one(store: Store, clock: ManualClock, worker: str = "w1") -> tuple[Job, Lease]:
    claims = store.claim(worker_id=worker, queues=None, limit=1, now=clock.now())
    assert len(claims) == 1, f"expected one claim, got {claims}"
    return claims[0].job, claims[0].lease


def lapsed(store: Store, clock: ManualClock) -> Job:
    """A job (3 attempts) claimed by "ghost", the clock then 10 minutes on: far past the
    lease, which the ghost never renewed."""
    job = enqueue(store, clock, max_attempts=3)
    store.claim(worker_id="ghost", queues=None, limit=1, now=clock.now())
    clock.advance(timedelta(minutes=10))
    return job


def job_in(
    store: Store, clock: ManualClock, status: JobStatus, key: str | None = None
) -> tuple[Job, Lease | None]:
    """A fresh job in `status`, and the lease of its newest attempt if it had one. With `key`
    (an idempotency key; not for a waiting occurrence, whose schedule keys it) a job that
    ends stays in the jobs table (docs/history-plan.md, step 5): the tests of older schemas,
    whose keys to the jobs table still cascade a deletion, write theirs so."""
    kw: dict[str, Any] = {} if key is None else {"key": key}
    if status is JobStatus.EXPIRED:
        job = enqueue(store, clock, deadline=clock.now() + timedelta(seconds=5), **kw)
        clock.advance(10)
        assert store.expire_overdue(clock.now(), 100) >= 1
        return _reload(store, job), None
    if status is JobStatus.WAITING:
        return _waiting_occurrence(store, clock), None
    if status is JobStatus.BLOCKED:  # behind a parent due tomorrow
        parent = enqueue(store, clock, at=clock.now() + timedelta(days=1))
        return enqueue(store, clock, depends_on=[parent.id], **kw), None
    job = enqueue(store, clock, **kw)
    if status is JobStatus.SCHEDULED:
        return job, None
    if status is JobStatus.CANCELLED:
        return store.transition(job.id, Event.CANCEL, clock.now()), None
    job, lease = claim_one(store, clock)
    if status is JobStatus.RUNNING:
        return job, lease
    if status is JobStatus.CANCEL_REQUESTED:
        return store.transition(job.id, Event.CANCEL, clock.now()), lease
    event = {
        JobStatus.SUCCEEDED: Event.SUCCEED,
        JobStatus.DEAD: Event.GIVE_UP,
        JobStatus.PARKED: Event.PARK,
    }[status]
    category = ErrorCategory.PERMANENT if event is Event.GIVE_UP else None
    assert store.finish(lease, Outcome(event, error_category=category), clock.now())
    return _reload(store, job), lease


def _waiting_occurrence(store: Store, clock: ManualClock) -> Job:
    """A schedule's occurrence buffered behind another (the only way a job is waiting)."""
    name = f"s{clock.now().timestamp()}"
    spec = build_spec(name, "t", timezone="UTC", cron="0 * * * *")
    schedule, _ = store.create_schedule(
        "default", spec, anchor_at=clock.now(), next_fire_at=None, now=clock.now()
    )
    occ = NewOccurrence(clock.now(), clock.now(), JobStatus.WAITING, Origin.TICK)
    store.apply_schedule("default", name, clock.now(), lambda s, a: Plan(new_jobs=[occ]))
    [job] = store.list_jobs(JobFilter(schedule_id=schedule.id))
    assert job.status is JobStatus.WAITING
    clock.advance(0.001)
    return job


def _reload(store: Store, job: Job) -> Job:
    loaded = store.get_job(job.id)
    assert loaded is not None
    return loaded


async def until(condition: Callable[[], bool], timeout: float = 15) -> None:
    """Wait until `condition()` holds, looking every 5 ms, for at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


async def run_until(
    worker: Worker, done: Callable[[], bool], timeout: float = 15, grace: bool = True
) -> None:
    """Run the worker until `done()` holds, then stop it. `done()` is checked each time an
    attempt ends and each time the worker's claim loop waits (every poll interval at least)."""
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    deadline = time.monotonic() + timeout
    try:
        while not done():
            assert time.monotonic() < deadline, "condition not reached in time"
            assert not task.done(), f"worker stopped early: {task}"
            idle = asyncio.ensure_future(worker.slots.idle.wait())
            finished = asyncio.ensure_future(worker.slots.finished.wait())
            await asyncio.wait(
                [idle, finished, task],
                timeout=max(0.0, deadline - time.monotonic()),
                return_when=asyncio.FIRST_COMPLETED,
            )
            idle.cancel()
            finished.cancel()
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


def race(count: int, call: Callable[[int], T]) -> list[T]:
    """`call(0)` to `call(count - 1)`, each in its own thread, released at once by a barrier;
    their results (in the order they returned). Raises the first error any of them raised."""
    start = threading.Barrier(count)
    results: list[T] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def racer(number: int) -> None:
        try:
            start.wait(10)
            result = call(number)
            with lock:
                results.append(result)
        except BaseException as exc:  # raised below, in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=racer, args=(n,)) for n in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]
    return results
