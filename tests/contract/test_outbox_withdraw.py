"""A dispatched attempt no worker accepted yet is withdrawn by an operator's move or by its
queue's switch to direct (docs/outbox.md, "Withdrawn dispatches"), on every dialect."""

from __future__ import annotations

from datetime import timedelta

import pytest

from duetime.core.clock import ManualClock
from duetime.core.errors import IllegalTransition, InvalidRequest
from duetime.core.models import JobFilter, Outcome
from duetime.core.outbox import Dispatch, Dispatched, OutboxEvent
from duetime.core.requests import TaskDefaults
from duetime.core.states import Event, JobStatus
from duetime.runtime.reaper import Reaper
from duetime.store.base import Store
from jobhelpers import enqueue
from kit import DialectKit


def message(event: OutboxEvent) -> Dispatched:
    return Dispatched.from_body(event.body())


def dispatched(store: Store, clock: ManualClock, count: int = 1, **kw: object) -> list[OutboxEvent]:
    store.set_queue("q", clock.now(), dispatch=Dispatch.OUTBOX)
    for _ in range(count):
        enqueue(store, clock, queue="q", **kw)
    events = store.dispatch_outbox(clock.now(), 100, lease_seconds=300)
    assert len(events) == count
    return events


def test_a_dispatched_job_shows_since_when_it_waits_for_a_worker(
    store: Store, clock: ManualClock
) -> None:
    [event] = dispatched(store, clock)
    at = clock.now()
    clock.advance(7)
    job = store.get_job(event.job_id)
    assert job is not None and job.status is JobStatus.RUNNING and job.dispatched_at == at
    [listed] = store.list_jobs(JobFilter(queue="q"))
    assert listed.dispatched_at == at
    [with_history] = store.list_jobs(JobFilter(queue="q", with_attempts=True))
    assert with_history.dispatched_at == at
    assert store.accept_dispatch(message(event), "w", clock.now()) is not None
    assert store.get_job(event.job_id).dispatched_at is None  # type: ignore[union-attr]
    assert store.list_jobs(JobFilter(queue="q"))[0].dispatched_at is None


def test_rescheduling_a_dispatched_job_withdraws_its_attempt(
    store: Store, clock: ManualClock
) -> None:
    [event] = dispatched(store, clock, defaults=TaskDefaults(max_attempts=1))
    store.mark_published([event.id], clock.now(), lease_seconds=300)
    before = store.get_job(event.job_id)
    assert before is not None
    later = clock.now() + timedelta(minutes=10)
    job = store.transition(event.job_id, Event.RESCHEDULE, clock.now(), due_at=later)
    assert job.status is JobStatus.SCHEDULED and job.due_at == later
    assert job.version > before.version and job.generation == before.generation
    assert job.attempts == 0 and job.attempt_history == ()  # the attempt never started
    assert job.dispatched_at is None
    # the published message is stale: refused, whoever receives it
    assert store.accept_dispatch(message(event), "w", clock.now()) is None
    assert store.expired_leases(clock.now() + timedelta(hours=1), 10) == []
    assert store.dispatch_outbox(clock.now(), 10, lease_seconds=300) == []  # not due yet
    clock.advance(600)
    [again] = store.dispatch_outbox(clock.now(), 10, lease_seconds=300)
    assert again.generation == event.generation + 1 and again.version == job.version
    assert store.accept_dispatch(message(event), "w", clock.now()) is None
    claim = store.accept_dispatch(message(again), "w", clock.now())
    assert claim is not None and claim.job.attempts == 1  # within max_attempts=1


def test_an_unpublished_withdrawn_event_is_never_published(
    store: Store, clock: ManualClock
) -> None:
    [event, kept] = dispatched(store, clock, count=2)
    store.transition(event.job_id, Event.RESCHEDULE, clock.now(), due_at=clock.now())
    taken = store.take_events("r", clock.now(), clock.now() + timedelta(seconds=15), 10)
    assert [e.id for e in taken] == [kept.id]
    assert store.outbox_figures(clock.now()).backlog == 1


