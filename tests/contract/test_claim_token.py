"""The claim token (docs/at-least-once.md, "The claim token"), on every dialect: every fenced
write matches the job and its attempt by the claim's random token, never by the attempt id
alone, so that an outcome from a lost history (a lossy promotion hands generations and attempt
ids out again) is refused, never lands on another job's attempt, and never holds up a batch."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

import schemas
from duetime.core.clock import ManualClock
from duetime.core.errors import StaleAttempt
from duetime.core.models import Job, Lease, Outcome
from duetime.core.outbox import Dispatch, Dispatched
from duetime.core.requests import TaskDefaults
from duetime.core.states import AttemptStatus, Event, JobStatus
from duetime.store.base import Store
from jobhelpers import claim_one, enqueue, job_in
from kit import DialectKit

MAX_TOKEN = (1 << 63) - 1


def attempt_rows(kit: DialectKit, url: str) -> list[tuple[Any, ...]]:
    """Every attempt, as the database holds it (what a stale outcome must not change): the
    ended ones' rows, and the running and succeeded ones on their jobs' rows."""
    return kit.execute(
        url,
        "SELECT id, job_id, generation, claim_token, worker_id, status, lease_expires_at, "
        "finished_at, error_message, late_outcome, late_reported_at "
        "FROM duetime_all_attempts ORDER BY id",
    )


def two_running(store: Store, clock: ManualClock) -> tuple[Job, Lease, Job, Lease]:
    enqueue(store, clock)
    enqueue(store, clock)
    a, lease_a = claim_one(store, clock, "wa")
    b, lease_b = claim_one(store, clock, "wb")
    return a, lease_a, b, lease_b


def wrong(lease: Lease) -> Lease:
    """The lease a worker of a lost history holds: the same job, generation and attempt id,
    another claim's token."""
    token = lease.claim_token
    assert token is not None
    return dataclasses.replace(lease, claim_token=token % MAX_TOKEN + 1)


