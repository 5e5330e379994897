"""A job that a worker's finish ends leaves the jobs table for the history table, within the
finish (docs/history-plan.md, steps 6a and 8; PostgreSQL only for now), while its result, its
limits, its children and its sequence still get what they need of it. A job that will run
again (a retry), waits for an operator (parked) or holds a key (an idempotency key, a unique
window, a schedule's occurrence) stays. What every job reads like afterwards is in
test_history_reads.py, on every dialect."""

from __future__ import annotations

from datetime import timedelta

import pytest

from duetime.core.clock import ManualClock
from duetime.core.limits import LimitSettings
from duetime.core.models import Job, Outcome
from duetime.core.requests import TaskDefaults
from duetime.core.retry import ErrorCategory
from duetime.core.states import Event, JobStatus
from duetime.runtime.reaper import Reaper
from duetime.store.base import Store
from history import IN_BOTH, table_of
from jobhelpers import claim_one, enqueue
from kit import DialectKit

HOT, DONE = "duetime_jobs", "duetime_jobs_done"


@pytest.fixture(autouse=True)
def _moving(kit: DialectKit) -> None:
    if not kit.moves_ended:
        pytest.skip(
            "SQLite and MariaDB/MySQL keep ended jobs in the jobs table for now (their move "
            "after the finish cost 18% to 45% of the drain: docs/history-plan.md, step 6a)"
        )


GIVE_UP = Outcome(Event.GIVE_UP, error_category=ErrorCategory.PERMANENT)


def in_both(kit: DialectKit, url: str) -> list[tuple[object, ...]]:
    """The ids of the jobs held by both tables at once (none may be)."""
    return kit.execute(url, IN_BOTH)


def ended_in_hot(kit: DialectKit, url: str) -> list[tuple[object, ...]]:
    """The jobs that ended without a key but are still in the jobs table (none may be)."""
    return kit.execute(
        url,
        "SELECT id, status FROM duetime_jobs "
        "WHERE status IN ('succeeded', 'dead', 'cancelled', 'expired') "
        "AND idempotency_key IS NULL AND unique_key IS NULL "
        "AND (schedule_id IS NULL OR nominal_at IS NULL)",
    )


def finish_next(store: Store, clock: ManualClock, outcome: Outcome) -> Job:
    """Claim the next due job and finish it with `outcome`; the job as read afterwards."""
    job, lease = claim_one(store, clock)
    assert store.finish(lease, outcome, clock.now())
    got = store.get_job(job.id)
    assert got is not None
    return got


