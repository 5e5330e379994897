"""What a node's timer and pruner read from the store: the near future of due jobs, wake-ups
when work is enqueued or due again, and finished jobs deleted by age in bounded batches."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from duetime.core.clock import ManualClock
from duetime.core.models import Outcome
from duetime.core.retry import ErrorCategory
from duetime.core.states import Event, JobStatus
from duetime.store.base import Store
from jobhelpers import claim_one, enqueue, job_in
from kit import DialectKit


def test_next_due_lists_the_near_future_instants_of_scheduled_jobs(
    store: Store, clock: ManualClock
) -> None:
    now = clock.now()
    soon, later = now + timedelta(seconds=1), now + timedelta(seconds=2)
    enqueue(store, clock, at=soon)
    enqueue(store, clock, at=later, args={"i": 1})
    enqueue(store, clock, at=later, args={"i": 2})  # the same instant: listed once
    enqueue(store, clock, at=later, queue="mail")
    enqueue(store, clock, at=now + timedelta(seconds=20))  # past the horizon
    enqueue(store, clock)  # due now: not in the future
    horizon = now + timedelta(seconds=10)
    assert store.next_due(now, horizon, None, 100) == [soon, later]
    assert store.next_due(now, horizon, ["mail"], 100) == [later]
    assert store.next_due(now, horizon, ["nothing"], 100) == []
    assert store.next_due(now, horizon, None, 1) == [soon]
    job, _ = claim_one(store, clock)  # claimed jobs are not scheduled any more
    assert job.due_at == now
    assert store.next_due(now, horizon, None, 100) == [soon, later]


def test_next_due_merges_the_instants_of_every_priority_class(
    store: Store, clock: ManualClock
) -> None:
    """Jobs of several priorities (PostgreSQL reads each class's instants from the claim-order
    index, migration 23): the earliest instants of every class, merged in time order, each
    instant once, up to the limit, whichever class holds them."""
    now = clock.now()
    at = [now + timedelta(seconds=s) for s in range(1, 8)]
    for priority, seconds in [(5, 3), (0, 1), (-3, 2), (5, 6), (0, 4), (-3, 4), (10, 7)]:
        enqueue(store, clock, at=at[seconds - 1], priority=priority, args={"p": priority})
    enqueue(store, clock, at=at[4], priority=5, queue="mail")
    enqueue(store, clock, at=now + timedelta(seconds=30), priority=-3)  # past the horizon
    enqueue(store, clock, priority=10)  # due now: not in the future
    horizon = now + timedelta(seconds=10)
    assert store.next_due(now, horizon, None, 100) == at
    assert store.next_due(now, horizon, None, 3) == at[:3]
    assert store.next_due(now, horizon, None, 5) == at[:4]  # at[3] is two jobs' instant
    assert store.next_due(now, horizon, ["mail"], 100) == [at[4]]
    assert store.next_due(now, horizon, ["default"], 100) == [*at[:4], at[5], at[6]]
    assert store.next_due(at[3], horizon, None, 100) == at[4:]


def test_prune_deletes_finished_jobs_by_age_and_keeps_the_rest(
    store: Store, clock: ManualClock
) -> None:
    kept = {s: job_in(store, clock, s)[0].id for s in (JobStatus.DEAD, JobStatus.PARKED)}
    old = [job_in(store, clock, s)[0].id for s in (JobStatus.SUCCEEDED, JobStatus.CANCELLED)]
    old.append(job_in(store, clock, JobStatus.EXPIRED)[0].id)
    clock.advance(3600)
    cutoff = clock.now()
    clock.advance(1)
    recent = job_in(store, clock, JobStatus.SUCCEEDED)[0].id
    waiting = enqueue(store, clock).id
    assert store.prune(cutoff, 2) == 2  # bounded: oldest first
    assert store.prune(cutoff, 100) == 1
    assert store.prune(cutoff, 100) == 0
    for job_id in old:
        assert store.get_job(job_id) is None
    for job_id in [*kept.values(), recent, waiting]:
        assert store.get_job(job_id) is not None


def test_wake_ups_tell_of_enqueued_and_retried_work(
    make_store: Callable[[], Store], kit: DialectKit, clock: ManualClock
) -> None:
    store = make_store()
    listener = store.listen()
    if kit.wakeups == "none":
        assert listener is None  # workers poll
        return
    assert listener is not None
    try:
        other = make_store()  # another process, as far as the database can tell
        due = clock.now() + timedelta(seconds=3)
        enqueue(other, clock, at=due, queue="mail")
        heard = listener.wait(10)
        assert heard
        if kit.wakeups == "due":
            assert heard[0].queue == "mail" and heard[0].due_at == due
        clock.advance(3)
        _, lease = claim_one(other, clock)
        listener.wait(0.1)  # the claim itself may count as a change: drain it
        retry_at = clock.now() + timedelta(seconds=7)
        failed = Outcome(Event.RETRY, due_at=retry_at, error_category=ErrorCategory.RETRYABLE)
        assert other.finish(lease, failed, clock.now())
        heard = listener.wait(10)
        assert heard
        if kit.wakeups == "due":
            assert (heard[-1].queue, heard[-1].due_at) == ("mail", retry_at)
    finally:
        listener.close()


@pytest.mark.parametrize("nothing_changed_for", [0.05])
def test_a_listener_waits_quietly_when_nothing_happens(
    store: Store, kit: DialectKit, nothing_changed_for: float
) -> None:
    listener = store.listen()
    if listener is None:
        assert kit.wakeups == "none"
        return
    try:
        listener.wait(0.01)  # whatever happened while the store was set up
        assert listener.wait(nothing_changed_for) == []
    finally:
        listener.close()


def test_the_pruner_deletes_what_is_older_than_the_retention_batch_after_batch(
    store: Store, clock: ManualClock
) -> None:
    import asyncio

    from duetime.runtime.pruner import Pruner
    from duetime.runtime.service import BlockingCalls

    finished = [job_in(store, clock, JobStatus.SUCCEEDED)[0].id for _ in range(5)]
    dead = job_in(store, clock, JobStatus.DEAD)[0].id
    clock.advance(timedelta(days=8))
    fresh = job_in(store, clock, JobStatus.SUCCEEDED)[0].id
    pruner = Pruner(store, clock, BlockingCalls(1), retention=timedelta(days=7), batch=2)
    asyncio.run(pruner.run_once())
    assert pruner.deleted == 5
    assert all(store.get_job(i) is None for i in finished)
    assert store.get_job(dead) is not None and store.get_job(fresh) is not None
