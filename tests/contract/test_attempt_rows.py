"""Attempts written once (docs/stores.md, "Attempts"; migrations 22 and 24), on every dialect:
a job's row carries the attempt it runs, so the claim and the renewals write no attempt row;
an attempt that ends otherwise than in success has its row inserted once, at its end, with its
outcome, and on PostgreSQL and SQLite a plain success stays on its job's row (a succeeded job
never runs again), so it writes no attempt row at all (MariaDB/MySQL write its row at its
end). Reads show every attempt as before (same id, worker, lease, status), and a worker of an
earlier version, which inserts a 'running' attempt at its claim, is refused."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from duetime.core.clock import ManualClock
from duetime.core.models import JobFilter, Outcome
from duetime.core.outbox import Dispatch
from duetime.core.retry import ErrorCategory
from duetime.core.states import AttemptStatus, Event, JobStatus
from duetime.runtime.reaper import Reaper
from duetime.store.base import Store
from history import IN_BOTH
from jobhelpers import claim_one, enqueue, job_in
from kit import DialectKit


def rows_of(kit: DialectKit, url: str, job_id: int) -> list[tuple[Any, ...]]:
    """The attempt rows the database holds for the job (ended attempts only, since 22)."""
    return kit.execute(
        url,
        "SELECT id, generation, claim_token, worker_id, status, error_category "
        "FROM duetime_attempts WHERE job_id = ? ORDER BY generation",
        (job_id,),
    )


def test_a_claim_writes_no_attempt_row_and_reads_show_the_running_attempt(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    job = enqueue(store, clock)
    claimed, lease = claim_one(store, clock, "w-claim")
    assert rows_of(kit, store_url, job.id) == []
    seen = store.get_job(job.id)
    assert seen is not None and seen.status is JobStatus.RUNNING
    (attempt,) = seen.attempt_history
    assert attempt.id == lease.attempt_id
    assert attempt.generation == lease.generation == claimed.generation
    assert attempt.claim_token == lease.claim_token
    assert attempt.worker_id == "w-claim"
    assert attempt.status is AttemptStatus.RUNNING
    assert attempt.started_at == clock.now()
    assert attempt.lease_expires_at == clock.now() + timedelta(seconds=job.lease_seconds)
    assert attempt.finished_at is None and attempt.due_at == job.due_at
    assert [h.job_id for h in store.held_leases("w-claim")] == [job.id]


def test_renewals_write_the_jobs_lease_and_no_attempt_row(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    job = enqueue(store, clock)
    _, lease = claim_one(store, clock)
    for _ in range(3):
        clock.advance(5)
        (state,) = store.heartbeat([lease], clock.now())
        assert state.held
        assert state.lease_expires_at == clock.now() + timedelta(seconds=job.lease_seconds)
    assert rows_of(kit, store_url, job.id) == []
    seen = store.get_job(job.id)
    assert seen is not None
    assert seen.attempt_history[0].lease_expires_at == state.lease_expires_at


@pytest.mark.parametrize(("event", "ended"), [(Event.GIVE_UP, "failed"), (Event.RETRY, "failed")])
def test_a_finish_writes_exactly_one_attempt_row_with_its_outcome(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str, event: Event, ended: str
) -> None:
    job = enqueue(store, clock)
    _, lease = claim_one(store, clock, "w-fin")
    clock.advance(2)
    error = ErrorCategory.RETRYABLE
    assert store.finish(lease, Outcome(event, error_category=error), clock.now())
    rows = rows_of(kit, store_url, job.id)
    assert rows == [
        (lease.attempt_id, lease.generation, lease.claim_token, "w-fin", ended, str(error))
    ]
    seen = store.get_job(job.id)
    assert seen is not None
    (attempt,) = seen.attempt_history
    assert attempt.status == AttemptStatus(ended) and attempt.finished_at == clock.now()
    assert attempt.started_at == clock.now() - timedelta(seconds=2)
    assert store.held_leases("w-fin") == []
    # the outcome reported again is refused (fenced) and writes no second row
    assert not store.finish(lease, Outcome(Event.SUCCEED), clock.now())
    assert len(rows_of(kit, store_url, job.id)) == 1


@pytest.mark.parametrize("cancel_requested", [False, True])
def test_a_success_stays_on_its_jobs_row_and_writes_no_attempt_row(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str, cancel_requested: bool
) -> None:
    """Migration 24: a succeeded job keeps its attempt on its row (MariaDB/MySQL: its row is
    written, one); every read shows it as its row would (succeeded, its id, worker, start,
    lease, finish at the job's end)."""
    job = enqueue(store, clock)
    _, lease = claim_one(store, clock, "w-ok")
    if cancel_requested:
        store.transition(job.id, Event.CANCEL, clock.now())
    clock.advance(2)
    assert store.finish(lease, Outcome(Event.SUCCEED, result='{"n":1}'), clock.now())
    written = [(lease.attempt_id, lease.generation, lease.claim_token, "w-ok", "succeeded", None)]
    assert rows_of(kit, store_url, job.id) == ([] if kit.successes_on_rows else written)
    seen = store.get_job(job.id)
    assert seen is not None and seen.status is JobStatus.SUCCEEDED
    (attempt,) = seen.attempt_history
    assert attempt.id == lease.attempt_id and attempt.job_id == job.id
    assert (attempt.generation, attempt.claim_token) == (lease.generation, lease.claim_token)
    assert attempt.worker_id == "w-ok" and attempt.status is AttemptStatus.SUCCEEDED
    assert attempt.finished_at == clock.now()
    assert attempt.started_at == clock.now() - timedelta(seconds=2)
    assert attempt.lease_expires_at == attempt.started_at + timedelta(seconds=job.lease_seconds)
    assert attempt.error_category is None and attempt.error_message is None
    assert attempt.due_at == job.due_at and attempt.late_outcome is None
    assert seen.result == {"n": 1}
    assert store.held_leases("w-ok") == []
    listed = {j.id: j for j in store.list_jobs(JobFilter(with_attempts=True))}
    assert listed[job.id].attempt_history == seen.attempt_history
    # nothing takes it for a running attempt: no lease to renew, to reap or to find held
    (state,) = store.heartbeat([lease], clock.now())
    assert not state.held
    clock.advance(job.lease_seconds + 1)
    assert Reaper(store, clock).run_once().reaped == 0
    # the outcome reported again is refused (fenced), recorded as a late report on the
    # attempt, and writes no row
    assert not store.finish(lease, Outcome(Event.SUCCEED), clock.now())
    assert len(rows_of(kit, store_url, job.id)) == (0 if kit.successes_on_rows else 1)
    again = store.get_job(job.id)
    assert again is not None
    (late,) = again.attempt_history
    assert late.late_outcome == "succeeded" and late.late_reported_at == clock.now()
    assert late.finished_at == attempt.finished_at and late.status is AttemptStatus.SUCCEEDED


def test_a_retried_job_that_succeeds_has_one_row_per_failure_and_its_success_on_its_row(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    job = enqueue(store, clock)
    _, first = claim_one(store, clock, "w-1")
    clock.advance(1)
    store.finish(
        first,
        Outcome(Event.RETRY, error_category=ErrorCategory.RETRYABLE, due_at=clock.now()),
        clock.now(),
    )
    _, second = claim_one(store, clock, "w-2")
    clock.advance(1)
    assert store.finish(second, Outcome(Event.SUCCEED), clock.now())
    rows = [r[0] for r in rows_of(kit, store_url, job.id)]
    assert rows == [first.attempt_id] + ([] if kit.successes_on_rows else [second.attempt_id])
    seen = store.get_job(job.id)
    assert seen is not None
    assert [(a.id, a.status, a.worker_id) for a in seen.attempt_history] == [
        (first.attempt_id, AttemptStatus.FAILED, "w-1"),
        (second.attempt_id, AttemptStatus.SUCCEEDED, "w-2"),
    ]


def test_the_reaper_writes_one_lost_attempt(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    job = enqueue(store, clock)
    _, lease = claim_one(store, clock)
    clock.advance(job.lease_seconds + 1)
    assert Reaper(store, clock).run_once().reaped == 1
    ((attempt_id, generation, _, _, status, category),) = rows_of(kit, store_url, job.id)
    assert (attempt_id, generation, status) == (lease.attempt_id, lease.generation, "lost")
    assert category == str(ErrorCategory.LEASE_EXPIRED)
    again = store.get_job(job.id)
    assert again is not None and again.status is JobStatus.SCHEDULED
    # its worker's late report lands on the row the reaper wrote
    assert not store.finish(lease, Outcome(Event.SUCCEED), clock.now())
    seen = store.get_job(job.id)
    assert seen is not None and seen.attempt_history[0].late_outcome == "succeeded"


def test_a_late_report_on_a_running_attempt_is_kept_at_its_end(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    """A refused report while the attempt still runs (STOP without a cancel request) is
    recorded on the running attempt, and its row keeps it when the attempt ends."""
    job = enqueue(store, clock)
    _, lease = claim_one(store, clock)
    assert not store.finish(lease, Outcome(Event.STOP), clock.now())
    seen = store.get_job(job.id)
    assert seen is not None and seen.attempt_history[0].late_outcome == "cancelled"
    assert rows_of(kit, store_url, job.id) == []
    clock.advance(1)
    assert store.finish(lease, Outcome(Event.SUCCEED), clock.now())
    seen = store.get_job(job.id)
    assert seen is not None
    (attempt,) = seen.attempt_history
    assert attempt.status is AttemptStatus.SUCCEEDED and attempt.late_outcome == "cancelled"
    assert attempt.late_reported_at == clock.now() - timedelta(seconds=1)


def test_an_old_style_running_attempt_insert_is_refused(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    """What a worker of an earlier version does at its claim fails (and its claim with it)."""
    job = enqueue(store, clock)
    at = kit.instant(clock.now())
    with pytest.raises(Exception, match=r"(?i)ended.only|upgrade|running"):
        kit.execute(
            store_url,
            "INSERT INTO duetime_attempts (job_id, generation, claim_token, worker_id, status, "
            "lease_expires_at, started_at, due_at) VALUES (?, 1, 7, 'old', 'running', ?, ?, ?)",
            (job.id, at, at, at),
        )
    assert rows_of(kit, store_url, job.id) == []
    # an ended attempt's row is still welcome (what this version writes at the end)
    kit.execute(
        store_url,
        "INSERT INTO duetime_attempts (job_id, generation, claim_token, worker_id, status, "
        "lease_expires_at, started_at, finished_at, due_at) "
        "VALUES (?, 1, 7, 'w', 'succeeded', ?, ?, ?, ?)",
        (job.id, at, at, at, at),
    )


def test_a_listing_with_attempts_shows_them_as_the_job_read_does(
    store: Store, clock: ManualClock
) -> None:
    """A page of jobs with their attempts (select_attempts_of_jobs) shows each job's ended
    attempts' rows and its running attempt (on its row) with the same fields, in the same
    order, as reading the job alone (select_attempts)."""
    retried = enqueue(store, clock)
    _, lease = claim_one(store, clock, "w-1")
    clock.advance(1)
    store.finish(lease, Outcome(Event.RETRY, due_at=clock.now()), clock.now())
    claim_one(store, clock, "w-2")
    idle = enqueue(store, clock)
    listed = {j.id: j for j in store.list_jobs(JobFilter(with_attempts=True))}
    alone = store.get_job(retried.id)
    assert alone is not None
    assert [a.status for a in alone.attempt_history] == [
        AttemptStatus.FAILED,
        AttemptStatus.RUNNING,
    ]
    assert listed[retried.id].attempt_history == alone.attempt_history
    assert listed[idle.id].attempt_history == ()


ANY_ATTEMPT_COLUMN = (
    "(attempt_id IS NOT NULL OR worker_id IS NOT NULL OR lease_expires_at IS NOT NULL "
    "OR started_at IS NOT NULL OR late_outcome IS NOT NULL OR late_reported_at IS NOT NULL)"
)


def stale(kit: DialectKit) -> str:
    """Jobs that hold attempt columns they should not: any but a running or cancel-requested
    job, and a succeeded one that keeps its success (migration 24, where the dialect does)
    only whole, with its attempt's id."""
    held = "'running', 'cancel_requested'" + (", 'succeeded'" if kit.successes_on_rows else "")
    return (
        f"SELECT id, status FROM duetime_all_jobs WHERE (status NOT IN ({held}) "
        f"AND {ANY_ATTEMPT_COLUMN}) OR (status = 'succeeded' AND attempt_id IS NULL "
        f"AND {ANY_ATTEMPT_COLUMN}) OR (status = 'succeeded' AND attempt_id IS NOT NULL "
        "AND (worker_id IS NULL OR lease_expires_at IS NULL OR started_at IS NULL))"
    )


# a succeeded job whose success is not its newest attempt, or not shown as succeeded
SUCCESSES = (
    "SELECT j.id FROM duetime_all_jobs j WHERE j.status = 'succeeded' AND j.attempt_id IS NOT NULL "
    "AND NOT EXISTS (SELECT 1 FROM duetime_all_attempts a WHERE a.job_id = j.id "
    "AND a.id = j.attempt_id AND a.generation = j.generation AND a.status = 'succeeded')"
)
TWICE = (
    "SELECT job_id, generation, claim_token FROM duetime_all_attempts "
    "GROUP BY job_id, generation, claim_token HAVING COUNT(*) > 1"
)


def test_no_move_leaves_a_phantom_running_attempt_or_ends_one_twice(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    """Every way a job leaves running (a finish of each outcome, a stop, the reaper, a
    withdrawn dispatch, an operator's move after it) clears its current-attempt columns, and
    every attempt has one row at most: no job that no longer runs shows a running attempt,
    and a succeeded job shows its success once (on its row, migration 24)."""
    for status in JobStatus:
        job_in(store, clock, status)
    _, lease = job_in(store, clock, JobStatus.CANCEL_REQUESTED)
    assert lease is not None and store.finish(lease, Outcome(Event.STOP), clock.now())
    dead, _ = job_in(store, clock, JobStatus.DEAD)
    store.transition(dead.id, Event.REPLAY, clock.now())
    parked, _ = job_in(store, clock, JobStatus.PARKED)
    store.transition(parked.id, Event.RESOLVE_RETRY, clock.now())
    held = store.claim(worker_id="w-gone", queues=None, limit=100, now=clock.now())
    assert held
    clock.advance(max(c.job.lease_seconds for c in held) + 1)
    assert Reaper(store, clock).run_once().reaped >= len(held)
    store.set_queue("q", clock.now(), dispatch=Dispatch.OUTBOX)
    for _ in range(3):
        enqueue(store, clock, queue="q")
    first, *_ = store.dispatch_outbox(clock.now(), 10, lease_seconds=300)
    store.transition(first.job_id, Event.CANCEL, clock.now())  # withdrawn, then cancelled
    store.set_queue("q", clock.now(), dispatch=Dispatch.DIRECT)  # the others withdrawn
    assert kit.execute(store_url, stale(kit)) == []
    assert kit.execute(store_url, TWICE) == []
    assert kit.execute(store_url, SUCCESSES) == []
    assert kit.execute(store_url, IN_BOTH) == []  # each job in one table
    seen = store.get_job(held[0].job.id)
    assert seen is not None and seen.attempt_history[-1].status is AttemptStatus.LOST
