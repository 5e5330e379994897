"""A paused worker comes back after another worker finished its job: its late outcome is fenced
out (the job keeps generation 2's result) and recorded on its lost attempt."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from conftest import STORE_KINDS
from duetime import App, AttemptStatus, ErrorCategory, JobStatus
from integration.procs import Processes, WorkerProcess, job_row_unlocked, wait_until
from kit import DialectKit, kit_named


@pytest.fixture(params=STORE_KINDS)
def kit(request: pytest.FixtureRequest) -> DialectKit:
    """Every registered dialect (the integration suite's default is sqlite and postgres)."""
    return kit_named(request.param)


LEASE_S = 2.0  # the lease of slow.first_attempt


def pause_between_transactions(worker: WorkerProcess, db_url: str, job_id: int) -> int:
    """SIGSTOP `worker` at a moment it holds no database lock on the job; return tries used.

    A process stopped inside a transaction would keep its lock (SQLite: the whole database)
    and block every other worker: that is not the situation under test.
    """
    for tries in range(1, 21):
        worker.stop()
        if job_row_unlocked(db_url, job_id):
            return tries
        worker.cont()
    raise AssertionError(f"{worker.name} held a lock on job {job_id} each time it was stopped")


def test_paused_worker_outcome_is_rejected_as_stale(
    db_url: str, procs: Processes, app: App
) -> None:
    # attempt 1 sleeps 5 s: mid-execution when paused, and still running after SIGCONT
    job = app.enqueue("slow.first_attempt", {"seconds": 5})
    assert job.lease_seconds == LEASE_S

    a = procs.worker(db_url, name="A")
    started_1 = procs.out_dir / f"started-{job.id}-1"
    wait_until(
        lambda: a.alive() and started_1.exists(),
        30,
        lambda: f"attempt 1 never started in A\n{a.tail()}",
    )
    pause_between_transactions(a, db_url, job.id)
    assert app.get_job(job.id).status is JobStatus.RUNNING
    assert not (procs.out_dir / f"finished-{job.id}-1").exists(), "attempt 1 ended too early"

    # A cannot renew its lease while stopped; wait until the store sees it lapse
    lease_end = app.get_job(job.id).attempt_history[0].lease_expires_at
    wait_until(
        lambda: datetime.now(UTC) > lease_end,
        LEASE_S + 5,
        f"attempt 1's lease (until {lease_end}) did not lapse",
    )

    # B's reaper runs at start-up: it returns the job, and B runs attempt 2 to success
    b = procs.worker(db_url, name="B")
    done = wait_until(
        lambda: b.alive() and (j := app.get_job(job.id)).status is JobStatus.SUCCEEDED and j,
        30,
        lambda: f"B did not finish the job: {app.get_job(job.id).to_json()}\n{b.tail()}",
        interval=0.1,
    )
    assert done.generation == 2
    b.wait_event("attempt.lost", 5, job_id=job.id, generation=1)
    assert a.state() in ("T", "t"), "A must still be paused while B takes the job over"

    # A resumes, its handler finishes attempt 1, and its outcome is refused
    a.cont()
    rejected = a.wait_event("outcome.rejected_stale", 30, job_id=job.id, generation=1)
    assert json.loads((procs.out_dir / f"finished-{job.id}-1").read_text())["pid"] == a.pid
    assert a.events("job.succeeded", job_id=job.id) == [], "A must not claim the success"

    final = app.get_job(job.id)
    assert final.status is JobStatus.SUCCEEDED
    assert final.generation == 2 and final.version == done.version
    assert final.updated_at == done.updated_at, "the stale report must not touch the job"
    first, second = final.attempt_history
    assert first.generation == 1 and first.status is AttemptStatus.LOST, first
    assert first.error_category is ErrorCategory.LEASE_EXPIRED, first
    assert first.late_outcome == "succeeded", first
    assert rejected["outcome"] == first.late_outcome, rejected
    assert first.late_reported_at is not None and first.late_reported_at > done.updated_at
    assert second.generation == 2 and second.status is AttemptStatus.SUCCEEDED, second
    assert f":{b.pid}:" in second.worker_id

    for w in (a, b):
        assert w.terminate_and_wait() == 0, w.tail()
    stopped = a.events("worker.stopped")
    assert stopped and stopped[0]["stale_rejected"] == 1 and stopped[0]["succeeded"] == 0, stopped
