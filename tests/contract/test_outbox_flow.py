"""Flow control of the relay's dispatch (docs/flow-control.md, docs/outbox.md), on every
dialect: queue and tenant caps, weights and limits per dependency hold for jobs of outbox-mode
queues as they do for a worker's claim; a dispatched attempt counts as running from its
dispatch; every event belongs to an attempt started with the relay's lease."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import timedelta

import pytest

from duetime.core.clock import ManualClock
from duetime.core.limits import LimitSettings, parse_rate
from duetime.core.models import Job, JobFilter, Outcome
from duetime.core.outbox import DISPATCH_HOLDER, Dispatch, Dispatched, OutboxEvent
from duetime.core.requests import TaskDefaults
from duetime.core.states import AttemptStatus, Event, JobStatus
from duetime.runtime.fairness import DispatchFairness
from duetime.store.base import Store
from jobhelpers import enqueue

API = TaskDefaults(limits=("api",))
LEASE = 120.0  # the relay's dispatch lease in these tests (jobs keep their own default)


def dispatch(store: Store, clock: ManualClock, limit: int = 50) -> list[OutboxEvent]:
    return store.dispatch_outbox(clock.now(), limit, lease_seconds=LEASE)


def outbox_queue(store: Store, clock: ManualClock, name: str = "ob", **kw: object) -> None:
    store.set_queue(name, clock.now(), dispatch=Dispatch.OUTBOX, **kw)  # type: ignore[arg-type]


def jobs_of(store: Store, events: list[OutboxEvent]) -> list[Job]:
    found = [store.get_job(e.job_id) for e in events]
    assert all(j is not None for j in found)
    return [j for j in found if j is not None]


def accept_and_finish(store: Store, clock: ManualClock, event: OutboxEvent) -> None:
    claim = store.accept_dispatch(Dispatched.from_body(event.body()), "w", clock.now())
    assert claim is not None
    assert store.finish(claim.lease, Outcome(Event.SUCCEED), clock.now())


def check_started(store: Store, clock: ManualClock, events: list[OutboxEvent]) -> None:
    """Every event belongs to the running attempt of its job's generation, held for the
    broker with the relay's lease, and every attempt held for the broker has its event."""
    for event, job in zip(events, jobs_of(store, events), strict=True):
        assert job.status is JobStatus.RUNNING and job.generation == event.generation
        attempt = job.attempt_history[-1]
        assert attempt.id == event.attempt_id and attempt.generation == event.generation
        assert attempt.status is AttemptStatus.RUNNING and attempt.worker_id == DISPATCH_HOLDER
        assert attempt.lease_expires_at == clock.now() + timedelta(seconds=LEASE)
        assert (event.queue, event.task, event.version) == (job.queue, job.task, job.version)


def held_for_broker(store: Store) -> int:
    """Attempts running and held by DISPATCH_HOLDER, over every job."""
    return sum(
        1
        for status in (JobStatus.RUNNING, JobStatus.CANCEL_REQUESTED)
        for job in _jobs(store, status)
        if job.attempt_history
        and job.attempt_history[-1].worker_id == DISPATCH_HOLDER
        and job.attempt_history[-1].status is AttemptStatus.RUNNING
    )


def _jobs(store: Store, status: JobStatus) -> list[Job]:
    return store.list_jobs(JobFilter(status=status, limit=1000, with_attempts=True))


@pytest.fixture(params=["alone", "beside-direct-controls"])
def setup(request: pytest.FixtureRequest, make_store: Callable[[], Store]) -> str:
    """Each test runs twice: alone, and with controls of a direct-mode queue the test does not
    use (a pause and a cap), which must not change what is dispatched."""
    if request.param == "beside-direct-controls":
        make_store().set_queue("elsewhere", ManualClock().now(), paused=True, concurrency=1)
    return str(request.param)


