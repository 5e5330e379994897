"""The dialect kit: what the shared test suites need from each database dialect.

Every contract test, the model test and the dialect-wide integration tests take a `store_url`
fixture that is parametrized over KITS, so a dialect joins all of them by one line at the end
of this module (see docs/stores.md, "Adding a dialect"). A kit knows how to find or start its
server, make a fresh database for this test run, empty it between tests, and run raw SQL for
tests that look at or break the database on purpose (written with `?` placeholders).
"""

from __future__ import annotations

import re
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar


class DialectKit(ABC):
    name: ClassVar[str]  # the store's dialect
    placeholder: ClassVar[str] = "%s"  # what `?` becomes in raw SQL
    wakeups: ClassVar[str] = "none"  # Store.listen(): "none", "changed" (no detail), "due"
    # a plain success stays on its job's row, with no attempt row (migration 24; not on
    # MariaDB/MySQL, which write its row as every other ending's: docs/stores.md)
    successes_on_rows: ClassVar[bool] = True
    # a worker's finish moves a job that ends without a key to the history table (PostgreSQL
    # only for now: docs/history-plan.md, step 8)
    moves_ended: ClassVar[bool] = False

    @abstractmethod
    def fresh_url(self, tmp_path: Path, *, drop: bool = False) -> str:
        """The URL of an empty database for one test: no duetime tables, or (where the kit
        keeps a schema left intact by the previous test) an empty, fully migrated schema.
        With `drop`, never a kept schema: every duetime table is dropped (for tests that need
        no statistics or other state of an earlier test's tables)."""

    @abstractmethod
    def connect(self, url: str) -> Any:
        """A DB-API connection to `url` in autocommit mode."""

    def finish(self) -> None:  # noqa: B027 - most kits create nothing to drop
        """Called once when the test run ends: drop what the run created."""

    def tables(self, url: str) -> list[str]:
        """The duetime tables of the database at `url`."""
        return [name for (name,) in self.execute(url, self.tables_sql)]

    tables_sql: ClassVar[str]  # lists the names of the database's duetime tables

    def owns(self, url: str) -> bool:
        return url.split(":", 1)[0] in self.schemes

    schemes: ClassVar[tuple[str, ...]]

    def instant(self, value: datetime) -> Any:
        """`value` as this dialect stores an instant (for raw SQL parameters)."""
        return value

    def execute(self, url: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one raw statement (placeholders written `?`); return its rows."""
        with closing(self.connect(url)) as conn:
            cur = conn.cursor()
            cur.execute(sql.replace("?", self.placeholder), tuple(params))
            rows = cur.fetchall() if cur.description is not None else []
            return [tuple(r) for r in rows]

    def execute_on(self, native: Any, sql: str, params: Sequence[Any] = ()) -> None:
        """Run a statement on a connection the store handed out (a completion block)."""
        cur = native.cursor()
        cur.execute(sql.replace("?", self.placeholder), tuple(params))

    @abstractmethod
    def row_unlocked(self, url: str, job_id: int) -> bool:
        """True when no transaction holds a lock that would block work on the job."""


class SQLiteKit(DialectKit):
    name = "sqlite"
    tables_sql = "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'duetime%'"
    placeholder = "?"
    wakeups = "changed"
    schemes = ("sqlite",)

    def fresh_url(self, tmp_path: Path, *, drop: bool = False) -> str:
        return f"sqlite:///{tmp_path / 'duetime.db'}"  # a new file: nothing to drop

    def connect(self, url: str) -> sqlite3.Connection:
        return sqlite3.connect(url.removeprefix("sqlite:///"), timeout=60, isolation_level=None)

    def instant(self, value: datetime) -> Any:
        from duetime.store.sqlite.driver import to_micros

        return to_micros(value)

    def row_unlocked(self, url: str, job_id: int) -> bool:
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=0.2, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            return True
        except sqlite3.OperationalError:
            return False
        finally:
            conn.close()


class PostgresKit(DialectKit):
    """The server of tests/pgserver.py (configured, local, or a private throwaway cluster)."""

    name = "postgres"
    moves_ended = True
    schemes = ("postgresql", "postgres")
    wakeups = "due"
    _url: str | None = None

    def run_url(self) -> str:
        """This test run's own database, created on first use."""
        if self._url is None:
            import pgserver

            self._url = pgserver.create_database()
        return self._url

    tables_sql = (
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
        "AND tablename LIKE 'duetime%%'"
    )

    written_sql = (
        "SELECT relname FROM pg_class WHERE relnamespace = current_schema()::regnamespace "
        "AND relkind = 'r' AND relname LIKE 'duetime%' AND pg_relation_size(oid) > 0"
    )
    restart_sequences_sql = (
        "SELECT setval(format('%I', sequencename)::regclass, 1, false) FROM pg_sequences "
        "WHERE schemaname = current_schema() AND sequencename LIKE 'duetime%' "
        "AND last_value IS NOT NULL"
    )

    def fresh_url(self, tmp_path: Path, *, drop: bool = False) -> str:
        """Empty the run's database. A schema left intact by the previous test (exactly the
        migrations this code knows, and their tables) is kept: one TRUNCATE empties the tables
        written to and restarts their ids at 1, where dropping every table and migrating again
        took about 0.2 s a test. Tables a test added under the duetime_ prefix are dropped. A
        schema not intact, or `drop`, has every duetime table dropped."""
        from duetime.store.driver import load_migrations

        url = self.run_url()
        migrations = load_migrations("duetime.store.postgres")
        schema = {name for m in migrations for name in _CREATE_TABLE.findall(m.script)}
        with closing(self.connect(url)) as conn:
            tables = {name for (name,) in conn.execute(self.tables_sql)}
            applied = "SELECT version FROM duetime_migrations ORDER BY 1"
            intact = (
                not drop
                and "duetime_migrations" in tables
                and schema <= tables
                and [v for (v,) in conn.execute(applied)] == [m.version for m in migrations]
            )
            if intact:
                extra = tables - schema - {"duetime_migrations"}
                if extra:
                    conn.execute(f"DROP TABLE {_names(extra)} CASCADE")
                # a TRUNCATE costs about 2 ms a table and index: only the tables written to
                # since they were made or emptied (a file of one page or more) need it
                written = {name for (name,) in conn.execute(self.written_sql)} & schema
                if written:
                    conn.execute(f"TRUNCATE {_names(written)} RESTART IDENTITY CASCADE")
                conn.execute(self.restart_sequences_sql)  # ids taken by an insert that failed
            elif tables:
                conn.execute(f"DROP TABLE IF EXISTS {_names(tables)} CASCADE")
        return url

    def connect(self, url: str) -> Any:
        import psycopg

        return psycopg.connect(url, autocommit=True)

    def finish(self) -> None:
        if self._url is not None:
            import pgserver

            pgserver.drop_database(self._url)

    def row_unlocked(self, url: str, job_id: int) -> bool:
        import psycopg

        with psycopg.connect(url) as pg:
            try:
                for table in ("duetime_jobs", "duetime_jobs_done"):  # either holds the job
                    pg.execute(f"SELECT id FROM {table} WHERE id = %s FOR UPDATE NOWAIT", (job_id,))
                pg.execute(
                    "SELECT id FROM duetime_attempts WHERE job_id = %s FOR UPDATE NOWAIT",
                    (job_id,),
                )
                return True
            except psycopg.errors.LockNotAvailable:
                return False
            finally:
                pg.rollback()


class MySQLKit(DialectKit):
    """MariaDB 10.6+ or MySQL 8, found or started by tests/mysqlserver.py. Each run creates
    its own database and drops it at the end."""

    name = "mysql"
    successes_on_rows = False
    schemes = ("mysql", "mariadb")
    tables_sql = (
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = DATABASE() AND table_name LIKE 'duetime%%' "
        "AND table_type = 'BASE TABLE'"
    )
    _url: str | None = None

    def server_url(self) -> str:
        import mysqlserver

        return mysqlserver.server_url()

    def run_url(self) -> str:
        if self._url is None:
            import secrets
            from urllib.parse import urlsplit, urlunsplit

            server = self.server_url()
            name = f"duetime_test_{secrets.token_hex(6)}"
            self.execute(server, f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
            self._url = urlunsplit(urlsplit(server)._replace(path="/" + name))
        return self._url

    def fresh_url(self, tmp_path: Path, *, drop: bool = False) -> str:
        """Empty the run's database. DDL is slow here (about 1 s to build the schema), so a
        schema left intact by the previous test is kept and only its rows are deleted
        (unless `drop`)."""
        from duetime.store.driver import load_migrations

        url = self.run_url()
        tables = self.tables(url)
        expected = [m.version for m in load_migrations("duetime.store.mysql")]
        intact = (
            not drop
            and "duetime_migrations" in tables
            and [
                v for (v,) in self.execute(url, "SELECT version FROM duetime_migrations ORDER BY 1")
            ]
            == expected
        )
        with closing(self.connect(url)) as conn:
            cur = conn.cursor()
            cur.execute("SET FOREIGN_KEY_CHECKS = 0")
            if intact:
                cur.execute("START TRANSACTION")
                for name in tables:
                    if name != "duetime_migrations":
                        cur.execute(f"DELETE FROM `{name}`")
                # the attempt id counter's one row, as migration 22 makes it
                cur.execute("INSERT INTO duetime_attempt_ids (id, next_id) VALUES (1, 1)")
                cur.execute("COMMIT")
            elif tables:
                cur.execute("DROP VIEW IF EXISTS duetime_all_attempts")  # migration 22's
                cur.execute("DROP VIEW IF EXISTS duetime_all_jobs")  # migration 27's
                cur.execute("DROP TABLE IF EXISTS " + ", ".join(f"`{n}`" for n in tables))
        return url

    def connect(self, url: str) -> Any:
        import pymysql

        from duetime.store.mysql.driver import _connect_params

        params = {**_connect_params(url), "autocommit": True}
        return pymysql.connect(**params)

    def instant(self, value: datetime) -> Any:
        from datetime import UTC

        return value.astimezone(UTC).replace(tzinfo=None)

    def finish(self) -> None:
        if self._url is not None:
            from urllib.parse import urlsplit

            name = urlsplit(self._url).path.lstrip("/")
            self.execute(self._url, f"DROP DATABASE IF EXISTS {name}")

    def row_unlocked(self, url: str, job_id: int) -> bool:
        import pymysql

        with closing(self.connect(url)) as conn:
            cur = conn.cursor()
            cur.execute("SET SESSION innodb_lock_wait_timeout = 1")
            cur.execute("START TRANSACTION")
            try:
                for table in ("duetime_jobs", "duetime_jobs_done"):  # either holds the job
                    cur.execute(
                        f"SELECT id FROM {table} WHERE id = %s FOR UPDATE NOWAIT", (job_id,)
                    )
                cur.execute(
                    "SELECT id FROM duetime_attempts WHERE job_id = %s FOR UPDATE NOWAIT",
                    (job_id,),
                )
                return True
            except pymysql.err.OperationalError:
                return False
            finally:
                conn.rollback()


_CREATE_TABLE = re.compile(r"CREATE TABLE (?:IF NOT EXISTS )?(duetime_\w+)", re.IGNORECASE)


def _names(tables: set[str]) -> str:
    return ", ".join(f'"{name}"' for name in sorted(tables))


def kit_for(url: str) -> DialectKit:
    for kit in KITS:
        if kit.owns(url):
            return kit
    raise ValueError(f"no dialect kit for {url!r}")


def kit_named(name: str) -> DialectKit:
    return next(kit for kit in KITS if kit.name == name)


# -- the registry: one line per dialect ----------------------------------------------------------
KITS: list[DialectKit] = [
    SQLiteKit(),
    PostgresKit(),
    MySQLKit(),
]
