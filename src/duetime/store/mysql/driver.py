"""The MariaDB (10.6+) and MySQL (8+) dialect, on PyMySQL: a small pool of connections,
READ COMMITTED transactions, row locks (FOR UPDATE SKIP LOCKED) between processes.

Instants are DATETIME(6) in UTC, sent and read as naive datetimes; lists travel as JSON text.
DDL commits implicitly in these databases, so a migration that fails halfway must be finished
by hand (docs/stores.md says how).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import pymysql
import pymysql.cursors

from duetime.core.errors import (
    ConfigurationError,
    DuetimeError,
    InvalidRequest,
    StoreConflict,
    StoreUnavailable,
)
from duetime.store.driver import Connection, Driver, Row, driver_connection, unexpected

# errors that mean the server is gone or could not commit now: retrying later can succeed
_UNAVAILABLE = {
    1040,  # too many connections
    1053,  # server shutdown in progress
    1205,  # lock wait timeout
    1927,  # connection was killed (MariaDB: by idle_transaction_timeout or an operator)
    2003,  # cannot connect
    2006,  # server has gone away
    2013,  # lost connection during query
    4031,  # disconnected by the server for inactivity (idle_transaction_timeout, wait_timeout)
}
_SESSION = (
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
    "SET SESSION time_zone = '+00:00'",
    "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
    "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'",
)
_CHECK_AFTER_IDLE = 5.0  # seconds: an idle pooled connection is pinged before reuse

# The client's side of each TCP connection (PyMySQL turns SO_KEEPALIVE on, at the system's
# 2-hour idle): probes after 10 s of silence, every 5 s, 3 of them, and unacknowledged data for
# 30 s ends it, so a worker cut off from the server (packets dropped) hears of it in seconds.
# URL parameters of the same names (libpq's) override them: ?keepalives_idle=30.
CLIENT_DEFAULTS: dict[str, int] = {
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 30000,  # milliseconds
}
_SOCKET_OPTIONS = {
    "keepalives_idle": "TCP_KEEPIDLE",
    "keepalives_interval": "TCP_KEEPINTVL",
    "keepalives_count": "TCP_KEEPCNT",
    "tcp_user_timeout": "TCP_USER_TIMEOUT",
}
# Session variables duetime sets, MariaDB only (MySQL has no idle-in-transaction limit): a
# session idle inside a transaction for 60 s (a connection lost mid-transaction) is ended and
# its row locks released. No max_statement_time: migrations and a handler's completion
# transaction may rightly run long. The server's own net_read_timeout/net_write_timeout (30 s,
# 60 s) bound a read or write to a lost client, innodb_lock_wait_timeout (50 s) a lock wait.
MARIADB_SESSION_DEFAULTS: dict[str, int] = {"idle_transaction_timeout": 60}
# the session variables a URL may set (?name=integer), after duetime's: the URL's win
SESSION_VARIABLES = frozenset(
    {
        "idle_transaction_timeout",
        "idle_readonly_transaction_timeout",
        "idle_write_transaction_timeout",
        "innodb_lock_wait_timeout",
        "lock_wait_timeout",
        "max_statement_time",
        "max_execution_time",
        "net_read_timeout",
        "net_write_timeout",
        "wait_timeout",
    }
)


class MySQLDriver(Driver):
    dialect = "mysql"
    names_classes = True
    package = "duetime.store.mysql"

    def __init__(self, url: str, *, max_size: int = 10, pool_timeout: float = 30.0) -> None:
        super().__init__()
        self.url = url
        self._params = _connect_params(url)
        self._socket, self._variables = _url_settings(url)
        self._mariadb: bool | None = None  # known at the first connection
        self.max_size = max_size
        self.pool_timeout = pool_timeout
        self._idle: list[tuple[pymysql.Connection[Any], float]] = []
        self._open = 0
        self._cond = threading.Condition()
        try:  # fail fast and clearly when the server is not there
            self._release(self._new(), broken=False)
        except pymysql.Error as exc:
            raise StoreUnavailable(f"cannot connect to MySQL at {self.where()}: {exc}") from None

    def where(self) -> str:
        p = self._params
        return f"{p['host']}:{p['port']}/{p['database']}"

    # -- a small pool ------------------------------------------------------------------------

    def _new(self) -> pymysql.Connection[Any]:
        conn = pymysql.connect(**self._params)
        _tune_socket(conn, self._socket)
        if self._mariadb is None:
            self._mariadb = "mariadb" in str(getattr(conn, "server_version", "")).lower()
        variables = dict(MARIADB_SESSION_DEFAULTS) if self._mariadb else {}
        variables.update(self._variables)
        with conn.cursor() as cur:
            for statement in _SESSION:
                cur.execute(statement)
            if variables:  # names from SESSION_VARIABLES, integer values: nothing to quote
                cur.execute("SET " + ", ".join(f"SESSION {k} = {v}" for k, v in variables.items()))
        return conn

    def _acquire(self) -> pymysql.Connection[Any]:
        deadline = time.monotonic() + self.pool_timeout
        conn: pymysql.Connection[Any] | None = None
        since = 0.0
        with self._cond:
            while True:
                if self._idle:
                    conn, since = self._idle.pop()
                    break
                if self._open < self.max_size:
                    self._open += 1  # a new one, opened outside the lock
                    break
                if not self._cond.wait(deadline - time.monotonic()):
                    raise StoreUnavailable(
                        f"no connection to MySQL at {self.where()} in {self.pool_timeout:g}s"
                    )
        try:
            if conn is None:
                return self._new()
            if time.monotonic() - since > _CHECK_AFTER_IDLE:
                conn.ping(reconnect=False)  # it may have died while idle (a server restart)
            return conn
        except Exception:
            self._release(conn, broken=True)
            if conn is None:
                raise
            return self._acquire()  # the idle one died: take another or a new one

    def _release(self, conn: pymysql.Connection[Any] | None, *, broken: bool) -> None:
        if broken and conn is not None:
            try:
                conn.close()
            except Exception:
                pass
        with self._cond:
            if broken or conn is None:
                self._open -= 1
            else:
                self._idle.append((conn, time.monotonic()))
            self._cond.notify()

    @contextmanager
    def transaction(self, *, write: bool = True, snapshot: bool = False) -> Iterator[Connection]:
        with self.translated():
            native = self._acquire()
        broken = True
        try:
            with self.translated():
                # Without autocommit the first statement starts the transaction (READ
                # COMMITTED, the session's level), saving a round trip; a snapshot needs its own
                if snapshot:
                    with native.cursor() as cur:
                        cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
            try:
                yield Connection(self, native)
            except BaseException:
                try:
                    native.rollback()
                    broken = False
                except Exception:
                    pass
                raise
            with self.translated():
                native.commit()
            broken = False
        finally:
            self._release(native, broken=broken)

    @contextmanager
    def joined(self, native: Any) -> Iterator[Connection]:
        accepted = "a PyMySQL connection or a SQLAlchemy session or connection on mysql+pymysql://"
        conn = driver_connection(native, pymysql.Connection, accepted)
        if conn.get_autocommit():  # no transaction of the caller's: one of our own
            conn.begin()
            try:
                yield Connection(self, conn)
            except BaseException:
                conn.rollback()
                raise
            conn.commit()
            return
        with conn.cursor() as cur:
            cur.execute("SAVEPOINT duetime_enqueue")
        try:
            yield Connection(self, conn)
        except BaseException:
            with conn.cursor() as cur:
                cur.execute("ROLLBACK TO SAVEPOINT duetime_enqueue")
            raise
        with conn.cursor() as cur:
            cur.execute("RELEASE SAVEPOINT duetime_enqueue")

    # -- statements -------------------------------------------------------------------------

    def execute(
        self, native: Any, sql: str, params: Mapping[str, Any]
    ) -> tuple[list[Row] | None, int]:
        with native.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute(sql, params)
            rows = list(cur.fetchall()) if cur.description is not None else None
            return rows, cur.rowcount

    def execute_many(self, native: Any, sql: str, params: list[Mapping[str, Any]]) -> None:
        with native.cursor() as cur:
            cur.executemany(sql, params)  # one multi-row INSERT per batch

    def run_script(self, native: Any, script: str) -> None:
        with native.cursor() as cur:
            for statement in _statements(script):
                cur.execute(statement)

    def to_time(self, value: Any) -> datetime:
        result: datetime = value.replace(tzinfo=UTC)
        return result

    def encode_time(self, value: datetime) -> datetime:
        return value.astimezone(UTC).replace(tzinfo=None)

    def json_time(self, value: datetime) -> str:
        return self.encode_time(value).isoformat(sep=" ", timespec="microseconds")

    def encode_bool(self, value: bool) -> int:
        return int(value)

    def encode_list(self, value: Sequence[Any]) -> tuple[Any, ...]:
        # PyMySQL writes a tuple as (a, b, ...); (NULL) matches nothing, as an empty list must
        return tuple(value) if value else (None,)

    def translate(self, exc: BaseException) -> DuetimeError | None:
        if isinstance(exc, UnicodeEncodeError):  # an unpaired surrogate cannot be sent
            return InvalidRequest(
                "MySQL cannot store this value (text with an unpaired surrogate); use valid "
                "Unicode text in args, names and keys"
            )
        if not isinstance(exc, pymysql.Error):
            return None
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        if code == 1213:  # deadlock: this transaction was rolled back, running it again is safe
            return StoreConflict(f"MySQL at {self.where()} broke a deadlock: {_reason(exc)}")
        if isinstance(exc, pymysql.err.InterfaceError) or code in _UNAVAILABLE:
            return StoreUnavailable(f"MySQL at {self.where()} failed: {_reason(exc)}")
        if isinstance(exc, pymysql.err.DataError):
            return InvalidRequest(f"MySQL cannot store this value ({_reason(exc)})")
        return unexpected(self.dialect, exc)

    def close(self) -> None:
        with self._cond:
            idle, self._idle = self._idle, []
            self._open -= len(idle)
        for conn, _ in idle:
            try:
                conn.close()
            except Exception:
                pass


def open_driver(url: str, *, pool_timeout: float | None = None) -> MySQLDriver:
    if pool_timeout is not None:
        return MySQLDriver(url, pool_timeout=pool_timeout)
    return MySQLDriver(url)


def _connect_params(url: str) -> dict[str, Any]:
    """pymysql.connect's arguments from mysql://user[:password]@host[:port]/database."""
    parts = urlsplit(url)
    database = parts.path.lstrip("/")
    if not database or "/" in database:
        raise ConfigurationError(
            f"the MySQL URL names no database; write it as "
            f"{parts.scheme}://user[:password]@host[:port]/database"
        )
    try:
        port = parts.port or 3306
    except ValueError:
        raise ConfigurationError(f"the MySQL URL has a bad port: {parts.netloc!r}") from None
    return {
        "host": parts.hostname or "localhost",
        "port": port,
        "user": unquote(parts.username or "root"),
        "password": unquote(parts.password or ""),
        "database": unquote(database),
        "charset": "utf8mb4",
        "autocommit": False,
        "connect_timeout": 10,
    }