def test_a_queue_cap_holds_dispatched_attempts(
    setup: str, store: Store, clock: ManualClock
) -> None:
    outbox_queue(store, clock, concurrency=2)
    outbox_queue(store, clock, "free")
    for _ in range(5):
        enqueue(store, clock, queue="ob")
    free = [enqueue(store, clock, queue="free").id for _ in range(3)]
    events = dispatch(store, clock, limit=3)
    events += dispatch(store, clock)
    assert Counter(e.queue for e in events) == {"ob": 2, "free": 3}
    assert set(free) <= {e.job_id for e in events}  # an uncapped queue is not held back
    check_started(store, clock, events)
    clock.advance(LEASE + 1)  # unpublished, past the dispatch lease: still running, still held
    assert dispatch(store, clock) == []
    store.mark_published([e.id for e in events], clock.now(), lease_seconds=LEASE)
    accept_and_finish(store, clock, next(e for e in events if e.queue == "ob"))
    [again] = dispatch(store, clock)  # a slot came back
    assert again.queue == "ob"
    assert dispatch(store, clock) == []


def test_an_accepted_attempt_keeps_its_slot_until_it_ends(
    setup: str, store: Store, clock: ManualClock
) -> None:
    outbox_queue(store, clock, concurrency=1)
    enqueue(store, clock, queue="ob")
    enqueue(store, clock, queue="ob")
    [event] = dispatch(store, clock)
    store.mark_published([event.id], clock.now(), lease_seconds=LEASE)
    claim = store.accept_dispatch(Dispatched.from_body(event.body()), "w", clock.now())
    assert claim is not None
    assert dispatch(store, clock) == []
    assert store.finish(claim.lease, Outcome(Event.SUCCEED), clock.now())
    assert len(dispatch(store, clock)) == 1


def test_a_cap_of_zero_dispatches_nothing(setup: str, store: Store, clock: ManualClock) -> None:
    outbox_queue(store, clock, concurrency=0)
    enqueue(store, clock, queue="ob")
    assert dispatch(store, clock) == []
    assert held_for_broker(store) == 0


def test_a_tenant_cap_holds_dispatch_and_claims_together(
    setup: str, store: Store, clock: ManualClock
) -> None:
    outbox_queue(store, clock)
    store.set_tenant("big", clock.now(), concurrency=3)
    direct = enqueue(store, clock, queue="db", tenant="big")
    [claim] = store.claim(worker_id="w", queues=["db"], limit=5, now=clock.now())
    assert claim.job.id == direct.id
    for _ in range(5):
        enqueue(store, clock, queue="ob", tenant="big")
    small = [enqueue(store, clock, queue="ob", tenant="small").id for _ in range(2)]
    events = dispatch(store, clock)
    assert Counter(j.tenant for j in jobs_of(store, events)) == {"big": 2, "small": 2}
    assert set(small) <= {e.job_id for e in events}
    check_started(store, clock, events)
    # the dispatched attempts count for a worker's claim too: the tenant is full
    enqueue(store, clock, queue="db", tenant="big")
    assert store.claim(worker_id="w", queues=["db"], limit=5, now=clock.now()) == []
    assert store.finish(claim.lease, Outcome(Event.SUCCEED), clock.now())
    [one] = dispatch(store, clock, limit=1)
    assert jobs_of(store, [one])[0].tenant == "big"


def test_tenants_take_turns_in_saturated_dispatches(
    setup: str, store: Store, clock: ManualClock
) -> None:
    """A small tenant's jobs, due after a flood's, are dispatched within the next saturated
    dispatches, not after the flood (the relay's tenant rotation, as a worker's claims, kept
    by the relay's dispatch policy: runtime/fairness.py)."""
    relay = DispatchFairness()

    def dispatch(store: Store, clock: ManualClock, limit: int = 50) -> list[OutboxEvent]:
        return relay.dispatch(store, clock.now(), limit, LEASE).events

    outbox_queue(store, clock)
    for _ in range(40):
        enqueue(store, clock, queue="ob", tenant="big")
    clock.advance(1)
    small = {enqueue(store, clock, queue="ob", tenant="small").id for _ in range(3)}
    events = dispatch(store, clock, limit=4) + dispatch(store, clock, limit=4)
    assert small <= {e.job_id for e in events}
    assert Counter(j.tenant for j in jobs_of(store, events)) == {"big": 5, "small": 3}
    check_started(store, clock, events)
    # the flood alone again: claim order, all of it
    rest = dispatch(store, clock)
    assert len(rest) == 35 and all(j.tenant == "big" for j in jobs_of(store, rest))


