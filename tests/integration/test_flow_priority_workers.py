"""Priorities without starvation across real worker processes on every dialect
(docs/flow-control.md, "Priorities"): under a flood of high-priority jobs, the low-priority
class keeps at least its share (PRIORITY_SHARE, 10%) of the attempts started, from the
attempts the workers recorded."""

from __future__ import annotations

import signal

import pytest

from conftest import STORE_KINDS
from duetime import App
from duetime.core.flow import PRIORITY_SHARE
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
        return int(scalar(db_url, "SELECT count(*) FROM duetime_attempts"))

    wait_until(lambda: started() >= WINDOW, 120, lambda: workers[0].tail(10))
    for w in workers:
        w.send(signal.SIGTERM)
    assert [w.wait_exit(60) for w in workers] == [0] * WORKERS

    rows = query(
        db_url,
        "SELECT j.priority, a.worker_id FROM duetime_attempts a "
        "JOIN duetime_jobs j ON j.id = a.job_id ORDER BY a.id",
    )
    first = [int(p) for p, _ in rows[:WINDOW]]
    low = first.count(0)
    # each worker's claims give the low class a slot for every 1/share of theirs, within a
    # claim's slots of exact: at least share x WINDOW less a claim's slots per worker
    assert low >= PRIORITY_SHARE * WINDOW - WORKERS * SLOTS, f"{low} low of the first {WINDOW}"
    assert first.count(10) >= (1 - 2 * PRIORITY_SHARE) * WINDOW, "high priority went first"
    assert len({w for _, w in rows}) == WORKERS, "one worker ran every job: not a cluster test"
    waiting_high = scalar(
        db_url, "SELECT count(*) FROM duetime_jobs WHERE priority = 10 AND status = 'scheduled'"
    )
    assert int(waiting_high) > 0, "the flood drained: not a flood"
