"""Migration 24 (a success stays on its job's row, docs/stores.md "Attempts"), on every
dialect. A database at schema 23 holds jobs in every state; its successes were written as
version 23 wrote them (the attempt's row inserted at the end, the job's attempt columns
cleared: the raw statements below, since this version's finish keeps a success on its row).
After the migration every job and every attempt reads as before; a job running across the
migration that succeeds under this version leaves no attempt row (but on MariaDB/MySQL,
whose migration 24 changes nothing: docs/stores.md); and a worker of version 23 still running
after the migration writes its success the old way, which reads once, as it did."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import history
import schemas
from duetime.core.clock import ManualClock
from duetime.core.models import Lease, Outcome
from duetime.core.states import AttemptStatus, Event, JobStatus
from duetime.store.base import Store
from jobhelpers import job_in
from kit import DialectKit


@pytest.fixture
def at_23(kit: DialectKit, tmp_path: Path) -> Iterator[tuple[Store, str]]:
    """A store on a database of schema 23 (26 builds on 24: not run ahead)."""
    with schemas.store_before(kit, tmp_path, 24) as (store, url):
        yield store, url


def version_23_success(kit: DialectKit, url: str, clock: ManualClock, lease: Lease) -> None:
    """What a worker of version 23 wrote for a success: the attempt's row, then the job's
    move with its attempt columns cleared (fenced as its finish was)."""
    at = kit.instant(clock.now())
    kit.execute(
        url,
        "INSERT INTO duetime_attempts (id, job_id, generation, claim_token, worker_id, status, "
        "lease_expires_at, started_at, finished_at, due_at) SELECT attempt_id, id, generation, "
        "claim_token, worker_id, 'succeeded', lease_expires_at, started_at, ?, due_at "
        "FROM duetime_jobs WHERE id = ? AND generation = ? AND claim_token = ? "
        "AND attempt_id IS NOT NULL",
        (at, lease.job_id, lease.generation, lease.claim_token),
    )
    kit.execute(
        url,
        "UPDATE duetime_jobs SET status = 'succeeded', updated_at = ?, attempt_id = NULL, "
        "worker_id = NULL, lease_expires_at = NULL, started_at = NULL, late_outcome = NULL, "
        "late_reported_at = NULL WHERE id = ? AND generation = ? AND claim_token = ?",
        (at, lease.job_id, lease.generation, lease.claim_token),
    )


def attempt_rows(kit: DialectKit, url: str, job_id: int) -> list[tuple[object, ...]]:
    return kit.execute(
        url, "SELECT id, status FROM duetime_attempts WHERE job_id = ? ORDER BY id", (job_id,)
    )


def test_jobs_in_every_state_survive_migration_24(
    at_23: tuple[Store, str], clock: ManualClock, kit: DialectKit
) -> None:
    store, url = at_23
    ids = []
    # every job keyed: one that ends stays where schema 23's keys (which cascade a deletion)
    # reach it, whichever job a claim of job_in takes
    for status in JobStatus:
        if status is JobStatus.SUCCEEDED:
            job, lease = job_in(store, clock, JobStatus.RUNNING, key="kept-succeeded")
            assert lease is not None
            clock.advance(1)
            version_23_success(kit, url, clock, lease)
        else:
            job, _ = job_in(store, clock, status, key=f"kept-{status}")
        ids.append(job.id)
    across, across_lease = job_in(store, clock, JobStatus.RUNNING)
    old_worker, old_lease = job_in(store, clock, JobStatus.RUNNING)
    assert across_lease is not None and old_lease is not None
    ids += [across.id, old_worker.id]
    before = {i: store.get_job(i) for i in ids}
    assert {history.table_of(kit, url, i) for i in ids} == {"duetime_jobs"}
    succeeded = [j for j in before.values() if j is not None and j.status is JobStatus.SUCCEEDED]
    assert [[a.status for a in j.attempt_history] for j in succeeded] == [[AttemptStatus.SUCCEEDED]]

    assert store.migrate() == [24, 26, 29]  # 26 and 29 build on 24 (tests/schemas.py)

    # nothing lost: every job and its attempts read as they did
    assert {i: store.get_job(i) for i in ids} == before

    # a job claimed before the migration succeeds under this version: on its row, no row
    clock.advance(2)
    assert store.finish(across_lease, Outcome(Event.SUCCEED), clock.now())
    written = [(across_lease.attempt_id, "succeeded")]
    assert attempt_rows(kit, url, across.id) == ([] if kit.successes_on_rows else written)
    done = store.get_job(across.id)
    assert done is not None
    [attempt] = done.attempt_history
    assert (attempt.id, attempt.status) == (across_lease.attempt_id, AttemptStatus.SUCCEEDED)
    assert attempt.finished_at == clock.now() and attempt.worker_id is not None

    # a worker of version 23 that still runs writes its success the old way: it reads once
    version_23_success(kit, url, clock, old_lease)
    assert attempt_rows(kit, url, old_worker.id) == [(old_lease.attempt_id, "succeeded")]
    old = store.get_job(old_worker.id)
    assert old is not None and old.status is JobStatus.SUCCEEDED
    [attempt] = old.attempt_history
    assert (attempt.id, attempt.status) == (old_lease.attempt_id, AttemptStatus.SUCCEEDED)
    assert attempt.finished_at == clock.now()
