"""A pause holds at once across real worker processes, on every dialect (docs/flow-control.md,
Pause and resume; issue 20, section 2): two `duetime worker` processes of 4 slots, a job of
queue `qy` running, `duetime queues pause qy`, and jobs enqueued in bulk right after it (in
this process a few milliseconds after the pause returned, and by `duetime enqueue --from-file`).
Before the fix the workers' copies of the control rows (up to a second old) still said `qy`
ran, and on SQLite all of them started within 20 ms of their enqueue."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from conftest import STORE_KINDS
from duetime import App
from duetime.core.models import JobFilter
from duetime.core.states import JobStatus
from integration.procs import Processes, describe, run_cli, wait_until
from kit import DialectKit, kit_named

RUNNING = 3.0  # seconds the job running at the pause sleeps
BULK = 5
AFTER_END = 0.5  # seconds the held jobs are watched after the running job's end


@pytest.fixture(params=STORE_KINDS)
def kit(request: pytest.FixtureRequest) -> DialectKit:
    """Every registered dialect (the integration suite's default is sqlite and postgres)."""
    return kit_named(request.param)


def cli(db_url: str, *args: str) -> str:
    done = run_cli([*args, "--database-url", db_url])
    assert done.returncode == 0, describe(done)
    return done.stdout


@pytest.mark.timeout(180)
def test_a_pause_holds_jobs_enqueued_in_bulk_right_after_it_while_one_runs(
    db_url: str, procs: Processes, app: App, tmp_path: Path
) -> None:
    workers = [procs.worker(db_url, "--concurrency", "4") for _ in range(2)]
    for w in workers:
        w.wait_event("worker.started", 60)
    running = app.enqueue("sleep", {"seconds": RUNNING}, queue="qy")
    marker = procs.out_dir / f"started-{running.id}-1"
    wait_until(lambda: all(w.alive() for w in workers) and marker.exists(), 30, workers[0].tail)

    assert cli(db_url, "queues", "pause", "qy").startswith("queue qy: paused,")
    held = app.enqueue_many("noop", [{}] * BULK, queue="qy")  # a few ms after the pause
    lines = tmp_path / "jobs.jsonl"
    lines.write_text("".join(json.dumps({"task": "noop", "args": {}}) + "\n" for _ in range(BULK)))
    out = cli(db_url, "enqueue", "--from-file", str(lines), "--queue", "qy")
    assert f"{BULK} created" in out, out
    [row] = json.loads(cli(db_url, "queues", "list", "--json"))
    assert (row["queue"], row["paused"]) == ("qy", True)
    other = app.enqueue("noop", queue="other")  # the workers still run the other queues

    def jobs_of(queue: str) -> list[tuple[int, JobStatus]]:
        return [(j.id, j.status) for j in app.store.list_jobs(JobFilter(queue=queue, limit=100))]

    def ran() -> set[int]:
        return {int(p.name.split("-")[1]) for p in procs.out_dir.glob("finished-*")}

    def succeeded(job_id: int) -> bool:
        return app.get_job(job_id).status is JobStatus.SUCCEEDED

    wait_until(lambda: succeeded(other.id), 30, "the other queue's job did not run")
    # the job running at the pause ends (past CONTROLS_SECONDS after the enqueues): the claims
    # after its end, and those the enqueues' wake-ups brought before it, start none of qy's
    wait_until(lambda: succeeded(running.id), 30, "the job running at the pause did not end")
    time.sleep(AFTER_END)
    statuses = [s for i, s in jobs_of("qy") if i != running.id]
    assert len(statuses) == 2 * BULK and {j.id for j in held} <= {i for i, _ in jobs_of("qy")}
    assert set(statuses) == {JobStatus.SCHEDULED}, f"a paused queue started jobs: {statuses}"
    assert ran() == {running.id, other.id}, "a held job's handler ran"

    cli(db_url, "queues", "resume", "qy")
    wait_until(
        lambda: (
            all(w.alive() for w in workers)
            and all(s is JobStatus.SUCCEEDED for _, s in jobs_of("qy"))
        ),
        30,
        lambda: f"the resumed queue's jobs did not all run: {jobs_of('qy')}",
    )
    assert ran() == {j.id for j in app.store.list_jobs(JobFilter(limit=100))}
    for w in workers:
        assert w.terminate_and_wait() == 0
        assert w.problems() == [], w.tail()
