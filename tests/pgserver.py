"""A PostgreSQL server for tests: the one configured, the local one, or a private throwaway.

server_url() picks, once per process:
1. DUETIME_TEST_PG_URL, when set;
2. postgresql://postgres@127.0.0.1:5432/postgres, when it answers within 3 s
   (skipped when DUETIME_TEST_PG_PRIVATE=1);
3. a private cluster started with initdb/pg_ctl in a temporary directory, stopped and deleted
   when the process exits.

create_database() makes a fresh, uniquely named database on it; drop_database() removes one.
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from duetime.chaos.pgcluster import Cluster, find_bin_dir

LOCAL_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
URL_ENV = "DUETIME_TEST_PG_URL"
PRIVATE_ENV = "DUETIME_TEST_PG_PRIVATE"

_lock = threading.Lock()
_url: str | None = None


def server_url() -> str:
    """The URL of a reachable PostgreSQL server (its maintenance database), cached per process."""
    global _url
    with _lock:
        if _url is None:
            _url = _find_or_start()
        return _url


def create_database(prefix: str = "duetime_test") -> str:
    """Create a fresh database with a unique name on the test server; return its URL."""
    base = server_url()
    name = f"{prefix}_{secrets.token_hex(6)}"
    for attempt in range(5):
        try:
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            break
        except psycopg.errors.ObjectInUse:  # template1 busy with another CREATE DATABASE
            if attempt == 4:
                raise
            time.sleep(0.2 * (attempt + 1))
    return with_database(base, name)


def drop_database(url: str) -> None:
    """Terminate the connections to the database `url` names, and drop it."""
    name = conninfo_to_dict(url).get("dbname")
    base = server_url()
    if not name or name == conninfo_to_dict(base).get("dbname"):
        raise ValueError(f"refusing to drop {name!r}: not a database made by create_database")
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
        drop = sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(str(name)))
        if conn.info.server_version >= 130000:
            drop = sql.SQL("{} WITH (FORCE)").format(drop)
        conn.execute(drop)


def with_database(url: str, name: str) -> str:
    """`url` pointing at database `name` instead (URLs stay URLs, key=value strings stay so)."""
    if url.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(url)
        return urlunsplit(parts._replace(path="/" + name))
    return make_conninfo(url, dbname=name)


# -- finding or starting a server ------------------------------------------------------------


def _reachable(url: str, timeout: int = 3) -> str | None:
    """None when a connection to `url` works, else why it did not."""
    try:
        psycopg.connect(url, connect_timeout=timeout).close()
    except psycopg.Error as exc:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return None


def _find_or_start() -> str:
    configured = os.environ.get(URL_ENV)
    if configured:
        problem = _reachable(configured, timeout=10)
        if problem:
            raise RuntimeError(f"{URL_ENV} is set but PostgreSQL there is not reachable: {problem}")
        return configured
    if os.environ.get(PRIVATE_ENV) != "1" and _reachable(LOCAL_URL) is None:
        return LOCAL_URL
    return _start_private_cluster()


def _start_private_cluster() -> str:
    if find_bin_dir() is None:
        why = (
            f"{PRIVATE_ENV}=1 asks for a private PostgreSQL cluster"
            if os.environ.get(PRIVATE_ENV) == "1"
            else f"PostgreSQL was not reachable at {LOCAL_URL}"
        )
        raise RuntimeError(
            f"{why} and no initdb was found (looked in /usr/lib/postgresql/*/bin and PATH); "
            f"set {URL_ENV}=postgresql://user@host:port/dbname or install postgresql "
            "(e.g. apt-get install postgresql)"
        )
    root = Path(tempfile.mkdtemp(prefix="duetime-pg-"))
    cluster = Cluster(root)

    def cleanup() -> None:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)

    try:
        cluster.start()
    except BaseException:
        cleanup()
        raise
    atexit.register(cleanup)
    return cluster.url
