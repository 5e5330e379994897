"""The claim's instant (docs/at-least-once.md), on every dialect: a claim given the clock's
`now` (a callable) reads it once its connection is held, not before it waited for one. A
wait for a pooled connection (a database restart, an exhausted pool) then neither stamps the
attempt early (started_at, lease end) nor lets a job start after its deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import pytest

import duetime
from duetime.core.clock import ManualClock, SystemClock
from duetime.core.limits import LimitSettings
from duetime.core.models import Claim
from duetime.core.outbox import Dispatch, Dispatched
from duetime.core.requests import TaskDefaults
from duetime.core.states import JobStatus
from duetime.runtime.worker import Worker
from duetime.store.base import Store
from jobhelpers import enqueue, run_until

WAIT = 0.66  # how long the claim waited for its connection (the chaos run's)
LEASE = 30.0


def claim(store: Store, now: Callable[[], datetime]) -> list[Claim]:
    return store.claim(worker_id="w", queues=None, limit=5, now=now)


def stamped_after_the_wait(claims: list[Claim], clock: ManualClock) -> None:
    assert len(claims) == 1
    attempt = claims[0].attempt
    assert attempt.started_at == clock.now()  # the instant read once the connection was held
    assert attempt.lease_expires_at == clock.now() + timedelta(seconds=LEASE)


def plain(store: Store, clock: ManualClock) -> None:
    """No control, no limit: the claim statement alone (Driver.values_alone)."""


def limited(store: Store, clock: ManualClock) -> None:
    """A limit per dependency exists: the limited pick, in a transaction."""
    store.set_limit(LimitSettings("other", concurrency=3), clock.now())


def controlled(store: Store, clock: ManualClock) -> None:
    """A capped queue: the controlled pick (flow control), in a transaction."""
    store.set_queue("default", clock.now(), concurrency=10)


PATHS = [plain, limited, controlled]


def expired_by_the_usual_path(store: Store, clock: ManualClock, job_id: int) -> None:
    """The job left unstarted is expired by expire_overdue, as any job past its deadline."""
    assert store.expire_overdue(clock.now(), 10) == 1
    got = store.get_job(job_id)
    assert got is not None and got.status is JobStatus.EXPIRED


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.__name__)
def test_the_attempt_is_stamped_with_the_instant_read_after_the_connection_is_held(
    store: Store, clock: ManualClock, path: Callable[[Store, ManualClock], None]
) -> None:
    path(store, clock)
    enqueue(store, clock, defaults=TaskDefaults(lease_seconds=LEASE))
    with slow_connections_on(store, clock):
        claims = claim(store, clock.now)
    stamped_after_the_wait(claims, clock)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.__name__)
def test_a_job_whose_deadline_passes_during_the_wait_is_not_started(
    store: Store, clock: ManualClock, path: Callable[[Store, ManualClock], None]
) -> None:
    path(store, clock)
    job = enqueue(store, clock, deadline=clock.now() + timedelta(seconds=WAIT / 2))
    with slow_connections_on(store, clock):
        assert claim(store, clock.now) == []
    expired_by_the_usual_path(store, clock, job.id)


def test_a_plain_datetime_is_the_claim_instant_as_before(store: Store, clock: ManualClock) -> None:
    enqueue(store, clock, defaults=TaskDefaults(lease_seconds=LEASE))
    at = clock.now()
    with slow_connections_on(store, clock):
        claims = store.claim(worker_id="w", queues=None, limit=5, now=at)
    assert [c.attempt.started_at for c in claims] == [at]


def dispatch_plain(store: Store, clock: ManualClock) -> None:
    """The relay's dispatch with no control: the dispatch statement alone."""
    store.set_queue("default", clock.now(), dispatch=Dispatch.OUTBOX)


def dispatch_controlled(store: Store, clock: ManualClock) -> None:
    """A capped outbox-mode queue: the controlled choice (Claimer.start_controlled)."""
    store.set_queue("default", clock.now(), dispatch=Dispatch.OUTBOX, concurrency=10)