def test_a_relay_publishing_a_withdrawn_event_changes_nothing(
    store: Store, clock: ManualClock
) -> None:
    [event] = dispatched(store, clock)
    [taken] = store.take_events("r", clock.now(), clock.now() + timedelta(seconds=15), 10)
    job = store.transition(event.job_id, Event.RESCHEDULE, clock.now(), due_at=clock.now())
    assert store.mark_published([taken.id], clock.now(), lease_seconds=300) == 0
    assert store.accept_dispatch(message(taken), "w", clock.now()) is None
    assert store.get_job(job.id) == job


def test_rescheduling_a_dispatched_job_past_its_deadline_changes_nothing(
    store: Store, clock: ManualClock
) -> None:
    [event] = dispatched(store, clock, deadline=clock.now() + timedelta(minutes=1))
    before = store.get_job(event.job_id)
    with pytest.raises(InvalidRequest, match="deadline"):
        store.transition(
            event.job_id, Event.RESCHEDULE, clock.now(), due_at=clock.now() + timedelta(hours=1)
        )
    assert store.get_job(event.job_id) == before
    assert store.accept_dispatch(message(event), "w", clock.now()) is not None


def test_a_move_of_another_tenant_does_not_withdraw(store: Store, clock: ManualClock) -> None:
    [event] = dispatched(store, clock)
    with pytest.raises(Exception, match=str(event.job_id)):
        store.transition(
            event.job_id, Event.RESCHEDULE, clock.now(), tenant="other", due_at=clock.now()
        )
    job = store.get_job(event.job_id)
    assert job is not None and job.status is JobStatus.RUNNING and job.dispatched_at is not None


def test_cancelling_a_dispatched_job_cancels_it_at_once(store: Store, clock: ManualClock) -> None:
    [event] = dispatched(store, clock)
    job = store.transition(event.job_id, Event.CANCEL, clock.now())
    assert job.status is JobStatus.CANCELLED and job.attempts == 0
    assert store.accept_dispatch(message(event), "w", clock.now()) is None


def test_an_accepted_attempt_is_not_withdrawn(store: Store, clock: ManualClock) -> None:
    [event] = dispatched(store, clock)
    claim = store.accept_dispatch(message(event), "w", clock.now())
    assert claim is not None
    with pytest.raises(IllegalTransition, match="running"):
        store.transition(event.job_id, Event.RESCHEDULE, clock.now(), due_at=clock.now())
    cancelled = store.transition(event.job_id, Event.CANCEL, clock.now())
    assert cancelled.status is JobStatus.CANCEL_REQUESTED  # it runs: its handler is asked
    assert store.finish(claim.lease, Outcome(Event.STOP), clock.now())


def test_switching_to_direct_makes_dispatched_jobs_claimable_at_once(
    store: Store, clock: ManualClock
) -> None:
    events = dispatched(store, clock, count=3, defaults=TaskDefaults(max_attempts=1))
    store.mark_published([e.id for e in events[:2]], clock.now(), lease_seconds=300)
    taken = store.accept_dispatch(message(events[0]), "broker-fed", clock.now())
    assert taken is not None
    clock.advance(1)
    store.set_queue("q", clock.now(), dispatch=Dispatch.DIRECT)
    for e in events[1:]:
        job = store.get_job(e.job_id)
        assert job is not None and job.status is JobStatus.SCHEDULED
        assert job.attempts == 0 and job.attempt_history == ()
    claims = store.claim(worker_id="direct", queues=None, limit=10, now=clock.now())
    assert sorted(c.job.id for c in claims) == [e.job_id for e in events[1:]]
    assert all(c.job.attempts == 1 for c in claims)  # the withdrawn dispatch did not count
    # the accepted attempt runs on where it is; the others' messages are stale
    assert store.get_job(events[0].job_id).attempt_history[-1].worker_id == "broker-fed"  # type: ignore[union-attr]
    for e in events[1:]:
        assert store.accept_dispatch(message(e), "broker-fed", clock.now()) is None
    assert store.take_events("r", clock.now(), clock.now() + timedelta(seconds=15), 10) == []


