"""Reads of a job that go to both tables (docs/history-plan.md, step 3): a job that ended may
be in the history table once jobs move there. Nothing moves yet, so these tests move jobs by
hand (tests/history.py) and read them back: a job, its attempts, its parents and children
and its parents' results read as they did before the move, a schedule's latest run is found
in either table, its tick history, the job counts, the listings and the recent attempts read
as before, a dead job that holds its sequence keeps holding it from the history table, and a
job in the history table is found and locked as a parent and by an operator's move (also
while it moves), on every dialect."""

from __future__ import annotations

import threading
import time
from contextlib import closing
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from duetime.core.clock import ManualClock
from duetime.core.errors import IllegalTransition, InvalidRequest
from duetime.core.models import Job, JobFilter, Outcome
from duetime.core.requests import TaskDefaults
from duetime.core.retry import ErrorCategory
from duetime.core.schedule_spec import build_spec
from duetime.core.schedules import NewOccurrence, Origin, Plan, TickOutcome, TickRecord
from duetime.core.states import Event, JobStatus
from duetime.store.base import Store
from history import GENERATED, columns, move, place
from jobhelpers import claim_one, enqueue, job_in
from kit import DialectKit

ENDED = (JobStatus.SUCCEEDED, JobStatus.DEAD, JobStatus.CANCELLED, JobStatus.EXPIRED)


def succeed(store: Store, clock: ManualClock, job: Job, result: str | None = None) -> None:
    claimed, lease = claim_one(store, clock)
    assert claimed.id == job.id
    assert store.finish(lease, Outcome(Event.SUCCEED, result=result), clock.now())


def whole(job: Job | None) -> tuple[Any, ...]:
    """A job with what its equality leaves out: its attempts, parents and children."""
    assert job is not None
    return job, job.attempt_history, job.parents, job.children


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
    before = {i: whole(store.get_job(i)) for i in ended}
    assert all(j.status in ENDED for j, *_ in before.values())

    move(kit, store_url, ended)

    assert {i: whole(store.get_job(i)) for i in ended} == before
    assert whole(store.get_job(retried.id, tenant="default")) == before[retried.id]
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
    child_before = whole(store.get_job(child.id))
    assert child_before[0].status is JobStatus.SCHEDULED
    parents_before = {p.id: whole(store.get_job(p.id)) for p in parents}

    move(kit, store_url, [parents[0].id, parents[2].id])  # the child stays

    assert store.parent_results(child.id) == results
    assert whole(store.get_job(child.id)) == child_before
    assert {p.id: whole(store.get_job(p.id)) for p in parents} == parents_before
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


