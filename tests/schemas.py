"""A store at an earlier schema, for the migration tests (tests/contract/test_migration_*.py).

This version's statements name the columns every migration adds, so rows written "at schema
N-1" by them need the columns of the migrations after N too. Those migrations only add to the
schema and none depends on N: `before(store, n)` migrates to N-1 as `migrate` does, then runs
the scripts of the migrations after N ahead, unrecorded, and leaves the store's migrations at
N and below, so that its next `migrate` runs N alone."""

from __future__ import annotations

from typing import Any

from duetime.store.base import Store


def before(store: Store, version: int) -> list[Any]:
    """Bring `store`'s database to the schema before `version` (with the later migrations run
    ahead); returns every migration, for `restore`."""
    driver = store.driver  # type: ignore[attr-defined]
    every: list[Any] = driver.migrations
    driver.migrations = [m for m in every if m.version < version]
    store.migrate()
    later = [m for m in every if m.version > version]
    if later:
        with driver.transaction() as c, driver.translated():
            c.run("schema_version")  # as migrate does first (SQLite re-reads the schema)
            for migration in later:
                driver.run_script(c.native, migration.script)
    driver.migrations = [m for m in every if m.version <= version]
    return every


def restore(store: Store, every: list[Any]) -> None:
    """The store's migrations as they were before `before` (for a store that is closed next)."""
    store.driver.migrations = every  # type: ignore[attr-defined]
