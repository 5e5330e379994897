"""Limits per dependency on every dialect: concurrency and token bucket per key, enforced in
the claim; jobs over a limit wait without consuming attempts and never hold other work back;
a dependency's pause (Retry(dependency=True))."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest

import duetime
from duetime.core.clock import ManualClock
from duetime.core.limits import (
    COOLDOWN_SECONDS,
    MIN_RETRIES,
    WINDOW_SECONDS,
    LimitSettings,
    parse_rate,
)
from duetime.core.models import Job, Lease, Outcome
from duetime.core.requests import TaskDefaults
from duetime.core.retry import ErrorCategory
from duetime.core.states import Event, JobStatus
from duetime.runtime.worker import Worker
from duetime.store.base import Store
from jobhelpers import new, run_until

API = TaskDefaults(limits=("api",))


@pytest.fixture(params=["plain", "controlled"], autouse=True)
def claim_path(request: pytest.FixtureRequest, make_store: Callable[[], Store]) -> str:
    """Every test runs twice: with limits alone (the claim's limited path), and with a queue
    control as well (a paused queue no test uses), where the controlled claim of
    store/sql/flow.py must keep every limit too."""
    if request.param == "controlled":
        make_store().set_queue("elsewhere", ManualClock().now(), paused=True)
    return str(request.param)


def enqueue_many(store: Store, clock: ManualClock, count: int, **kw: object) -> list[Job]:
    jobs = [new(clock, **kw) for _ in range(count)]  # type: ignore[arg-type]
    return [e.job for e in store.enqueue(jobs, clock.now())]


def claim(store: Store, clock: ManualClock, limit: int = 100) -> list[Job]:
    return [c.job for c in store.claim(worker_id="w", queues=None, limit=limit, now=clock.now())]


def carrying(jobs: list[Job], key: str) -> list[Job]:
    return [j for j in jobs if key in j.limits]


def test_a_job_carries_its_tasks_limit_keys(store: Store, clock: ManualClock) -> None:
    job = enqueue_many(store, clock, 1, defaults=TaskDefaults(limits=("b", "a")))[0]
    assert job.limits == ("a", "b")
    assert store.get_job(job.id).limits == ("a", "b")  # type: ignore[union-attr]
    plain = enqueue_many(store, clock, 2)  # the batch path too
    assert [j.limits for j in plain] == [(), ()]


def test_without_limits_keys_cost_nothing(store: Store, clock: ManualClock) -> None:
    enqueue_many(store, clock, 5, defaults=API)
    assert store.limit_names() == []
    assert len(claim(store, clock)) == 5  # a key nobody limited does not hold jobs back


def test_concurrency_per_key_and_others_not_blocked(store: Store, clock: ManualClock) -> None:
    store.set_limit(LimitSettings("api", concurrency=2), clock.now())
    limited = enqueue_many(store, clock, 6, defaults=API, priority=10)  # ahead in claim order
    others = enqueue_many(store, clock, 3)
    first = claim(store, clock, limit=4)
    assert len(carrying(first, "api")) == 2
    assert len(first) == 4  # the slots left went to other due work
    second = claim(store, clock)
    assert carrying(second, "api") == []
    assert {j.id for j in first + second} >= {j.id for j in others}
    waiting = [store.get_job(j.id) for j in limited if j.id not in {c.id for c in first}]
    assert all(j is not None and j.attempts == 0 for j in waiting)  # no attempt consumed
    assert all(j is not None and j.status is JobStatus.SCHEDULED for j in waiting)
    # one finishes: one slot comes back
    done = carrying(first, "api")[0]
    store.finish(done_lease(store, done), Outcome(Event.SUCCEED), clock.now())
    assert len(carrying(claim(store, clock), "api")) == 1
    assert carrying(claim(store, clock), "api") == []


def done_lease(store: Store, job: Job) -> Lease:
    full = store.get_job(job.id)
    assert full is not None
    attempt = full.attempt_history[-1]
    return Lease(job.id, attempt.id, attempt.generation, attempt.claim_token)


def test_expired_leases_give_their_slots_back(store: Store, clock: ManualClock) -> None:
    store.set_limit(LimitSettings("api", concurrency=1), clock.now())
    enqueue_many(store, clock, 3, defaults=API)
    assert len(claim(store, clock)) == 1
    assert claim(store, clock) == []
    clock.advance(31)  # past the lease (30 s): the crashed worker's slot is free again
    assert len(claim(store, clock)) == 1


def test_token_bucket(store: Store, clock: ManualClock) -> None:
    store.set_limit(LimitSettings("api", rate=parse_rate("2/s"), burst=3), clock.now())
    enqueue_many(store, clock, 20, defaults=API)
    assert len(claim(store, clock)) == 3  # a full bucket: the burst
    assert claim(store, clock) == []
    clock.advance(1)
    assert len(claim(store, clock)) == 2
    clock.advance(0.25)
    assert claim(store, clock) == []
    clock.advance(0.25)
    assert len(claim(store, clock, limit=1)) == 1
    clock.advance(10)  # the bucket holds at most burst tokens
    assert len(claim(store, clock)) == 3
    (status,) = store.limits(clock.now())
    assert status.tokens == pytest.approx(0.0)
    assert status.waiting == 20 - 9


def test_a_job_needs_every_key(store: Store, clock: ManualClock) -> None:
    store.set_limit(LimitSettings("a", concurrency=5), clock.now())
    store.set_limit(LimitSettings("b", concurrency=1), clock.now())
    enqueue_many(store, clock, 3, defaults=TaskDefaults(limits=("a", "b")))
    enqueue_many(store, clock, 3, defaults=TaskDefaults(limits=("a",)))
    got = claim(store, clock)
    assert len(carrying(got, "b")) == 1
    assert len(got) == 4
    (a, b) = store.limits(clock.now())
    assert (a.settings.key, a.running, b.running, b.waiting) == ("a", 4, 1, 2)


def test_a_paused_dependency_starts_nothing_until_then(store: Store, clock: ManualClock) -> None:
    enqueue_many(store, clock, 2, defaults=API)
    other = enqueue_many(store, clock, 1)
    store.pause_limits(["api"], clock.now() + timedelta(seconds=30), clock.now())
    assert [j.id for j in claim(store, clock)] == [other[0].id]
    store.pause_limits(["api"], clock.now() + timedelta(seconds=5), clock.now())  # shorter: kept
    clock.advance(29)
    assert claim(store, clock) == []
    clock.advance(1)
    assert len(claim(store, clock)) == 2


def test_settings_change_and_delete(store: Store, clock: ManualClock) -> None:
    store.set_limit(LimitSettings("api", concurrency=1), clock.now())
    enqueue_many(store, clock, 3, defaults=API)
    assert len(claim(store, clock)) == 1
    store.set_limit(LimitSettings("api", concurrency=2), clock.now())
    assert len(claim(store, clock)) == 1
    assert store.delete_limit("api") is True
    assert store.delete_limit("api") is False
    assert len(claim(store, clock)) == 1
    assert store.limits(clock.now()) == []


def test_limits_and_queue_caps_hold_together(store: Store, clock: ManualClock) -> None:
    store.set_limit(LimitSettings("api", concurrency=2), clock.now())
    store.set_queue("mail", clock.now(), concurrency=3)
    enqueue_many(store, clock, 5, defaults=TaskDefaults(queue="mail", limits=("api",)))
    enqueue_many(store, clock, 5, defaults=TaskDefaults(queue="mail"))
    enqueue_many(store, clock, 4, defaults=API, priority=5)
    first = claim(store, clock)
    assert len(carrying(first, "api")) == 2  # the key's cap, over both queues
    assert len([j for j in first if j.queue == "mail"]) == 3  # the queue's cap
    assert claim(store, clock) == []  # both full: nothing more, whatever is due
    assert all(
        j is not None and j.attempts == 0
        for j in (store.get_job(x.id) for x in enqueue_many(store, clock, 1, defaults=API))
    )


def test_a_long_line_of_blocked_jobs_does_not_starve_the_rest(
    store: Store, clock: ManualClock
) -> None:
    store.set_limit(LimitSettings("api", concurrency=1), clock.now())
    enqueue_many(store, clock, 300, defaults=API, priority=5)
    others = enqueue_many(store, clock, 10)
    first = claim(store, clock, limit=5)
    assert len(carrying(first, "api")) == 1 and len(first) == 5
    rest = claim(store, clock, limit=50)
    assert {j.id for j in first + rest} >= {j.id for j in others}


# -- retry budgets and breakers ----------------------------------------------------------------


def fail(store: Store, clock: ManualClock, job: Job) -> None:
    outcome = Outcome(Event.RETRY, due_at=clock.now(), error_category=ErrorCategory.RETRYABLE)
    assert store.finish(done_lease(store, job), outcome, clock.now())


def succeed(store: Store, clock: ManualClock, job: Job) -> None:
    assert store.finish(done_lease(store, job), Outcome(Event.SUCCEED), clock.now())


def test_breaker_opens_holds_probes_and_closes(store: Store, clock: ManualClock) -> None:
    store.set_limit(LimitSettings("api", breaker_threshold=0.5), clock.now())
    enqueue_many(store, clock, 12, defaults=API, max_attempts=10)
    first = claim(store, clock)
    assert len(first) == 12
    for job in first[:10]:
        fail(store, clock, job)  # 10 of 10 recent outcomes failed: the breaker opens
    (status,) = store.limits(clock.now())
    assert status.state.breaker == "open"
    other = enqueue_many(store, clock, 1)
    assert [j.id for j in claim(store, clock)] == [other[0].id]  # api held, the rest runs
    held = [store.get_job(j.id) for j in first[:10]]
    assert all(j is not None and j.attempts == 1 for j in held)  # waiting burns no attempt
    for job in first[10:]:
        succeed(store, clock, job)
    clock.advance(COOLDOWN_SECONDS)
    probe = claim(store, clock)
    assert len(probe) == 1  # half-open: one probe
    assert claim(store, clock) == []  # while it runs, nothing else
    fail(store, clock, probe[0])  # the dependency is still down: open again
    assert claim(store, clock) == []
    clock.advance(COOLDOWN_SECONDS)
    probe = claim(store, clock)
    assert len(probe) == 1
    succeed(store, clock, probe[0])  # it recovered: closed
    (status,) = store.limits(clock.now())
    assert status.state.breaker == "closed"
    assert len(claim(store, clock)) == 9


def test_breaker_cooldown_round_trips(store: Store, clock: ManualClock) -> None:
    settings = LimitSettings("api", breaker_threshold=0.5, breaker_cooldown=7.25)
    store.set_limit(settings, clock.now())
    (status,) = store.limits(clock.now())
    assert status.settings == settings
    assert status.to_json(clock.now())["breaker_cooldown_seconds"] == 7.25
    store.set_limit(LimitSettings("api", breaker_threshold=0.5), clock.now())  # back to the default
    (status,) = store.limits(clock.now())
    assert status.settings.breaker_cooldown is None
    assert status.to_json(clock.now())["breaker_cooldown_seconds"] == COOLDOWN_SECONDS


def test_an_open_breaker_holds_for_the_keys_own_cooldown(store: Store, clock: ManualClock) -> None:
    store.set_limit(LimitSettings("api", breaker_threshold=0.5, breaker_cooldown=5), clock.now())
    jobs = enqueue_many(store, clock, 10, defaults=API, max_attempts=10)
    assert len(claim(store, clock)) == 10
    for job in jobs:
        fail(store, clock, job)  # 10 of 10 failed: open for the key's 5 s, not the default 30 s
    opened = clock.now()
    (status,) = store.limits(clock.now())
    assert (status.state.breaker, status.state.breaker_until) == (
        "open",
        opened + timedelta(seconds=5),
    )
    clock.advance(4.9)
    assert claim(store, clock) == []
    clock.advance(0.1)
    probe = claim(store, clock)
    assert len(probe) == 1  # half-open at the end of the key's cool-down: one probe
    fail(store, clock, probe[0])  # it failed: open again, for the key's cool-down again
    (status,) = store.limits(clock.now())
    assert status.state.breaker_until == clock.now() + timedelta(seconds=5)
    clock.advance(4.9)
    assert claim(store, clock) == []
    clock.advance(0.1)
    assert len(claim(store, clock)) == 1


def test_retry_budget_delays_retries_not_fresh_work(store: Store, clock: ManualClock) -> None:
    store.set_limit(LimitSettings("api", retry_budget=0.1), clock.now())
    jobs = enqueue_many(store, clock, 30, defaults=API, max_attempts=5)
    assert len(claim(store, clock)) == 30
    for job in jobs:
        fail(store, clock, job)  # 30 retries due at once: a storm in the making
    fresh = enqueue_many(store, clock, 2, defaults=API)
    got = claim(store, clock)
    retries = [j for j in got if j.attempts > 1]
    # 30 recent starts, none a retry: max(MIN_RETRIES, 0.1 of the starts) retries may start
    assert len(retries) == MIN_RETRIES
    assert {j.id for j in fresh} <= {j.id for j in got}  # fresh work is not held back
    waiting = [store.get_job(j.id) for j in jobs if j.id not in {g.id for g in got}]
    assert len(waiting) == 20
    assert all(j is not None and j.attempts == 1 for j in waiting)  # delayed, not burnt
    assert claim(store, clock) == []
    clock.advance(2 * WINDOW_SECONDS)  # the window moved on: the budget is back
    assert len(claim(store, clock)) == MIN_RETRIES


# -- through the worker ------------------------------------------------------------------------


@pytest.fixture
def app(store_url: str, make_store: Callable[[], Store]) -> Iterator[duetime.App]:
    application = duetime.App(database_url=store_url)
    yield application
    application.close()


def test_retry_with_dependency_pauses_the_key(app: duetime.App) -> None:
    calls: list[int] = []

    @app.task(name="charge", limits=["payments-api"])
    def charge(n: int) -> None:
        calls.append(n)
        if n == 1:
            raise duetime.Retry(after=3600, reason="429", dependency=True)

    first = charge.enqueue({"n": 1})
    worker = Worker(app, poll_interval=0.02)
    asyncio.run(
        run_until(
            worker,
            lambda: (
                app.get_job(first.id).status is JobStatus.SCHEDULED
                and app.get_job(first.id).attempts == 1
            ),
        )
    )
    (status,) = app.limits()
    assert status.settings.key == "payments-api" and status.state.paused_until is not None
    assert status.state.paused_until > app.clock.now() + timedelta(seconds=3500)

    @app.task(name="other")
    def other() -> None:
        pass

    second = charge.enqueue({"n": 2})
    unlimited = other.enqueue({})
    worker = Worker(app, poll_interval=0.02)
    asyncio.run(run_until(worker, lambda: app.get_job(unlimited.id).status is JobStatus.SUCCEEDED))
    job = app.get_job(second.id)
    assert (job.status, job.attempts, calls) == (JobStatus.SCHEDULED, 0, [1])
    assert app.limit("payments-api").waiting == 1


def test_a_schedules_occurrences_carry_its_tasks_keys(app: duetime.App) -> None:
    @app.task(name="sync", limits=["crm"])
    def sync() -> None:
        pass

    schedule = app.add_schedule("nightly", task="sync", cron="0 2 * * *", timezone="UTC")
    assert schedule.spec.limits == ("crm",)
    assert app.get_schedule("nightly").spec.limits == ("crm",)  # as stored
    job = app.trigger_schedule("nightly")
    assert job.limits == ("crm",)
    assert app.get_job(job.id).limits == ("crm",)
    updated = app.update_schedule("nightly", cron="0 3 * * *")
    assert updated.spec.limits == ("crm",)
