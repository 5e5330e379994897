"""Migration 20 (dependencies, docs/workflows.md), on every dialect: a database of the schema
before it, with jobs in every status of that schema and their attempts, migrates with nothing
lost (SQLite's status constraint is widened in place: no attempt goes with a rebuilt table),
the constraint still refuses an unknown status, and the migrated store runs dependencies: a
child of a job running before the migration is released when that job's worker finishes it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import schemas
from duetime.core.clock import ManualClock
from duetime.core.models import JobFilter, Outcome
from duetime.core.states import Event, JobStatus
from duetime.store.base import Store
from jobhelpers import enqueue, job_in
from kit import DialectKit


@pytest.fixture
def before_20(kit: DialectKit, tmp_path: Path) -> Iterator[tuple[Store, str]]:
    with schemas.store_before(kit, tmp_path, 20) as (store, url):
        yield store, url


def test_jobs_survive_migration_20_and_dependencies_work(
    before_20: tuple[Store, str], clock: ManualClock, kit: DialectKit
) -> None:
    store, url = before_20
    # this version's enqueue, claim and cancel request write what version 19's wrote; the jobs
    # that ended are ended by hand (this version's finish reads the new columns). The claim
    # returns two of the columns of the jobs' table that migration 20 adds (store/rows.py
    # CLAIMED_COLUMNS), and a read or a listing of jobs names all five (the part job_columns,
    # which reads the history table alike): none is written, they are lent to the table while this
    # version writes and reads its jobs, and dropped again before the migration
    lent = {
        "has_children": "INTEGER",
        "on_parent_failure": "TEXT",
        "parents_left": "INTEGER",
        "release_delay": "REAL",
        "cancel_reason": "TEXT",
    }
    for column, kind in lent.items():
        kit.execute(url, f"ALTER TABLE duetime_jobs ADD COLUMN {column} {kind}")
    jobs = {s: job_in(store, clock, s) for s in (JobStatus.WAITING, JobStatus.CANCEL_REQUESTED)}
    jobs[JobStatus.RUNNING] = job_in(store, clock, JobStatus.RUNNING)
    running, lease = jobs[JobStatus.RUNNING]
    assert lease is not None
    ended = {
        JobStatus.SUCCEEDED: "succeeded",
        JobStatus.DEAD: "failed",
        JobStatus.PARKED: "parked",
    }
    for status, attempt in ended.items():
        job, held = job_in(store, clock, JobStatus.RUNNING)
        assert held is not None
        kit.execute(url, "UPDATE duetime_jobs SET status = ? WHERE id = ?", (str(status), job.id))
        # its attempt ends as migration 22 (run ahead here) stores it: a row, from its job's
        kit.execute(
            url,
            "INSERT INTO duetime_attempts (id, job_id, generation, claim_token, worker_id, "
            "status, lease_expires_at, started_at, due_at) SELECT attempt_id, id, generation, "
            "claim_token, worker_id, ?, lease_expires_at, started_at, due_at FROM duetime_jobs "
            "WHERE id = ?",
            (attempt, job.id),
        )
        kit.execute(
            url,
            "UPDATE duetime_jobs SET attempt_id = NULL, worker_id = NULL, "
            "lease_expires_at = NULL, started_at = NULL WHERE id = ?",
            (job.id,),
        )
        jobs[status] = (job, held)
    for status in (JobStatus.CANCELLED, JobStatus.EXPIRED, JobStatus.SCHEDULED):
        job = enqueue(store, clock)
        kit.execute(url, "UPDATE duetime_jobs SET status = ? WHERE id = ?", (str(status), job.id))
        jobs[status] = (job, None)
    assert set(jobs) == set(JobStatus) - {JobStatus.BLOCKED}
    # read as a listing (which reads the lent columns too)
    listed = JobFilter(with_attempts=True, limit=100)
    before = store.list_jobs(listed)
    assert len(before) == len(jobs)
    for column in lent:
        kit.execute(url, f"ALTER TABLE duetime_jobs DROP COLUMN {column}")
    # every attempt, the running ones on their jobs' rows (migration 22, run ahead here)
    attempts = kit.execute(url, "SELECT COUNT(*) FROM duetime_all_attempts")[0][0]
    assert attempts >= 4

    assert store.migrate() == [20, 26, 27]  # 26 and 27 build on 20 (tests/schemas.py)

    after = store.list_jobs(listed)
    assert after == before
    assert [j.attempt_history for j in after] == [j.attempt_history for j in before]
    assert kit.execute(url, "SELECT COUNT(*) FROM duetime_all_attempts")[0][0] == attempts
    with pytest.raises(Exception, match=r"(?i)check|constraint"):
        kit.execute(url, "UPDATE duetime_jobs SET status = 'bogus' WHERE id = ?", (running.id,))
    child = enqueue(store, clock, depends_on=[running.id])
    assert child.status is JobStatus.BLOCKED
    assert store.finish(lease, Outcome(Event.SUCCEED), clock.now())
    got = store.get_job(child.id)
    assert got is not None and got.status is JobStatus.SCHEDULED
