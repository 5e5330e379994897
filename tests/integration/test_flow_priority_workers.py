"""Priorities without starvation across real worker processes on every dialect
(docs/flow-control.md, "Priorities"): under a flood of high-priority jobs, the low-priority
class keeps at least its share (PRIORITY_SHARE, 10%) of the attempts started, from the
attempts the workers recorded."""

from __future__ import annotations

import json
import signal

import pytest

from conftest import STORE_KINDS
from duetime import App
from duetime.core.flow.share import PRIORITY_SHARE
from integration.procs import Processes, query, scalar, wait_until
from kit import DialectKit, kit_named

HIGH = 1500  # priority 10, enqueued after the low ones: strict order would start them all first
LOW = 200  # priority 0
WINDOW = 300  # the first attempts started: the high flood is far from drained by then
WORKERS = 2
SLOTS = 4


@pytest.fixture(params=STORE_KINDS)
def kit(request: pytest.FixtureRequest) -> DialectKit:
    return kit_named(request.param)


@pytest.mark.timeout(300)
def test_low_priority_keeps_its_share_under_a_high_priority_flood(
    db_url: str, procs: Processes, app: App
) -> None:
    app.enqueue_many("flow.hold", [{"seconds": 0.01} for _ in range(LOW)], priority=0)
    for _ in range(0, HIGH, 500):
        app.enqueue_many("flow.hold", [{"seconds": 0.01} for _ in range(500)], priority=10)
    workers = [procs.worker(db_url, "--concurrency", str(SLOTS)) for _ in range(WORKERS)]

    def started() -> int:
        return int(scalar(db_url, "SELECT count(*) FROM duetime_all_attempts"))

    wait_until(lambda: started() >= WINDOW, 120, lambda: workers[0].tail(10))
    for w in workers:
        w.send(signal.SIGTERM)
    assert [w.wait_exit(60) for w in workers] == [0] * WORKERS

    rows = query(
        db_url,
        "SELECT j.priority, a.worker_id FROM duetime_all_attempts a "
        "JOIN duetime_all_jobs j ON j.id = a.job_id ORDER BY a.id",
    )
    first = [int(p) for p, _ in rows[:WINDOW]]
    low = first.count(0)
    # each worker's claims give the low class a slot for every 1/share of theirs, within a
    # claim's slots of exact: at least share x WINDOW less a claim's slots per worker
    assert low >= PRIORITY_SHARE * WINDOW - WORKERS * SLOTS, f"{low} low of the first {WINDOW}"
    assert first.count(10) >= (1 - 2 * PRIORITY_SHARE) * WINDOW, "high priority went first"
    assert len({w for _, w in rows}) == WORKERS, "one worker ran every job: not a cluster test"
    waiting_high = scalar(
        db_url, "SELECT count(*) FROM duetime_all_jobs WHERE priority = 10 AND status = 'scheduled'"
    )
    assert int(waiting_high) > 0, "the flood drained: not a flood"


FLOOD = 2000
SMALL = 10
FAIRNESS_BOUND = 5.0  # seconds from enqueue to start, for every job of the small tenant


@pytest.mark.timeout(300)
def test_a_small_tenant_at_the_default_weight_starts_within_a_bound_under_a_flood(
    db_url: str, procs: Processes, app: App
) -> None:
    """Another tenant has FLOOD jobs due before the small tenant's SMALL, and neither has a
    setting: the claims rotate across the tenants with due work, so the small tenant's jobs
    start within FAIRNESS_BOUND seconds, long before the flood drains."""
    for _ in range(0, FLOOD, 500):
        app.scoped("flood").enqueue_many("flow.hold", [{"seconds": 0.05} for _ in range(500)])
    workers = [procs.worker(db_url, "--concurrency", "4") for _ in range(2)]

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
