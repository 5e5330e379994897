"""The lower priority classes keep their share when another claim holds some of the rows a
claim chose (docs/flow-control.md, "Priorities"). Only dialects with row locks have this
contention (SQLite has one writer at a time): PostgreSQL and MySQL/MariaDB. A second
connection holds the oldest high-priority rows locked, as a concurrent worker's claim does
between its read and its commit: a claim that chose them starts fewer jobs than its slots,
yet more were due, so its lower classes' credit must not be dropped as if it had taken every
due job."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

import duetime
from duetime.core.clock import ManualClock
from duetime.store import open_store
from duetime.store.sqlstore import SQLStore
from jobhelpers import enqueue
from kit import DialectKit, kit_named

ROW_LOCKING = ["postgres", "mysql"]


@pytest.fixture(params=ROW_LOCKING)
def kit(request: pytest.FixtureRequest) -> DialectKit:
    return kit_named(request.param)


@pytest.fixture
def sql_store(kit: DialectKit, tmp_path: Path) -> Iterator[SQLStore]:
    url = kit.fresh_url(tmp_path)
    app = duetime.App(database_url=url)
    app.migrate()
    app.close()
    store = open_store(url)
    assert isinstance(store, SQLStore)
    yield store
    store.close()


def test_a_claim_that_lost_chosen_rows_to_another_keeps_the_lower_class_share(
    kit: DialectKit, sql_store: SQLStore, clock: ManualClock
) -> None:
    low = [enqueue(sql_store, clock, priority=0).id for _ in range(10)]
    high = [enqueue(sql_store, clock, priority=10).id for _ in range(80)]
    sql_store.set_priority_share(0.1)  # claims of 10 slots: one low slot in each
    url = sql_store.driver.url  # type: ignore[attr-defined]
    with closing(kit.connect(url)) as other:  # a concurrent claim, between read and commit
        marks = ", ".join("?" for _ in high[:4])
        kit.execute_on(other, "BEGIN")  # the kit's connections autocommit
        kit.execute_on(
            other, f"SELECT id FROM duetime_jobs WHERE id IN ({marks}) FOR UPDATE", high[:4]
        )
        lows = []
        for _ in range(6):
            got = sql_store.claim(worker_id="w", queues=None, limit=10, now=clock.now())
            lows.append(sum(1 for c in got if c.job.priority == 0))
        kit.execute_on(other, "ROLLBACK")
    # every claim keeps the low class's slot; dropping the credit after a claim that came
    # short under contention gave 1, 0, 1, 0, ...
    assert lows == [1] * 6
    assert (
        sorted(
            c.job.id
            for c in sql_store.claim(worker_id="w", queues=None, limit=100, now=clock.now())
            if c.job.priority == 0
        )
        == low[6:]
    )
