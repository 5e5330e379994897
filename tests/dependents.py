"""A job's dependent rows (its attempts, dependency links, outbox events and ticks): jobs
that have each kind, their counts, and the rows whose job is gone (docs/history-plan.md,
migration 26: no foreign key removes them)."""

from __future__ import annotations

from datetime import timedelta

from duetime.core.clock import ManualClock
from duetime.core.models import JobFilter, Outcome
from duetime.core.outbox import Dispatch, Dispatched
from duetime.core.retry import ErrorCategory
from duetime.core.schedule_spec import build_spec
from duetime.core.schedules import NewOccurrence, Origin, Plan, TickOutcome, TickRecord
from duetime.core.states import Event, JobStatus
from duetime.store.base import Store
from jobhelpers import claim_one, enqueue
from kit import DialectKit

# rows of the jobs' dependents whose job is gone from both tables (none may be left)
JOBS = "(SELECT id FROM duetime_jobs UNION ALL SELECT id FROM duetime_jobs_done)"
ORPHANS = {
    "attempts": f"SELECT job_id FROM duetime_attempts WHERE job_id NOT IN {JOBS}",
    "outbox": f"SELECT job_id FROM duetime_outbox WHERE job_id NOT IN {JOBS}",
    "links": "SELECT child_id, parent_id FROM duetime_job_parents "
    f"WHERE child_id NOT IN {JOBS} OR parent_id NOT IN {JOBS}",
    "ticks": f"SELECT job_id FROM duetime_ticks WHERE job_id IS NOT NULL AND job_id NOT IN {JOBS}",
}


def orphans(kit: DialectKit, url: str) -> dict[str, list[tuple[object, ...]]]:
    found = {name: kit.execute(url, sql) for name, sql in ORPHANS.items()}
    return {name: rows for name, rows in found.items() if rows}


def ticked(store: Store, clock: ManualClock, name: str, status: JobStatus) -> tuple[int, int]:
    """A schedule with one occurrence (in `status`: scheduled, or waiting for its turn) and
    the tick that made it: (schedule id, job id)."""
    spec = build_spec(name, "t", timezone="UTC", cron="0 * * * *")
    schedule, _ = store.create_schedule(
        "default", spec, anchor_at=clock.now(), next_fire_at=None, now=clock.now()
    )
    at = clock.now() + timedelta(hours=1)
    occurrence = NewOccurrence(at, at, status, Origin.TICK)
    tick = TickRecord(at, TickOutcome.ENQUEUED)
    store.apply_schedule(
        "default", name, clock.now(), lambda s, a: Plan(new_jobs=[occurrence], ticks=[tick])
    )
    [job] = store.list_jobs(JobFilter(schedule_id=schedule.id))
    return schedule.id, job.id


def dependents(
    store: Store, clock: ManualClock, schedule: str = "hourly", *, keyed: bool = False
) -> dict[str, int]:
    """Jobs with every kind of dependent row: a job with a failed attempt then a success, a
    parent and its child (both succeeded), a job run through the outbox (its event stays
    until the outbox's own pruning), and a schedule's occurrence that succeeded (its tick
    points at it). `keyed`: each with an idempotency key, so that none leaves the jobs table
    as it ends (an occurrence has its key already), as before the history table."""

    def key(name: str) -> dict[str, str]:
        return {"key": f"{schedule}-{name}"} if keyed else {}

    ids: dict[str, int] = {}
    retried = enqueue(store, clock, max_attempts=3, **key("retried"))
    _, lease = claim_one(store, clock)
    failed = Outcome(Event.RETRY, due_at=clock.now(), error_category=ErrorCategory.RETRYABLE)
    assert store.finish(lease, failed, clock.now())
    _, lease = claim_one(store, clock)
    assert store.finish(lease, Outcome(Event.SUCCEED), clock.now())
    ids["retried"] = retried.id
    parent = enqueue(store, clock, **key("parent"))
    child = enqueue(store, clock, depends_on=[parent.id], **key("child"))
    for _ in range(2):
        _, lease = claim_one(store, clock)
        assert store.finish(lease, Outcome(Event.SUCCEED), clock.now())
    ids["parent"], ids["child"] = parent.id, child.id
    store.set_queue("q", clock.now(), dispatch=Dispatch.OUTBOX)
    dispatched = enqueue(store, clock, queue="q", **key("dispatched"))
    [event] = store.dispatch_outbox(clock.now(), 10, lease_seconds=300)
    assert event.job_id == dispatched.id
    assert store.mark_published([event.id], clock.now(), 300) == 1
    claim = store.accept_dispatch(Dispatched.from_body(event.body()), "w", clock.now())
    assert claim is not None
    assert store.finish(claim.lease, Outcome(Event.SUCCEED), clock.now())
    store.set_queue("q", clock.now(), dispatch=Dispatch.DIRECT)
    ids["dispatched"] = dispatched.id
    _, occurrence = ticked(store, clock, schedule, JobStatus.SCHEDULED)
    clock.advance(3600)
    _, lease = claim_one(store, clock)
    assert lease.job_id == occurrence
    assert store.finish(lease, Outcome(Event.SUCCEED), clock.now())
    ids["occurrence"] = occurrence
    for job_id in ids.values():
        job = store.get_job(job_id)
        assert job is not None and job.status is JobStatus.SUCCEEDED
    return ids


def rows_of(kit: DialectKit, url: str, job_id: int) -> dict[str, int]:
    """How many rows of each dependent table name the job."""
    counts = {
        "attempts": "SELECT COUNT(*) FROM duetime_attempts WHERE job_id = ?",
        "outbox": "SELECT COUNT(*) FROM duetime_outbox WHERE job_id = ?",
        "links": "SELECT COUNT(*) FROM duetime_job_parents WHERE child_id = ? OR parent_id = ?",
        "ticks": "SELECT COUNT(*) FROM duetime_ticks WHERE job_id = ?",
    }
    found = {}
    for name, sql in counts.items():
        [(n,)] = kit.execute(url, sql, (job_id,) * sql.count("?"))
        found[name] = int(n)
    return found
