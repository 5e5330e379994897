"""A rate limit paces at its rate, not at the workers' poll interval, on every dialect
(docs/flow-control.md, issue 20 section 2: 40 jobs under 5/s burst 1 took 20 s, not 8).

A claim held back by a limit tells when the limit allows a start again
(Claimed.next_start: the bucket's next token, the end of a dependency pause or of a
breaker's cool-down), and the worker's claim loop claims again at that instant."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest

import duetime
from duetime.core.clock import ManualClock
from duetime.core.limits import LimitSettings, parse_rate
from duetime.core.requests import TaskDefaults
from duetime.runtime.worker import Worker
from duetime.store.base import Claimed, ClaimPlan, Store
from jobhelpers import new, run_until

KEYED = TaskDefaults(limits=("api",))


def claim(store: Store, clock: ManualClock, limit: int = 8) -> Claimed:
    return store.claim_planned(
        ClaimPlan(), worker_id="w", queues=None, limit=limit, now=clock.now()
    )


def test_a_claim_held_back_by_a_bucket_says_when_its_next_token_comes(
    store: Store, clock: ManualClock
) -> None:
    store.set_limit(LimitSettings("api", rate=parse_rate("5/s"), burst=1), clock.now())
    store.enqueue([new(clock, args={"i": i}, defaults=KEYED) for i in range(5)], clock.now())
    got = claim(store, clock)
    assert len(got.claims) == 1  # the one token
    at = got.next_start
    assert at is not None
    assert clock.now() + timedelta(seconds=0.2) <= at <= clock.now() + timedelta(seconds=0.202)
    clock.advance(0.1)
    got = claim(store, clock)
    assert got.claims == [] and got.next_start == at  # still held back: and the same instant
    clock.advance((at - clock.now()).total_seconds())
    assert len(claim(store, clock).claims) == 1  # at that instant, one more
    # a claim that nothing held back says nothing
    store.delete_limit("api")
    got = claim(store, clock)
    assert len(got.claims) == 3 and got.next_start is None


def test_a_dependency_pause_says_when_it_ends(store: Store, clock: ManualClock) -> None:
    store.set_limit(LimitSettings("api", concurrency=5), clock.now())
    store.enqueue([new(clock, defaults=KEYED)], clock.now())
    until = clock.now() + timedelta(seconds=3)
    store.pause_limits(["api"], until, clock.now())
    got = claim(store, clock)
    assert got.claims == [] and got.next_start == until


@pytest.fixture
def app(store_url: str, make_store: Callable[[], Store]) -> Iterator[duetime.App]:
    application = duetime.App(database_url=store_url)
    yield application
    application.close()


JOBS = 11
RATE = 5.0  # per second, burst 1: the last of JOBS starts (JOBS - 1) / RATE after the first


def test_a_worker_starts_jobs_at_the_rate_not_at_its_poll_interval(app: duetime.App) -> None:
    """One worker of 8 slots and the default poll interval (0.5 s): 11 jobs under 5/s burst 1
    start over 2 s (before: one per poll interval, 5 s). Never faster than the rate (the
    store's bucket), and not more than 1.6 times slower."""
    starts: list[float] = []

    @app.task(name="keyed", limits=["api"])
    async def keyed(i: int) -> None:
        starts.append(time.monotonic())

    app.set_limit("api", rate="5/s", burst=1)
    app.enqueue_many("keyed", [{"i": i} for i in range(JOBS)])
    worker = Worker(app, concurrency=8)  # the default poll interval
    assert worker.poll_interval == 0.5
    asyncio.run(run_until(worker, lambda: len(starts) >= JOBS, timeout=30))
    expected = (JOBS - 1) / RATE
    # the handlers' own starts, and the starts the store recorded (the claims' `now`, which
    # the bucket counts from: exactly never faster than the rate)
    spread = starts[-1] - starts[0]
    assert spread <= 1.6 * expected, f"{JOBS} jobs took {spread:.2f}s to start, not {expected}"
    recorded = sorted(
        a.started_at for j in app.list_jobs(with_attempts=True) for a in j.attempt_history
    )
    assert len(recorded) == JOBS
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(recorded)]
    assert min(gaps) >= 1 / RATE - 1e-6, f"starts {min(gaps):.3f}s apart: above the rate"
    assert (recorded[-1] - recorded[0]).total_seconds() <= 1.6 * expected
