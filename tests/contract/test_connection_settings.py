"""Connection hygiene: TCP keepalives and server-side timeouts on every connection duetime
opens, so a connection lost in the middle of a transaction (a partition) gives its row locks
back in bounded time; the URL's own values win over duetime's (docs/stores.md)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from duetime.core.errors import ConfigurationError, StoreError, StoreUnavailable
from kit import kit_named


def _with_query(url: str, query: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{query}"


def _tcp_option(fd: int, option: int) -> int:
    sock = socket.socket(fileno=socket.dup(fd))
    try:
        return sock.getsockopt(socket.IPPROTO_TCP, option)
    finally:
        sock.close()


# -- PostgreSQL ---------------------------------------------------------------------------------


@pytest.fixture
def pg_driver_factory(pg_database_url: str) -> Iterator[Any]:
    from duetime.store.postgres.driver import PostgresDriver

    opened: list[PostgresDriver] = []

    def make(query: str = "") -> PostgresDriver:
        driver = PostgresDriver(_with_query(pg_database_url, query) if query else pg_database_url)
        opened.append(driver)
        return driver

    yield make
    for driver in opened:
        driver.close()


def _show(native: Any, name: str) -> str:
    return str(native.execute(f"SHOW {name}").fetchone()[0])


def test_postgres_sessions_carry_the_timeouts_and_keepalives(pg_driver_factory: Any) -> None:
    driver = pg_driver_factory()
    with driver.transaction() as c:
        assert _show(c.native, "idle_in_transaction_session_timeout") == "1min"
        assert _show(c.native, "tcp_keepalives_idle") == "10"
        assert _show(c.native, "tcp_keepalives_interval") == "5"
        assert _show(c.native, "tcp_keepalives_count") == "3"
        assert _show(c.native, "tcp_user_timeout") == "30000"  # ms
        if c.native.info.server_version >= 140000:
            assert _show(c.native, "client_connection_check_interval") == "5s"
        assert _show(c.native, "statement_timeout") == "0"  # migrations may run long
        assert _show(c.native, "TimeZone") == "UTC"
        fd = c.native.pgconn.socket
        assert _tcp_option(fd, socket.TCP_KEEPIDLE) == 10
        assert _tcp_option(fd, socket.TCP_KEEPINTVL) == 5
        assert _tcp_option(fd, socket.TCP_KEEPCNT) == 3
        assert _tcp_option(fd, socket.TCP_USER_TIMEOUT) == 30000
    listener = driver.listener()
    try:  # the LISTEN connection too: it sits idle for long
        conn = listener.conn  # type: ignore[attr-defined]
        assert _show(conn, "idle_in_transaction_session_timeout") == "1min"
        assert _tcp_option(conn.pgconn.socket, socket.TCP_KEEPIDLE) == 10
    finally:
        listener.close()


def test_postgres_a_first_call_opens_one_pooled_connection_not_two(
    pg_driver_factory: Any,
) -> None:
    """A one-shot command's first call finds the pool's connection ready: had it waited for
    it, the pool would have opened a second one as well (each a server process, a TLS offer,
    a login and the session's settings)."""
    name = f"dt-first-call-{time.monotonic_ns()}"
    driver = pg_driver_factory(f"application_name={name}")
    with driver.single() as c:
        c.native.execute("SELECT 1")

    def backends() -> int:
        with driver.single() as c:
            row = c.native.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
            ).fetchone()
        return int(row[0])

    deadline = time.monotonic() + 0.5  # a second connection, were one coming, is open by then
    while time.monotonic() < deadline:
        assert backends() == 1
        time.sleep(0.05)


