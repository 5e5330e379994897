"""Fresh databases for each (workload, system, run), and the orchestrator's read-only probe.

Runs in duetime's venv (psycopg and PyMySQL come with duetime's extras).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pymysql

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_MYSQL_URL = "mysql://root@127.0.0.1:3306/"


def _with_path(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))


def _mysql_connect(url: str, database: str | None = None) -> Any:
    parts = urlsplit(url)
    return pymysql.connect(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 3306,
        user=parts.username or "root",
        password=parts.password or "",
        database=database,
        autocommit=True,
    )


@dataclass
class Database:
    store: str  # postgres, mysql or sqlite
    name: str
    url: str
    admin_url: str
    path: Path | None = None  # SQLite's file
    _probe: Any = field(default=None, repr=False)

    def count(self, query: str) -> int:
        """One integer from a fresh snapshot (autocommit: every statement sees the latest)."""
        if self._probe is None:
            self._probe = self._connect()
        if self.store == "mysql":
            with self._probe.cursor() as cur:
                cur.execute(query)
                row = cur.fetchone()
        else:
            row = self._probe.execute(query).fetchone()
        return int(row[0]) if row else 0

    def sizes(self) -> dict[str, int]:
        """Bytes of duetime's jobs and attempts tables, TOAST and indexes (bench/sizes.py);
        on PostgreSQL after a plain VACUUM of both."""
        from bench import sizes

        if self._probe is None:
            self._probe = self._connect()
        if self.store == "postgres":
            sizes.postgres_vacuum(self._probe)
            return sizes.postgres_sizes(self._probe)
        if self.store == "mysql":
            return sizes.mysql_sizes(self._probe)
        return sizes.sqlite_sizes(self._probe)

    def updates(self) -> dict[str, int]:
        """PostgreSQL's insert, update, HOT update and dead-tuple counters of both tables."""
        from bench import sizes

        if self._probe is None:
            self._probe = self._connect()
        return sizes.postgres_updates(self._probe)

    def _connect(self) -> Any:
        if self.store == "postgres":
            return psycopg.connect(self.url, autocommit=True)
        if self.store == "mysql":
            return _mysql_connect(self.admin_url, self.name)
        assert self.path is not None
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=60)
        return conn

    def drop(self) -> None:
        if self._probe is not None:
            self._probe.close()
            self._probe = None
        if self.store == "postgres":
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        elif self.store == "mysql":
            conn = _mysql_connect(self.admin_url)
            try:
                with conn.cursor() as cur:
                    cur.execute(f"DROP DATABASE IF EXISTS `{self.name}`")
            finally:
                conn.close()
        elif self.path is not None:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)


@dataclass
class Servers:
    pg_url: str = DEFAULT_PG_URL
    mysql_url: str = DEFAULT_MYSQL_URL
    sqlite_dir: Path = Path("/tmp")
    created: list[Database] = field(default_factory=list)

    def create(self, store: str, name: str) -> Database:
        """A new, empty database named `name` (unique per run) on the given store."""
        if store == "postgres":
            with psycopg.connect(self.pg_url, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            db = Database(store, name, _with_path(self.pg_url, name), self.pg_url)
        elif store == "mysql":
            conn = _mysql_connect(self.mysql_url)
            try:
                with conn.cursor() as cur:
                    cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
            finally:
                conn.close()
            db = Database(store, name, _with_path(self.mysql_url, name), self.mysql_url)
        elif store == "sqlite":
            path = self.sqlite_dir / f"{name}.db"
            db = Database(store, name, f"sqlite:///{path}", "", path=path)
        else:
            raise ValueError(f"unknown store {store!r}")
        self.created.append(db)
        return db

    def drop_all(self) -> None:
        """Drop whatever a crash left behind (each workload drops its own database)."""
        while self.created:
            self.created.pop().drop()

    def forget(self, db: Database) -> None:
        if db in self.created:
            self.created.remove(db)


def check(servers: Servers, stores: set[str]) -> dict[str, str]:
    """Which database servers answer: store -> error message, for those that do not."""
    problems: dict[str, str] = {}
    probes: dict[str, Callable[[], Any]] = {
        "postgres": lambda: psycopg.connect(servers.pg_url, connect_timeout=5).close(),
        "mysql": lambda: _mysql_connect(servers.mysql_url).close(),
    }
    for store in stores & probes.keys():
        try:
            probes[store]()
        except Exception as exc:
            problems[store] = f"{type(exc).__name__}: {exc}"
    return problems