def test_every_claim_gives_a_fresh_random_token_to_the_job_and_its_attempt(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    for _ in range(6):
        enqueue(store, clock)
    claims = store.claim(worker_id="w", queues=None, limit=6, now=clock.now())
    tokens = [c.lease.claim_token for c in claims]
    assert all(t is not None and 0 < t <= MAX_TOKEN for t in tokens)
    assert len(set(tokens)) == 6
    assert [c.attempt.claim_token for c in claims] == tokens
    rows = kit.execute(store_url, "SELECT id, claim_token FROM duetime_jobs")
    assert {int(i): int(t) for i, t in rows} == {c.job.id: c.lease.claim_token for c in claims}
    # a retry's claim gets a new token
    first = claims[0]
    retry = Outcome(Event.RETRY, due_at=clock.now())
    assert store.finish(first.lease, retry, clock.now())
    again = store.claim(worker_id="w", queues=None, limit=1, now=clock.now())
    assert again[0].job.id == first.job.id
    assert again[0].lease.claim_token not in (None, first.lease.claim_token)


def test_the_epoch_of_a_claim_is_the_databases_timeline_on_postgresql_else_zero(
    store: Store, clock: ManualClock
) -> None:
    enqueue(store, clock)
    [claim] = store.claim(worker_id="w", queues=None, limit=1, now=clock.now())
    epoch = 1 if store.dialect == "postgres" else 0  # a fresh cluster's first timeline
    assert claim.attempt.epoch == epoch
    assert claim.attempt.fencing_token == (epoch << 32) | claim.attempt.generation


@pytest.mark.parametrize("event", [Event.SUCCEED, Event.RETRY, Event.GIVE_UP, Event.STOP])
def test_a_finish_with_the_right_generation_and_a_wrong_token_changes_no_attempt(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str, event: Event
) -> None:
    a, lease_a, b, _ = two_running(store, clock)
    before = attempt_rows(kit, store_url)
    assert not store.finish(wrong(lease_a), Outcome(event, due_at=clock.now()), clock.now())
    # refused: no attempt row of any job changed (a lost history's attempt has no row here, so
    # no late report is recorded either), and the job is still held by its claim
    assert attempt_rows(kit, store_url) == before
    for job in (a, b):
        after = store.get_job(job.id)
        assert after is not None and after.status is JobStatus.RUNNING
    assert store.finish(lease_a, Outcome(Event.SUCCEED), clock.now())


def test_a_lease_without_a_token_is_refused(store: Store, clock: ManualClock) -> None:
    """A worker of an earlier version carries no token: refused, as a stale lease is."""
    enqueue(store, clock)
    job, lease = claim_one(store, clock)
    tokenless = dataclasses.replace(lease, claim_token=None)
    assert not store.finish(tokenless, Outcome(Event.SUCCEED), clock.now())
    [state] = store.heartbeat([tokenless], clock.now())
    assert not state.held
    after = store.get_job(job.id)
    assert after is not None and after.status is JobStatus.RUNNING


def test_a_stale_outcome_never_lands_on_another_jobs_attempt(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    """A lossy promotion gave job A's attempt id to job B: the stale worker of A reports with
    A's generation and B's attempt id. Its outcome is refused and B's attempt is untouched."""
    a, lease_a, b, lease_b = two_running(store, clock)
    forged = Lease(a.id, lease_b.attempt_id, lease_a.generation, wrong(lease_a).claim_token)
    before = attempt_rows(kit, store_url)
    assert not store.finish(forged, Outcome(Event.SUCCEED), clock.now())
    [state] = store.heartbeat([forged], clock.now())
    assert not state.held
    assert attempt_rows(kit, store_url) == before
    # even with A's own token, an attempt id of B's is never what is written: A's attempt is
    # found by A's job and token, so only A's attempt ends
    mixed = Lease(a.id, lease_b.attempt_id, lease_a.generation, lease_a.claim_token)
    store.finish(mixed, Outcome(Event.SUCCEED), clock.now())
    b_after = store.get_job(b.id)
    assert b_after is not None and b_after.status is JobStatus.RUNNING
    assert [x.status for x in b_after.attempt_history] == [AttemptStatus.RUNNING]
    a_after = store.get_job(a.id)
    assert a_after is not None
    assert (a_after.status, [x.status for x in a_after.attempt_history]) in (
        (JobStatus.SUCCEEDED, [AttemptStatus.SUCCEEDED]),  # applied to A's own attempt
        (JobStatus.RUNNING, [AttemptStatus.RUNNING]),  # or refused: never B's
    )
    assert store.finish(lease_b, Outcome(Event.SUCCEED), clock.now())


def test_a_heartbeat_with_a_wrong_token_renews_nothing(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    _, lease_a, _, lease_b = two_running(store, clock)
    clock.advance(10)
    before = attempt_rows(kit, store_url)
    states = store.heartbeat([wrong(lease_a), wrong(lease_b)], clock.now())
    assert [s.held for s in states] == [False, False]
    assert attempt_rows(kit, store_url) == before
    good = store.heartbeat([lease_a, wrong(lease_b)], clock.now())
    assert [s.held for s in good] == [True, False]
    assert good[0].lease_expires_at is not None and good[0].lease_expires_at > clock.now()


def test_a_late_report_lands_only_on_the_attempt_of_its_token(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    enqueue(store, clock, defaults=TaskDefaults(lease_seconds=10))
    job, old = claim_one(store, clock, "w1")
    clock.advance(11)
    [expired] = store.expired_leases(clock.now(), 10)
    lost = Outcome(Event.RETRY, due_at=clock.now(), attempt_status=AttemptStatus.LOST)
    assert store.finish(expired.lease, lost, clock.now(), only_if_expired=True)
    _, new = claim_one(store, clock, "w2")
    # the first worker reports late: recorded on its own attempt, not the new one
    assert not store.finish(old, Outcome(Event.SUCCEED), clock.now())
    after = store.get_job(job.id)
    assert after is not None
    first, second = after.attempt_history
    assert first.late_outcome == "succeeded" and second.late_outcome is None
    # a report with the old generation's attempt id but a token of no claim records nothing
    before = attempt_rows(kit, store_url)
    assert not store.finish(wrong(old), Outcome(Event.SUCCEED), clock.now())
    assert attempt_rows(kit, store_url) == before
    assert store.finish(new, Outcome(Event.SUCCEED), clock.now())


def test_a_batch_with_one_stale_outcome_keeps_the_others(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    for _ in range(4):
        enqueue(store, clock)
    claims = store.claim(worker_id="w", queues=None, limit=4, now=clock.now())
    leases = [c.lease for c in claims]
    stale = wrong(leases[1])
    items = [(leases[0], Outcome(Event.SUCCEED)), (stale, Outcome(Event.SUCCEED))] + [
        (lease, Outcome(Event.SUCCEED)) for lease in leases[2:]
    ]
    assert store.finish_many(items, clock.now()) == [True, False, True, True]
    statuses = {c.job.id: store.get_job(c.job.id) for c in claims}
    assert [statuses[lease.job_id].status for lease in leases] == [  # type: ignore[union-attr]
        JobStatus.SUCCEEDED,
        JobStatus.RUNNING,
        JobStatus.SUCCEEDED,
        JobStatus.SUCCEEDED,
    ]
    # and the batch after it is not held up either
    assert store.finish_many([(leases[1], Outcome(Event.SUCCEED))], clock.now()) == [True]


def test_the_reaper_expires_by_the_token_and_refuses_a_stale_one(
    store: Store, clock: ManualClock
) -> None:
    enqueue(store, clock, defaults=TaskDefaults(lease_seconds=10))
    _, lease = claim_one(store, clock)
    clock.advance(11)
    [expired] = store.expired_leases(clock.now(), 10)
    assert expired.lease == lease  # the token included
    lost = Outcome(Event.RETRY, due_at=clock.now(), attempt_status=AttemptStatus.LOST)
    assert not store.finish(wrong(expired.lease), lost, clock.now(), only_if_expired=True)
    assert store.finish(expired.lease, lost, clock.now(), only_if_expired=True)
    assert store.held_leases("w1") == []


def test_held_leases_carry_the_token(store: Store, clock: ManualClock) -> None:
    enqueue(store, clock)
    _, lease = claim_one(store, clock, "w7")
    assert store.held_leases("w7") == [lease]


def test_a_completion_with_a_wrong_token_rolls_back_and_changes_no_attempt(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    a, lease_a, _, _ = two_running(store, clock)
    before = attempt_rows(kit, store_url)
    with pytest.raises(StaleAttempt):
        with store.completion(wrong(lease_a), Outcome(Event.SUCCEED), clock.now):
            pass
    assert attempt_rows(kit, store_url) == before
    with store.completion(lease_a, Outcome(Event.SUCCEED), clock.now):
        pass
    done = store.get_job(a.id)
    assert done is not None and done.status is JobStatus.SUCCEEDED


def test_a_dispatched_attempt_is_accepted_only_by_its_token(
    store: Store, clock: ManualClock
) -> None:
    store.set_queue("q", clock.now(), dispatch=Dispatch.OUTBOX)
    job = enqueue(store, clock, queue="q")
    [event] = store.dispatch_outbox(clock.now(), 10, lease_seconds=300)
    assert event.claim_token is not None
    message = Dispatched.from_body(event.body())
    assert message.claim_token == event.claim_token
    # a message of an earlier version (no token) and one of a lost history (another token)
    # are refused
    assert (
        store.accept_dispatch(dataclasses.replace(message, claim_token=None), "w", clock.now())
        is None
    )
    other = dataclasses.replace(message, claim_token=(event.claim_token % MAX_TOKEN) + 1)
    assert store.accept_dispatch(other, "w", clock.now()) is None
    claim = store.accept_dispatch(message, "w", clock.now())
    assert claim is not None and claim.job.id == job.id
    assert claim.lease.claim_token == event.claim_token
    assert store.finish(claim.lease, Outcome(Event.SUCCEED), clock.now())


@pytest.mark.parametrize("status", list(JobStatus))
def test_jobs_in_every_state_survive_migration_14(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str, status: JobStatus
) -> None:
    """A database of schema 13 (no claim tokens) with a job in `status`: after migrate, the job
    reads as before, and a running one's lease (as the reaper or its worker's restart reads it
    from the store) finishes."""
    job, _ = job_in(store, clock, status)
    before = store.get_job(job.id)
    # the tables as schema 13 had them (no claim tokens), then migration 14 run as `migrate`
    # runs it (the migrations after 14 touch other columns and stay applied; migration 22's
    # view of every attempt names the tokens: it goes while they do, tests/schemas.py)
    lift, restore = schemas.attempt_guard(store)
    schemas.run_all(store, lift)
    for table in ("duetime_outbox", "duetime_attempts", "duetime_jobs"):
        kit.execute(store_url, f"ALTER TABLE {table} DROP COLUMN claim_token")
    driver = store.driver  # type: ignore[attr-defined]
    [m14] = [m for m in driver.migrations if m.version == 14]
    with driver.transaction() as c, driver.translated():
        c.run("schema_version")  # as migrate does first (SQLite re-reads the altered schema)
        driver.run_script(c.native, m14.script)
    schemas.run_all(store, restore)
    after = store.get_job(job.id)
    assert after is not None and before is not None
    assert dataclasses.replace(after, attempt_history=()) == dataclasses.replace(
        before, attempt_history=()
    )
    assert [(x.id, x.generation, x.status) for x in after.attempt_history] == [
        (x.id, x.generation, x.status) for x in before.attempt_history
    ]
    if status in (JobStatus.RUNNING, JobStatus.CANCEL_REQUESTED):
        [held] = store.held_leases("w1")
        assert held.claim_token is not None
        assert store.heartbeat([held], clock.now())[0].held
        clock.advance(timedelta(hours=1).total_seconds())
        [expired] = store.expired_leases(clock.now(), 10)
        assert expired.lease == held
        lost = Outcome(Event.RETRY, due_at=clock.now(), attempt_status=AttemptStatus.LOST)
        assert store.finish(expired.lease, lost, clock.now(), only_if_expired=True)
    # and the job claims and finishes under tokens from now on
    enqueue(store, clock)
    claims = store.claim(worker_id="w9", queues=None, limit=10, now=clock.now())
    assert claims and all(c.lease.claim_token for c in claims)
    assert store.finish_many([(c.lease, Outcome(Event.SUCCEED)) for c in claims], clock.now()) == [
        True
    ] * len(claims)


def test_a_claim_of_a_history_the_database_lost_is_fenced_out(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    """As after a lossy promotion: the claim the first worker holds is lost with the old
    primary's last commits (its attempt gone, the job scheduled at generation 0 again), so the
    next claim hands generation 1 out again. The first worker's heartbeat, outcome and
    completion are refused and change nothing; the second worker's apply."""
    enqueue(store, clock)
    job, lost = claim_one(store, clock, "old-primary-worker")
    kit.execute(store_url, "DELETE FROM duetime_attempts WHERE job_id = ?", (job.id,))
    kit.execute(
        store_url,
        "UPDATE duetime_jobs SET status = 'scheduled', generation = 0, attempts = 0, "
        "claim_token = NULL WHERE id = ?",
        (job.id,),
    )
    _, held = claim_one(store, clock, "new-primary-worker")
    assert (held.generation, held.job_id) == (lost.generation, lost.job_id) == (1, job.id)
    before = attempt_rows(kit, store_url)
    assert not store.heartbeat([lost], clock.now())[0].held
    with pytest.raises(StaleAttempt):
        with store.completion(lost, Outcome(Event.SUCCEED), clock.now):
            pass
    assert store.finish_many([(lost, Outcome(Event.SUCCEED))], clock.now()) == [False]
    assert attempt_rows(kit, store_url) == before
    assert store.finish(held, Outcome(Event.SUCCEED), clock.now())
    done = store.get_job(job.id)
    assert done is not None and done.status is JobStatus.SUCCEEDED
    assert [a.worker_id for a in done.attempt_history] == ["new-primary-worker"]


def test_a_batch_the_store_did_not_end_as_checked_is_kept_one_outcome_at_a_time(
    store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should the finish statement ever end fewer attempts than the checks under the row locks
    said (it cannot, as far as anyone knows), the batch is rolled back and each outcome is
    tried alone: the ones that hold are kept, and the batch is never wedged."""
    from duetime.store.driver import Connection

    for _ in range(3):
        enqueue(store, clock)
    claims = store.claim(worker_id="w", queues=None, limit=3, now=clock.now())
    bad = claims[1].job.id
    real_run = Connection.run

    def short_count(self: Connection, name: str, /, **params: Any) -> int:
        ended = real_run(self, name, **params)
        if name == "finish_jobs" and any(m["job_id"] == bad for m in params["batch"]):
            return ended - 1  # as if the attempt of job `bad` had not ended
        return ended

    monkeypatch.setattr(Connection, "run", short_count)
    # the long way (lock_jobs, then finish_jobs): PostgreSQL's held batch is one statement,
    # which rolls back by itself when fewer jobs moved than it sent (test_batches.py)
    monkeypatch.setattr(store.driver, "finishes_held", False)  # type: ignore[attr-defined]
    items = [(c.lease, Outcome(Event.SUCCEED)) for c in claims]
    assert store.finish_many(items, clock.now()) == [True, False, True]
    monkeypatch.undo()
    got = [store.get_job(c.job.id) for c in claims]
    assert [j.status for j in got if j is not None] == [
        JobStatus.SUCCEEDED,
        JobStatus.RUNNING,
        JobStatus.SUCCEEDED,
    ]
    assert store.finish(claims[1].lease, Outcome(Event.SUCCEED), clock.now())
