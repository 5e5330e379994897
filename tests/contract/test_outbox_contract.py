"""The store's queue settings and transactional outbox (docs/outbox.md), on every dialect."""

from __future__ import annotations

from datetime import timedelta

from duetime.core.clock import ManualClock
from duetime.core.models import Outcome
from duetime.core.outbox import DISPATCH_HOLDER, Dispatch, Dispatched, OutboxEvent
from duetime.core.requests import TaskDefaults
from duetime.core.states import AttemptStatus, Event, JobStatus
from duetime.store.base import Store
from jobhelpers import enqueue
from kit import DialectKit


def message(event: OutboxEvent) -> Dispatched:
    return Dispatched.from_body(event.body())


def test_queue_settings_default_to_direct_and_keep_what_is_not_given(
    store: Store, clock: ManualClock
) -> None:
    assert store.queue_settings() == []
    set_ = store.set_queue("mail", clock.now(), dispatch=Dispatch.OUTBOX)
    assert set_.dispatch is Dispatch.OUTBOX and set_.updated_at == clock.now()
    clock.advance(1)
    kept = store.set_queue("mail", clock.now())  # no setting given: all kept
    assert kept.dispatch is Dispatch.OUTBOX and kept.updated_at == clock.now()
    store.set_queue("a", clock.now(), dispatch=Dispatch.DIRECT)
    assert [(q.queue, q.dispatch) for q in store.queue_settings()] == [
        ("a", Dispatch.DIRECT),
        ("mail", Dispatch.OUTBOX),
    ]


def test_claim_leaves_outbox_queues_to_the_relay(store: Store, clock: ManualClock) -> None:
    store.set_queue("broker", clock.now(), dispatch=Dispatch.OUTBOX)
    direct = enqueue(store, clock, queue="db")
    outboxed = enqueue(store, clock, queue="broker")
    for queues in (None, ["db", "broker"], ["broker"]):
        claims = store.claim(worker_id="w", queues=queues, limit=10, now=clock.now())
        assert outboxed.id not in [c.job.id for c in claims]
    [event] = store.dispatch_outbox(clock.now(), 10, lease_seconds=300)
    assert (event.job_id, event.queue, event.generation) == (outboxed.id, "broker", 1)
    assert event.version == outboxed.version and event.published_at is None
    job = store.get_job(outboxed.id)
    assert job is not None and job.status is JobStatus.RUNNING
    assert job.attempt_history[-1].worker_id == DISPATCH_HOLDER
    assert store.get_job(direct.id).status is JobStatus.RUNNING  # type: ignore[union-attr]
    assert store.dispatch_outbox(clock.now(), 10, lease_seconds=300) == []


def test_switching_back_to_direct_lets_workers_claim_again(
    store: Store, clock: ManualClock
) -> None:
    store.set_queue("q", clock.now(), dispatch=Dispatch.OUTBOX)
    job = enqueue(store, clock, queue="q")
    assert store.claim(worker_id="w", queues=None, limit=5, now=clock.now()) == []
    store.set_queue("q", clock.now(), dispatch=Dispatch.DIRECT)
    assert store.dispatch_outbox(clock.now(), 10, lease_seconds=300) == []
    [claim] = store.claim(worker_id="w", queues=None, limit=5, now=clock.now())
    assert claim.job.id == job.id


def test_relays_lease_events_and_mark_them_published(store: Store, clock: ManualClock) -> None:
    store.set_queue("q", clock.now(), dispatch=Dispatch.OUTBOX)
    jobs = [enqueue(store, clock, queue="q") for _ in range(3)]
    events = store.dispatch_outbox(clock.now(), 10, lease_seconds=300)
    assert [e.job_id for e in events] == [j.id for j in jobs]
    until = clock.now() + timedelta(seconds=30)
    first = store.take_events("r1", clock.now(), until, 2)
    assert [e.id for e in first] == [e.id for e in events[:2]]
    second = store.take_events("r2", clock.now(), until, 10)
    assert [e.id for e in second] == [events[2].id]  # r1's lease holds
    assert store.take_events("r3", clock.now(), until, 10) == []
    # a relay whose publish failed takes its own events again at once
    assert [e.id for e in store.take_events("r2", clock.now(), until, 10)] == [events[2].id]
    store.mark_published([e.id for e in first], clock.now(), lease_seconds=300)
    clock.advance(31)  # r2 died before marking: its lease ended, the event is taken again
    again = store.take_events("r3", clock.now(), clock.now() + timedelta(seconds=30), 10)
    assert [e.id for e in again] == [events[2].id]
    figures = store.outbox_figures(clock.now())
    assert figures.backlog == 1
    assert figures.oldest_unpublished_age_seconds == 31
    assert figures.to_json()["backlog"] == 1


def test_an_unpublished_attempt_is_not_reaped_and_a_published_one_is(
    store: Store, clock: ManualClock
) -> None:
    store.set_queue("q", clock.now(), dispatch=Dispatch.OUTBOX)
    job = enqueue(store, clock, queue="q")
    [event] = store.dispatch_outbox(clock.now(), 10, lease_seconds=60)
    clock.advance(600)  # the broker is down: the event stays unpublished, nothing is lost
    assert store.expired_leases(clock.now(), 10) == []
    store.mark_published([event.id], clock.now(), lease_seconds=60)
    clock.advance(59)
    assert store.expired_leases(clock.now(), 10) == []  # the lease runs from publication
    clock.advance(2)  # the message was lost in the broker: the reaper recovers the attempt
    [expired] = store.expired_leases(clock.now(), 10)
    assert expired.lease.job_id == job.id


