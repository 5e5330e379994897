"""The timer starts delayed jobs on their due instant, never before it, in a real worker whose
poll interval is far longer than the test; a cancel or a reschedule that lands before the
instant wins."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from duetime import App, JobStatus
from integration.procs import Processes, wait_until

POLL = "30s"  # only wake-ups and the timer can start these jobs in time


def ontime(out: Path) -> dict[int, dict[str, float]]:
    return {int(p.name.split("-")[1]): json.loads(p.read_text()) for p in out.glob("ontime-*")}


def test_delayed_jobs_start_on_their_instant_and_never_before(
    db_url: str, procs: Processes, app: App
) -> None:
    worker = procs.worker(db_url, "--concurrency", "5", poll_interval=POLL)
    worker.wait_event("worker.started", 30)
    start = datetime.now(UTC) + timedelta(seconds=1.5)
    jobs = [app.enqueue("on_time", at=start + timedelta(milliseconds=73 * i)) for i in range(30)]
    found = wait_until(
        lambda: (lambda seen: seen if len(seen) == len(jobs) else None)(ontime(procs.out_dir)),
        timeout=20,
        message=lambda: f"{len(ontime(procs.out_dir))} of {len(jobs)} started",
    )
    for job in jobs:
        mark = found[job.id]
        assert mark["started"] >= mark["due"], f"job {job.id} started before it was due"
        attempt = app.get_job(job.id).attempt_history[0]
        assert attempt.started_at >= job.due_at
    # a 30 s poll could not have started them: the timer did, soon after each instant
    assert max(m["started"] - m["due"] for m in found.values()) < 10


def test_a_cancel_or_reschedule_before_the_instant_wins_over_the_timer(
    db_url: str, procs: Processes, app: App
) -> None:
    worker = procs.worker(db_url, "--concurrency", "5", poll_interval=POLL)
    worker.wait_event("worker.started", 30)
    due = datetime.now(UTC) + timedelta(seconds=2)
    cancelled = app.enqueue("on_time", at=due)
    moved = app.enqueue("on_time", at=due, args={"label": "moved"})
    control = app.enqueue("on_time", at=due, args={"label": "control"})
    wait_until(  # the timer knows the instant by now; land just before it
        lambda: datetime.now(UTC) >= due - timedelta(milliseconds=300), 5, "never reached"
    )
    app.cancel(cancelled.id)
    later = due + timedelta(seconds=2)
    app.reschedule(moved.id, later)
    wait_until(lambda: control.id in ontime(procs.out_dir), 10, "the control job never ran")
    wait_until(lambda: moved.id in ontime(procs.out_dir), 10, "the rescheduled job never ran")
    marks = ontime(procs.out_dir)
    assert marks[moved.id]["started"] >= later.timestamp()  # at its new time, not the old
    final = app.get_job(cancelled.id)
    assert final.status is JobStatus.CANCELLED and final.attempt_history == ()
    assert cancelled.id not in marks
