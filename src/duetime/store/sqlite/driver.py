"""The SQLite dialect: one file, WAL journal, writes under BEGIN IMMEDIATE.

Instants are integer microseconds since the Unix epoch (UTC); lists travel as JSON text. One
connection per store, shared by the store's threads under a lock; other processes on the same
machine take their turns through SQLite's file locks (waiting up to the busy timeout; a write
transaction waits for the write lock in short naps of its own, _begin_write).
"""

from __future__ import annotations

import json
import random
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from duetime.core.errors import ConfigurationError, DuetimeError, SchemaError, StoreUnavailable
from duetime.core.models import Wakeup
from duetime.store.base import Listener
from duetime.store.driver import Connection, Driver, Row, unexpected

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
# how long a write transaction naps between two tries for the write lock (seconds, drawn
# anew each time, so that waiting processes do not try in step)
_NAP = (0.0002, 0.001)


def to_micros(value: datetime) -> int:
    """An instant as SQLite stores it: integer microseconds since the epoch."""
    return (value - _EPOCH) // _US


class SQLiteDriver(Driver):
    dialect = "sqlite"
    names_classes = True
    package = "duetime.store.sqlite"
    clock_is_local = True  # SQLite's 'now' is this machine's clock, read by this process

    def __init__(self, path: str | Path, *, busy_timeout: float = 20.0) -> None:
        super().__init__()
        self.path = str(path)
        self.busy_timeout = busy_timeout
        self.lock_wait = busy_timeout
        self._lock = threading.RLock()
        try:
            self._conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=busy_timeout
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError as exc:
            raise ConfigurationError(
                f"cannot open the SQLite database {self.path!r} ({exc}); check that its folder "
                "exists and is writable"
            ) from None
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute("PRAGMA foreign_keys=ON")

    def where(self) -> str:
        return self.path

    @contextmanager
    def transaction(self, *, write: bool = True, snapshot: bool = False) -> Iterator[Connection]:
        # a write transaction takes the write lock at once, so its reads and writes agree; a
        # read transaction (DEFERRED) sees one snapshot of the file until it ends
        with self._lock:
            with self.translated():
                if write and not snapshot:
                    self._begin_write()
                else:
                    self._conn.execute("BEGIN")
            try:
                yield Connection(self, self._conn)
                with self.translated():
                    self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:  # also when COMMIT itself failed
                    self._conn.execute("ROLLBACK")
                raise

    def _begin_write(self) -> None:
        """BEGIN IMMEDIATE, waiting up to the busy timeout for the write lock in naps of under
        a millisecond. SQLite's own busy handler naps longer the longer it waits (up to 100 ms
        a try), so while other processes keep taking the lock one after another, a process it
        waits for can miss every gap between their transactions (one of four workers ran no
        job of a 5,000-job drain): here each waiter tries again within a millisecond, so it
        rarely misses a gap. Every write goes through here (single() is a transaction too)."""
        conn = self._conn
        conn.execute("PRAGMA busy_timeout = 0")  # the naps below do the waiting
        try:
            deadline = 0.0
            while True:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as exc:
                    if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                        raise
                    now = time.monotonic()
                    if not deadline:
                        deadline = now + self.busy_timeout
                    if now >= deadline:
                        raise  # translated: the file stayed locked
                time.sleep(random.uniform(*_NAP))
        finally:
            try:
                conn.execute(f"PRAGMA busy_timeout = {round(self.busy_timeout * 1000)}")
            except BaseException:
                if conn.in_transaction:  # the lock was taken: give it back
                    conn.execute("ROLLBACK")
                raise

    # single(): the default, a transaction. An autocommit statement would wait for the write
    # lock through SQLite's own busy handler, not _begin_write's naps.

    @contextmanager
    def joined(self, native: Any) -> Iterator[Connection]:
        raise ConfigurationError(
            "enqueue inside your own transaction (connection=...) needs PostgreSQL or MySQL; the "
            "SQLite store commits each enqueue on its own connection"
        )
        yield  # pragma: no cover - a generator, for contextmanager

    def execute(
        self, native: Any, sql: str, params: Mapping[str, Any]
    ) -> tuple[list[Row] | None, int]:
        cursor = native.execute(sql, params)
        rows = cursor.fetchall() if cursor.description is not None else None
        return rows, cursor.rowcount

    def execute_many(self, native: Any, sql: str, params: list[Mapping[str, Any]]) -> None:
        native.executemany(sql, params)

    def run_script(self, native: Any, script: str) -> None:
        buffer = ""
        for line in script.splitlines(keepends=True):
            if not buffer and line.strip().startswith("--"):
                continue
            buffer += line
            if sqlite3.complete_statement(buffer):
                native.execute(buffer.strip())
                buffer = ""
        if buffer.strip():
            raise SchemaError(f"incomplete statement in migration: {buffer.strip()[:80]}")

    def to_time(self, value: Any) -> datetime:
        return _EPOCH + timedelta(microseconds=value)

    def encode_time(self, value: datetime) -> int:
        return to_micros(value)

    def json_time(self, value: datetime) -> int:
        return to_micros(value)

    def encode_bool(self, value: bool) -> int:
        return int(value)

    def encode_list(self, value: Sequence[Any]) -> str:
        return json.dumps(list(value))

    def translate(self, exc: BaseException) -> DuetimeError | None:
        if not isinstance(exc, sqlite3.Error):
            return None
        text = str(exc)
        if isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
            return StoreUnavailable(
                f"the SQLite database {self.path} stayed locked by another process for "
                f"{self.busy_timeout:g}s; try again, or use PostgreSQL for heavy concurrency"
            )
        return unexpected(self.dialect, exc)

    def listener(self) -> Listener:
        return _DataVersion(self.path)

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class _DataVersion:
    """SQLite has no notifications, but a connection's `PRAGMA data_version` changes whenever
    another connection commits: polled every 2 ms on a connection of its own, it tells that
    something changed (not what) at the cost of a few microseconds."""

    POLL = 0.002

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.seen = self._version()

    def _version(self) -> int:
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def wait(self, timeout: float) -> list[Wakeup]:
        deadline = time.monotonic() + timeout
        while True:
            version = self._version()
            if version != self.seen:
                self.seen = version
                return [Wakeup()]
            if time.monotonic() >= deadline:
                return []
            time.sleep(self.POLL)

    def close(self) -> None:
        self.conn.close()


def database_path(url: str) -> Path:
    """The file of sqlite:///relative/path.db or sqlite:////absolute/path.db."""
    path = url.split(":", 1)[1].removeprefix("///")
    if not url.split(":", 1)[1].startswith("///") or not path:
        raise ConfigurationError("sqlite URL has no file name; use sqlite:///duetime.db")
    return Path(path)


def open_driver(url: str, *, pool_timeout: float | None = None) -> SQLiteDriver:
    """sqlite:///relative/path.db or sqlite:////absolute/path.db (pool_timeout: unused)."""
    return SQLiteDriver(database_path(url))


def missing_database(url: str) -> str | None:
    """Why there is no database at `url` (opening it would create an empty file), or None."""
    path = database_path(url)
    return None if path.exists() else f"there is no file {path.absolute()}"
