"""Migration 23 (docs/performance.md, "One index fewer per enqueue"), on every dialect: on
PostgreSQL it drops duetime_jobs_next_due, whose one reader (next_due) now reads the
claim-order index; elsewhere it changes nothing. A database at the schema before it, with
jobs in several states and priority classes, migrates; then the near future, the claims and
the listing give what they gave before it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from datetime import timedelta
from pathlib import Path

import pytest

import schemas
from duetime.core.clock import ManualClock
from duetime.core.models import JobFilter, Outcome
from duetime.core.states import Event, JobStatus
from duetime.store.base import Store
from jobhelpers import claim_one, enqueue, job_in
from kit import DialectKit


@pytest.fixture
def before_23(kit: DialectKit, tmp_path: Path) -> Iterator[tuple[Store, str]]:
    """A store on a database of the schema before migration 23, and its URL."""
    with schemas.store_before(kit, tmp_path, 23) as (store, url):
        yield store, url


def job_indexes(kit: DialectKit, url: str) -> set[str]:
    """The names of the jobs table's indexes (a PostgreSQL database)."""
    with closing(kit.connect(url)) as conn:
        cur = conn.cursor()
        cur.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'duetime_jobs'")
        return {name for (name,) in cur.fetchall()}


def test_a_store_before_migration_23_migrates_and_reads_the_same_near_future(
    before_23: tuple[Store, str], kit: DialectKit, clock: ManualClock
) -> None:
    store, url = before_23
    now = clock.now()
    at = [now + timedelta(seconds=s) for s in (1, 2, 3)]
    for instant, priority in zip(at, (-5, 9, 0), strict=True):
        enqueue(store, clock, at=instant, priority=priority)
    enqueue(store, clock, at=at[1], priority=-5, queue="mail")
    finished, _ = job_in(store, clock, JobStatus.SUCCEEDED)
    due = enqueue(store, clock, priority=3)
    horizon = now + timedelta(seconds=10)
    near = store.next_due(now, horizon, None, 100)
    assert near == at
    if kit.name == "postgres":
        assert "duetime_jobs_next_due" in job_indexes(kit, url)
    assert store.migrate() == [23]
    if kit.name == "postgres":
        assert "duetime_jobs_next_due" not in job_indexes(kit, url)
        assert "duetime_jobs_due_any" in job_indexes(kit, url)
    assert store.next_due(now, horizon, None, 100) == near
    assert store.next_due(now, horizon, ["mail"], 100) == [at[1]]
    assert store.next_due(now, horizon, None, 2) == at[:2]
    job, lease = claim_one(store, clock)
    assert job.id == due.id  # the one due now
    assert store.finish(lease, Outcome(Event.SUCCEED), clock.now())
    listed = store.list_jobs(JobFilter(tenant="default", status=JobStatus.SUCCEEDED, limit=10))
    assert {j.id for j in listed} == {finished.id, due.id}
    clock.advance(2)
    assert store.next_due(clock.now(), horizon, None, 100) == [at[2]]
    claims = store.claim(worker_id="w", queues=None, limit=10, now=clock.now())
    assert sorted(c.job.priority for c in claims) == [-5, -5, 9]  # by priority, due by now