def test_switching_back_to_outbox_runs_nothing_twice(store: Store, clock: ManualClock) -> None:
    [first, second] = dispatched(store, clock, count=2)
    store.set_queue("q", clock.now(), dispatch=Dispatch.DIRECT)
    [direct] = store.claim(worker_id="direct", queues=None, limit=1, now=clock.now())
    store.set_queue("q", clock.now(), dispatch=Dispatch.OUTBOX)
    [again] = store.dispatch_outbox(clock.now(), 10, lease_seconds=300)
    assert {direct.job.id, again.job_id} == {first.job_id, second.job_id}
    assert store.claim(worker_id="direct", queues=None, limit=10, now=clock.now()) == []
    for old in (first, second):
        assert store.accept_dispatch(message(old), "broker-fed", clock.now()) is None
    claim = store.accept_dispatch(message(again), "broker-fed", clock.now())
    assert claim is not None and claim.job.attempts == 1
    assert store.accept_dispatch(message(again), "other", clock.now()) is None


def test_a_stranded_dispatch_of_a_direct_queue_is_withdrawn(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    [event] = dispatched(store, clock)
    store.set_queue("other", clock.now(), dispatch=Dispatch.OUTBOX)
    assert store.withdraw_stranded(clock.now()) == 0  # q is in outbox mode: its dispatch stands
    # a dispatch that raced the switch to direct (its process read the mode before the switch
    # committed) leaves an attempt held by the outbox in a direct queue: the mode is changed
    # here without the switch's own withdraw, as that race leaves it
    kit.execute(store_url, "UPDATE duetime_queues SET dispatch = 'direct' WHERE queue = ?", ["q"])
    assert Reaper(store, clock).run_once().withdrawn == 1  # every worker's reaper, each pass
    job = store.get_job(event.job_id)
    assert job is not None and job.status is JobStatus.SCHEDULED and job.attempts == 0
    assert store.accept_dispatch(message(event), "w", clock.now()) is None
    [claim] = store.claim(worker_id="direct", queues=None, limit=10, now=clock.now())
    assert claim.job.id == event.job_id
    assert store.withdraw_stranded(clock.now()) == 0  # a direct claim's attempt is not touched


def test_a_cancel_requested_dispatch_ends_cancelled_when_withdrawn(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    [event] = dispatched(store, clock)
    # cancelled while dispatched before a cancel withdrew (as a database of then holds it)
    kit.execute(
        store_url,
        "UPDATE duetime_jobs SET status = 'cancel_requested' WHERE id = ?",
        [event.job_id],
    )
    store.set_queue("q", clock.now(), dispatch=Dispatch.DIRECT)
    job = store.get_job(event.job_id)
    assert job is not None and job.status is JobStatus.CANCELLED and job.attempt_history == ()
    assert store.accept_dispatch(message(event), "w", clock.now()) is None


def test_the_outbox_figures_count_the_dispatched_attempts_no_worker_accepted(
    store: Store, clock: ManualClock
) -> None:
    events = dispatched(store, clock, count=3)
    clock.advance(5)
    enqueue(store, clock, queue="q")
    later = store.dispatch_outbox(clock.now(), 10, lease_seconds=300)
    assert store.accept_dispatch(message(events[0]), "w", clock.now()) is not None
    clock.advance(4)
    figures = store.outbox_figures(clock.now())
    assert figures.dispatched == 3  # two of the first three, and the later one
    assert figures.oldest_dispatched_age_seconds == 9
    [q] = figures.to_json()["queues"]  # type: ignore[misc]
    assert (q["dispatched"], q["oldest_dispatched_age_seconds"]) == (3, 9)
    store.transition(later[0].job_id, Event.CANCEL, clock.now())
    assert store.outbox_figures(clock.now()).dispatched == 2