def test_a_worker_finish_moves_what_ended_and_keeps_what_runs_again(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    plain = [enqueue(store, clock) for _ in range(3)]
    retried = enqueue(store, clock, max_attempts=3, at=clock.now() + timedelta(seconds=1))
    parked = enqueue(store, clock, at=clock.now() + timedelta(seconds=2))
    succeeded = finish_next(store, clock, Outcome(Event.SUCCEED, result='{"n":1}'))
    dead = finish_next(store, clock, GIVE_UP)
    cancelled = plain[2]
    store.transition(cancelled.id, Event.CANCEL, clock.now())  # scheduled: cancelled at once
    clock.advance(1)
    retry = Outcome(
        Event.RETRY, error_category=ErrorCategory.RETRYABLE, due_at=clock.now() + timedelta(hours=1)
    )
    again = finish_next(store, clock, retry)
    clock.advance(1)
    waiting = finish_next(store, clock, Outcome(Event.PARK))

    assert [succeeded.id, dead.id, again.id, waiting.id] == [
        plain[0].id,
        plain[1].id,
        retried.id,
        parked.id,
    ]
    assert (succeeded.status, dead.status) == (JobStatus.SUCCEEDED, JobStatus.DEAD)
    assert table_of(kit, store_url, succeeded.id) == DONE
    assert table_of(kit, store_url, dead.id) == DONE
    assert (again.status, table_of(kit, store_url, again.id)) == (JobStatus.SCHEDULED, HOT)
    assert (waiting.status, table_of(kit, store_url, waiting.id)) == (JobStatus.PARKED, HOT)
    assert store.get_job(succeeded.id).result == {"n": 1}  # type: ignore[union-attr]
    assert in_both(kit, store_url) == []


def test_a_job_with_a_key_stays_in_the_jobs_table(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    keyed = enqueue(store, clock, key="order-42")
    unique = enqueue(store, clock, defaults=TaskDefaults(unique_for_seconds=60))
    for job in (keyed, unique):
        done = finish_next(store, clock, Outcome(Event.SUCCEED))
        assert done.id == job.id and table_of(kit, store_url, job.id) == HOT
    # the key still finds the job that ended
    assert enqueue(store, clock, key="order-42").id == keyed.id


def test_the_reaper_and_a_completion_move_the_jobs_they_end(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    lost = enqueue(store, clock, max_attempts=1)
    _, lease = claim_one(store, clock)
    clock.advance(lost.lease_seconds + 1)
    assert Reaper(store, clock).run_once().reaped == 1
    reaped = store.get_job(lost.id)
    assert reaped is not None and reaped.status is JobStatus.DEAD
    assert table_of(kit, store_url, lost.id) == DONE
    assert not store.finish(lease, Outcome(Event.SUCCEED), clock.now())  # fenced, recorded
    late = store.get_job(lost.id)
    assert late is not None and late.attempt_history[-1].late_outcome == "succeeded"

    completed = enqueue(store, clock)
    _, lease = claim_one(store, clock)
    with store.completion(lease, Outcome(Event.SUCCEED), clock.now):
        pass
    assert table_of(kit, store_url, completed.id) == DONE
    assert ended_in_hot(kit, store_url) == [] and in_both(kit, store_url) == []


def test_children_and_sequences_are_told_before_their_job_moves(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    parent = enqueue(store, clock)
    child = enqueue(store, clock, depends_on=[parent.id])
    failing = enqueue(store, clock, at=clock.now() + timedelta(seconds=10))
    doomed = enqueue(store, clock, depends_on=[failing.id])
    seq = TaskDefaults(sequence="{account}")
    later = clock.now() + timedelta(seconds=20)
    head = enqueue(store, clock, args={"account": "a", "n": 0}, defaults=seq, at=later)
    next_in_line = enqueue(store, clock, args={"account": "a", "n": 1}, defaults=seq, at=later)
    assert next_in_line.status is JobStatus.WAITING

    # one job due at a time: the parent, then the child it released
    assert finish_next(store, clock, Outcome(Event.SUCCEED)).id == parent.id
    assert table_of(kit, store_url, parent.id) == DONE
    released = store.get_job(child.id)
    assert released is not None and released.status is JobStatus.SCHEDULED
    got = store.get_job(parent.id)
    assert got is not None and [c.id for c in got.children] == [child.id]
    assert finish_next(store, clock, Outcome(Event.SUCCEED)).id == child.id

    clock.advance(10)
    assert finish_next(store, clock, GIVE_UP).id == failing.id
    assert table_of(kit, store_url, failing.id) == DONE
    cancelled = store.get_job(doomed.id)
    assert cancelled is not None and cancelled.status is JobStatus.CANCELLED

    clock.advance(10)
    assert finish_next(store, clock, Outcome(Event.SUCCEED)).id == head.id
    assert table_of(kit, store_url, head.id) == DONE
    after = store.get_job(next_in_line.id)
    assert after is not None and after.status is JobStatus.SCHEDULED
    assert finish_next(store, clock, Outcome(Event.SUCCEED)).id == next_in_line.id
    assert in_both(kit, store_url) == []


def test_one_batch_moves_what_leaves_and_updates_the_rest(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    """A worker's batch finished in one statement (all its attempts still hold their jobs):
    a job that leaves, a keyed job and a retry together, each as it would be alone."""
    plain = enqueue(store, clock)
    keyed = enqueue(store, clock, key="batch-1")
    retried = enqueue(store, clock, max_attempts=3)
    claims = store.claim(worker_id="w", queues=None, limit=3, now=clock.now())
    assert sorted(c.job.id for c in claims) == sorted([plain.id, keyed.id, retried.id])
    later = clock.now() + timedelta(hours=1)
    outcomes = {
        plain.id: Outcome(Event.SUCCEED, result='{"n":2}'),
        keyed.id: Outcome(Event.SUCCEED),
        retried.id: Outcome(Event.RETRY, error_category=ErrorCategory.RETRYABLE, due_at=later),
    }
    applied = store.finish_many([(c.lease, outcomes[c.job.id]) for c in claims], clock.now())
    assert applied == [True, True, True]
    assert table_of(kit, store_url, plain.id) == DONE
    assert table_of(kit, store_url, keyed.id) == HOT
    assert table_of(kit, store_url, retried.id) == HOT
    got = {j: store.get_job(j) for j in (plain.id, keyed.id, retried.id)}
    assert [g.status for g in got.values() if g] == [
        JobStatus.SUCCEEDED,
        JobStatus.SUCCEEDED,
        JobStatus.SCHEDULED,
    ]
    assert got[plain.id].result == {"n": 2}  # type: ignore[union-attr]
    assert [a.status.value for a in got[retried.id].attempt_history] == ["failed"]  # type: ignore[union-attr]
    assert in_both(kit, store_url) == []


def test_the_limits_count_the_outcomes_of_jobs_that_moved(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    """The finish counts an ended attempt on its job's limit keys after the job has moved
    (job_limits reads both tables): a success and a give-up each counted once."""
    store.set_limit(LimitSettings("api", concurrency=5), clock.now())
    api = TaskDefaults(limits=("api",))
    won = enqueue(store, clock, defaults=api)
    lost = enqueue(store, clock, defaults=api, max_attempts=1)
    assert finish_next(store, clock, Outcome(Event.SUCCEED)).id == won.id
    assert finish_next(store, clock, GIVE_UP).id == lost.id
    assert [table_of(kit, store_url, j.id) for j in (won, lost)] == [DONE, DONE]
    (status,) = store.limits(clock.now())
    assert (status.state.current.successes, status.state.current.failures) == (1, 1)
