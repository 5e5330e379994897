"""A task's max_lateness on every dialect: on_late="expire" jobs get a deadline of due time +
bound, are not claimed past it and are expired by the reaper (through retries too); on_late
="run" jobs run however late, logged as job.late, counted, and told via duetime.current()."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest

import duetime
from duetime.core.clock import ManualClock
from duetime.core.models import Outcome
from duetime.core.states import Event, JobStatus
from duetime.runtime.reaper import Reaper
from duetime.runtime.worker import Worker
from duetime.store.base import Store
from jobhelpers import run_until


@pytest.fixture
def app(
    store_url: str, make_store: Callable[[], Store], clock: ManualClock
) -> Iterator[duetime.App]:
    application = duetime.App(database_url=store_url, clock=clock)
    yield application
    application.close()


def claim_ids(app: duetime.App) -> list[int]:
    claims = app.store.claim(worker_id="w", queues=None, limit=10, now=app.clock.now())
    return [c.job.id for c in claims]


def test_a_job_later_than_its_bound_is_not_started_and_expires(
    app: duetime.App, clock: ManualClock
) -> None:
    @app.task(name="remind", max_lateness="5m")
    def remind() -> None: ...

    on_time = remind.enqueue()
    clock.advance(4 * 60)
    [claim] = app.store.claim(worker_id="w", queues=None, limit=10, now=clock.now())
    assert claim.job.id == on_time.id  # 4 minutes late, within its bound: starts
    assert app.store.finish(claim.lease, Outcome(Event.SUCCEED), clock.now())
    late = remind.enqueue(delay="1m")
    assert app.get_job(late.id).deadline_at == late.due_at + timedelta(minutes=5)
    clock.advance(6 * 60)  # its due time + 5 minutes has passed
    assert claim_ids(app) == []
    assert Reaper(app.store, clock).run_once().expired == 1
    expired = app.get_job(late.id)
    assert expired.status is JobStatus.EXPIRED and expired.attempts == 0


def test_the_bound_is_the_jobs_deadline_through_its_retries(
    app: duetime.App, clock: ManualClock
) -> None:
    @app.task(name="remind", max_lateness="5m")
    def remind() -> None: ...

    job = remind.enqueue()
    [claim] = app.store.claim(worker_id="w", queues=None, limit=1, now=clock.now())
    retry_at = clock.now() + timedelta(minutes=10)  # a back-off past the bound
    assert app.store.finish(claim.lease, Outcome(Event.RETRY, due_at=retry_at), clock.now())
    clock.advance(10 * 60)
    assert claim_ids(app) == []
    assert Reaper(app.store, clock).run_once().expired == 1
    assert app.get_job(job.id).status is JobStatus.EXPIRED


def test_batches_derive_each_jobs_deadline_from_its_own_due_time(
    app: duetime.App, clock: ManualClock
) -> None:
    @app.task(name="remind", max_lateness="5m")
    def remind() -> None: ...

    dues = [clock.now() + timedelta(hours=h) for h in (1, 2)]
    jobs = remind.enqueue_many([{}, {}], at_each=dues)
    assert [j.deadline_at for j in jobs] == [d + timedelta(minutes=5) for d in dues]
    [same] = remind.enqueue_many([{}], delay="1h")
    assert same.deadline_at == same.due_at + timedelta(minutes=5)
    given = clock.now() + timedelta(hours=1, minutes=2)  # earlier than the first job's bound
    capped = remind.enqueue_many([{}, {}], at_each=dues[:1] * 2, deadline=given)
    assert [j.deadline_at for j in capped] == [given, given]


def test_on_late_run_runs_the_job_and_says_how_late(
    store_url: str, make_store: Callable[[], Store], caplog: pytest.LogCaptureFixture
) -> None:
    app = duetime.App(database_url=store_url)  # a real clock: the worker waits on it
    seen: dict[int, tuple[timedelta, bool]] = {}

    @app.task(name="report", max_lateness="5m", on_late="run")
    def report() -> None:
        ctx = duetime.current()
        seen[ctx.job_id] = (ctx.lateness, ctx.late)

    now = app.clock.now()
    late = report.enqueue(at=now - timedelta(minutes=10))
    on_time = report.enqueue(at=now - timedelta(minutes=1))
    assert app.get_job(late.id).deadline_at is None
    worker = Worker(app, poll_interval=0.02)
    caplog.set_level(logging.WARNING, logger="duetime.worker")
    asyncio.run(run_until(worker, lambda: len(seen) == 2))
    app.close()
    assert seen[late.id][0] >= timedelta(minutes=10) and seen[late.id][1] is True
    assert timedelta(minutes=1) <= seen[on_time.id][0] < timedelta(minutes=5)
    assert seen[on_time.id][1] is False
    warned = [r for r in caplog.records if getattr(r, "duetime_event", "") == "job.late"]
    assert [r.duetime["job_id"] for r in warned] == [late.id]  # type: ignore[attr-defined]
    assert warned[0].duetime["max_lateness_ms"] == 300_000  # type: ignore[attr-defined]
    assert worker.metrics.value("duetime_jobs_started_late_total", task="report") == 1