def test_postgres_a_pool_that_cannot_get_its_first_connection_is_closed(
    pg_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening fails in one line when the pool gets no connection in time, and the pool is
    closed: left open, its threads would go on connecting, and a caller that retries (the
    worker waiting for its store) would leave one such pool behind per try."""
    import psycopg_pool

    from duetime.store.postgres.driver import PostgresDriver

    pools: list[Any] = []
    real_wait = psycopg_pool.ConnectionPool.wait

    def no_connection(self: Any, timeout: float = 30.0) -> None:
        pools.append(self)
        raise psycopg_pool.PoolTimeout("no connection")

    monkeypatch.setattr(psycopg_pool.ConnectionPool, "wait", no_connection)
    with pytest.raises(StoreUnavailable, match=r"no connection in 2 s; check that the server"):
        PostgresDriver(pg_database_url, pool_timeout=2.0)
    monkeypatch.setattr(psycopg_pool.ConnectionPool, "wait", real_wait)
    [pool] = pools
    assert pool.closed


def test_postgres_the_finish_statement_is_prepared_server_side(tmp_path: Path) -> None:
    """finish_jobs, whose plan cannot depend on its parameters (its rows come from a JSON
    batch), is prepared once per connection instead of parsed and planned per batch."""
    from duetime.store import open_store
    from duetime.store.driver import Rows
    from duetime.store.postgres.driver import PostgresDriver

    url = kit_named("postgres").fresh_url(tmp_path)
    store = open_store(url)
    store.migrate()
    store.close()
    driver = PostgresDriver(url, max_size=1)
    try:
        for _ in range(2):
            with driver.transaction() as c:
                c.run("finish_jobs", batch=Rows(), now=datetime.now(UTC), whole=False)
        with driver.transaction() as c:
            prepared = [
                str(r[0])
                for r in c.native.execute("SELECT statement FROM pg_prepared_statements").fetchall()
            ]
    finally:
        driver.close()
    assert any("json_to_recordset" in s and "duetime_attempts" in s for s in prepared)


def test_postgres_values_in_the_url_win(pg_driver_factory: Any) -> None:
    options = quote("-c idle_in_transaction_session_timeout=7s -c tcp_keepalives_idle=33")
    driver = pg_driver_factory(f"options={options}&keepalives_idle=42&tcp_user_timeout=9000")
    with driver.transaction() as c:
        assert _show(c.native, "idle_in_transaction_session_timeout") == "7s"
        assert _show(c.native, "tcp_keepalives_idle") == "33"
        assert _show(c.native, "tcp_keepalives_interval") == "5"  # duetime's, not named
        fd = c.native.pgconn.socket
        assert _tcp_option(fd, socket.TCP_KEEPIDLE) == 42
        assert _tcp_option(fd, socket.TCP_USER_TIMEOUT) == 9000
        assert _tcp_option(fd, socket.TCP_KEEPINTVL) == 5


def test_postgres_a_session_idle_in_a_transaction_is_ended_and_replaced(
    pg_driver_factory: Any,
) -> None:
    """The server ends a session left idle inside a transaction (as a partitioned worker's
    is); the caller gets StoreUnavailable in one line, and the pool hands out a fresh one."""
    options = quote("-c idle_in_transaction_session_timeout=300ms")
    driver = pg_driver_factory(f"options={options}")
    with pytest.raises(StoreUnavailable, match=r"idle_in_transaction_session_timeout"):
        with driver.transaction() as c:
            c.native.execute("SELECT 1")
            time.sleep(1.0)
            with driver.translated():  # as duetime's statements are
                c.native.execute("SELECT 2")
    with driver.transaction() as c:
        assert c.native.execute("SELECT 3").fetchone()[0] == 3


def _pool_pids(driver: Any, count: int) -> set[int]:
    """The backend pids of `count` pooled connections held at once."""
    with ExitStack() as stack:
        held = [stack.enter_context(driver.transaction()) for _ in range(count)]
        return {c.native.execute("SELECT pg_backend_pid()").fetchone()[0] for c in held}


def _every_pool_pid(driver: Any) -> set[int]:
    """The backend pids of every connection the pool holds (all taken at once)."""
    return _pool_pids(driver, driver._pool.get_stats()["pool_size"])


def _terminate(url: str, pids: set[int]) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (sorted(pids),)
        )


@pytest.fixture
def failed_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every pooled connection is checked at checkout (as if each sat idle past
    _CHECK_AFTER_IDLE); the list grows by one per check that found its connection dead."""
    import psycopg_pool

    from duetime.store.postgres import driver as pg

    monkeypatch.setattr(pg, "_CHECK_AFTER_IDLE", -1.0)
    failed: list[int] = []
    check = psycopg_pool.ConnectionPool.check_connection

    def counted(conn: Any) -> None:
        try:
            check(conn)
        except Exception:
            failed.append(1)
            raise

    monkeypatch.setattr(psycopg_pool.ConnectionPool, "check_connection", staticmethod(counted))
    return failed


def test_postgres_connections_that_died_idle_cost_no_check_each(
    pg_driver_factory: Any, pg_database_url: str, failed_checks: list[int]
) -> None:
    """A server restart or a failover while the pool sat idle ends every pooled session; the
    first call then finds them dead one by one as it checks them, and psycopg_pool pauses
    after each dead one but the first, doubling (1 + 2 + 4 + 8 s for five: 14 s measured).
    A second dead one in a row must drain the others, so the call checks two and waits for
    one fresh connection."""
    driver = pg_driver_factory()
    pids = _pool_pids(driver, 5)
    _terminate(pg_database_url, pids)
    with driver.single() as c:
        assert c.native.execute("SELECT pg_backend_pid()").fetchone()[0] not in pids
    assert len(failed_checks) <= 2  # not one per dead session


def test_postgres_one_pooled_session_ended_alone_costs_that_session_only(
    pg_driver_factory: Any, pg_database_url: str, failed_checks: list[int]
) -> None:
    """One pooled session ended alone (the server's idle_session_timeout, a load balancer's
    idle reset, pg_terminate_backend) is replaced on its own: the next connection checked is
    alive, so the pool is not drained, and its other sessions stay (their backends)."""
    driver = pg_driver_factory()
    before = _pool_pids(driver, 4)
    ended = min(before)
    _terminate(pg_database_url, {ended})
    _pool_pids(driver, 4)  # meets the dead one among them
    assert failed_checks == [1]
    assert before - {ended} <= _every_pool_pid(driver)


def test_postgres_a_write_in_a_read_only_transaction_on_a_writable_server_is_no_outage(
    pg_driver_factory: Any,
) -> None:
    """25006 (cannot execute ... in a read-only transaction) means a lost primary only when
    the server itself is read-only (tests/integration/test_failover.py); a write in a
    transaction declared READ ONLY on a writable one stays a statement's error, and the
    session stays in the pool, as do the pool's others."""
    driver = pg_driver_factory()
    before = _pool_pids(driver, 3)
    with pytest.raises(StoreError, match="read-only transaction") as raised:
        with driver.transaction(snapshot=True) as c, driver.translated():
            native = c.native
            pid = native.execute("SELECT pg_backend_pid()").fetchone()[0]
            native.execute("CREATE TEMP TABLE written (n int)")
    assert not isinstance(raised.value, StoreUnavailable)
    assert pid in before and not native.closed
    assert before <= _every_pool_pid(driver)  # none closed, none drained


# -- MariaDB / MySQL ----------------------------------------------------------------------------


@pytest.fixture
def mysql_url() -> str:
    return kit_named("mysql").run_url()


def _variable(native: Any, name: str) -> Any:
    with native.cursor() as cur:
        cur.execute(f"SELECT @@session.{name}")
        return cur.fetchone()[0]


def test_mysql_sessions_carry_the_timeouts_and_keepalives(mysql_url: str) -> None:
    from duetime.store.mysql.driver import MySQLDriver

    driver = MySQLDriver(mysql_url)
    try:
        with driver.transaction() as c:
            native = c.native
            if "mariadb" in native.get_server_info().lower():
                assert int(_variable(native, "idle_transaction_timeout")) == 60
            fd = native._sock.fileno()
            assert _tcp_option(fd, socket.TCP_KEEPIDLE) == 10
            assert _tcp_option(fd, socket.TCP_KEEPINTVL) == 5
            assert _tcp_option(fd, socket.TCP_KEEPCNT) == 3
            assert _tcp_option(fd, socket.TCP_USER_TIMEOUT) == 30000
    finally:
        driver.close()


def test_mysql_values_in_the_url_win(mysql_url: str) -> None:
    from duetime.store.mysql.driver import MySQLDriver

    driver = MySQLDriver(
        _with_query(mysql_url, "keepalives_idle=42&innodb_lock_wait_timeout=7&wait_timeout=900")
    )
    try:
        with driver.transaction() as c:
            assert int(_variable(c.native, "innodb_lock_wait_timeout")) == 7
            assert int(_variable(c.native, "wait_timeout")) == 900
            assert _tcp_option(c.native._sock.fileno(), socket.TCP_KEEPIDLE) == 42
    finally:
        driver.close()


def test_mysql_url_parameters_are_checked(mysql_url: str) -> None:
    from duetime.store.mysql.driver import MySQLDriver

    with pytest.raises(ConfigurationError, match="unknown parameter 'sslmode'"):
        MySQLDriver(_with_query(mysql_url, "sslmode=require"))
    with pytest.raises(ConfigurationError, match="whole number"):
        MySQLDriver(_with_query(mysql_url, "wait_timeout=1;DROP"))


def test_mariadb_a_session_idle_in_a_transaction_is_ended_and_replaced(mysql_url: str) -> None:
    from duetime.store.mysql.driver import MySQLDriver

    driver = MySQLDriver(_with_query(mysql_url, "idle_transaction_timeout=1"))
    try:
        with driver.transaction() as c:
            if "mariadb" not in c.native.get_server_info().lower():
                pytest.fail("this test needs MariaDB (idle_transaction_timeout)")
        with pytest.raises(StoreUnavailable):
            with driver.transaction() as c:
                with c.native.cursor() as cur:
                    cur.execute("START TRANSACTION")
                time.sleep(2.5)
                with driver.translated(), c.native.cursor() as cur:
                    cur.execute("SELECT 2")
        with driver.transaction() as c:
            with c.native.cursor() as cur:
                cur.execute("SELECT 3")
                assert cur.fetchone()[0] == 3
    finally:
        driver.close()
