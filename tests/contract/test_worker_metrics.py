"""A real in-process worker's Prometheus figures, on each store, with real time."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest

import duetime
from duetime.core.clock import ManualClock, SystemClock
from duetime.core.states import AttemptStatus, JobStatus
from duetime.runtime.metrics import STALE
from duetime.runtime.reaper import Reaper
from duetime.runtime.worker import Worker
from duetime.store.base import Store
from jobhelpers import run_until

FAST_RETRY = duetime.RetryPolicy(base=0.05, cap=0.1)


@pytest.fixture
def app(store_url: str, make_store: Callable[[], Store]) -> Iterator[duetime.App]:
    application = duetime.App(database_url=store_url)
    yield application
    application.close()


def attempts(worker: Worker, task: str, outcome: str) -> float:
    return worker.metrics.value("duetime_attempts_total", task=task, outcome=outcome)


def test_lag_outcomes_and_durations(app: duetime.App) -> None:
    @app.task(name="ok", queue="fast")
    def ok() -> None:
        pass

    @app.task(name="flaky", retry=FAST_RETRY, max_attempts=3)
    def flaky() -> None:
        if duetime.current().attempt == 1:
            raise RuntimeError("first attempt fails")

    @app.task(name="doomed")
    def doomed() -> None:
        raise duetime.PermanentError("never works")

    ids = [ok.enqueue().id, ok.enqueue().id, flaky.enqueue().id, doomed.enqueue().id]
    worker = Worker(app, poll_interval=0.02)
    assert worker.metrics.value("duetime_worker_busy") == 0
    asyncio.run(run_until(worker, lambda: all(app.get_job(i).terminal for i in ids)))

    assert attempts(worker, "ok", "succeeded") == 2
    assert attempts(worker, "flaky", "retried") == 1
    assert attempts(worker, "flaky", "succeeded") == 1
    assert attempts(worker, "doomed", "dead") == 1
    assert attempts(worker, "doomed", "succeeded") == 0
    assert worker.metrics.value("duetime_attempt_duration_seconds_count", task="flaky") == 2

    # one lag observation per claim, per queue; each equals the stored attempt's start - due
    claims = {"fast": 2, "default": 3}
    for queue, n in claims.items():
        assert worker.metrics.value("duetime_jobs_claimed_total", queue=queue) == n
        assert worker.metrics.value("duetime_scheduling_lag_seconds_count", queue=queue) == n
    stored = [a for i in ids for a in app.get_job(i).attempt_history]
    assert len(stored) == sum(claims.values()) == worker.stats.claimed
    lags = [a.lag_seconds for a in stored]
    assert all(lag is not None for lag in lags)
    total = sum(worker.metrics.value("duetime_scheduling_lag_seconds_sum", queue=q) for q in claims)
    assert total == pytest.approx(sum(max(0.0, lag or 0.0) for lag in lags), abs=1e-6)

    assert worker.metrics.value("duetime_stale_completions_rejected_total") == 0
    assert worker.metrics.value("duetime_lease_expiries_total") == 0
    assert worker.metrics.value("duetime_worker_busy") == 0
    assert worker.metrics.value("duetime_attempt_duration_seconds_count", task="ok") == 2


def test_a_lost_lease_and_a_fenced_out_outcome_are_counted(app: duetime.App, store: Store) -> None:
    started = threading.Event()

    @app.task(name="paused", lease=1, max_attempts=3)
    def paused() -> None:
        ctx = duetime.current()
        started.set()
        deadline = time.monotonic() + 20
        # runs on until the heartbeat learns the lease is gone (and asks it to stop)
        while not ctx.cancel_requested:
            assert time.monotonic() < deadline, "the lost lease was never noticed"
            time.sleep(0.01)

    job = paused.enqueue()
    # another node's reaper whose clock is a minute ahead sees this lease as lapsed
    ahead = ManualClock(SystemClock().now())
    worker = Worker(app, poll_interval=0.02)
    reaped = threading.Event()

    def done() -> bool:
        if started.is_set() and not reaped.is_set():
            ahead.set(SystemClock().now() + timedelta(minutes=1))
            if Reaper(store, ahead).run_once().reaped == 1:
                reaped.set()
        return worker.stats.stale_rejected == 1

    asyncio.run(run_until(worker, done))
    assert worker.metrics.value("duetime_stale_completions_rejected_total") == 1
    assert attempts(worker, "paused", STALE) == 1
    assert attempts(worker, "paused", "succeeded") == 0  # its retry is due a minute later
    assert worker.metrics.value("duetime_lease_expiries_total") == 1  # the heartbeat's finding
    assert worker.stats.leases_lost == 1
    first = app.get_job(job.id).attempt_history[0]
    assert first.status is AttemptStatus.LOST


def test_leases_this_workers_reaper_finds_expired_are_counted(
    app: duetime.App, store: Store
) -> None:
    @app.task(name="orphan", lease=1, max_attempts=3, retry=FAST_RETRY)
    def orphan() -> None:
        pass

    job = orphan.enqueue()
    # a worker that claimed it and vanished: nobody renews the lease
    [gone] = store.claim(worker_id="ghost", queues=None, limit=1, now=app.clock.now())
    assert gone.job.id == job.id
    worker = Worker(app, poll_interval=0.02, reap_interval=0.05)
    asyncio.run(
        run_until(worker, lambda: app.get_job(job.id).status is JobStatus.SUCCEEDED, timeout=20)
    )
    assert worker.metrics.value("duetime_lease_expiries_total") == 1
    assert worker.stats.reaped == 1
    assert attempts(worker, "orphan", "succeeded") == 1
