"""Sequences (docs/workflows.md) across real worker processes, on every dialect: 4 `duetime
worker` processes run three per-account sequences of postings, some failing their first
attempt; within each account never two attempts at once, and the postings ran (and succeeded)
in the order they were enqueued, each retry before the next posting started."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest

from conftest import STORE_KINDS
from duetime import App
from duetime.core.models import Job, JobFilter
from duetime.core.states import JobStatus
from integration.apps.seqapp import make_app
from integration.procs import Processes, wait_until
from kit import DialectKit, kit_named

WORKERS = 4
ACCOUNTS = ("a", "b", "c")
POSTINGS = 12  # per account


@pytest.fixture(params=STORE_KINDS)
def kit(request: pytest.FixtureRequest) -> DialectKit:
    """Every registered dialect (the integration suite's default is sqlite and postgres)."""
    return kit_named(request.param)


@pytest.fixture
def seq_app(db_url: str) -> Iterator[App]:
    instance = make_app(db_url)
    yield instance
    instance.close()


def attempts_of(out: Path) -> list[tuple[int, int, float, float]]:
    rows = []
    for path in out.glob("spans-*.txt"):
        for line in path.read_text().splitlines():
            job_id, attempt, start, end = line.split()
            rows.append((int(job_id), int(attempt), float(start), float(end)))
    return sorted(rows, key=lambda r: r[2])


@pytest.mark.long
def test_four_workers_run_each_sequence_one_at_a_time_in_order(
    seq_app: App, db_url: str, procs: Processes
) -> None:
    jobs: dict[str, list[Job]] = {a: [] for a in ACCOUNTS}
    for n in range(POSTINGS):
        for account in ACCOUNTS:
            job = seq_app.enqueue(
                "ledger.post", {"account": account, "n": n, "fail_first": n % 4 == 1}
            )
            jobs[account].append(job)
    for _ in range(WORKERS):
        procs.worker(db_url, "--concurrency", "4", app="seqapp:app", poll_interval="0.05s")

    def done() -> list[Job] | None:
        for worker in procs.started:
            worker.alive()
        found = seq_app.store.list_jobs(JobFilter(task="ledger.post", limit=1000))
        ended = all(j.status is JobStatus.SUCCEEDED for j in found)
        return found if ended and len(found) == len(ACCOUNTS) * POSTINGS else None

    wait_until(done, 180, "the postings did not all succeed")
    ran = attempts_of(procs.out_dir)
    account_of = {j.id: a for a, js in jobs.items() for j in js}
    for account in ACCOUNTS:
        ours = [r for r in ran if account_of[r[0]] == account]
        for before, after in pairwise(ours):
            assert before[3] <= after[2], f"two attempts of sequence {account} at once: {ours}"
        # in enqueue order; a failed first attempt retried before the next posting
        expected = []
        for n, job in enumerate(jobs[account]):
            expected += [(job.id, 1), (job.id, 2)] if n % 4 == 1 else [(job.id, 1)]
        assert [(r[0], r[1]) for r in ours] == expected