def test_weights_split_a_dispatch_between_outbox_queues(
    setup: str, store: Store, clock: ManualClock
) -> None:
    outbox_queue(store, clock, "light")
    outbox_queue(store, clock, "heavy", weight=3)
    for _ in range(20):
        enqueue(store, clock, queue="light")  # earlier: first in claim order
    for _ in range(20):
        enqueue(store, clock, queue="heavy")
    events = dispatch(store, clock, limit=8)
    assert Counter(e.queue for e in events) == {"heavy": 6, "light": 2}
    check_started(store, clock, events)


def test_a_limit_keys_concurrency_holds_dispatch(
    setup: str, store: Store, clock: ManualClock
) -> None:
    outbox_queue(store, clock)
    store.set_limit(LimitSettings("api", concurrency=2), clock.now())
    limited = [enqueue(store, clock, queue="ob", defaults=API, priority=10) for _ in range(5)]
    others = [enqueue(store, clock, queue="ob").id for _ in range(2)]
    events = dispatch(store, clock)
    assert len([e for e in events if e.job_id in {j.id for j in limited}]) == 2
    assert set(others) <= {e.job_id for e in events}
    check_started(store, clock, events)
    (status,) = store.limits(clock.now())
    assert (status.running, status.waiting) == (2, 3)
    clock.advance(LEASE * 5)  # the broker is down: unpublished attempts hold their slots
    assert dispatch(store, clock) == []
    assert store.limits(clock.now())[0].running == 2
    store.mark_published([e.id for e in events], clock.now(), lease_seconds=LEASE)
    accept_and_finish(store, clock, next(e for e in events if e.job_id == limited[0].id))
    assert [e.job_id for e in dispatch(store, clock)] == [limited[2].id]


def test_a_limit_counts_dispatched_and_claimed_attempts_together(
    setup: str, store: Store, clock: ManualClock
) -> None:
    outbox_queue(store, clock)
    store.set_limit(LimitSettings("api", concurrency=2), clock.now())
    enqueue(store, clock, queue="db", defaults=API)
    assert len(store.claim(worker_id="w", queues=None, limit=5, now=clock.now())) == 1
    for _ in range(3):
        enqueue(store, clock, queue="ob", defaults=API)
    assert len(dispatch(store, clock)) == 1
    enqueue(store, clock, queue="db", defaults=API)
    assert store.claim(worker_id="w", queues=None, limit=5, now=clock.now()) == []


def test_a_token_bucket_holds_dispatch(setup: str, store: Store, clock: ManualClock) -> None:
    outbox_queue(store, clock)
    store.set_limit(LimitSettings("api", rate=parse_rate("2/s"), burst=3), clock.now())
    for _ in range(20):
        enqueue(store, clock, queue="ob", defaults=API)
    assert len(dispatch(store, clock)) == 3  # a full bucket: the burst
    assert dispatch(store, clock) == []
    clock.advance(1)
    assert len(dispatch(store, clock)) == 2
    clock.advance(0.25)
    assert dispatch(store, clock) == []
    clock.advance(0.25)
    assert len(dispatch(store, clock, limit=1)) == 1
    clock.advance(10)  # the bucket holds at most burst tokens
    assert len(dispatch(store, clock)) == 3
    (status,) = store.limits(clock.now())
    assert status.tokens == pytest.approx(0.0)
    assert status.waiting == 20 - 9