def _url_settings(url: str) -> tuple[dict[str, int], dict[str, int]]:
    """The URL's query: TCP settings (CLIENT_DEFAULTS' names) merged over duetime's, and the
    session variables it sets (SESSION_VARIABLES). Anything else is refused, in one line."""
    tcp = dict(CLIENT_DEFAULTS)
    variables: dict[str, int] = {}
    for name, value in parse_qsl(urlsplit(url).query, keep_blank_values=True):
        if name not in CLIENT_DEFAULTS and name not in SESSION_VARIABLES:
            accepted = ", ".join(sorted([*CLIENT_DEFAULTS, *SESSION_VARIABLES]))
            raise ConfigurationError(
                f"the MySQL URL has an unknown parameter {name!r}; accepted: {accepted}"
            )
        try:
            number = int(value)
        except ValueError:
            raise ConfigurationError(
                f"the MySQL URL parameter {name} must be a whole number, not {value!r}"
            ) from None
        if number < 0:
            raise ConfigurationError(f"the MySQL URL parameter {name} must not be negative")
        (tcp if name in CLIENT_DEFAULTS else variables)[name] = number
    return tcp, variables


def _tune_socket(conn: pymysql.Connection[Any], settings: dict[str, int]) -> None:
    """TCP keepalives and the user timeout on the connection's socket (Linux names; where the
    system lacks one, it is left as is). PyMySQL offers no option for them."""
    sock = getattr(conn, "_sock", None)
    if not isinstance(sock, socket.socket) or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in settings.items():
        option = getattr(socket, _SOCKET_OPTIONS[name], None)
        if option is not None and (value > 0 or name == "tcp_user_timeout"):
            sock.setsockopt(socket.IPPROTO_TCP, option, value)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, pymysql.Error) and len(exc.args) >= 2:
        return f"{exc.args[1]} ({exc.args[0]})"
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _statements(script: str) -> Iterator[str]:
    """A migration script's statements (each ends with `;` at the end of a line)."""
    buffer: list[str] = []
    for line in script.splitlines():
        if not buffer and (not line.strip() or line.strip().startswith("--")):
            continue
        buffer.append(line)
        if line.rstrip().endswith(";"):
            yield "\n".join(buffer).rstrip().rstrip(";")
            buffer = []
    if any(line.strip() for line in buffer):
        yield "\n".join(buffer)
