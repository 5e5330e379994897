"""Batched writes keep every fencing rule: claims, heartbeats and outcomes of many jobs at once.

A stale attempt inside a batch is refused alone (and its late report kept) while the rest of
the batch commits; a batch is one transaction.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from duetime.core.clock import ManualClock
from duetime.core.models import Lease, Outcome
from duetime.core.requests import TaskDefaults
from duetime.core.retry import ErrorCategory
from duetime.core.states import AttemptStatus, Event, JobStatus
from duetime.store.base import Store
from jobhelpers import enqueue


def claim_all(store: Store, clock: ManualClock, n: int, worker: str = "w") -> list[Lease]:
    claims = store.claim(worker_id=worker, queues=None, limit=n, now=clock.now())
    assert len(claims) == n
    return [c.lease for c in claims]


def test_a_claim_takes_every_due_job_up_to_its_limit_in_one_go(
    store: Store, clock: ManualClock
) -> None:
    ids = [enqueue(store, clock, args={"i": i}).id for i in range(25)]
    enqueue(store, clock, at=clock.now() + timedelta(minutes=5))  # not due
    claims = store.claim(worker_id="w", queues=None, limit=100, now=clock.now())
    assert sorted(c.job.id for c in claims) == ids
    assert all(c.job.status is JobStatus.RUNNING and c.attempt.generation == 1 for c in claims)
    assert len({c.attempt.id for c in claims}) == 25


def test_a_stale_outcome_in_a_batch_is_refused_alone(store: Store, clock: ManualClock) -> None:
    for i in range(5):
        enqueue(store, clock, args={"i": i})
    leases = claim_all(store, clock, 5, worker="old")
    stale = leases[2]
    # the stale one's lease lapses and another worker takes its job over
    clock.advance(31)
    expired = Outcome(
        Event.RETRY,
        due_at=clock.now(),
        error_category=ErrorCategory.LEASE_EXPIRED,
        attempt_status=AttemptStatus.LOST,
    )
    assert store.finish_many([(stale, expired)], clock.now(), only_if_expired=True) == [True]
    [new] = claim_all(store, clock, 1, worker="new")
    assert new.job_id == stale.job_id and new.generation == stale.generation + 1
    outcomes = [
        (lease, Outcome(Event.SUCCEED))
        if i % 2 == 0
        else (lease, Outcome(Event.RETRY, due_at=clock.now() + timedelta(seconds=9)))
        for i, lease in enumerate(leases)
    ]
    applied = store.finish_many(outcomes, clock.now())
    assert applied == [True, True, False, True, True]
    for lease, ok in zip(leases, applied, strict=True):
        job = store.get_job(lease.job_id)
        assert job is not None
        first = job.attempt_history[0]
        if not ok:  # the newer attempt still holds it; the late report is kept
            assert job.status is JobStatus.RUNNING and job.generation == new.generation
            assert first.status is AttemptStatus.LOST and first.late_outcome == "succeeded"
        elif lease.job_id == leases[1].job_id or lease.job_id == leases[3].job_id:
            assert job.status is JobStatus.SCHEDULED
            assert job.due_at == clock.now() + timedelta(seconds=9)
            assert first.status is AttemptStatus.FAILED
        else:
            assert job.status is JobStatus.SUCCEEDED and first.status is AttemptStatus.SUCCEEDED


def test_a_reap_batch_takes_only_the_leases_still_expired(store: Store, clock: ManualClock) -> None:
    leases = running(store, clock, 3)
    clock.advance(31)
    store.heartbeat([leases[1]], clock.now())  # renewed between the scan and the reap
    lost = Outcome(Event.RETRY, due_at=clock.now(), attempt_status=AttemptStatus.LOST)
    applied = store.finish_many(
        [(lease, lost) for lease in leases], clock.now(), only_if_expired=True
    )
    assert applied == [True, False, True]
    renewed = store.get_job(leases[1].job_id)
    assert renewed is not None and renewed.status is JobStatus.RUNNING
    assert renewed.attempt_history[0].late_outcome is None  # a reap leaves no late report


def test_one_outcome_per_job_in_a_batch(store: Store, clock: ManualClock) -> None:
    enqueue(store, clock)
    [lease] = claim_all(store, clock, 1)
    applied = store.finish_many(
        [(lease, Outcome(Event.SUCCEED)), (lease, Outcome(Event.GIVE_UP))], clock.now()
    )
    assert applied == [True, False]
    job = store.get_job(lease.job_id)
    assert job is not None and job.status is JobStatus.SUCCEEDED


def test_a_stale_outcome_and_the_current_one_of_one_job_in_one_batch(
    store: Store, clock: ManualClock
) -> None:
    # a worker whose first attempt was reaped runs the job again; both outcomes reach its
    # completer together: the stale one is refused, the current one applies, in either order
    for order in (0, 1):
        job = enqueue(store, clock, args={"order": order})
        [stale] = claim_all(store, clock, 1)
        clock.advance(31)
        lost = Outcome(Event.RETRY, due_at=clock.now(), attempt_status=AttemptStatus.LOST)
        assert store.finish_many([(stale, lost)], clock.now(), only_if_expired=True) == [True]
        [current] = claim_all(store, clock, 1)
        assert current.job_id == job.id and current.generation == stale.generation + 1
        items = [(stale, Outcome(Event.SUCCEED)), (current, Outcome(Event.SUCCEED))]
        if order:
            items.reverse()
        applied = store.finish_many(items, clock.now())
        assert applied == ([False, True] if order == 0 else [True, False])
        ended = store.get_job(job.id)
        assert ended is not None and ended.status is JobStatus.SUCCEEDED
        first, second = ended.attempt_history
        assert first.status is AttemptStatus.LOST and first.late_outcome == "succeeded"
        assert second.status is AttemptStatus.SUCCEEDED


def test_one_batch_records_each_outcome_with_what_it_carries(
    store: Store, clock: ManualClock
) -> None:
    """A batch's rows leave out what an outcome does not carry (a retry's due instant, the
    error texts): each attempt still records exactly what its own outcome says, beside a plain
    success, and a message that is empty is a message, not none."""
    later = clock.now() + timedelta(minutes=7)
    outcomes = [
        Outcome(Event.SUCCEED),
        Outcome(Event.SUCCEED, error_category=ErrorCategory.RECONCILED),
        Outcome(Event.RETRY, due_at=later, error_category=ErrorCategory.RETRYABLE),
        Outcome(
            Event.GIVE_UP,
            error_category=ErrorCategory.PERMANENT,
            error_message="bad input: ü",
            error_traceback="Traceback (most recent call last):\n  ...",
        ),
        Outcome(Event.RETRY, due_at=later, error_message=""),
    ]
    ids = [enqueue(store, clock, args={"i": i}, max_attempts=3).id for i in range(len(outcomes))]
    leases = claim_all(store, clock, len(outcomes))
    by_job = {lease.job_id: lease for lease in leases}
    items = [(by_job[job_id], outcome) for job_id, outcome in zip(ids, outcomes, strict=True)]
    assert store.finish_many(items, clock.now()) == [True] * len(outcomes)
    jobs = [store.get_job(job_id) for job_id in ids]
    assert [j.status if j else None for j in jobs] == [
        JobStatus.SUCCEEDED,
        JobStatus.SUCCEEDED,
        JobStatus.SCHEDULED,
        JobStatus.DEAD,
        JobStatus.SCHEDULED,
    ]
    attempts = [j.attempt_history[-1] for j in jobs if j]
    assert [(a.error_category, a.error_message, a.error_traceback) for a in attempts] == [
        (None, None, None),
        (ErrorCategory.RECONCILED, None, None),
        (ErrorCategory.RETRYABLE, None, None),
        (ErrorCategory.PERMANENT, "bad input: ü", "Traceback (most recent call last):\n  ..."),
        (None, "", None),
    ]
    assert [j.due_at for j in jobs if j and j.status is JobStatus.SCHEDULED] == [later, later]


def statements_of(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the statements run from here on, in order, as a list that grows."""
    from duetime.store.driver import Connection

    names: list[str] = []
    real_run, real_rows = Connection.run, Connection.rows

    def run(self: Connection, name: str, /, **params: Any) -> Any:
        names.append(name)
        return real_run(self, name, **params)

    def rows(self: Connection, name: str, /, **params: Any) -> Any:
        names.append(name)
        return real_rows(self, name, **params)

    monkeypatch.setattr(Connection, "run", run)
    monkeypatch.setattr(Connection, "rows", rows)
    return names


