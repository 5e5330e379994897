"""PostgreSQL prepares the claim statements on each connection (parsed and rewritten once) and
still plans them for each call's parameters: a generic plan would not know which rows are due.
(SQLite and MariaDB/MySQL prepare nothing server-side.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from duetime.store.postgres.driver import PostgresDriver
from duetime.store.sql.front import SQLStore
from kit import kit_named

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def test_the_claims_are_prepared_and_planned_for_each_call(tmp_path: Path) -> None:
    url = kit_named("postgres").fresh_url(tmp_path)
    driver = PostgresDriver(url, min_size=1, max_size=1)  # every claim on one connection
    store = SQLStore(driver)
    store.migrate()
    try:
        for name in ("claim", "claim_queues"):  # twice as many calls as PostgreSQL's five
            for _ in range(10):  # custom plans before it weighs a generic one
                store.claim(
                    worker_id="w",
                    queues=None if name == "claim" else ["default"],
                    limit=10,
                    now=NOW + timedelta(seconds=1),
                )
        with driver.transaction() as c:
            rows = c.native.execute(
                "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
            ).fetchall()
        # as the server holds them: the parameters numbered ($1, ...), the start the same
        starts = {"claim": "WITH RECURSIVE up AS (", "claim_queues": "WITH RECURSIVE up_1 AS ("}
        for name, start in starts.items():
            assert driver.statements(name)[-1].startswith(start), name
            found = [(r[1], r[2]) for r in rows if r[0].startswith(start)]
            assert found == [(0, 10)], (name, found)
    finally:
        store.close()
