"""Migration 17 (docs/performance.md, "Bytes per job"), on every dialect: the index on the
running attempts' lease goes, and every read of running attempts reaches them through their
jobs. A database of schema 16 with jobs in every state, running ones holding live and expired
leases and a dispatched one, migrates to 17 with nothing lost; the history reads as before,
the running attempts' workers renew and finish them, a lease without a token is refused, the
reaper reaps the expired lease, and an attempt marked running that its job no longer holds
(left by a hand edit) is recorded lost."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

import schemas
from duetime.core.clock import ManualClock
from duetime.core.models import Job, Lease, Outcome
from duetime.core.outbox import Dispatch, Dispatched
from duetime.core.requests import TaskDefaults
from duetime.core.retry import ErrorCategory
from duetime.core.states import AttemptStatus, Event, JobStatus
from duetime.runtime.reaper import Reaper
from duetime.store.base import Store
from jobhelpers import claim_one, enqueue, job_in
from kit import DialectKit

# a job's row without the attempt it ran (migration 22's columns), as after its end
UNHELD = (
    "UPDATE duetime_jobs SET attempt_id = NULL, worker_id = NULL, lease_expires_at = NULL, "
    "started_at = NULL WHERE id = ?"
)


@pytest.fixture
def at_16(kit: DialectKit, tmp_path: Path) -> Iterator[tuple[Store, str]]:
    """A store on a database of schema 16 (migrations 1 to 16 as `migrate` runs them, and
    the later ones after 17 ahead: tests/schemas.py). The rows below are written by this
    version's statements; the ones that write them (enqueue, claim, finish, dispatch) write the
    same columns as version 16's and those of the migrations run ahead."""
    with schemas.store_before(kit, tmp_path, 17) as (store, url):
        yield store, url