def running(store: Store, clock: ManualClock, n: int) -> list[Lease]:
    """The leases of `n` new jobs, claimed at once."""
    for i in range(n):
        enqueue(store, clock, args={"i": i})
    return claim_all(store, clock, n)


def test_a_batch_whose_attempts_all_hold_their_jobs(
    store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # PostgreSQL finishes it in one statement that locks and fences the rows itself
    # (finish_held); the others read the rows first (lock_jobs), then finish them (finish_jobs)
    leases = running(store, clock, 4)
    names = statements_of(monkeypatch)
    due = clock.now() + timedelta(seconds=9)
    items = [
        (leases[0], Outcome(Event.SUCCEED, result='{"n": 1}')),
        (leases[1], Outcome(Event.RETRY, due_at=due, error_category=ErrorCategory.RETRYABLE)),
        (leases[2], Outcome(Event.GIVE_UP, error_message="no")),
        (leases[3], Outcome(Event.SUCCEED)),
    ]
    assert store.finish_many(items, clock.now()) == [True] * 4
    held = store.driver.finishes_held  # type: ignore[attr-defined]
    assert ("finish_held" if held else "finish_jobs") in names
    assert ("lock_jobs" in names) == (not held)
    monkeypatch.undo()
    jobs = [store.get_job(lease.job_id) for lease in leases]
    assert [j.status for j in jobs if j is not None] == [
        JobStatus.SUCCEEDED,
        JobStatus.SCHEDULED,
        JobStatus.DEAD,
        JobStatus.SUCCEEDED,
    ]
    assert jobs[0] is not None and jobs[0].result == {"n": 1}
    assert jobs[1] is not None and jobs[1].due_at == due
    for job, lease in zip(jobs, leases, strict=True):
        assert job is not None
        [attempt] = job.attempt_history
        assert (attempt.generation, attempt.claim_token) == (lease.generation, lease.claim_token)
    assert jobs[2] is not None and jobs[2].attempt_history[0].error_message == "no"


def test_one_batch_acts_on_each_end_that_others_wait_for(
    store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rest of a finish acts only on some of the jobs it moved: a parent that ended
    releases its child, a job of a sequence lets the next one run, a retry is due again. In
    one batch with plain jobs around them (PostgreSQL: finish_held answers with those jobs
    alone, not a row for each), each is acted on."""
    parent = enqueue(store, clock, args={"n": 0})
    seq = TaskDefaults(sequence="{account}")
    head = enqueue(store, clock, args={"account": "a", "n": 1}, defaults=seq)
    plain = [enqueue(store, clock, args={"n": n}) for n in (2, 3)]
    retried = enqueue(store, clock, args={"n": 4})
    child = enqueue(store, clock, depends_on=[parent.id], at=clock.now() + timedelta(hours=1))
    nxt = enqueue(store, clock, args={"account": "a", "n": 5}, defaults=seq)
    assert (child.status, nxt.status) == (JobStatus.BLOCKED, JobStatus.WAITING)
    leases = {lease.job_id: lease for lease in claim_all(store, clock, 5)}
    due = clock.now() + timedelta(seconds=30)
    names = statements_of(monkeypatch)
    items = [
        (leases[plain[0].id], Outcome(Event.SUCCEED)),
        (leases[parent.id], Outcome(Event.SUCCEED)),
        (leases[head.id], Outcome(Event.GIVE_UP, error_message="no")),
        (leases[retried.id], Outcome(Event.RETRY, due_at=due)),
        (leases[plain[1].id], Outcome(Event.SUCCEED)),
    ]
    assert store.finish_many(items, clock.now()) == [True] * 5
    held = store.driver.finishes_held  # type: ignore[attr-defined]
    assert ("finish_held" in names, "lock_jobs" in names) == (held, not held)
    monkeypatch.undo()

    def status(job_id: int) -> JobStatus:
        found = store.get_job(job_id)
        assert found is not None
        return found.status

    assert status(child.id) is JobStatus.SCHEDULED  # released, due at its own instant
    assert status(nxt.id) is JobStatus.SCHEDULED  # the sequence's next one
    assert status(retried.id) is JobStatus.SCHEDULED
    assert [status(j.id) for j in (parent, *plain)] == [JobStatus.SUCCEEDED] * 3
    assert status(head.id) is JobStatus.DEAD
    clock.advance(31)
    again = store.claim(worker_id="w", queues=None, limit=10, now=clock.now())
    assert sorted(c.job.id for c in again) == sorted([retried.id, nxt.id])


def test_a_batch_with_one_job_whose_cancel_was_asked_meanwhile(
    store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the attempt still holds its job, but the job is no longer `running`: PostgreSQL's one
    # statement moves none of the batch's jobs, and the batch goes the long way; every
    # outcome applies once, the cancelled job's as a cancellation
    leases = running(store, clock, 3)
    store.transition(leases[1].job_id, Event.CANCEL, clock.now())
    names = statements_of(monkeypatch)
    due = clock.now() + timedelta(seconds=9)
    items = [(lease, Outcome(Event.RETRY, due_at=due)) for lease in leases]
    assert store.finish_many(items, clock.now()) == [True] * 3
    held = store.driver.finishes_held  # type: ignore[attr-defined]
    # PostgreSQL: the one statement first (it moved nothing), then the long way
    assert [n for n in names if n in ("lock_jobs", "finish_jobs", "finish_held")] == (
        ["finish_held", "lock_jobs", "finish_jobs"] if held else ["lock_jobs", "finish_jobs"]
    )
    monkeypatch.undo()
    jobs = [store.get_job(lease.job_id) for lease in leases]
    assert [j.status for j in jobs if j is not None] == [
        JobStatus.SCHEDULED,
        JobStatus.CANCELLED,
        JobStatus.SCHEDULED,
    ]
    assert all(j is not None and len(j.attempt_history) == 1 for j in jobs)


def test_a_heartbeat_batch_renews_only_leases_still_held(store: Store, clock: ManualClock) -> None:
    leases = running(store, clock, 4)
    assert store.finish(leases[0], Outcome(Event.SUCCEED), clock.now())
    clock.advance(10)
    states = store.heartbeat(leases, clock.now())
    assert [s.held for s in states] == [False, True, True, True]
    assert all(s.lease_expires_at == clock.now() + timedelta(seconds=30) for s in states[1:])


def test_error_text_the_database_cannot_hold_is_still_recorded(
    store: Store, clock: ManualClock
) -> None:
    enqueue(store, clock)
    [lease] = claim_all(store, clock, 1)
    failure = Outcome(
        Event.GIVE_UP,
        error_category=ErrorCategory.PERMANENT,
        error_message="bad \x00 byte and a lone \udc80 surrogate",
        error_traceback="Traceback\x00",
    )
    assert store.finish(lease, failure, clock.now())
    job = store.get_job(lease.job_id)
    assert job is not None and job.status is JobStatus.DEAD
    assert job.attempt_history[0].error_message == "bad \ufffd byte and a lone ? surrogate"


def test_a_bulk_enqueue_returns_the_jobs_as_stored(
    store: Store, store_url: str, clock: ManualClock
) -> None:
    import duetime

    app = duetime.App(store_url, clock=clock)
    try:
        later = clock.now() + timedelta(minutes=3)
        jobs = app.enqueue_many(
            "report",
            [{"n": i, "text": "é\u2603"} for i in range(50)],
            queue="bulk",
            priority=3,
            deadline=later + timedelta(hours=1),
            at_each=[later + timedelta(seconds=i) for i in range(50)],
        )
        assert [j.due_at for j in jobs] == [later + timedelta(seconds=i) for i in range(50)]
        assert len({j.id for j in jobs}) == 50
        for job in jobs:
            stored = app.get_job(job.id)
            assert stored == job  # every field, as the store reads it back
    finally:
        app.close()


def test_a_bulk_enqueue_with_a_due_time_each_refuses_what_cannot_run(
    store: Store, store_url: str, clock: ManualClock
) -> None:
    import pytest

    import duetime

    app = duetime.App(store_url, clock=clock)
    try:
        soon = clock.now() + timedelta(seconds=5)
        with pytest.raises(duetime.InvalidRequest, match="one per job"):
            app.enqueue_many("t", [{}, {}], at_each=[soon])
        with pytest.raises(duetime.InvalidRequest, match="deadline"):
            app.enqueue_many("t", [{}], at_each=[soon], deadline=soon)
        with pytest.raises(duetime.InvalidRequest, match="not both"):
            app.enqueue_many("t", [{}], at_each=[soon], delay=3)
        assert app.list_jobs() == []
    finally:
        app.close()