def test_a_worker_accepts_a_dispatched_attempt_once(store: Store, clock: ManualClock) -> None:
    store.set_queue("q", clock.now(), dispatch=Dispatch.OUTBOX)
    job = enqueue(store, clock, queue="q", defaults=TaskDefaults(lease_seconds=45))
    [event] = store.dispatch_outbox(clock.now(), 10, lease_seconds=300)
    clock.advance(5)
    claim = store.accept_dispatch(message(event), "w1", clock.now())
    assert claim is not None and claim.job.id == job.id
    assert claim.attempt.worker_id == "w1" and claim.attempt.started_at == clock.now()
    assert claim.attempt.lease_expires_at == clock.now() + timedelta(seconds=45)
    assert store.accept_dispatch(message(event), "w2", clock.now()) is None  # a duplicate
    assert store.accept_dispatch(message(event), "w1", clock.now()) is None  # redelivered
    assert store.finish(claim.lease, Outcome(Event.SUCCEED), clock.now())
    assert store.accept_dispatch(message(event), "w2", clock.now()) is None  # succeeded


def test_a_stale_message_is_refused(store: Store, clock: ManualClock) -> None:
    store.set_queue("q", clock.now(), dispatch=Dispatch.OUTBOX)
    enqueue(store, clock, queue="q", defaults=TaskDefaults(lease_seconds=10))
    [event] = store.dispatch_outbox(clock.now(), 10, lease_seconds=30)
    store.mark_published([event.id], clock.now(), lease_seconds=30)
    clock.advance(31)  # lost in the broker: reaped, retried, dispatched again
    [expired] = store.expired_leases(clock.now(), 10)
    assert store.finish(
        expired.lease,
        Outcome(Event.RETRY, due_at=clock.now(), attempt_status=AttemptStatus.LOST),
        clock.now(),
        only_if_expired=True,
    )
    [newer] = store.dispatch_outbox(clock.now(), 10, lease_seconds=30)
    assert newer.generation == event.generation + 1
    assert store.accept_dispatch(message(event), "w", clock.now()) is None
    assert store.accept_dispatch(message(newer), "w", clock.now()) is not None


def test_a_cancel_requested_job_is_still_handed_over_to_be_stopped(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    store.set_queue("q", clock.now(), dispatch=Dispatch.OUTBOX)
    job = enqueue(store, clock, queue="q")
    [event] = store.dispatch_outbox(clock.now(), 10, lease_seconds=30)
    # a cancel now withdraws a dispatched attempt (test_outbox_withdraw.py); a request made
    # before that (a database of an older version) still stands, with a newer version
    kit.execute(
        store_url,
        "UPDATE duetime_jobs SET status = 'cancel_requested', version = version + 1 WHERE id = ?",
        [job.id],
    )
    claim = store.accept_dispatch(message(event), "w", clock.now())
    assert claim is not None and claim.job.status is JobStatus.CANCEL_REQUESTED
    assert store.finish(claim.lease, Outcome(Event.STOP), clock.now())
    assert store.get_job(job.id).status is JobStatus.CANCELLED  # type: ignore[union-attr]


def test_published_events_are_pruned(store: Store, clock: ManualClock) -> None:
    store.set_queue("q", clock.now(), dispatch=Dispatch.OUTBOX)
    enqueue(store, clock, queue="q")
    enqueue(store, clock, queue="q")
    events = store.dispatch_outbox(clock.now(), 10, lease_seconds=30)
    store.mark_published([events[0].id], clock.now(), lease_seconds=30)
    clock.advance(10)
    assert store.outbox_figures(clock.now(), window_seconds=60).publish_rate == 1 / 60
    assert store.prune_outbox(clock.now(), 100) == 1
    assert store.outbox_figures(clock.now()).backlog == 1


def test_a_message_that_comes_after_the_deadline_never_starts_and_the_job_expires(
    store: Store, clock: ManualClock
) -> None:
    store.set_queue("q", clock.now(), dispatch=Dispatch.OUTBOX)
    job = enqueue(store, clock, queue="q", deadline=clock.now() + timedelta(seconds=10))
    [event] = store.dispatch_outbox(clock.now(), 10, lease_seconds=300)
    store.mark_published([event.id], clock.now(), lease_seconds=300)
    clock.advance(11)  # the message waited in the broker past the deadline
    assert store.accept_dispatch(message(event), "w", clock.now()) is None
    found = store.get_job(job.id)
    assert found is not None and found.status is JobStatus.SCHEDULED
    [attempt] = found.attempt_history
    assert attempt.status is AttemptStatus.LOST and attempt.started_at < job.deadline_at  # type: ignore[operator]
    assert store.dispatch_outbox(clock.now(), 10, lease_seconds=300) == []  # not again
    assert store.expire_overdue(clock.now(), 10) == 1
    assert store.get_job(job.id).status is JobStatus.EXPIRED  # type: ignore[union-attr]