DISPATCHES = [dispatch_plain, dispatch_controlled]


@pytest.mark.parametrize("path", DISPATCHES, ids=lambda p: p.__name__)
def test_a_dispatch_stamps_its_attempt_after_the_wait_and_skips_a_job_past_its_deadline(
    store: Store, clock: ManualClock, path: Callable[[Store, ManualClock], None]
) -> None:
    path(store, clock)
    late = enqueue(store, clock, deadline=clock.now() + timedelta(seconds=WAIT / 2))
    job = enqueue(store, clock)
    with slow_connections_on(store, clock):
        [event] = store.dispatch_outbox(clock.now, 10, lease_seconds=LEASE)
    assert event.job_id == job.id and event.created_at == clock.now()
    got = store.get_job(job.id)
    assert got is not None
    attempt = got.attempt_history[-1]
    assert attempt.started_at == clock.now()
    assert attempt.lease_expires_at == clock.now() + timedelta(seconds=LEASE)
    expired_by_the_usual_path(store, clock, late.id)


def test_a_broker_fed_worker_takes_its_attempt_at_the_instant_after_the_wait(
    store: Store, clock: ManualClock
) -> None:
    dispatch_plain(store, clock)
    enqueue(store, clock, defaults=TaskDefaults(lease_seconds=LEASE))
    [event] = store.dispatch_outbox(clock.now(), 10, lease_seconds=300)
    with slow_connections_on(store, clock):
        claim = store.accept_dispatch(Dispatched.from_body(event.body()), "w", clock.now)
    assert claim is not None
    assert claim.attempt.started_at == clock.now()
    assert claim.attempt.lease_expires_at == clock.now() + timedelta(seconds=LEASE)


class SlowDriver:
    """A claimer's driver whose every connection (a transaction's, values_alone's) is held
    WAIT seconds of `clock` after it was asked for; the rest as the driver's."""

    def __init__(self, driver: Any, clock: ManualClock) -> None:
        self.driver = driver
        self.clock = clock

    def __getattr__(self, name: str) -> Any:
        return getattr(self.driver, name)

    def transaction(self, *args: Any, **kwargs: Any) -> Any:
        self.clock.advance(WAIT)
        return self.driver.transaction(*args, **kwargs)

    def values_alone(self, name: str, /, **params: Any) -> Any:
        self.clock.advance(WAIT)
        return self.driver.values_alone(name, **params)


def test_a_worker_claims_at_the_instant_after_its_wait_for_a_connection(
    store_url: str,
) -> None:
    """The worker gives its claim the clock's `now`, not an instant read before the store
    thread and the connection were taken: a job whose deadline passes while the claim waits
    for its connection is not started, and the reaper expires it."""
    clock = ManualClock(SystemClock().now())
    app = duetime.App(store_url, clock=clock)
    try:
        ran: list[int] = []

        @app.task(name="late")
        def late() -> None:
            ran.append(1)

        job = app.enqueue("late", deadline=clock.now() + timedelta(seconds=WAIT / 2))
        claimer = app.store.claimer  # type: ignore[attr-defined]
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(claimer, "driver", SlowDriver(claimer.driver, clock))
            worker = Worker(app, poll_interval=0.02, reap_interval=0.05)
            asyncio.run(run_until(worker, lambda: app.get_job(job.id).terminal, timeout=10))
        got = app.get_job(job.id)
        assert got.status is JobStatus.EXPIRED and got.attempt_history == () and ran == []
    finally:
        app.close()


@contextmanager
def slow_connections_on(store: Store, clock: ManualClock) -> Iterator[None]:
    """Every connection the store's claims, dispatches and accepts take from here waits WAIT
    seconds of `clock` (SlowDriver), as a claim waits for a pooled one."""
    with pytest.MonkeyPatch.context() as patch:
        for part in (store.claimer, store.outbox):  # type: ignore[attr-defined]
            patch.setattr(part, "driver", SlowDriver(part.driver, clock))
        yield
