"""Dependencies between jobs (docs/workflows.md, "Dependencies"), on every dialect: a job
enqueued with depends_on is blocked until its parents end; the parent's end releases or cancels
it in the transaction that records that end, exactly once, whichever path ends the parent (a
worker's finish, the reaper, an expiry, an operator's cancel or resolve)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from datetime import timedelta

import pytest

import duetime
from duetime.core.clock import ManualClock
from duetime.core.errors import InvalidRequest
from duetime.core.models import Job, JobFilter, Lease, Outcome
from duetime.core.requests import TaskDefaults
from duetime.core.retry import ErrorCategory
from duetime.core.schedule_spec import build_spec
from duetime.core.schedules import NewOccurrence, Origin, Plan
from duetime.core.states import Event, JobStatus
from duetime.runtime.reaper import Reaper
from duetime.runtime.worker import Worker
from duetime.store.base import Store
from jobhelpers import enqueue, new, run_until

S = JobStatus


def _get(store: Store, job_id: int) -> Job:
    job = store.get_job(job_id)
    assert job is not None
    return job


def _claim(store: Store, clock: ManualClock, job: Job, worker: str = "w") -> Lease:
    """Claim `job` (the only job due among those claimed, by construction)."""
    claims = store.claim(worker_id=worker, queues=None, limit=10, now=clock.now())
    mine = [c for c in claims if c.job.id == job.id]
    assert len(mine) == 1, f"job {job.id} not claimed: {[c.job.id for c in claims]}"
    for other in claims:
        assert other.job.id == job.id, f"job {other.job.id} was claimed too"
    return mine[0].lease


def _succeed(store: Store, clock: ManualClock, job: Job) -> None:
    lease = _claim(store, clock, job)
    assert store.finish(lease, Outcome(Event.SUCCEED), clock.now())


def _die(store: Store, clock: ManualClock, job: Job) -> None:
    lease = _claim(store, clock, job)
    failed = Outcome(Event.GIVE_UP, error_category=ErrorCategory.PERMANENT, error_message="no")
    assert store.finish(lease, failed, clock.now())


def test_a_child_is_released_when_all_its_parents_succeed(store: Store, clock: ManualClock) -> None:
    a = enqueue(store, clock)
    b = enqueue(store, clock, at=clock.now() + timedelta(seconds=10))
    child = enqueue(store, clock, depends_on=[a.id, b.id])
    assert child.status is S.BLOCKED
    assert [j.id for j in store.list_jobs(JobFilter(status=S.BLOCKED))] == [child.id]
    shown = _get(store, child.id)
    assert [(r.id, r.status) for r in shown.parents] == [(a.id, S.SCHEDULED), (b.id, S.SCHEDULED)]
    assert [(r.id, r.status) for r in _get(store, a.id).children] == [(child.id, S.BLOCKED)]
    _succeed(store, clock, a)
    assert _get(store, child.id).status is S.BLOCKED
    clock.advance(10)
    _succeed(store, clock, b)
    released = _get(store, child.id)
    assert released.status is S.SCHEDULED
    assert released.due_at == clock.now()  # due at its release
    assert store.list_jobs(JobFilter(status=S.BLOCKED)) == []
    _succeed(store, clock, released)


def test_a_delay_counts_from_the_release_and_an_instant_stands(
    store: Store, clock: ManualClock
) -> None:
    parent = enqueue(store, clock)
    delayed = enqueue(store, clock, depends_on=[parent.id], delay=60)
    at = clock.now() + timedelta(seconds=100)
    timed = enqueue(store, clock, depends_on=[parent.id], at=at)
    clock.advance(30)
    _succeed(store, clock, parent)
    assert _get(store, delayed.id).due_at == clock.now() + timedelta(seconds=60)
    assert _get(store, timed.id).due_at == at


def _finish_at_once(
    store: Store, lease: Lease, clock: ManualClock, barrier: threading.Barrier, out: list[bool]
) -> None:
    barrier.wait()
    out.append(store.finish(lease, Outcome(Event.SUCCEED), clock.now()))


def test_the_last_two_parents_ending_at_once_release_the_child_once(
    make_store: Callable[[], Store], clock: ManualClock
) -> None:
    """Two stores (connections) finish a child's last two parents at the same instant, a few
    rounds over: the child is released once each time (one move: its version goes up by one),
    never left blocked."""
    store = make_store()
    stores = [make_store(), make_store()]
    for _ in range(5):
        a, b = enqueue(store, clock), enqueue(store, clock)
        child = enqueue(store, clock, depends_on=[a.id, b.id])
        claimed = store.claim(worker_id="w", queues=None, limit=2, now=clock.now())
        leases = {c.job.id: c.lease for c in claimed}
        assert set(leases) == {a.id, b.id}
        barrier = threading.Barrier(2)
        results: list[bool] = []

        threads = [
            threading.Thread(
                target=_finish_at_once, args=(s, leases[j.id], clock, barrier, results)
            )
            for s, j in zip(stores, (a, b), strict=True)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == [True, True]
        released = _get(store, child.id)
        assert released.status is S.SCHEDULED
        assert released.version == child.version + 1  # moved once
        claims = store.claim(worker_id="w", queues=None, limit=10, now=clock.now())
        assert [c.job.id for c in claims] == [child.id]
        assert store.finish(claims[0].lease, Outcome(Event.SUCCEED), clock.now())


def test_a_parent_retried_keeps_its_child_blocked_until_it_succeeds(
    store: Store, clock: ManualClock
) -> None:
    parent = enqueue(store, clock)
    child = enqueue(store, clock, depends_on=[parent.id])
    lease = _claim(store, clock, parent)
    retry = Outcome(Event.RETRY, due_at=clock.now() + timedelta(seconds=5))
    assert store.finish(lease, retry, clock.now())
    assert _get(store, child.id).status is S.BLOCKED
    clock.advance(5)
    _succeed(store, clock, parent)
    assert _get(store, child.id).status is S.SCHEDULED


def test_a_parent_dying_cancels_its_descendants_with_the_reason(
    store: Store, clock: ManualClock
) -> None:
    parent = enqueue(store, clock)
    other = enqueue(store, clock, at=clock.now() + timedelta(hours=1))
    child = enqueue(store, clock, depends_on=[parent.id, other.id])
    grandchild = enqueue(store, clock, depends_on=[child.id])
    runner = enqueue(store, clock, depends_on=[child.id], on_parent_failure="run")
    _die(store, clock, parent)
    for job in (child, grandchild):
        got = _get(store, job.id)
        assert got.status is S.CANCELLED
    assert _get(store, child.id).cancel_reason == f"parent job {parent.id} ended dead"
    assert _get(store, grandchild.id).cancel_reason == f"parent job {child.id} ended cancelled"
    assert _get(store, runner.id).status is S.SCHEDULED  # "run": its only parent has ended
    assert _get(store, other.id).status is S.SCHEDULED  # a sibling parent is not touched


def test_run_on_parent_failure_runs_once_every_parent_ended(
    store: Store, clock: ManualClock
) -> None:
    a = enqueue(store, clock)
    b = enqueue(store, clock, at=clock.now() + timedelta(seconds=10))
    child = enqueue(store, clock, depends_on=[a.id, b.id], on_parent_failure="run")
    assert child.on_parent_failure == "run"
    _die(store, clock, a)
    assert _get(store, child.id).status is S.BLOCKED
    store.transition(b.id, Event.CANCEL, clock.now())
    assert _get(store, child.id).status is S.SCHEDULED


def test_cancelling_a_blocked_job_cancels_its_descendants(store: Store, clock: ManualClock) -> None:
    parent = enqueue(store, clock, at=clock.now() + timedelta(hours=1))
    child = enqueue(store, clock, depends_on=[parent.id])
    grandchild = enqueue(store, clock, depends_on=[child.id])
    cancelled = store.transition(child.id, Event.CANCEL, clock.now())
    assert cancelled.status is S.CANCELLED
    got = _get(store, grandchild.id)
    assert got.status is S.CANCELLED
    assert got.cancel_reason == f"parent job {child.id} ended cancelled"
    assert _get(store, parent.id).status is S.SCHEDULED


def test_a_parent_of_another_tenant_or_missing_is_refused(store: Store, clock: ManualClock) -> None:
    theirs = enqueue(store, clock, tenant="other")
    with pytest.raises(InvalidRequest, match=f"parent job {theirs.id} is not a job of tenant"):
        enqueue(store, clock, depends_on=[theirs.id])
    with pytest.raises(InvalidRequest, match="parent job 999999 does not exist"):
        enqueue(store, clock, depends_on=[999999])
    assert [j.id for j in store.list_jobs(JobFilter())] == [theirs.id]  # nothing else


def test_parents_that_ended_before_the_enqueue_count_at_once(
    store: Store, clock: ManualClock
) -> None:
    done = enqueue(store, clock)
    _succeed(store, clock, done)
    dead = enqueue(store, clock)
    _die(store, clock, dead)
    child = enqueue(store, clock, depends_on=[done.id])
    assert child.status is S.SCHEDULED
    assert [(r.id, r.status) for r in _get(store, done.id).children] == [(child.id, S.SCHEDULED)]
    refused = enqueue(store, clock, depends_on=[done.id, dead.id])
    assert refused.status is S.CANCELLED
    assert refused.cancel_reason == f"parent job {dead.id} ended dead"
    ran = enqueue(store, clock, depends_on=[dead.id], on_parent_failure="run")
    assert ran.status is S.SCHEDULED


def test_a_parent_whose_lease_expires_and_dies_in_the_reaper_cancels_its_child(
    store: Store, clock: ManualClock
) -> None:
    parent = enqueue(store, clock, max_attempts=1, defaults=TaskDefaults(lease_seconds=1))
    child = enqueue(store, clock, depends_on=[parent.id])
    _claim(store, clock, parent)
    clock.advance(5)
    assert Reaper(store, clock).run_once().reaped == 1
    assert _get(store, parent.id).status is S.DEAD
    got = _get(store, child.id)
    assert got.status is S.CANCELLED
    assert got.cancel_reason == f"parent job {parent.id} ended dead"


def test_a_parent_expiring_unstarted_cancels_its_child(store: Store, clock: ManualClock) -> None:
    parent = enqueue(store, clock, deadline=clock.now() + timedelta(seconds=5))
    child = enqueue(store, clock, depends_on=[parent.id])
    clock.advance(10)
    assert store.expire_overdue(clock.now(), 100) == 1
    assert _get(store, child.id).status is S.CANCELLED


def test_a_parked_parent_resolved_done_releases_its_child(store: Store, clock: ManualClock) -> None:
    parent = enqueue(store, clock)
    child = enqueue(store, clock, depends_on=[parent.id])
    lease = _claim(store, clock, parent)
    assert store.finish(lease, Outcome(Event.PARK), clock.now())
    assert _get(store, child.id).status is S.BLOCKED
    store.transition(parent.id, Event.RESOLVE_DONE, clock.now())
    assert _get(store, child.id).status is S.SCHEDULED


def test_a_dead_parent_replayed_does_not_bring_its_cancelled_child_back(
    store: Store, clock: ManualClock
) -> None:
    parent = enqueue(store, clock)
    child = enqueue(store, clock, depends_on=[parent.id])
    _die(store, clock, parent)
    store.transition(parent.id, Event.REPLAY, clock.now())
    _succeed(store, clock, _get(store, parent.id))
    assert _get(store, child.id).status is S.CANCELLED


def test_a_plain_job_is_not_blocked_and_a_batch_can_depend(
    store: Store, clock: ManualClock
) -> None:
    parent = enqueue(store, clock)
    jobs = store.enqueue([new(clock, depends_on=[parent.id]) for _ in range(3)], clock.now())
    assert {r.job.status for r in jobs} == {S.BLOCKED}
    _succeed(store, clock, parent)
    assert {_get(store, r.job.id).status for r in jobs} == {S.SCHEDULED}


def test_an_idempotent_retry_of_a_child_links_nothing_twice(
    store: Store, clock: ManualClock
) -> None:
    parent = enqueue(store, clock)
    first = store.enqueue([new(clock, key="k", depends_on=[parent.id])], clock.now())[0]
    again = store.enqueue([new(clock, key="k", depends_on=[parent.id])], clock.now())[0]
    assert (first.created, again.created) == (True, False)
    assert again.job.id == first.job.id
    assert [r.id for r in _get(store, parent.id).children] == [first.job.id]


def test_a_schedule_deleted_with_an_unstarted_parent_cancels_its_child(
    store: Store, clock: ManualClock
) -> None:
    spec = build_spec("nightly", "t", timezone="UTC", cron="0 * * * *")
    schedule, _ = store.create_schedule(
        "default", spec, anchor_at=clock.now(), next_fire_at=None, now=clock.now()
    )
    later = clock.now() + timedelta(hours=1)
    occ = NewOccurrence(later, later, JobStatus.SCHEDULED, Origin.TICK)
    store.apply_schedule("default", "nightly", clock.now(), lambda s, a: Plan(new_jobs=[occ]))
    [parent] = store.list_jobs(JobFilter(schedule_id=schedule.id))
    child = enqueue(store, clock, depends_on=[parent.id])
    store.delete_schedule("default", "nightly", clock.now())
    got = _get(store, child.id)
    assert got.status is S.CANCELLED
    assert got.cancel_reason == f"parent job {parent.id} ended cancelled"


def test_a_released_job_obeys_its_queue_s_flow_controls(store: Store, clock: ManualClock) -> None:
    parent = enqueue(store, clock)
    child = enqueue(store, clock, depends_on=[parent.id], queue="held")
    store.set_queue("held", clock.now(), paused=True)
    _succeed(store, clock, parent)
    assert _get(store, child.id).status is S.SCHEDULED
    clock.advance(5)  # past the controls' cache
    assert store.claim(worker_id="w", queues=None, limit=10, now=clock.now()) == []
    store.set_queue("held", clock.now(), paused=False)
    clock.advance(5)
    claims = store.claim(worker_id="w", queues=None, limit=10, now=clock.now())
    assert [c.job.id for c in claims] == [child.id]


def test_a_wide_fan_in_is_released_once_by_its_last_parent(
    store: Store, clock: ManualClock
) -> None:
    parents = store.enqueue([new(clock) for _ in range(200)], clock.now())
    child = enqueue(store, clock, depends_on=[r.job.id for r in parents])
    assert child.status is S.BLOCKED
    claims = store.claim(worker_id="w", queues=None, limit=200, now=clock.now())
    assert len(claims) == 200
    for start in range(0, 200, 50):  # finished in batches, as a worker's completer does
        batch = [(c.lease, Outcome(Event.SUCCEED)) for c in claims[start : start + 50]]
        assert store.finish_many(batch, clock.now()) == [True] * 50
        expected = S.SCHEDULED if start == 150 else S.BLOCKED
        assert _get(store, child.id).status is expected
    assert _get(store, child.id).version == child.version + 1


def test_a_parent_ending_in_its_handler_s_transaction_releases_there(
    store: Store, clock: ManualClock
) -> None:
    parent = enqueue(store, clock)
    child = enqueue(store, clock, depends_on=[parent.id])
    lease = _claim(store, clock, parent)
    with pytest.raises(RuntimeError):
        with store.completion(lease, Outcome(Event.SUCCEED), clock.now):
            raise RuntimeError("the handler's writes fail: nothing is kept")
    assert _get(store, child.id).status is S.BLOCKED
    with store.completion(lease, Outcome(Event.SUCCEED), clock.now):
        pass
    assert _get(store, child.id).status is S.SCHEDULED


def test_a_worker_runs_a_diamond_in_order(make_store: Callable[[], Store], store_url: str) -> None:
    """A worker runs a diamond (a; b and c after a; d after b and c) from the App's enqueue,
    each job after its parents (make_store: the database is migrated)."""
    app = duetime.App(database_url=store_url)
    ran: list[str] = []

    @app.task(name="step")
    def step(name: str) -> None:
        ran.append(name)

    try:
        a = step.enqueue({"name": "a"})
        b = app.enqueue("step", {"name": "b"}, depends_on=[a.id])
        c = app.submit("step", {"name": "c"}, depends_on=[a.id]).job
        d = app.enqueue("step", {"name": "d"}, depends_on=[b.id, c.id])
        assert {b.status, c.status, d.status} == {S.BLOCKED}
        worker = Worker(app, poll_interval=0.02)
        done = lambda: app.get_job(d.id).status is S.SUCCEEDED  # noqa: E731
        asyncio.run(run_until(worker, done))
        assert ran[0] == "a" and sorted(ran[1:3]) == ["b", "c"] and ran[3] == "d"
    finally:
        app.close()
