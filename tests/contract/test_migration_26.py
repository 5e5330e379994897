"""Migration 26 (no foreign key to the jobs table, docs/history-plan.md step 2), on every
dialect. A database at schema 25 with attempts, dependency links, outbox events and ticks
migrates with nothing lost, and no foreign key references duetime_jobs afterwards. What the
keys' cascades did is now done by the two statements that delete jobs for good: pruning a
finished job deletes its attempts, its links (as a child and as a parent) and its outbox
events, and detaches its ticks; deleting a schedule's unstarted occurrences deletes their
links and detaches their ticks. Neither leaves an orphan row, and neither touches the rows of
a job that stays."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

import schemas
from dependents import dependents, orphans, rows_of, ticked
from duetime.core.clock import ManualClock
from duetime.core.errors import StoreError
from duetime.core.models import Outcome
from duetime.core.retry import ErrorCategory
from duetime.core.schedules import Plan
from duetime.core.states import Event, JobStatus
from duetime.store.base import Store
from jobhelpers import claim_one, enqueue
from kit import DialectKit


def foreign_keys_to_jobs(kit: DialectKit, url: str) -> list[str]:
    """The tables with a foreign key that references duetime_jobs."""
    if kit.name == "sqlite":
        found = []
        for (table,) in kit.execute(url, kit.tables_sql):
            keys = kit.execute(url, f"PRAGMA foreign_key_list({table})")
            found += [table for key in keys if key[2] == "duetime_jobs"]
        return sorted(found)
    schema = "DATABASE()" if kit.name == "mysql" else "current_schema()"
    if kit.name == "mysql":
        sql = (
            "SELECT table_name FROM information_schema.referential_constraints "
            f"WHERE constraint_schema = {schema} AND referenced_table_name = 'duetime_jobs'"
        )
    else:
        sql = (
            "SELECT conrelid::regclass::text FROM pg_constraint "
            "WHERE contype = 'f' AND confrelid = 'duetime_jobs'::regclass"
        )
    return sorted(str(name) for (name,) in kit.execute(url, sql))


@pytest.fixture
def at_25(kit: DialectKit, tmp_path: Path) -> Iterator[tuple[Store, str]]:
    """A store on a database of schema 25 (26 is the last migration: nothing run ahead)."""
    with schemas.store_before(kit, tmp_path, 26) as (store, url):
        yield store, url


def test_every_dependent_row_survives_migration_26(
    at_25: tuple[Store, str], clock: ManualClock, kit: DialectKit
) -> None:
    store, url = at_25
    # (this version moves a job that ends without a key to the history table, deleting its
    # row here, which the keys of schema 25 would cascade: these jobs have keys and stay)
    ids = dependents(store, clock, keyed=True)
    before = {i: (store.get_job(i), rows_of(kit, url, i)) for i in ids.values()}
    assert foreign_keys_to_jobs(kit, url) != []

    assert store.migrate() == [26]

    assert foreign_keys_to_jobs(kit, url) == []
    assert {i: (store.get_job(i), rows_of(kit, url, i)) for i in ids.values()} == before
    assert orphans(kit, url) == {}


def test_pruning_deletes_a_jobs_dependents_and_detaches_its_ticks(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    ids = dependents(store, clock)
    counts = {name: rows_of(kit, store_url, i) for name, i in ids.items()}
    # the failure's row (and the success's, on MariaDB/MySQL: docs/stores.md)
    assert counts["retried"]["attempts"] == (1 if kit.successes_on_rows else 2)
    assert counts["dispatched"]["outbox"] == 1
    assert counts["parent"]["links"] == counts["child"]["links"] == 1
    assert counts["occurrence"]["ticks"] == 1
    clock.advance(60)
    cutoff = clock.now()
    clock.advance(1)
    kept = dependents(store, clock, "daily")  # the same again, finished after the cutoff
    kept_counts = {i: rows_of(kit, store_url, i) for i in kept.values()}

    assert store.prune(cutoff, 100) == len(ids)

    for job_id in ids.values():
        assert store.get_job(job_id) is None
        assert rows_of(kit, store_url, job_id) == dict.fromkeys(counts["retried"], 0)
    assert {i: rows_of(kit, store_url, i) for i in kept.values()} == kept_counts
    assert orphans(kit, store_url) == {}
    ticks = kit.execute(store_url, "SELECT COUNT(*) FROM duetime_ticks WHERE job_id IS NULL")
    assert ticks == [(1,)]  # the pruned occurrence's tick stays, detached


def test_pruning_deletes_a_link_whichever_side_of_it_goes(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    """A link goes when its child is pruned and its parent stays, and when its parent is
    pruned and its child stays (in the test above both go at once, which either side's
    deletion alone would cover)."""
    give_up = Outcome(Event.GIVE_UP, error_category=ErrorCategory.PERMANENT)
    dead_parent = enqueue(store, clock)
    cancelled_child = enqueue(store, clock, depends_on=[dead_parent.id])
    _, lease = claim_one(store, clock)
    assert lease.job_id == dead_parent.id and store.finish(lease, give_up, clock.now())
    done_parent = enqueue(store, clock)
    dead_child = enqueue(store, clock, depends_on=[done_parent.id])
    _, lease = claim_one(store, clock)
    assert store.finish(lease, Outcome(Event.SUCCEED), clock.now())
    _, lease = claim_one(store, clock)
    assert lease.job_id == dead_child.id and store.finish(lease, give_up, clock.now())
    statuses = {j: store.get_job(j) for j in (cancelled_child.id, done_parent.id)}
    assert [j.status for j in statuses.values() if j] == [JobStatus.CANCELLED, JobStatus.SUCCEEDED]
    links = "SELECT child_id, parent_id FROM duetime_job_parents ORDER BY child_id"
    assert kit.execute(store_url, links) == [
        (cancelled_child.id, dead_parent.id),
        (dead_child.id, done_parent.id),
    ]
    clock.advance(60)

    assert store.prune(clock.now(), 100) == 2

    assert kit.execute(store_url, links) == []
    for stays in (dead_parent.id, dead_child.id):
        job = store.get_job(stays)
        assert job is not None and job.status is JobStatus.DEAD
    assert orphans(kit, store_url) == {}


def test_a_schedules_unstarted_occurrences_leave_no_link_or_tick_behind(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    schedule_id, unstarted = ticked(store, clock, "nightly", JobStatus.SCHEDULED)
    child = enqueue(store, clock, depends_on=[unstarted])
    other_schedule, other = ticked(store, clock, "other", JobStatus.SCHEDULED)
    other_child = enqueue(store, clock, depends_on=[other])
    assert rows_of(kit, store_url, unstarted)["links"] == 1
    assert rows_of(kit, store_url, unstarted)["ticks"] == 1

    store.apply_schedule(
        "default", "nightly", clock.now(), lambda s, a: Plan(delete_unstarted=True)
    )

    assert store.get_job(unstarted) is None
    assert rows_of(kit, store_url, unstarted) == {
        "attempts": 0,
        "outbox": 0,
        "links": 0,
        "ticks": 0,
    }
    assert orphans(kit, store_url) == {}
    detached = kit.execute(
        store_url, "SELECT job_id FROM duetime_ticks WHERE schedule_id = ?", (schedule_id,)
    )
    assert detached == [(None,)]
    # the other schedule's occurrence and its child are untouched
    assert rows_of(kit, store_url, other)["links"] == 1
    assert rows_of(kit, store_url, other)["ticks"] == 1
    got = store.get_job(other_child.id)
    assert got is not None and got.status is JobStatus.BLOCKED
    assert other_schedule != schedule_id
    kept = store.get_job(child.id)
    assert kept is not None  # the child of the deleted occurrence is still there


def test_sqlite_refuses_to_migrate_a_table_whose_key_it_cannot_remove(
    at_25: tuple[Store, str], kit: DialectKit
) -> None:
    """SQLite removes the keys by editing the tables' definitions (docs/stores.md): a table
    whose definition reads otherwise than duetime wrote it (edited by hand) would keep its
    key, whose cascade would delete what a job's move keeps. The migration fails then, and
    changes nothing."""
    store, url = at_25
    if kit.name != "sqlite":
        pytest.skip("PostgreSQL and MariaDB/MySQL drop each key by its name")
    with closing(kit.connect(url)) as conn:
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute(
            "UPDATE sqlite_master SET sql = replace(sql, 'duetime_jobs (id) ON DELETE SET NULL', "
            "'duetime_jobs(id) ON DELETE SET NULL') WHERE name = 'duetime_ticks'"
        )
        conn.commit()
    with pytest.raises(StoreError, match="duetime_foreign_keys_to_jobs_removed"):
        store.migrate()
    assert store.schema_version() == 25
    assert foreign_keys_to_jobs(kit, url) == [
        "duetime_attempts",
        "duetime_job_parents",
        "duetime_job_parents",
        "duetime_outbox",
        "duetime_ticks",
    ]
