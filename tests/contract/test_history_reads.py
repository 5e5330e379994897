"""Reads of a job that go to both tables (docs/history-plan.md, step 3): a job that ended may
be in the history table once jobs move there. Nothing moves yet, so these tests move jobs by
hand (tests/history.py) and read them back: a job, its attempts, its parents and children
and its parents' results read as they did before the move, a schedule's latest run is found
in either table, its tick history and the job counts read as before, and a dead job that
holds its sequence keeps holding it from the history table, on every dialect."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from duetime.core.clock import ManualClock
from duetime.core.models import Job, JobFilter, Outcome
from duetime.core.requests import TaskDefaults
from duetime.core.retry import ErrorCategory
from duetime.core.schedule_spec import build_spec
from duetime.core.schedules import NewOccurrence, Origin, Plan, TickOutcome, TickRecord
from duetime.core.states import Event, JobStatus
from duetime.store.base import Store
from history import move
from jobhelpers import claim_one, enqueue, job_in
from kit import DialectKit

ENDED = (JobStatus.SUCCEEDED, JobStatus.DEAD, JobStatus.CANCELLED, JobStatus.EXPIRED)


def succeed(store: Store, clock: ManualClock, job: Job, result: str | None = None) -> None:
    claimed, lease = claim_one(store, clock)
    assert claimed.id == job.id
    assert store.finish(lease, Outcome(Event.SUCCEED, result=result), clock.now())


def rows(store: Store, name: str, **params: Any) -> list[dict[str, Any]]:
    """A named statement's rows, read in a transaction of the store's own driver."""
    driver = store.driver  # type: ignore[attr-defined]
    with driver.transaction(write=False) as c:
        return [dict(r) for r in c.rows(name, **params)]


def hourly(store: Store, clock: ManualClock, name: str, count: int) -> int:
    """A schedule with `count` hourly occurrences from an hour from now, each with the tick
    that made it; its id."""
    spec = build_spec(name, "t", timezone="UTC", cron="0 * * * *")
    schedule, _ = store.create_schedule(
        "default", spec, anchor_at=clock.now(), next_fire_at=None, now=clock.now()
    )
    at = [clock.now() + timedelta(hours=h) for h in range(1, count + 1)]
    plan = Plan(
        new_jobs=[NewOccurrence(t, t, JobStatus.SCHEDULED, Origin.TICK) for t in at],
        ticks=[TickRecord(t, TickOutcome.ENQUEUED) for t in at],
    )
    store.apply_schedule("default", name, clock.now(), lambda s, a: plan)
    return schedule.id


def test_a_job_that_moved_reads_as_it_did(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    ended = [job_in(store, clock, status)[0].id for status in ENDED]
    retried = enqueue(store, clock, max_attempts=3)
    _, lease = claim_one(store, clock)
    failed = Outcome(Event.RETRY, due_at=clock.now(), error_category=ErrorCategory.RETRYABLE)
    assert store.finish(lease, failed, clock.now())
    succeed(store, clock, retried, '{"n":1}')
    ended.append(retried.id)
    staying = enqueue(store, clock)
    before = {i: store.get_job(i) for i in ended}
    assert all(j is not None and j.status in ENDED for j in before.values())

    move(kit, store_url, ended)

    assert {i: store.get_job(i) for i in ended} == before
    assert store.get_job(retried.id, tenant="default") == before[retried.id]
    assert store.get_job(retried.id, tenant="other") is None
    got = store.get_job(retried.id)
    assert got is not None and got.attempt_history[0].status.value == "failed"
    assert store.get_job(staying.id) is not None
    found = rows(store, "jobs_by_ids", ids=[staying.id, *ended])
    assert sorted(r["id"] for r in found) == sorted([staying.id, *ended])


def test_parents_children_and_results_read_across_both_tables(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    parents = [enqueue(store, clock) for _ in range(4)]
    child = enqueue(store, clock, depends_on=[p.id for p in parents])
    for n, parent in enumerate(parents):
        succeed(store, clock, parent, f'"r{n}"')
    results = store.parent_results(child.id)
    assert results == {p.id: f"r{n}" for n, p in enumerate(parents)}
    child_before = store.get_job(child.id)
    assert child_before is not None and child_before.status is JobStatus.SCHEDULED
    parents_before = {p.id: store.get_job(p.id) for p in parents}

    move(kit, store_url, [parents[0].id, parents[2].id])  # the child stays

    assert store.parent_results(child.id) == results
    assert store.get_job(child.id) == child_before
    assert {p.id: store.get_job(p.id) for p in parents} == parents_before
    # each part stops at the limit, and the parts merge in id order
    firsts = rows(store, "job_parents", id=child.id, limit=3)
    assert [r["id"] for r in firsts] == [p.id for p in parents[:3]]
    # and the other way: a child that moved is still its parent's child
    succeed(store, clock, child)
    move(kit, store_url, [child.id, parents[1].id])
    got = store.get_job(parents[1].id)
    assert got is not None and [c.id for c in got.children] == [child.id]
    assert [r["id"] for r in rows(store, "job_children", id=parents[3].id, limit=10)] == [child.id]


def test_a_schedules_latest_run_is_found_in_either_table(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    schedule_id = hourly(store, clock, "hourly", 3)
    jobs = sorted(store.list_jobs(JobFilter(schedule_id=schedule_id)), key=lambda j: j.due_at)
    assert store.latest_run(schedule_id) is None  # none started
    clock.advance(2 * 3600)
    for job in jobs[:2]:
        succeed(store, clock, job)
    newest = store.latest_run(schedule_id)
    assert newest is not None and newest.id == jobs[1].id
    move(kit, store_url, [jobs[1].id])  # the newest run is in history, the older one hot
    moved = store.latest_run(schedule_id)
    assert moved == newest
    move(kit, store_url, [jobs[0].id])
    assert store.latest_run(schedule_id) == newest
    clock.advance(3600)
    claimed, _lease = claim_one(store, clock)  # the third starts: it is the latest, hot
    assert claimed.id == jobs[2].id
    latest = store.latest_run(schedule_id)
    assert latest is not None and latest.id == jobs[2].id


def test_a_dead_job_in_history_holds_its_sequence(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    hold = TaskDefaults(sequence="{account}", sequence_on_dead="hold")
    first = enqueue(store, clock, args={"account": "a", "n": 0}, defaults=hold)
    claimed, lease = claim_one(store, clock)
    assert claimed.id == first.id
    dead = Outcome(Event.GIVE_UP, error_category=ErrorCategory.PERMANENT)
    assert store.finish(lease, dead, clock.now())
    move(kit, store_url, [first.id])

    later = enqueue(store, clock, args={"account": "a", "n": 1}, defaults=hold)
    assert later.status is JobStatus.WAITING  # held by the dead job in history
    got = store.get_job(later.id)
    assert got is not None and got.sequence_ahead == 1
    assert store.claim(worker_id="w", queues=None, limit=10, now=clock.now()) == []


def test_tick_history_and_job_counts_read_as_they_did(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    schedule_id = hourly(store, clock, "ticking", 2)
    clock.advance(3600)
    occurrence, lease = claim_one(store, clock)
    clock.advance(5)
    assert store.finish(lease, Outcome(Event.SUCCEED), clock.now())
    ended = [job_in(store, clock, status)[0].id for status in ENDED]
    ticks = store.schedule_ticks(schedule_id, 10, None)
    assert [t.job_status for t in ticks] == [JobStatus.SCHEDULED, JobStatus.SUCCEEDED]
    assert ticks[1].started_at is not None
    counts = sorted(store.job_counts(None), key=lambda c: (c.status, c.queue))

    move(kit, store_url, [occurrence.id, *ended])

    assert store.schedule_ticks(schedule_id, 10, None) == ticks
    assert sorted(store.job_counts(None), key=lambda c: (c.status, c.queue)) == counts
    assert store.job_counts("other") == []