def test_listings_page_through_both_tables_newest_first(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    """A listing (with each job's attempts) reads both tables newest first: its pages, its
    filters and its attempts are those it read before the move."""
    made = [job_in(store, clock, ENDED[n % len(ENDED)])[0].id for n in range(8)]
    later = clock.now() + timedelta(hours=1)
    staying = [enqueue(store, clock, task="other", at=later).id for _ in range(3)]
    retried = enqueue(store, clock, max_attempts=3)
    _, lease = claim_one(store, clock)
    failed = Outcome(Event.RETRY, due_at=clock.now(), error_category=ErrorCategory.RETRYABLE)
    assert store.finish(lease, failed, clock.now())
    succeed(store, clock, retried)
    filters = [
        JobFilter(with_attempts=True, limit=100),
        JobFilter(status=JobStatus.SUCCEEDED, with_attempts=True, limit=100),
        JobFilter(task="other", limit=2),
        JobFilter(tenant="other", limit=10),
    ]

    def pages(f: JobFilter) -> list[list[Job]]:
        """Every page of the listing, three jobs a page."""
        found: list[list[Job]] = []
        before: int | None = None
        while True:
            page = store.list_jobs(replace(f, limit=3, before_id=before))
            if not page:
                return found
            found.append(page)
            before = page[-1].id

    listed = [[whole(j) for j in store.list_jobs(f)] for f in filters]
    paged = pages(filters[0])
    assert [j.id for page in paged for j in page] == sorted(
        [*made, *staying, retried.id], reverse=True
    )
    kept = [j for j, *_ in listed[1] if j.id == retried.id]
    assert kept and [a.status.value for a in kept[0].attempt_history] == ["failed", "succeeded"]

    move(kit, store_url, [*made[::2], made[5], retried.id])  # every other one, and two more

    assert [[whole(j) for j in store.list_jobs(f)] for f in filters] == listed
    assert pages(filters[0]) == paged


def test_recent_attempts_read_their_jobs_in_either_table(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    """The recent attempts (lag, throughput and failure figures) name each attempt's task and
    queue from its job in whichever table holds it."""
    since = clock.now()
    ended = [job_in(store, clock, s)[0].id for s in (JobStatus.SUCCEEDED, JobStatus.DEAD)]
    ended.append(enqueue(store, clock, task="elsewhere", queue="q2").id)
    succeed(store, clock, store.get_job(ended[-1]))  # type: ignore[arg-type]
    running = job_in(store, clock, JobStatus.RUNNING)[0]
    samples = store.attempt_samples(None, since, 100)
    assert len(samples) == 4
    assert {(s.task, s.queue) for s in samples} >= {("elsewhere", "q2")}

    move(kit, store_url, ended)

    assert store.attempt_samples(None, since, 100) == samples
    assert store.attempt_samples("default", since, 100) == samples
    assert store.attempt_samples("other", since, 100) == []
    assert store.get_job(running.id) is not None


def test_a_parent_in_history_is_found_locked_and_told(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    """A new job may depend on a job in the history table: its parent is found (and its
    tenant checked) and the child starts as that parent ended, as it would have before the
    move."""
    done = job_in(store, clock, JobStatus.SUCCEEDED)[0]
    dead = job_in(store, clock, JobStatus.DEAD)[0]
    hot = enqueue(store, clock, at=clock.now() + timedelta(hours=1))
    move(kit, store_url, [done.id, dead.id])

    released = enqueue(store, clock, depends_on=[done.id])
    assert released.status is JobStatus.SCHEDULED
    waiting = enqueue(store, clock, depends_on=[done.id, hot.id])
    assert waiting.status is JobStatus.BLOCKED
    cancelled = enqueue(store, clock, depends_on=[dead.id, hot.id])
    assert cancelled.status is JobStatus.CANCELLED
    got = store.get_job(done.id)
    assert got is not None and {c.id for c in got.children} == {released.id, waiting.id}
    with pytest.raises(InvalidRequest, match="tenant"):
        enqueue(store, clock, tenant="other", depends_on=[done.id])
    with pytest.raises(InvalidRequest, match="does not exist"):
        enqueue(store, clock, depends_on=[done.id, dead.id + 1000])
    # an operator's move finds the job in history: refused as an ended job's move is
    with pytest.raises(IllegalTransition, match="succeeded"):
        store.transition(done.id, Event.CANCEL, clock.now())


LOCK_WAITS = {
    "postgres": "SELECT count(*) FROM pg_stat_activity "
    "WHERE datname = current_database() AND wait_event_type = 'Lock'",
    "mysql": "SELECT count(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'",
}


def lock_awaited(kit: DialectKit, url: str, seconds: float = 10.0) -> bool:
    """Whether a transaction of the database waits for a row lock, within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if kit.execute(url, LOCK_WAITS[kit.name])[0][0]:
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("way", ["ends", "replayed"])
def test_a_parent_that_moves_while_its_child_waits_for_its_lock_is_found(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str, way: str
) -> None:
    """A job that moves between the tables while a new child waits for its row lock is
    found where it went once the move commits: to the history table as it ends, or back to
    the jobs table as it is replayed (on PostgreSQL the first read's two parts share one
    snapshot, taken before the move: store/sql/shared.py lock_either reads again)."""
    if kit.name == "sqlite":
        pytest.skip("SQLite runs one writer at a time: no read waits for a move there")
    parent = job_in(store, clock, JobStatus.SUCCEEDED if way == "ends" else JobStatus.DEAD)[0]
    source, target = ("duetime_jobs", "duetime_jobs_done")
    if way == "replayed":
        source, target = target, source
    place(kit, store_url, parent.id, source)
    begin = "START TRANSACTION" if kit.name == "mysql" else "BEGIN"
    found: list[Job | BaseException] = []

    def child() -> None:
        try:
            found.append(enqueue(store, clock, depends_on=[parent.id]))
        except BaseException as exc:  # reported below
            found.append(exc)

    names = [c for c in columns(kit, store_url, "duetime_jobs") if c not in GENERATED]
    listed = ", ".join(names)
    with closing(kit.connect(store_url)) as mover:
        kit.execute_on(mover, begin)  # the kit's connections autocommit
        kit.execute_on(mover, f"SELECT id FROM {source} WHERE id = ? FOR UPDATE", [parent.id])
        thread = threading.Thread(target=child, daemon=True)
        thread.start()
        waited = lock_awaited(kit, store_url)  # the child's enqueue waits for the parent's lock
        kit.execute_on(
            mover,
            f"INSERT INTO {target} ({listed}) SELECT {listed} FROM {source} WHERE id = ?",
            [parent.id],
        )
        kit.execute_on(mover, f"DELETE FROM {source} WHERE id = ?", [parent.id])
        if way == "replayed":  # as a replay leaves it: due again
            kit.execute_on(
                mover, "UPDATE duetime_jobs SET status = 'scheduled' WHERE id = ?", [parent.id]
            )
        kit.execute_on(mover, "COMMIT")
    thread.join(timeout=30)
    assert waited
    [made] = found
    assert isinstance(made, Job), made
    # as its parent is now: succeeded (the child runs), or due again (the child waits for it)
    assert made.status is (JobStatus.SCHEDULED if way == "ends" else JobStatus.BLOCKED)
