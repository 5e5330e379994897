"""Flow control across real worker processes on every dialect (docs/flow-control.md): a
queue capped at 3 never runs more than 3 attempts at once over four workers of 2 slots each
(8 slots: reaching 3 at once takes two processes); a paused queue starts nothing until it is
resumed; a weighted small tenant's jobs start within a bound under another tenant's flood."""

from __future__ import annotations

import json
import signal

import pytest

from conftest import STORE_KINDS
from duetime import App
from integration.procs import Processes, query, scalar, wait_until
from kit import DialectKit, kit_named

CAP = 3
WORKERS = 4
SLOTS = 2  # per worker: below the cap, so the peak needs several processes
JOBS = 30
HOLD_SECONDS = 0.15


RUNNING_CAPPED = (
    "SELECT count(*) FROM duetime_all_attempts a JOIN duetime_all_jobs j ON j.id = a.job_id "
    "WHERE a.status = 'running' AND j.queue = 'capped'"
)


@pytest.fixture(params=STORE_KINDS)
def kit(request: pytest.FixtureRequest) -> DialectKit:
    """Every registered dialect (the integration suite's default is sqlite and postgres)."""
    return kit_named(request.param)


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The largest number of intervals that overlap at one instant (an end before a start
    at the same instant: touching intervals do not overlap)."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    now = peak = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    return peak


def test_most_at_once_counts_overlaps() -> None:
    assert most_at_once([(0, 2), (1, 3), (2, 4)]) == 2
    assert most_at_once([(0, 5), (1, 2), (1.5, 3), (4, 6)]) == 3
    assert most_at_once([]) == 0


@pytest.mark.timeout(300)
def test_a_queue_cap_holds_across_worker_processes_and_a_paused_queue_starts_nothing(
    db_url: str, procs: Processes, app: App
) -> None:
    app.set_queue("capped", concurrency=CAP)
    app.pause_queue("held")
    held = app.enqueue_many("flow.hold", [{"seconds": 0} for _ in range(5)], queue="held")
    capped = app.enqueue_many(
        "flow.hold", [{"seconds": HOLD_SECONDS} for _ in range(JOBS)], queue="capped"
    )
    workers = [procs.worker(db_url, "--concurrency", str(SLOTS)) for _ in range(WORKERS)]

    def succeeded(queue: str) -> int:
        return int(
            scalar(
                db_url,
                "SELECT count(*) FROM duetime_all_jobs WHERE status = 'succeeded' AND queue = ?",
                (queue,),
            )
        )

    def progress() -> str:
        states = query(
            db_url, "SELECT queue, status, count(*) FROM duetime_all_jobs GROUP BY queue, status"
        )
        return f"jobs by queue and status {states}\n" + workers[0].tail(10)

    # the database's own view, sampled all along: never more than CAP running at a commit
    samples: list[int] = []

    def drained() -> bool:
        samples.append(int(scalar(db_url, RUNNING_CAPPED)))
        return succeeded("capped") == JOBS

    wait_until(drained, 120, progress, interval=0.01)
    assert max(samples) <= CAP, f"the database had {max(samples)} capped attempts running"

    # the paused queue: every worker ran for the whole drain, and none started its jobs
    attempts = scalar(
        db_url,
        "SELECT count(*) FROM duetime_all_attempts a JOIN duetime_all_jobs j ON j.id = a.job_id "
        "WHERE j.queue = 'held'",
    )
    assert attempts == 0, f"a paused queue started {attempts} attempts"
    assert {app.get_job(j.id).status.value for j in held} == {"scheduled"}

    # the cap: from what the handlers recorded (each interval lies inside its attempt's
    # lease). Not from duetime_attempts' started_at: that is the claim's `now`, read by the
    # worker before the claim waits for the control rows' locks, so a slot freed during that
    # wait shows as an overlap in the recorded intervals that never happened.
    intervals = []
    for job in capped:
        body = json.loads((procs.out_dir / f"hold-{job.id}-1").read_text())
        intervals.append((body["start"], body["end"]))
    pids = {json.loads(p.read_text())["pid"] for p in procs.out_dir.glob("hold-*")}
    peak = most_at_once(intervals)
    assert peak <= CAP, f"{peak} attempts of a queue capped at {CAP} ran at once"
    assert peak == CAP, f"never {CAP} at once (at most {peak}): the cap held jobs back"
    assert len(pids) > 1, f"one worker process ran every job ({pids}): not a cluster-wide test"

    # the recorded attempts agree: one each, all succeeded
    statuses = dict(
        query(
            db_url,
            "SELECT a.status, count(*) FROM duetime_all_attempts a JOIN duetime_all_jobs j "
            "ON j.id = a.job_id WHERE j.queue = 'capped' GROUP BY a.status",
        )
    )
    assert statuses == {"succeeded": JOBS}

    app.resume_queue("held")  # the workers see it within CONTROLS_SECONDS
    wait_until(lambda: succeeded("held") == len(held), 30, progress, interval=0.2)

    for w in workers:
        w.send(signal.SIGTERM)
    assert [w.wait_exit(60) for w in workers] == [0] * WORKERS


FLOOD = 2000
SMALL = 10
FAIRNESS_BOUND = 5.0  # seconds from enqueue to start, for every job of the small tenant


@pytest.mark.timeout(300)
def test_a_weighted_small_tenant_starts_within_a_bound_under_a_flood(
    db_url: str, procs: Processes, app: App
) -> None:
    """Another tenant has FLOOD jobs due before the small tenant's SMALL: with a weight, the
    small tenant's jobs start within FAIRNESS_BOUND seconds, long before the flood drains."""
    app.set_tenant("small", weight=2)
    for _ in range(0, FLOOD, 500):
        app.scoped("flood").enqueue_many("flow.hold", [{"seconds": 0.05} for _ in range(500)])
    workers = [procs.worker(db_url, "--concurrency", "4") for _ in range(2)]
    for w in workers:  # both take part in the flood (one still starting could do nothing)
        w.wait_event("worker.started", 60)

    def flood_done() -> int:
        return int(
            scalar(db_url, "SELECT count(*) FROM duetime_all_jobs WHERE status = 'succeeded'")
        )

    wait_until(lambda: flood_done() >= 50, 60, "the flood does not start")  # workers are busy
    small = app.scoped("small").enqueue_many("on_time", [{} for _ in range(SMALL)])
    enqueued = {job.id: job.created_at.timestamp() for job in small}

    def started() -> list[float]:
        found = [procs.out_dir / f"ontime-{job_id}" for job_id in enqueued]
        return [json.loads(p.read_text())["started"] for p in found if p.exists()]

    wait_until(lambda: len(started()) == SMALL, 60, f"the small tenant's jobs: {started()}")
    left = FLOOD - flood_done()
    delays = sorted(s - min(enqueued.values()) for s in started())
    assert delays[-1] < FAIRNESS_BOUND, f"small tenant's start delays {delays}"
    assert left > FLOOD // 4, f"the flood was nearly done ({left} left): not a flood"
    for w in workers:
        w.send(signal.SIGTERM)
    assert [w.wait_exit(60) for w in workers] == [0, 0]