def test_jobs_in_every_state_survive_migration_17(
    at_16: tuple[Store, str], clock: ManualClock, kit: DialectKit
) -> None:
    store, url = at_16
    # held jobs first (each claim takes the one due job), then the ones never claimed
    held: dict[str, tuple[Job, Lease]] = {}
    for status in (JobStatus.RUNNING, JobStatus.CANCEL_REQUESTED):
        job, lease = job_in(store, clock, status)
        assert lease is not None
        held[status] = (job, lease)
    ended = [job_in(store, clock, s)[0] for s in (JobStatus.SUCCEEDED, JobStatus.DEAD)]
    ended.append(job_in(store, clock, JobStatus.PARKED)[0])
    enqueue(store, clock, defaults=TaskDefaults(lease_seconds=1))  # its lease will expire
    short_job, short = claim_one(store, clock, "w2")
    enqueue(store, clock)  # a retry waiting with its failed attempt in its history
    retried, lease = claim_one(store, clock, "w3")
    failed = Outcome(Event.RETRY, due_at=clock.now() + timedelta(hours=1))
    assert store.finish(lease, failed, clock.now())
    enqueue(store, clock)  # an attempt its job no longer holds (a hand edit)
    orphaned, orphan = claim_one(store, clock, "w4")
    kit.execute(url, "UPDATE duetime_jobs SET status = 'dead' WHERE id = ?", (orphaned.id,))
    # its attempt stored as schema 16 stored a running one (a row, status running), which
    # migration 22 (run ahead here, tests/schemas.py) refuses until it is put back below
    lift, restore = schemas.attempt_guard(store, view=False)
    schemas.run_all(store, lift)
    kit.execute(
        url,
        "INSERT INTO duetime_attempts (id, job_id, generation, claim_token, worker_id, status, "
        "lease_expires_at, started_at, due_at) SELECT attempt_id, id, generation, claim_token, "
        "worker_id, 'running', lease_expires_at, started_at, due_at FROM duetime_jobs "
        "WHERE id = ?",
        (orphaned.id,),
    )
    kit.execute(url, UNHELD, (orphaned.id,))
    store.set_queue("q", clock.now(), dispatch=Dispatch.OUTBOX)  # two dispatched attempts
    dispatched = [enqueue(store, clock, queue="q") for _ in range(2)]
    events = store.dispatch_outbox(clock.now(), 10, lease_seconds=300)
    assert sorted(e.job_id for e in events) == sorted(j.id for j in dispatched)
    rest = [job_in(store, clock, s)[0] for s in (JobStatus.EXPIRED, JobStatus.WAITING)]
    rest += [job_in(store, clock, s)[0] for s in (JobStatus.SCHEDULED, JobStatus.CANCELLED)]
    ids = [j.id for j, _ in held.values()] + [j.id for j in ended + rest + dispatched]
    ids += [short_job.id, retried.id, orphaned.id]
    before = {i: store.get_job(i) for i in ids}
    # every status of schema 16 (blocked came with migration 20)
    assert {j.status for j in before.values() if j is not None} == set(JobStatus) - {
        JobStatus.BLOCKED
    }

    assert store.migrate() == [17]
    schemas.run_all(store, restore)

    after = {i: store.get_job(i) for i in ids}
    for i in ids:  # every job and its history as before; the orphaned attempt is lost
        if i != orphaned.id:
            assert after[i] == before[i]
    gone, was = after[orphaned.id], before[orphaned.id]
    assert gone is not None and was is not None
    assert dataclasses.replace(gone, attempt_history=()) == dataclasses.replace(
        was, attempt_history=()
    )
    [lost] = gone.attempt_history
    assert (lost.status, lost.error_category) == (AttemptStatus.LOST, ErrorCategory.LEASE_EXPIRED)
    # at its lease's end, or at the migration if that end is still to come: never in the future
    assert lost.finished_at is not None and lost.finished_at <= lost.lease_expires_at
    assert store.held_leases("w4") == []
    assert not store.heartbeat([orphan], clock.now())[0].held
    # the running attempts are found, renewed and finished by their workers
    (running, live), (cancelling, asked) = held.values()
    assert store.held_leases("w1") == [live, asked]
    states = store.heartbeat([live, asked], clock.now())
    assert [(s.held, s.cancel_requested) for s in states] == [(True, False), (True, True)]
    tokenless = dataclasses.replace(live, claim_token=None)  # a worker of before migration 14
    assert not store.heartbeat([tokenless], clock.now())[0].held
    assert not store.finish(tokenless, Outcome(Event.SUCCEED), clock.now())
    # the reaper finds the expired lease, and only it (the dispatched ones' events are
    # unpublished: no lease runs for them yet)
    assert [e.lease for e in store.expired_leases(clock.now(), 100)] == [short]
    assert Reaper(store, clock).run_once().reaped == 1
    reaped = store.get_job(short_job.id)
    assert reaped is not None and reaped.status is JobStatus.SCHEDULED
    assert [a.status for a in reaped.attempt_history] == [AttemptStatus.LOST]
    assert store.finish(live, Outcome(Event.SUCCEED), clock.now())
    assert store.finish(asked, Outcome(Event.STOP), clock.now())
    # a dispatched attempt is accepted and finished; the other is withdrawn by a cancel
    message = Dispatched.from_body(next(e for e in events if e.job_id == dispatched[0].id).body())
    claim = store.accept_dispatch(message, "w5", clock.now())
    assert claim is not None and claim.job.id == dispatched[0].id
    assert store.held_leases("w5") == [claim.lease]
    assert store.finish(claim.lease, Outcome(Event.SUCCEED), clock.now())
    cancelled = store.transition(dispatched[1].id, Event.CANCEL, clock.now())
    assert cancelled.status is JobStatus.CANCELLED and cancelled.attempt_history == ()
    final = {i: store.get_job(i) for i in (running.id, cancelling.id, dispatched[0].id)}
    assert [j.status for j in final.values() if j is not None] == [
        JobStatus.SUCCEEDED,
        JobStatus.CANCELLED,
        JobStatus.SUCCEEDED,
    ]
    assert store.held_leases("w1") == [] and store.expired_leases(clock.now(), 100) == []
    # and jobs claim, renew and finish as before
    enqueue(store, clock)
    claims = store.claim(worker_id="w9", queues=None, limit=10, now=clock.now())
    assert len(claims) == 2  # the scheduled job of before, and this one
    assert all(s.held for s in store.heartbeat([c.lease for c in claims], clock.now()))
    assert store.finish_many([(c.lease, Outcome(Event.SUCCEED)) for c in claims], clock.now()) == [
        True
    ] * len(claims)
