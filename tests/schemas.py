"""A store at an earlier schema, for the migration tests (tests/contract/test_migration_*.py).

This version's statements name the columns every migration adds, so rows written "at schema
N-1" by them need the columns of the migrations after N too. Those migrations only add to the
schema and, but for those in BUILDS_ON, none depends on N: `before(store, n)` migrates to N-1
as `migrate` does, then runs the scripts of the migrations after N ahead, unrecorded, and
leaves the store's migrations at N and below, so that its next `migrate` runs N alone (with
those that build on N)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from duetime.store import open_store
from duetime.store.base import Store
from duetime.store.driver import load_migrations

if TYPE_CHECKING:
    from kit import DialectKit

# the later migrations that change what an earlier one made, and so cannot run ahead of it:
# migration 24 replaces migration 22's view of every attempt (over 22's columns), and
# migration 26 replaces 24's (which, run after it, would drop 26's part of the view, over
# 25's table) and drops the foreign keys of migration 20's links
# 27: the view of every job names the columns 18 to 22 add and the history table (25)
# 29: drops the indexes of the successes' start that 24 and 25 make
BUILDS_ON = {24: {22}, 26: {20, 22, 24, 25}, 27: {18, 19, 20, 21, 22, 25}, 29: {24, 25}}


def before(store: Store, version: int) -> list[Any]:
    """Bring `store`'s database to the schema before `version` (with the later migrations run
    ahead, but those that build on `version`, or on one of those: the next `migrate` runs them
    after it); returns every migration, for `restore`."""
    driver = store.driver  # type: ignore[attr-defined]
    every: list[Any] = driver.migrations
    driver.migrations = [m for m in every if m.version < version]
    store.migrate()
    waits = {version}  # `version` and the later migrations that build on one that waits
    for m in every:
        if m.version > version and BUILDS_ON.get(m.version, set()) & waits:
            waits.add(m.version)
    later = [m for m in every if m.version > version and m.version not in waits]
    _run_unrecorded(store, later)
    driver.migrations = [m for m in every if m.version <= version or m not in later]
    return every


@contextmanager
def store_before(kit: DialectKit, tmp_path: Path, version: int) -> Iterator[tuple[Store, str]]:
    """A store on a fresh database at the schema before `version` (`before`), and its URL;
    afterwards its migrations are put back as they were and it is closed."""
    url = kit.fresh_url(tmp_path, drop=True)
    store = open_store(url)
    every = before(store, version)
    try:
        yield store, url
    finally:
        store.driver.migrations = every  # type: ignore[attr-defined]
        store.close()


def attempt_guard(
    store: Store, *, view: bool = True, refusal: bool = True
) -> tuple[list[str], list[str]]:
    """Migration 22's statements that a test probing an earlier schema lifts and puts back:
    (lift, restore). The views of every attempt (duetime_all_attempts, as the newest migration
    that defines it has it: 26) and of every job (duetime_all_jobs, 27) name columns such a
    test drops, and the refusal of 'running' attempt rows keeps it from writing one as an
    earlier version stored it."""
    dialect = store.driver.dialect  # type: ignore[attr-defined]
    driver = store.driver  # type: ignore[attr-defined]
    migrations = load_migrations(driver.package)
    [m22] = [m for m in migrations if m.version == 22]
    script: str = m22.script
    lift: list[str] = []
    restore: list[str] = []
    for name in ("duetime_all_jobs", "duetime_all_attempts") if view else ():
        newest: str = [m.script for m in migrations if f"VIEW {name} AS" in m.script][-1]
        view_at = newest.index(f"VIEW {name} AS")
        start = newest.rindex("CREATE", 0, view_at)
        create = newest[start:].split(";\n")[0].replace("CREATE OR REPLACE VIEW", "CREATE VIEW")
        lift.append(f"DROP VIEW {name}")
        restore.insert(0, create)
    if not refusal:
        pass
    elif dialect == "sqlite":  # triggers (SQLite adds no constraint to a table)
        for part in script.split("END;"):
            if "CREATE TRIGGER" in part:
                trigger = part[part.index("CREATE TRIGGER") :].strip() + "\nEND"
                lift.append(f"DROP TRIGGER {trigger.split()[2]}")
                restore.append(trigger)
    else:  # a CHECK constraint (PostgreSQL, MariaDB/MySQL)
        name = "duetime_attempts_ended_only_upgrade_every_worker"
        lift.append(f"ALTER TABLE duetime_attempts DROP CONSTRAINT {name}")
        restore.append(
            f"ALTER TABLE duetime_attempts ADD CONSTRAINT {name} CHECK (status <> 'running')"
        )
    return lift, restore


def run_all(store: Store, statements: list[str]) -> None:
    """Run raw statements (migration text) in one transaction of the store's driver."""
    driver = store.driver  # type: ignore[attr-defined]
    with driver.transaction() as c, driver.translated():
        c.run("schema_version")  # as migrate does first (SQLite re-reads the schema)
        for statement in statements:
            end = ";" if driver.dialect == "sqlite" else ""  # a complete statement, for SQLite
            driver.run_script(c.native, statement + end)


def run_unrecorded(store: Store, version: int) -> None:
    """Run one migration's script without recording it (the next `migrate` runs it again:
    undo what it made first)."""
    driver = store.driver  # type: ignore[attr-defined]
    _run_unrecorded(store, [m for m in driver.migrations if m.version == version])


def _run_unrecorded(store: Store, migrations: list[Any]) -> None:
    """Run migrations' scripts in one transaction of the store's driver, unrecorded."""
    if not migrations:
        return
    driver = store.driver  # type: ignore[attr-defined]
    with driver.transaction() as c, driver.translated():
        c.run("schema_version")  # as migrate does first (SQLite re-reads the schema)
        for migration in migrations:
            driver.run_script(c.native, migration.script)