def test_a_blocked_dependency_dispatches_nothing_of_it(
    setup: str, store: Store, clock: ManualClock
) -> None:
    outbox_queue(store, clock)
    blocked = [enqueue(store, clock, queue="ob", defaults=API, priority=5) for _ in range(2)]
    other = enqueue(store, clock, queue="ob")
    store.pause_limits(["api"], clock.now() + timedelta(seconds=30), clock.now())
    assert [e.job_id for e in dispatch(store, clock)] == [other.id]
    clock.advance(29)
    assert dispatch(store, clock) == []
    clock.advance(1)
    assert [e.job_id for e in dispatch(store, clock)] == [j.id for j in blocked]


def test_a_paused_outbox_queue_dispatches_nothing_under_controls(
    setup: str, store: Store, clock: ManualClock
) -> None:
    outbox_queue(store, clock, paused=True, concurrency=5)
    outbox_queue(store, clock, "open")
    store.set_limit(LimitSettings("api", concurrency=10), clock.now())
    enqueue(store, clock, queue="ob")
    enqueue(store, clock, queue="ob", defaults=API)
    open_ = enqueue(store, clock, queue="open", defaults=API)
    assert [e.job_id for e in dispatch(store, clock)] == [open_.id]
    assert dispatch(store, clock) == []
    outbox_queue(store, clock, paused=False)
    assert len(dispatch(store, clock)) == 2


def test_a_direct_queue_is_not_dispatched_under_controls(
    setup: str, store: Store, clock: ManualClock
) -> None:
    outbox_queue(store, clock, concurrency=5)
    store.set_queue("db", clock.now(), concurrency=5)
    store.set_limit(LimitSettings("api", concurrency=10), clock.now())
    direct = [enqueue(store, clock, queue="db").id, enqueue(store, clock, queue="plain").id]
    outboxed = enqueue(store, clock, queue="ob", defaults=API)
    assert [e.job_id for e in dispatch(store, clock)] == [outboxed.id]
    claims = store.claim(worker_id="w", queues=None, limit=10, now=clock.now())
    assert sorted(c.job.id for c in claims) == sorted(direct)


@pytest.mark.parametrize("controls", ["none", "a cap elsewhere", "a limit elsewhere"])
def test_an_uncontrolled_outbox_queue_dispatches_in_claim_order(
    controls: str, setup: str, store: Store, clock: ManualClock
) -> None:
    outbox_queue(store, clock)
    if controls == "a cap elsewhere":
        outbox_queue(store, clock, "capped", concurrency=1)
        store.set_tenant("nobody", clock.now(), concurrency=1)
    elif controls == "a limit elsewhere":
        store.set_limit(LimitSettings("other", concurrency=1), clock.now())
    low = enqueue(store, clock, queue="ob", priority=0)
    clock.advance(1)
    high = enqueue(store, clock, queue="ob", priority=10)
    later = enqueue(store, clock, queue="ob", priority=0, delay=5)
    same = enqueue(store, clock, queue="ob", priority=0)
    clock.advance(10)
    events = dispatch(store, clock)
    assert [e.job_id for e in events] == [high.id, low.id, same.id, later.id]
    assert [e.id for e in events] == sorted(e.id for e in events)  # written in that order
    check_started(store, clock, events)
    assert held_for_broker(store) == len(events)


def test_a_controlled_dispatch_events_are_accepted_as_any(
    setup: str, store: Store, clock: ManualClock
) -> None:
    outbox_queue(store, clock, concurrency=3)
    job = enqueue(store, clock, queue="ob", defaults=TaskDefaults(lease_seconds=45))
    [event] = dispatch(store, clock)
    assert held_for_broker(store) == 1
    clock.advance(2)
    claim = store.accept_dispatch(Dispatched.from_body(event.body()), "w1", clock.now())
    assert claim is not None and claim.job.id == job.id
    assert claim.attempt.lease_expires_at == clock.now() + timedelta(seconds=45)
    assert store.accept_dispatch(Dispatched.from_body(event.body()), "w2", clock.now()) is None
