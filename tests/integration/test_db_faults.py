"""Dropped database connections: workers reconnect by themselves and lose nothing."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from integration.apps.itapp import make_app
from integration.procs import Processes, migrate, query, scalar

DROPS = 3
JOBS = 2000  # in DROPS + 1 waves


@pytest.fixture
def pg_url(pg_database_url: str) -> Iterator[str]:
    from conftest import reset_postgres

    reset_postgres(pg_database_url)
    migrate(pg_database_url)
    yield pg_database_url


def drop_connections(url: str) -> int:
    """Terminate every other session on this database, as a failover or a proxy would."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return len(rows)


def test_workers_survive_dropped_connections(pg_url: str, procs: Processes, tmp_path: Path) -> None:
    """Three drops of every connection, each while jobs are left to run: the jobs come in
    waves, and the next wave is enqueued (by an app of its own, its connections dropped in
    turn) before each drop, so a fast drain cannot finish before the third. A drop can hit a
    claim after its commit: the worker then gives back the attempts it never heard of."""
    wave = JOBS // (DROPS + 1)

    def enqueue_wave() -> None:
        enqueuer = make_app(pg_url)
        try:
            enqueuer.enqueue_many("drain.record", [{} for _ in range(wave)])
        finally:
            enqueuer.close()

    enqueue_wave()
    workers = [procs.worker(pg_url, "--concurrency", "10") for _ in range(2)]
    deadline = time.monotonic() + 240

    def wait_until_done(count: int) -> None:
        while True:
            done = int(
                scalar(pg_url, "SELECT count(*) FROM duetime_all_jobs WHERE status = 'succeeded'")
            )
            if done >= count:
                return
            assert time.monotonic() < deadline, f"only {done} of {count} jobs succeeded"
            assert all(w.alive() for w in workers), workers[0].tail()
            time.sleep(0.05)

    dropped = 0
    for n in range(DROPS):
        wait_until_done(n * wave + wave // 2)  # halfway through the wave
        enqueue_wave()  # work left after the drop, whatever the drain's pace
        dropped += drop_connections(pg_url)
    wait_until_done(JOBS)
    assert dropped >= DROPS  # each drop ended at least one worker connection
    for w in workers:
        assert w.terminate_and_wait() == 0, w.tail()
    per_job = Counter(
        job_id
        for (job_id,) in query(
            # (a success stays on its job's row: the view reads both, migration 24)
            pg_url,
            "SELECT job_id FROM duetime_all_attempts WHERE status = 'succeeded'",
        )
    )
    assert len(per_job) == JOBS and max(per_job.values()) == 1
    statuses = dict(query(pg_url, "SELECT status, count(*) FROM duetime_all_jobs GROUP BY status"))
    assert statuses == {"succeeded": JOBS}
    # a drop that lost a claim's answer after its commit left attempts running under a worker
    # that never heard of them: the worker gave them back (interrupted), none waited out its
    # lease to be reaped
    reaped = scalar(pg_url, "SELECT count(*) FROM duetime_attempts WHERE status = 'lost'")
    assert int(reaped) == 0, f"{reaped} attempts waited out their leases"


def test_a_worker_started_while_the_database_is_down_waits_for_it(procs: Processes) -> None:
    worker = procs.worker("postgresql://postgres@127.0.0.1:1/postgres")
    deadline = time.monotonic() + 20
    while "database unavailable" not in "".join(worker.lines()):
        assert worker.alive(), worker.tail()
        assert time.monotonic() < deadline, worker.tail()
        time.sleep(0.2)
    time.sleep(1.5)
    assert worker.alive(), "the worker gave up instead of waiting"
    assert worker.terminate_and_wait(timeout=10) == 0, worker.tail()
