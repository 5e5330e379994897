"""PostgreSQL prepares the claim statements on each connection (parsed and rewritten once).
The claim of every queue is planned once there (a generic plan, whose settings keep it on the
claim-order index whatever the table holds: test_plans_unanalyzed.py); the claim of named
queues is planned for each call's parameters: its queues' names are constants of its plan,
which picks each queue's own index with them. (SQLite and MariaDB/MySQL prepare nothing
server-side.)"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from duetime.core.clock import ManualClock
from duetime.core.errors import DuetimeError, StoreConflict
from duetime.store.postgres.driver import PostgresDriver
from duetime.store.sql.front import SQLStore
from integration.test_plans import claim_params
from jobhelpers import enqueue
from kit import kit_named

NOW = datetime(2026, 6, 1, tzinfo=UTC)
# the claims as the server holds them: the parameters numbered ($1, ...), the start the same
STARTS = {"claim": "WITH RECURSIVE up AS (", "claim_queues": "WITH RECURSIVE up_1 AS ("}


@pytest.fixture
def one_connection(tmp_path: Path) -> Iterator[tuple[str, PostgresDriver, SQLStore]]:
    url = kit_named("postgres").fresh_url(tmp_path, drop=True)
    driver = PostgresDriver(url, min_size=1, max_size=1)  # every claim on one connection
    store = SQLStore(driver)
    store.migrate()
    yield url, driver, store
    store.close()


def plans(conn: Any) -> dict[str, list[tuple[int, int]]]:
    """Each claim's (generic plans, custom plans) as the connection's prepared statements."""
    rows = conn.execute(
        "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
    ).fetchall()
    return {
        name: [(r[1], r[2]) for r in rows if r[0].startswith(start)]
        for name, start in STARTS.items()
    }


def claim_ten_times(store: SQLStore, name: str) -> None:
    for _ in range(10):  # twice PostgreSQL's five custom plans before it weighs a generic one
        store.claim(
            worker_id="w",
            queues=None if name == "claim" else ["default"],
            limit=10,
            now=NOW + timedelta(seconds=1),
        )


def test_the_claims_are_prepared_and_planned_as_each_needs(
    one_connection: tuple[str, PostgresDriver, SQLStore],
) -> None:
    url, driver, store = one_connection
    for name, start in STARTS.items():
        assert driver.statements(name)[-1].startswith(start), name
        claim_ten_times(store, name)
    with driver.transaction() as c:
        # (generic plans, custom plans): the claim's one generic plan ran ten times
        assert plans(c.native) == {"claim": [(10, 0)], "claim_queues": [(0, 10)]}
    # the control: the claim of named queues prepared without its SET LOCAL plan_cache_mode
    # is given a generic plan by the fifth call (what it must not be)
    with psycopg.connect(url) as conn:
        for _ in range(10):
            conn.execute("SET LOCAL enable_sort = off")
            conn.execute(driver.statements("claim_queues")[-1], claim_params(False), prepare=True)
            conn.commit()
        [(generic, _)] = plans(conn)["claim_queues"]
        assert generic > 0, plans(conn)


def test_a_claim_prepared_before_a_migration_changed_the_jobs_table_runs_after_it(
    one_connection: tuple[str, PostgresDriver, SQLStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A migration run while workers run (`duetime migrate`, then restart the workers) may
    change a column a prepared claim returns (store/rows.py CLAIMED_COLUMNS): PostgreSQL
    refuses the prepared statement once; the claim is run again, prepared anew, and takes its
    jobs."""
    url, driver, store = one_connection
    claim_ten_times(store, "claim")
    enqueue(store, ManualClock(NOW), args={"i": 1})
    conflicts: list[DuetimeError] = []
    translate = driver.translate

    def noted(exc: BaseException) -> DuetimeError | None:
        mine = translate(exc)
        if isinstance(mine, StoreConflict):
            conflicts.append(mine)
        return mine

    monkeypatch.setattr(driver, "translate", noted)
    with psycopg.connect(url, autocommit=True) as admin:
        # a returned column's type changes (text to varchar and back: the same values), as a
        # migration would change it: with the view of every job (migration 27) made again
        [(view,)] = admin.execute("SELECT pg_get_viewdef('duetime_all_jobs')").fetchall()
        admin.execute("DROP VIEW duetime_all_jobs")
        admin.execute("ALTER TABLE duetime_jobs ALTER COLUMN progress_message TYPE varchar(800)")
        try:
            claims = store.claim(
                worker_id="w", queues=None, limit=10, now=NOW + timedelta(seconds=1)
            )
            assert [c.job.args for c in claims] == [{"i": 1}]
        finally:
            admin.execute("ALTER TABLE duetime_jobs ALTER COLUMN progress_message TYPE text")
            admin.execute(f"CREATE VIEW duetime_all_jobs AS {view}")
    assert len(conflicts) == 1 and "changed a table" in str(conflicts[0])
