"""Driver.values_alone: a named statement in a transaction of its own (PostgreSQL: BEGIN, the
statements and COMMIT in one pipeline), its rows as their columns' names and each row's
values in that order. It commits, and a statement that fails leaves nothing behind: the
transaction is rolled back and the connection serves the next call."""

from __future__ import annotations

from typing import Any, cast

import pytest

from duetime.core.errors import DuetimeError
from duetime.store.base import Store


class Boom(Exception):
    pass


def driver_of(store: Store) -> Any:
    return cast(Any, store).driver


def test_values_alone_commits_and_a_failure_leaves_nothing(store: Store) -> None:
    driver = driver_of(store)
    names, rows = driver.values_alone("schema_version")
    assert names == ("version",) and rows and store.schema_version() == store.latest_version
    table = "duetime_values_alone_probe"
    with driver.transaction() as c:
        driver.run_script(c.native, f"CREATE TABLE {table} (n INTEGER);")
    # several statements (as the claim's settings and CTE): all committed together
    driver.queries["probe_insert"] = (
        f"INSERT INTO {table} (n) VALUES (1)",
        f"SELECT count(*) AS n, 'one' AS word FROM {table}",
    )
    names, rows = driver.values_alone("probe_insert")
    assert (names, [tuple(r) for r in rows]) == (("n", "word"), [(1, "one")])
    # the second statement fails: the first one's insert is rolled back with it
    driver.queries["probe_fail"] = (
        f"INSERT INTO {table} (n) VALUES (2)",
        "SELECT * FROM duetime_no_such_table",
    )
    for _ in range(3):  # and the connection (or pool) serves the next calls
        with pytest.raises(DuetimeError):
            driver.values_alone("probe_fail")
    driver.queries["probe_count"] = (f"SELECT count(*) AS n FROM {table}",)
    assert driver.values_alone("probe_count")[1] == [(1,)]
    # the connections are transactional again: a block that raises keeps nothing
    driver.queries["probe_insert_only"] = (f"INSERT INTO {table} (n) VALUES (3)",)
    for _ in range(3):
        with pytest.raises(Boom), driver.transaction() as c:
            c.run("probe_insert_only")
            raise Boom
    assert driver.values_alone("probe_count")[1] == [(1,)]
    assert store.schema_version() == store.latest_version
