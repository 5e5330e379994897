"""A worker killed mid-job: its lease lapses, another worker's reaper returns the job, and the
job runs again and succeeds; the history shows the lost attempt and the one that succeeded."""

from __future__ import annotations

import json
import signal

from duetime import App, AttemptStatus, ErrorCategory, JobStatus
from integration.procs import Processes, wait_until

LEASE_S = 2.0  # the lease of slow.first_attempt
REAP_INTERVAL = "0.5s"  # B's reaper: at start-up, then this often (the default is 5 s)


def test_sigkilled_worker_job_is_reaped_and_run_again(
    db_url: str, procs: Processes, app: App
) -> None:
    job = app.enqueue("slow.first_attempt", {"seconds": 30})
    assert job.lease_seconds == LEASE_S

    a = procs.worker(db_url, name="A")
    started_1 = procs.out_dir / f"started-{job.id}-1"
    wait_until(
        lambda: a.alive() and started_1.exists(),
        30,
        lambda: f"attempt 1 never started in A\n{a.tail()}",
    )
    assert json.loads(started_1.read_text())["pid"] == a.pid
    running = app.get_job(job.id)
    assert running.status is JobStatus.RUNNING and running.generation == 1

    a.send(signal.SIGKILL)
    assert a.wait_exit(10) == -signal.SIGKILL

    b = procs.worker(db_url, "--reap-interval", REAP_INTERVAL, name="B")
    timeout = LEASE_S + 20
    done = wait_until(
        lambda: b.alive() and (j := app.get_job(job.id)).status is JobStatus.SUCCEEDED and j,
        timeout,
        lambda: f"job not succeeded: {app.get_job(job.id).to_json()}\n{b.tail()}",
        interval=0.1,
    )

    assert done.generation == 2 and done.attempts == 2
    first, second = done.attempt_history
    assert (first.generation, first.status, first.error_category) == (
        1,
        AttemptStatus.LOST,
        ErrorCategory.LEASE_EXPIRED,
    ), first
    assert f":{a.pid}:" in first.worker_id, (first.worker_id, a.pid)
    assert first.finished_at is not None and first.finished_at >= first.lease_expires_at
    assert first.late_outcome is None  # A died: it never reported
    assert (second.generation, second.status, second.error_category) == (
        2,
        AttemptStatus.SUCCEEDED,
        None,
    ), second
    assert f":{b.pid}:" in second.worker_id, (second.worker_id, b.pid)

    # B's reaper recorded the loss, B ran attempt 2 (the handler saw attempt 2, generation 2)
    lost = b.wait_event("attempt.lost", 5, job_id=job.id, generation=1)
    assert lost["next"] == "retry", lost
    b.wait_event("job.succeeded", 5, job_id=job.id, generation=2)
    finished_2 = json.loads((procs.out_dir / f"finished-{job.id}-2").read_text())
    assert finished_2 == {"pid": b.pid, "generation": 2, "attempt": 2}
    assert not (procs.out_dir / f"finished-{job.id}-1").exists(), "A's attempt cannot finish"

    assert b.terminate_and_wait() == 0
    assert b.problems() == [], "\n".join(b.problems())
