"""Migration 29 (the successes kept on their jobs' rows sampled by their end), on every
dialect. A database at schema 28 with jobs in every state, and successes kept on rows in
either table, migrates; every job reads as before, the stats' samples are the same, and the
indexes of the successes' start are gone on PostgreSQL (SQLite keeps its own, which a process
of an earlier version names; MariaDB/MySQL had none)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

import history
import schemas
from duetime.core.clock import ManualClock
from duetime.core.states import JobStatus
from duetime.store.base import Store
from jobhelpers import job_in
from kit import DialectKit

INDEXES = {
    "postgres": "SELECT indexname FROM pg_indexes WHERE tablename LIKE ?",
    "sqlite": "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name LIKE ?",
    "mysql": "SELECT DISTINCT index_name FROM information_schema.statistics "
    "WHERE table_schema = DATABASE() AND table_name LIKE ?",
}
STARTED = {"duetime_jobs_succeeded_started", "duetime_jobs_done_succeeded_started"}
VIEW = (
    "SELECT status FROM duetime_all_attempts WHERE started_at >= ? "
    "ORDER BY started_at DESC, job_id DESC"
)


def indexes(kit: DialectKit, url: str) -> set[str]:
    return {name for (name,) in kit.execute(url, INDEXES[kit.name], ("duetime_jobs%",))}


@pytest.fixture
def at_28(kit: DialectKit, tmp_path: Path) -> Iterator[tuple[Store, str]]:
    """A store on a database of schema 28."""
    with schemas.store_before(kit, tmp_path, 29) as (store, url):
        yield store, url


def test_jobs_in_every_state_survive_migration_29(
    at_28: tuple[Store, str], clock: ManualClock, kit: DialectKit
) -> None:
    store, url = at_28
    since = clock.now()
    ids = [job_in(store, clock, s)[0].id for s in JobStatus]
    ids += [job_in(store, clock, s, key=f"kept-{s}")[0].id for s in JobStatus]  # jobs table
    ids.append(job_in(store, clock, JobStatus.SUCCEEDED)[0].id)
    clock.advance(1)
    ids.append(job_in(store, clock, JobStatus.SUCCEEDED, key="a second later")[0].id)
    tables = {history.table_of(kit, url, i) for i in ids}
    assert tables == {"duetime_jobs", *(["duetime_jobs_done"] if kit.moves_ended else [])}
    before = {i: store.get_job(i) for i in ids}
    samples = store.attempt_samples(None, since, 1000)
    assert len([s for s in samples if s.status.value == "succeeded"]) == 4
    every = kit.execute(url, VIEW, (kit.instant(since),))  # the view of every attempt
    assert [s.status.value for s in samples] == [status for (status,) in every]
    if kit.successes_on_rows:
        assert STARTED & indexes(kit, url)

    assert store.migrate() == [29]

    assert {i: store.get_job(i) for i in ids} == before
    assert store.attempt_samples(None, since, 1000) == samples
    assert store.attempt_samples("default", since + timedelta(seconds=1), 1) == samples[:1]
    kept = STARTED if kit.name == "sqlite" else set()
    assert STARTED & indexes(kit, url) == kept  # SQLite's: an earlier version names them
