"""Migration 25 (the history table, docs/history-plan.md step 1), on every dialect. A database
at schema 24 with jobs in every state migrates (with 26, which builds on it); every job and
its attempts read as before, the history table is there and empty, and it holds every column
of the jobs table in the jobs table's order, so a job can move with one INSERT ... SELECT. A
success kept on a row of the history table reads through the view of every attempt as one
kept on a job's row does (PostgreSQL and SQLite, which keep successes on rows: migration 26),
and the table refuses a status that has not ended."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import history
import schemas
from duetime.core.clock import ManualClock
from duetime.core.models import Outcome
from duetime.core.states import Event, JobStatus
from duetime.store.base import Store
from jobhelpers import job_in
from kit import DialectKit


@pytest.fixture
def at_24(kit: DialectKit, tmp_path: Path) -> Iterator[tuple[Store, str]]:
    """A store on a database of schema 24 (26 builds on 25: nothing run ahead)."""
    with schemas.store_before(kit, tmp_path, 25) as (store, url):
        yield store, url


def test_jobs_in_every_state_survive_migration_25(
    at_24: tuple[Store, str], clock: ManualClock, kit: DialectKit
) -> None:
    store, url = at_24
    # this version reads the history table too (a job that ended may be there): the jobs are
    # written with the table made ahead, unrecorded, and read; it is dropped again, empty.
    # Each job holds a key, so one that ends stays in the jobs table, where version 24 kept
    # it (a job that moved would lose its attempts to schema 24's cascading keys)
    schemas.run_unrecorded(store, 25)
    # keyed: a job that ends stays where schema 24's keys (which cascade a deletion) reach it
    ids = [job_in(store, clock, s, key=f"kept-{s}")[0].id for s in JobStatus]
    across, lease = job_in(store, clock, JobStatus.RUNNING)
    assert lease is not None
    ids.append(across.id)
    before = {i: store.get_job(i) for i in ids}
    assert {history.table_of(kit, url, i) for i in ids} == {"duetime_jobs"}
    kit.execute(url, "DROP TABLE duetime_jobs_done")
    assert "duetime_jobs_done" not in kit.tables(url)

    assert store.migrate() == [25, 26, 27, 29]  # 26, 27 and 29 build on 25 (tests/schemas.py)

    assert "duetime_jobs_done" in kit.tables(url)
    assert kit.execute(url, "SELECT COUNT(*) FROM duetime_jobs_done") == [(0,)]
    assert {i: store.get_job(i) for i in ids} == before
    assert history.table_of(kit, url, ids[0]) == "duetime_jobs"  # moved by no migration
    clock.advance(2)
    assert store.finish(lease, Outcome(Event.SUCCEED), clock.now())
    done = store.get_job(across.id)
    assert done is not None and done.status is JobStatus.SUCCEEDED
    assert [a.finished_at for a in done.attempt_history] == [clock.now()]


def test_the_history_table_holds_every_column_of_the_jobs_table(
    store: Store, kit: DialectKit, store_url: str
) -> None:
    # every stored column of a job in both (the part job_columns reads them by name), in the
    # same order where a database's migrations ran in order, as here
    stored = [
        c for c in history.columns(kit, store_url, "duetime_jobs") if c not in history.GENERATED
    ]
    assert history.columns(kit, store_url, "duetime_jobs_done") == stored


def test_a_success_kept_on_a_history_row_reads_as_an_attempt(
    store: Store, kit: DialectKit, store_url: str, clock: ManualClock
) -> None:
    job, lease = job_in(store, clock, JobStatus.SUCCEEDED)
    assert lease is not None
    copy = job.id + 1_000_000
    history.copy(kit, store_url, job.id, copy)
    rows = kit.execute(
        store_url,
        "SELECT id, job_id, status, generation, claim_token FROM duetime_all_attempts "
        "WHERE job_id = ?",
        (copy,),
    )
    kept = [(lease.attempt_id, copy, "succeeded", lease.generation, lease.claim_token)]
    # MariaDB/MySQL write every success's attempt row (for the original job id): none is kept
    assert rows == (kept if kit.successes_on_rows else [])


def test_the_history_table_holds_only_jobs_that_have_ended(
    store: Store, kit: DialectKit, store_url: str, clock: ManualClock
) -> None:
    ended = {JobStatus.SUCCEEDED, JobStatus.DEAD, JobStatus.CANCELLED, JobStatus.EXPIRED}
    for n, status in enumerate(JobStatus):
        job, _ = job_in(store, clock, status)
        if status in ended:
            history.copy(kit, store_url, job.id, job.id + 1_000_000)
            continue
        with pytest.raises(Exception, match=r"(?i)check|constraint"):
            history.copy(kit, store_url, job.id, job.id + 1_000_000 + n)
    statuses = kit.execute(store_url, "SELECT status FROM duetime_jobs_done WHERE id > 1000000")
    assert sorted(s for (s,) in statuses) == sorted(s.value for s in ended)
