"""Migration 22 (attempts written once, docs/stores.md "Attempts"), on every dialect. A
database at schema 21 holds jobs in every state, written as version 21 wrote them (a 'running'
attempt row inserted at the claim, updated at the end: the raw statements below, since this
version's statements write the new storage). After the migration nothing is lost, every
attempt reads as before (the running ones from their jobs' rows), the running attempts are
renewed, finished and reaped by this version, a dispatched one is accepted by its worker, and
a worker of version 21 can no longer claim."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import schemas
from duetime.core.clock import ManualClock
from duetime.core.models import Lease, Outcome
from duetime.core.outbox import DISPATCH_HOLDER, Dispatch, Dispatched
from duetime.core.states import AttemptStatus, Event, JobStatus
from duetime.runtime.reaper import Reaper
from duetime.store.base import Store
from jobhelpers import enqueue
from kit import DialectKit

ATTEMPT = (
    "id, job_id, generation, worker_id, status, lease_expires_at, started_at, finished_at, "
    "error_category, error_message, late_outcome, late_reported_at, due_at, claim_token"
)
JOB = "id, status, generation, claim_token, attempts, version, due_at, cancel_requested_at"


@pytest.fixture
def at_21(kit: DialectKit, tmp_path: Path) -> Iterator[tuple[Store, str]]:
    """A store on a database of schema 21 (nothing run ahead: 22 is the last migration)."""
    with schemas.store_before(kit, tmp_path, 22) as (store, url):
        yield store, url


class Version21:
    """What a worker and relay of version 21 wrote: raw statements, on any dialect."""

    def __init__(self, kit: DialectKit, url: str, clock: ManualClock) -> None:
        self.kit, self.url, self.clock = kit, url, clock
        self.tokens = 1000

    def sql(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        return self.kit.execute(self.url, statement, params)

    def at(self, seconds: float = 0) -> Any:
        return self.kit.instant(self.clock.now() + timedelta(seconds=seconds))

    def claim(self, job_id: int, worker: str, lease: float = 30) -> Lease:
        self.tokens += 1
        self.sql(
            "UPDATE duetime_jobs SET status = 'running', generation = generation + 1, "
            "claim_token = ?, attempts = attempts + 1, updated_at = ? WHERE id = ?",
            self.tokens,
            self.at(),
            job_id,
        )
        self.sql(
            "INSERT INTO duetime_attempts (job_id, generation, claim_token, worker_id, status, "
            "lease_expires_at, started_at, due_at) SELECT id, generation, claim_token, ?, "
            "'running', ?, ?, due_at FROM duetime_jobs WHERE id = ?",
            worker,
            self.at(lease),
            self.at(),
            job_id,
        )
        [(attempt_id, generation)] = self.sql(
            "SELECT id, generation FROM duetime_attempts WHERE job_id = ? AND status = 'running'",
            job_id,
        )
        return Lease(job_id, attempt_id, generation, self.tokens)

    def finish(self, job_id: int, job_status: str, attempt_status: str) -> None:
        self.sql("UPDATE duetime_jobs SET status = ? WHERE id = ?", job_status, job_id)
        self.sql(
            "UPDATE duetime_attempts SET status = ?, finished_at = ?, error_category = ? "
            "WHERE job_id = ? AND status = 'running'",
            attempt_status,
            self.at(),
            None if attempt_status == "succeeded" else "permanent",
            job_id,
        )

    def dispatch(self, job_id: int) -> Lease:
        lease = self.claim(job_id, DISPATCH_HOLDER, lease=300)
        self.sql(
            "INSERT INTO duetime_outbox (job_id, attempt_id, queue, task, generation, version, "
            "created_at, claim_token) SELECT j.id, a.id, j.queue, j.task, j.generation, "
            "j.version, ?, a.claim_token FROM duetime_jobs j JOIN duetime_attempts a "
            "ON a.job_id = j.id AND a.status = 'running' WHERE j.id = ?",
            self.at(),
            job_id,
        )
        return lease


def test_jobs_in_every_state_survive_migration_22(
    at_21: tuple[Store, str], clock: ManualClock, kit: DialectKit
) -> None:
    store, url = at_21
    old = Version21(kit, url, clock)
    scheduled = enqueue(store, clock)
    running = enqueue(store, clock)
    live = old.claim(running.id, "w1")
    short = enqueue(store, clock)
    expiring = old.claim(short.id, "w1", lease=1)
    cancelling = enqueue(store, clock)
    asked = old.claim(cancelling.id, "w2")
    old.sql(
        "UPDATE duetime_jobs SET status = 'cancel_requested', cancel_requested_at = ? WHERE id = ?",
        old.at(),
        cancelling.id,
    )
    done = enqueue(store, clock)
    old.claim(done.id, "w1")
    old.finish(done.id, "succeeded", "succeeded")
    dead = enqueue(store, clock)  # twice failed: two attempts in its history
    old.claim(dead.id, "w1")
    old.finish(dead.id, "scheduled", "failed")
    old.claim(dead.id, "w2")
    old.finish(dead.id, "dead", "failed")
    store.set_queue("broker", clock.now(), dispatch=Dispatch.OUTBOX)
    sent = enqueue(store, clock, queue="broker")
    dispatched = old.dispatch(sent.id)
    ids = [scheduled.id, running.id, short.id, cancelling.id, done.id, dead.id, sent.id]
    jobs_before = old.sql(f"SELECT {JOB} FROM duetime_jobs ORDER BY id")
    attempts_before = old.sql(f"SELECT {ATTEMPT} FROM duetime_attempts ORDER BY id")
    assert len(attempts_before) == 7
    events_before = old.sql("SELECT id, job_id, attempt_id FROM duetime_outbox")

    assert store.migrate() == [22, 24, 26, 27, 29]  # they build on 22 (tests/schemas.py)

    # nothing lost: the jobs as they were, every attempt as it was (running ones on their jobs)
    assert old.sql(f"SELECT {JOB} FROM duetime_jobs ORDER BY id") == jobs_before
    assert old.sql(f"SELECT {ATTEMPT} FROM duetime_all_attempts ORDER BY id") == attempts_before
    assert old.sql("SELECT id, job_id, attempt_id FROM duetime_outbox") == events_before
    ended = old.sql("SELECT id FROM duetime_attempts ORDER BY id")
    assert len(ended) == 3  # the running attempts' rows moved onto their jobs
    history = {i: store.get_job(i) for i in ids}
    assert all(job is not None for job in history.values())
    assert [a.status for a in history[dead.id].attempt_history] == [AttemptStatus.FAILED] * 2  # type: ignore[union-attr]
    assert history[running.id].attempt_history[0].id == live.attempt_id  # type: ignore[union-attr]
    assert history[sent.id].dispatched_at is not None  # type: ignore[union-attr]

    # the running attempts are found, renewed, finished and reaped by this version
    assert store.held_leases("w1") == [live, expiring]
    assert store.held_leases("w2") == [asked]
    clock.advance(5)
    [renewed] = store.heartbeat([live], clock.now())
    assert renewed.held and renewed.lease_expires_at == clock.now() + timedelta(seconds=30)
    [cancel] = store.heartbeat([asked], clock.now())
    assert cancel.held and cancel.cancel_requested
    assert Reaper(store, clock).run_once().reaped == 1  # the 1-second lease, not the others
    assert store.finish(live, Outcome(Event.SUCCEED), clock.now())
    assert store.finish(asked, Outcome(Event.STOP), clock.now())
    statuses = {i: store.get_job(i).status for i in ids}  # type: ignore[union-attr]
    assert statuses[running.id] is JobStatus.SUCCEEDED
    assert statuses[cancelling.id] is JobStatus.CANCELLED
    assert statuses[short.id] is JobStatus.SCHEDULED
    rows = dict(old.sql("SELECT id, status FROM duetime_attempts"))
    # a success stays on its job's row (migration 24; MariaDB/MySQL write its row)
    assert rows.get(live.attempt_id) == (None if kit.successes_on_rows else "succeeded")
    assert store.get_job(running.id).attempt_history[-1].status is AttemptStatus.SUCCEEDED  # type: ignore[union-attr]
    assert rows[asked.attempt_id] == "cancelled"
    assert rows[expiring.attempt_id] == "lost"

    # the dispatched attempt: its event published, then accepted by a worker
    assert store.mark_published([events_before[0][0]], clock.now(), 300) == 1
    message = Dispatched(
        events_before[0][0],
        sent.id,
        dispatched.attempt_id,
        "broker",
        sent.task,
        dispatched.generation,
        sent.version,
        dispatched.claim_token,
    )
    claim = store.accept_dispatch(message, "w3", clock.now())
    assert claim is not None and claim.lease == dispatched
    assert store.finish(claim.lease, Outcome(Event.SUCCEED), clock.now())
    after = store.get_job(sent.id)
    assert after is not None and [a.worker_id for a in after.attempt_history] == ["w3"]

    # a worker of version 21 cannot claim any more: its attempt insert is refused
    with pytest.raises(Exception, match=r"(?i)ended.only|upgrade|running"):
        old.claim(scheduled.id, "old-worker")


def test_the_refusal_of_old_workers_does_not_scan_the_attempts_on_postgres(
    at_21: tuple[Store, str], kit: DialectKit
) -> None:
    """Migration 22 marks every 'running' attempt row it leaves lost before it adds its CHECK
    (status <> 'running'): every row meets it, so the CHECK is added NOT VALID (as migration
    20's), without a read of the whole attempts table under its exclusive lock; new rows are
    checked all the same."""
    if kit.name != "postgres":
        pytest.skip("NOT VALID constraints are PostgreSQL's (MariaDB/MySQL: docs/stores.md)")
    store, url = at_21
    assert store.migrate() == [22, 24, 26, 27, 29]  # they build on 22 (tests/schemas.py)
    [(validated,)] = kit.execute(
        url,
        "SELECT convalidated FROM pg_constraint "
        "WHERE conname = 'duetime_attempts_ended_only_upgrade_every_worker'",
    )
    assert validated is False
    enqueue(store, ManualClock())
    with pytest.raises(Exception, match="upgrade_every_worker"):
        kit.execute(
            url,
            "INSERT INTO duetime_attempts (job_id, generation, claim_token, worker_id, status, "
            "lease_expires_at, started_at) "
            "SELECT id, 1, 1, 'old', 'running', due_at, due_at FROM duetime_jobs",
        )
