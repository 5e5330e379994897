"""Four worker processes drain 5,000 jobs: every job runs once, succeeds once, none is lost
(throughput is measured by `make bench`, not here)."""

from __future__ import annotations

import signal
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import STORE_KINDS
from duetime import App
from integration.procs import Processes, query, scalar, wait_until
from kit import DialectKit, kit_named


@pytest.fixture(params=STORE_KINDS)
def kit(request: pytest.FixtureRequest) -> DialectKit:
    """Every registered dialect (the integration suite's default is sqlite and postgres)."""
    return kit_named(request.param)


JOBS = 5_000
WORKERS = 4
CHUNK = 1_000
DRAIN_TIMEOUT = 400.0


def read_executions(out_dir: Path) -> list[tuple[int, int, int]]:
    """(job_id, generation, pid) for every execution the handlers recorded."""
    rows = []
    for path in sorted(out_dir.glob("exec-*.txt")):
        for line in path.read_text().splitlines():
            job_id, generation, pid = line.split()
            rows.append((int(job_id), int(generation), int(pid)))
    return rows


@pytest.mark.long
@pytest.mark.timeout(900)
def test_four_workers_drain_5000_jobs_exactly_once(
    db_url: str, procs: Processes, app: App, capsys: pytest.CaptureFixture[str]
) -> None:
    # every worker running before the jobs come: on a loaded machine one that is still
    # starting could find the others done (the check below wants jobs run by all four)
    workers = [procs.worker(db_url, "--concurrency", "10") for _ in range(WORKERS)]
    for w in workers:
        w.wait_event("worker.started", 120)
    started = time.monotonic()
    job_ids: list[int] = []
    for _ in range(0, JOBS, CHUNK):
        jobs = app.enqueue_many("drain.record", [{} for _ in range(CHUNK)])
        job_ids += [j.id for j in jobs]
    enqueued_s = time.monotonic() - started
    assert len(set(job_ids)) == JOBS, "enqueue_many returned duplicate or missing ids"
    drain_started = time.monotonic()

    def succeeded() -> int:
        return int(
            scalar(db_url, "SELECT count(*) FROM duetime_all_jobs WHERE status = 'succeeded'")
        )

    def progress() -> str:
        states = query(db_url, "SELECT status, count(*) FROM duetime_all_jobs GROUP BY status")
        exited = [w for w in workers if w.popen.poll() is not None]
        return f"job statuses {dict(states)}; exited workers {exited}\n" + workers[0].tail(10)

    def all_done() -> bool:
        if any(w.popen.poll() is not None for w in workers):
            raise AssertionError(f"a worker exited during the drain: {progress()}")
        return succeeded() == JOBS

    wait_until(all_done, DRAIN_TIMEOUT, progress, interval=0.5)
    drain_s = time.monotonic() - drain_started

    for w in workers:
        w.send(signal.SIGTERM)
    codes = [w.wait_exit(60) for w in workers]
    assert codes == [0] * WORKERS, f"workers exited {codes}\n" + "\n".join(
        w.tail() for w in workers
    )

    # the store: every job there, succeeded, with exactly one attempt, and that one succeeded
    assert scalar(db_url, "SELECT count(*) FROM duetime_all_jobs") == JOBS
    by_status = dict(query(db_url, "SELECT status, count(*) FROM duetime_all_jobs GROUP BY status"))
    assert by_status == {"succeeded": JOBS}, f"job statuses: {by_status}"
    # (a success stays on its job's row: duetime_all_attempts reads both, migration 24)
    attempts = dict(
        query(db_url, "SELECT status, count(*) FROM duetime_all_attempts GROUP BY status")
    )
    assert attempts == {"succeeded": JOBS}, f"attempt statuses (one per job expected): {attempts}"
    doubled = query(
        db_url,
        "SELECT job_id, count(*) FROM duetime_all_attempts WHERE status = 'succeeded' "
        "GROUP BY job_id HAVING count(*) <> 1",
    )
    assert doubled == [], f"jobs with more than one succeeded attempt: {doubled[:10]}"
    generations = dict(
        query(db_url, "SELECT generation, count(*) FROM duetime_all_jobs GROUP BY generation")
    )
    assert generations == {1: JOBS}, f"job generations: {generations}"

    # the handlers: each job executed exactly once, by one of the four workers, in generation 1
    executions = read_executions(procs.out_dir)
    per_job = Counter(job_id for job_id, _, _ in executions)
    duplicates = {j: n for j, n in per_job.items() if n != 1}
    assert not duplicates, (
        f"{len(duplicates)} jobs ran more than once, e.g. {list(duplicates.items())[:10]}"
    )
    assert set(per_job) == set(job_ids), (
        f"executed {len(per_job)} distinct jobs; missing {len(set(job_ids) - set(per_job))}, "
        f"unknown {len(set(per_job) - set(job_ids))}"
    )
    assert {g for _, g, _ in executions} == {1}
    per_pid = Counter(pid for _, _, pid in executions)
    assert set(per_pid) <= {w.pid for w in workers}, f"executions by unknown pids: {per_pid}"
    assert len(per_pid) == WORKERS, f"not every worker ran jobs: {per_pid}"

    # the workers' own accounts agree, and nothing went wrong on the way
    stats = [w.events("worker.stopped") for w in workers]
    assert all(len(s) == 1 for s in stats), "every worker logs worker.stopped once"
    assert sum(s[0]["succeeded"] for s in stats) == JOBS
    assert sum(s[0]["stale_rejected"] + s[0]["leases_lost"] + s[0]["reaped"] for s in stats) == 0
    for w in workers:
        assert w.problems() == [], f"{w.name} logged problems:\n" + "\n".join(w.problems()[:20])

    with capsys.disabled():
        sys.stdout.write(
            f"\n[drain {db_url.split(':')[0]}] enqueue {JOBS} jobs: {enqueued_s:.1f}s, "
            f"drain with {WORKERS} workers after it: {drain_s:.1f}s, "
            f"per worker {sorted(per_pid.values())}\n"
        )
