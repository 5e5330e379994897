"""The PostgreSQL dialect: a pool of psycopg 3 connections, READ COMMITTED transactions, row
locks (FOR UPDATE SKIP LOCKED) for races between processes and machines.

Instants are timestamptz; lists travel as arrays.

Past 450 lines because one dialect's connection life lives here whole: the pool and how it
replaces lost connections (at most 2 s apart, jittered; all of them once two in a row are
found dead or one on a node turned read-only), the session settings each connection gets
(keepalives, server-side timeouts, each only where the URL or the server set nothing), how
errors map to duetime's (a lost session, or one on a demoted primary, reads as
StoreUnavailable), and the LISTEN connection (which checks that its node still takes
writes); splitting them would spread one connection's story over files.
"""

from __future__ import annotations

import json
import logging
import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import psycopg_pool
import psycopg_pool.pool
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import JsonbBinaryLoader, set_json_dumps

from duetime.core.errors import (
    DuetimeError,
    InvalidRequest,
    StoreConflict,
    StoreError,
    StoreUnavailable,
)
from duetime.core.models import JobParts, Wakeup
from duetime.store.base import Listener
from duetime.store.driver import (
    PLAIN,
    Connection,
    Driver,
    Row,
    at_connection,
    driver_connection,
    unexpected,
)


class PostgresDriver(Driver):
    dialect = "postgres"
    package = "duetime.store.postgres"
    pipelines = True
    numbers_jobs = True
    finishes_held = True
    unchanged = PLAIN | frozenset({datetime, bool})  # psycopg adapts instants, booleans itself

    def __init__(
        self, url: str, *, min_size: int = 1, max_size: int = 10, pool_timeout: float = 30.0
    ) -> None:
        super().__init__()
        self.url = url
        # the URL with duetime's TCP keepalives and user timeout where it names none (libpq's
        # parameters: the URL's own values win); the session's timeouts are set in _configure
        self.conninfo = with_connection_defaults(url)
        self._copy_types: dict[str, tuple[list[str], list[str]]] = {}
        # prepared server-side (the pool's connections prepare nothing else, see _configure):
        # statements whose plan cannot depend on their parameters, which then skip their parse
        # and plan on every call: one-at-a-time enqueue and enqueue_many's slices (plain
        # inserts), and the finish of a batch (its rows come from json_to_recordset, whose row
        # estimate is the same for every batch; parsing and planning it was 3 to 5% of
        # PostgreSQL's CPU per job of a drain, docs/performance.md)
        self._prepared = frozenset(
            self.statements("enqueue_one")
            + self.statements("insert_job_batch")
            + self.statements("finish_jobs")
            + self.statements("finish_held")
            # the claims' last statement: its parse and rewrite were a quarter of a small
            # claim's CPU. The claim of every queue (and of more than SEEKED_QUEUES named
            # ones, filtered) runs one generic plan per connection (planning was half of
            # what was left), its settings keeping that plan on the indexes; the claim of 1
            # to SEEKED_QUEUES named queues is planned per call (queries.sql says why)
            + self.statements("claim")[-1:]
            + self.statements("claim_queues")[-1:]
        )
        try:  # fail fast and clearly when the server is not there
            psycopg.connect(self.conninfo, connect_timeout=10).close()
        except psycopg.Error as exc:
            raise StoreUnavailable(
                f"cannot connect to PostgreSQL at {self.where()}: {_reason(exc)}"
            ) from None
        if not RECONNECTS_CAPPED:
            log.warning(
                "psycopg_pool %s lacks the internals duetime caps its reconnection delay with "
                "(duetime supports psycopg-pool 3.3): after an outage, lost connections are "
                "tried again up to minutes apart",
                psycopg_pool.__version__,
            )
        self._pool: _ReconnectingPool = _ReconnectingPool(
            self.conninfo,
            min_size=min_size,
            max_size=max_size,
            open=True,
            # nothing is prepared server-side unless asked (execute's prepare=True, the
            # statements of _prepared): each other is planned for its own parameters
            # (see _configure)
            kwargs={"autocommit": False, "prepare_threshold": _PREPARE_ONLY_WHEN_ASKED},
            configure=_configure_pooled,
            connection_class=_PooledConnection,
            # no check=: a connection that died (server restart, network drop) is replaced on
            # checkout by _ReconnectingPool.getconn
            name="duetime",
            timeout=pool_timeout,  # how long a caller waits for a connection in an outage
        )
        # the first call then finds its connection ready: one waiting for it would make the
        # pool open a second one as well (a one-shot command would open three in all)
        wait = pool_timeout
        try:
            self._pool.wait(timeout=wait)
        except psycopg_pool.PoolTimeout:
            # closed, or its threads would go on connecting (a caller that retries would leave
            # one such pool behind per try, each holding a connection once the server is back)
            self._pool.close()
            raise StoreUnavailable(
                f"cannot connect to PostgreSQL at {self.where()}: no connection in {wait:g} s;"
                " check that the server accepts connections (max_connections, pg_hba.conf)"
            ) from None

    def where(self) -> str:
        """Where the URL points, without its password."""
        try:
            parts = conninfo_to_dict(self.url)
        except psycopg.ProgrammingError:
            return "the configured URL (it could not be parsed)"
        hosts = str(parts.get("host") or "localhost").split(",")
        ports = str(parts.get("port") or "5432").split(",")
        if len(ports) == 1:  # libpq: one port applies to every host
            ports = ports * len(hosts)
        pairs = ",".join(
            f"{h or 'localhost'}:{p or 5432}" for h, p in zip(hosts, ports, strict=False)
        )
        return f"{pairs}/{parts.get('dbname') or ''}"

    @contextmanager
    def transaction(self, *, write: bool = True, snapshot: bool = False) -> Iterator[Connection]:
        with self.translated():
            pooled = self._pool.connection()
            native = pooled.__enter__()
        try:
            if snapshot:
                with self.translated():
                    native.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield Connection(self, native)
        except BaseException as exc:
            lost = self._dropped_if_read_only(native, exc)
            try:
                pooled.__exit__(type(exc), exc, exc.__traceback__)  # rolls back
            except Exception:
                pass
            if lost is not None:
                raise lost from exc
            raise
        with self.translated():
            pooled.__exit__(None, None, None)  # commits
        native.used_at = time.monotonic()

    def values_alone(
        self, name: str, /, **params: Any
    ) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
        """BEGIN, the statements and COMMIT in one pipeline: one round trip where a
        transaction of `transaction()` takes one per statement, plus its BEGIN and COMMIT (the
        claim: 4). psycopg would wait for an implicit BEGIN's answer in pipeline mode, so the
        connection is in autocommit mode for the block and sends its own BEGIN. A statement
        that fails aborts the rest (COMMIT included), and the transaction is rolled back.
        The rows come in binary (the claims': their instants, numbers and ids cost the server
        no text to write and the driver none to parse), their JSON parsed from text
        (_JsonbFromText; docs/performance.md, "Claim rows in binary, and JSON parsed from
        text"), each as a tuple of its values (psycopg builds those in C; a dict each cost
        the worker about 1 us a row: docs/performance.md, "Claim rows as tuples")."""
        *before, last = self.statements(name)
        with self.translated():
            with self._pool.connection() as native:
                encoded = self.encode(at_connection(params))  # its instant read once held
                native.autocommit = True
                try:
                    with native.cursor(row_factory=tuple_row) as cur:
                        cur.adapters.register_loader("jsonb", _JsonbFromText)
                        with native.pipeline():
                            native.execute("BEGIN")
                            for statement in before:
                                native.execute(statement, encoded)
                            cur.execute(
                                last, encoded, prepare=last in self._prepared or None, binary=True
                            )
                            native.execute("COMMIT")
                        names: tuple[str, ...] = ()
                        rows: list[tuple[Any, ...]] = []
                        result = cur.pgresult
                        if result is not None and result.status == _TUPLES_OK:
                            rows = cur.fetchall()
                            names = tuple(
                                (result.fname(i) or b"").decode() for i in range(result.nfields)
                            )
                except BaseException as exc:
                    try:
                        if native.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                            native.rollback()
                    except psycopg.Error:
                        pass  # closed below: the statement's error is the one to raise
                    lost = self._dropped_if_read_only(native, exc)
                    if lost is not None:
                        raise lost from exc
                    raise
                finally:
                    if native.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                        native.autocommit = False
                    else:  # never back in the pool in autocommit mode: the pool discards it
                        native.close()
                native.used_at = time.monotonic()
        return names, rows

    @contextmanager
    def single(self) -> Iterator[Connection]:
        """A pooled connection in autocommit: its one statement is its own transaction, sent
        in one round trip (no BEGIN, no COMMIT); a pipelined_transaction() block on it is one
        transaction, sent in one round trip too. Taken and given back with the pool's getconn
        and putconn: its connection() block would also commit (nothing to commit here: a
        lock and a wait of psycopg's per call)."""
        with self.translated():
            native = self._pool.getconn()
        try:
            native.autocommit = True
            yield Connection(self, native)
        except BaseException as exc:
            lost = self._dropped_if_read_only(native, exc)
            _no_autocommit(native)
            try:
                self._pool.putconn(native)
            except Exception:
                pass
            if lost is not None:
                raise lost from exc
            raise
        _no_autocommit(native)
        with self.translated():
            self._pool.putconn(native)
        native.used_at = time.monotonic()

    @contextmanager
    def joined(self, native: Any) -> Iterator[Connection]:
        accepted = (
            "a psycopg 3 connection or a SQLAlchemy session or connection on postgresql+psycopg://"
        )
        conn = driver_connection(native, psycopg.Connection, accepted)
        if (
            not conn.autocommit
            and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        ):
            # the caller's transaction has run nothing yet, so psycopg has not sent its BEGIN;
            # conn.transaction() would then be a transaction of its own, committed at its end.
            # Any statement makes psycopg open the caller's transaction first.
            conn.execute("SELECT 1")
        # a savepoint inside the caller's transaction (or a transaction of its own if the
        # connection is in autocommit mode): what runs here exists iff the caller commits
        with conn.transaction():
            yield Connection(self, conn)

    def execute(
        self, native: Any, sql: str, params: Mapping[str, Any]
    ) -> tuple[list[Row] | None, int]:
        prepare = True if sql in self._prepared else None
        if isinstance(native, _PooledConnection):
            return _rows(native.statement_cursor(), sql, params, prepare)
        with native.cursor(row_factory=dict_row) as cur:  # an application's connection
            return _rows(cur, sql, params, prepare)

    def send(self, native: Any, sql: str, params: Mapping[str, Any]) -> None:
        # in pipeline mode: sent, its result read at the end (and never read)
        _unread(native).execute(sql, params, prepare=True if sql in self._prepared else None)

    def sent(self, native: Any, sql: str, params: Mapping[str, Any]) -> Callable[[], list[Row]]:
        # in pipeline mode a cursor keeps the result of its last statement only: a cursor of
        # its own for each (about 5 us)
        cur = native.cursor(row_factory=dict_row)
        cur.execute(sql, params, prepare=True if sql in self._prepared else None)

        def read() -> list[Row]:
            return [*cur.fetchall()]

        return read

    @contextmanager
    def pipeline(self, c: Connection) -> Iterator[None]:
        """psycopg's pipeline mode: statements go out without waiting for one another; the
        server runs each as it arrives, and the block's end waits for their results."""
        with self.translated():
            with c.native.pipeline():
                yield

    @contextmanager
    def pipelined_transaction(self, c: Connection) -> Iterator[None]:
        """On a connection of single() (autocommit): BEGIN, the block's statements and COMMIT
        in one pipeline, one round trip in all, where a transaction of transaction() takes
        one more for psycopg's BEGIN and one for its COMMIT (as values_alone does for the
        claims). A statement that fails aborts the rest, COMMIT included; an error, the
        database's or the block's, rolls the transaction back."""
        native = c.native
        cur = native.unread_cursor()
        with self.translated():
            try:
                with native.pipeline():
                    cur.execute("BEGIN")
                    yield
                    cur.execute("COMMIT")
            except BaseException:
                if native.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    try:
                        native.rollback()
                    except psycopg.Error:
                        pass  # single() closes a connection it cannot take out of autocommit
                raise

    def execute_many(self, native: Any, sql: str, params: list[Mapping[str, Any]]) -> None:
        if sql.lstrip().upper().startswith("COPY"):
            self._copy(native, sql, params)
            return
        with native.cursor() as cur:
            cur.executemany(sql, params)

    def _copy(self, native: Any, sql: str, params: list[Mapping[str, Any]]) -> None:
        """A binary COPY of parameter sets, each in the column order the statement names (a
        parameter of each column's name); JSON columns take their text as it is."""
        columns, types = self._copy_columns(native, sql)
        with native.cursor() as cur:
            set_json_dumps(_json_text, cur)
            with cur.copy(sql) as copy:
                copy.set_types(types)
                for row in params:
                    copy.write_row([row[c] for c in columns])

    def _copy_columns(self, native: Any, sql: str) -> tuple[list[str], list[str]]:
        """The columns a COPY names, and their types (read once from the catalog)."""
        if sql not in self._copy_types:
            match = _COPY.match(sql)
            if match is None:
                raise StoreError(f"cannot read the columns of {sql[:60]!r}")
            table = match.group(1)
            columns = [c.strip() for c in match.group(2).split(",")]
            rows = native.execute(
                "SELECT attname, format_type(atttypid, NULL) FROM pg_attribute "
                "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
                (table,),
            ).fetchall()
            known = dict(rows)
            self._copy_types[sql] = (columns, [known[c] for c in columns])
        return self._copy_types[sql]

    def run_script(self, native: Any, script: str) -> None:
        native.execute(script)  # no parameters: the whole script runs as one batch

    def to_time(self, value: Any) -> datetime:
        if value.tzinfo is UTC:  # duetime's connections read instants in UTC (_configure)
            return value  # type: ignore[no-any-return]
        result: datetime = value.astimezone(UTC)
        return result

    def encode_time(self, value: datetime) -> datetime:
        return value

    def _dropped_if_read_only(
        self, native: _PooledConnection, exc: BaseException
    ) -> StoreUnavailable | None:
        """A pooled session that found its node read-only (_read_only_node) is closed, so
        the pool replaces it by one to the read-write host, and so are the pool's other
        connections opened before (drain: the idle ones now, those in use when given back;
        they are on that node too). Returns the error to raise then, StoreUnavailable, as a
        lost primary's (callers retry), not a statement's; None for any other error."""
        if not _read_only_node(native, exc):
            return None
        native.close()
        self._pool.drain_opened_before(native)
        return StoreUnavailable(
            f"PostgreSQL at {self.where()} failed: {_reason(exc)}: the server is read-only "
            "now (a standby, or a primary demoted or fenced by a failover); reconnecting"
        )

    def translate(self, exc: BaseException) -> DuetimeError | None:
        if isinstance(exc, psycopg_pool.PoolTimeout):
            return StoreUnavailable(f"no connection to PostgreSQL at {self.where()} in time")
        if isinstance(exc, psycopg.errors.DeadlockDetected | psycopg.errors.SerializationFailure):
            return StoreConflict(f"PostgreSQL at {self.where()} broke a conflict: {_reason(exc)}")
        if isinstance(exc, psycopg.errors.FeatureNotSupported) and _PLAN_CHANGED in str(exc):
            # a prepared statement (a claim) whose returned columns a migration changed
            # while this process ran: the transaction's rollback made psycopg forget the
            # connection's prepared statements, so the method's rerun prepares it anew
            return StoreConflict(f"PostgreSQL at {self.where()} changed a table: {_reason(exc)}")
        if isinstance(exc, psycopg.OperationalError):
            return StoreUnavailable(f"PostgreSQL at {self.where()} failed: {_reason(exc)}")
        if isinstance(exc, psycopg.errors.IdleInTransactionSessionTimeout):
            # the server ended a session that sat in a transaction longer than allowed (a
            # partition, or a completion block that waited too long): its work rolled back
            return StoreUnavailable(
                f"PostgreSQL at {self.where()} ended the connection: it sat idle in a "
                "transaction past idle_in_transaction_session_timeout; the transaction rolled "
                "back (raise the timeout in the URL's options if a handler needs longer)"
            )
        if isinstance(exc, psycopg.DataError):  # a value PostgreSQL cannot store
            return InvalidRequest(
                f"PostgreSQL cannot store this value ({_reason(exc)}); text in args, names and "
                "keys must not contain NUL characters (\\u0000) or unpaired surrogates"
            )
        if isinstance(exc, psycopg.Error):
            return unexpected(self.dialect, exc)
        return None

    def job_batch(
        self, ids: Sequence[int] | None, parts: Sequence[JobParts], shared_due: datetime
    ) -> str:
        """insert_job_batch's `rows`, each job's args as its JSON object, not as a string of
        it: the server parses them once, with the array (as a string, each was parsed again
        on its own: about 0.5 us of the server's 12 per job), and the array is written here
        without json.dumps escaping each job's args text. [args, due_at or null where it is
        `shared_due`, business_key]: no id (numbers_jobs; `ids` is None)."""
        text = _json_string
        return (
            "["
            + ",".join(
                [
                    f"[{args_json},null,{text(key)}]"
                    if due_at is shared_due
                    else f"[{args_json},{text(due_at.isoformat())},{text(key)}]"
                    for _, args_json, due_at, key in parts
                ]
            )
            + "]"
        )

    def wake_payload(self, queue: str, at: datetime) -> str:
        return f"{queue}\t{_micros(at)}"

    def notify(self, c: Connection, due: Mapping[str, datetime]) -> None:
        payloads = [self.wake_payload(queue, at) for queue, at in due.items()]
        sender = _unread(c.native)
        with self.translated():
            if len(payloads) == 1:  # most batches: one queue (no array to adapt)
                sender.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payloads[0]))
            elif payloads:
                sender.execute(
                    "SELECT pg_notify(%s, p) FROM unnest(%s::text[]) AS p", (CHANNEL, payloads)
                )

    def listener(self) -> Listener:
        with self.translated():
            return _Listener(self.conninfo, self)

    def close(self) -> None:
        self._pool.close()


# the longest wait between two attempts to replace a lost connection (s), see _ReconnectingPool
RECONNECT_DELAY_MAX = 2.0

# psycopg_pool's private names the cap relies on (pyproject pins psycopg-pool to 3.3.x; the
# unit test test_postgres_reconnect fails on a psycopg_pool that moved them)
AddConnection: Any = getattr(psycopg_pool.pool, "AddConnection", None)
RECONNECTS_CAPPED = isinstance(AddConnection, type) and callable(
    getattr(psycopg_pool.ConnectionPool, "schedule_task", None)
)
log = logging.getLogger("duetime.store")


class _PooledConnection(psycopg.Connection[Any]):
    """A connection of the driver's pool. It keeps one cursor for the statements the driver
    executes (each reads its rows before the next is sent, so they take turns): a cursor made
    per statement (its map of adapters, its row maker) was about 30 us of the 250 us of client
    CPU a one-job enqueue took (docs/performance.md). The cursor holds the last result until
    the next statement. It also keeps when it was opened and last used, which
    _ReconnectingPool reads."""

    _statement_cursor: psycopg.Cursor[dict[str, Any]] | None = None
    _unread_cursor: psycopg.Cursor[Any] | None = None
    opened_at = 0.0  # time.monotonic() when it was opened (set by _configure)
    used_at = 0.0  # ... when it last finished a transaction

    def statement_cursor(self) -> psycopg.Cursor[dict[str, Any]]:
        cur = self._statement_cursor
        if cur is None or cur.closed:
            cur = self._statement_cursor = self.cursor(row_factory=dict_row)
        return cur

    def unread_cursor(self) -> psycopg.Cursor[Any]:
        """A second kept cursor, for statements whose results are never read (a pipeline's
        BEGIN, COMMIT and sends, the wake-ups): in pipeline mode a result lands on its cursor
        when it arrives, so one of these on the statement cursor could stand in for the
        result a later statement there reads."""
        cur = self._unread_cursor
        if cur is None or cur.closed:
            cur = self._unread_cursor = self.cursor()
        return cur


def _unread(native: Any) -> Any:
    """Where a statement whose result is never read goes: a pooled connection's kept
    unread_cursor, not a new cursor each time; an application's connection itself."""
    return native.unread_cursor() if isinstance(native, _PooledConnection) else native


class _ReconnectingPool(psycopg_pool.ConnectionPool[_PooledConnection]):
    """psycopg_pool's pool, but a lost connection is tried again at most RECONNECT_DELAY_MAX s
    apart, and a checkout replaces a dead connection without psycopg_pool's pauses.

    psycopg_pool doubles the delay after each failed attempt (1, 2, 4, 8, 16, 32 s ..., for up
    to reconnect_timeout, 5 minutes) and has no setting to bound it: after an outage of T s
    its next attempt came up to T s after the database was back (a 52 s failover: the workers
    started again 6 to 20 s after the promotion, docs/production.md). The attempts still back
    off, 1 s then 2 s apart, each capped delay drawn between half the cap and the cap, so that
    the processes that lost the server together do not retry in step; each costs a refused
    connection or, on a standby or a node kept read-only, libpq's target_session_attrs check,
    and logs one warning per connection being replaced. Without the private names the cap
    needs (RECONNECTS_CAPPED false), psycopg_pool's own delays apply, and the driver warns."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._drain_lock = threading.Lock()
        self._last_drain = 0.0  # time.monotonic() of the last drain_opened_before's drain
        super().__init__(*args, **kwargs)

    def schedule_task(self, task: Any, delay: float) -> None:
        if RECONNECTS_CAPPED and isinstance(task, AddConnection):
            delay = min(delay, RECONNECT_DELAY_MAX * random.uniform(0.5, 1.0))
        super().schedule_task(task, delay)

    def getconn(self, timeout: float | None = None) -> _PooledConnection:
        """psycopg_pool's, and a connection that sat idle past _CHECK_AFTER_IDLE is checked
        first, a round trip (one in use moments ago is alive; a dead one fails its statement
        and is replaced). One found dead is given back (the pool opens another in its place)
        and the next one is checked, idle or not: a single session ended alone (the server's
        idle_session_timeout, a load balancer's idle reset, pg_terminate_backend) costs that
        session only. When the next one is dead too, the pool is drained (a restart, a
        failover: the rest are most likely dead as well), so the caller waits for one fresh
        connection, not a check per dead one (psycopg_pool's own check loop pauses after each
        dead connection but the first, 1 s, then 2, 4, 8 s...: 14 s for five)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        found_dead = False
        while True:
            conn = super().getconn(timeout=max(deadline - time.monotonic(), 0.0))
            if not found_dead and time.monotonic() - conn.used_at <= _CHECK_AFTER_IDLE:
                return conn
            try:
                psycopg_pool.ConnectionPool.check_connection(conn)
            except psycopg.Error:
                pass
            except BaseException:
                self.putconn(conn)
                raise
            else:
                return conn
            conn.close()  # closed already; the pool discards it and opens another
            self.putconn(conn)
            if found_dead:
                self.drain_opened_before(conn)
            found_dead = True

    def drain_opened_before(self, conn: _PooledConnection) -> None:
        """`conn` was found on a read-only node, or dead after another: drop every connection
        the pool holds (psycopg_pool's drain: the idle ones now, those in use when given back;
        the pool opens new ones), since those opened before `conn` are most likely in the
        same state; unless a drain since `conn` was opened did it already. The younger ones go
        too: a reconnection each."""
        with self._drain_lock:
            if conn.opened_at <= self._last_drain:
                return
            self._last_drain = time.monotonic()
        self.drain()


# a count of executions no statement reaches: psycopg then prepares only what is asked for
# (None would refuse even that)
_PREPARE_ONLY_WHEN_ASKED = 2**62

_CHECK_AFTER_IDLE = 2.0  # seconds: a connection idle longer is checked before it is reused


def _read_only_node(native: psycopg.Connection[Any], exc: BaseException) -> bool:
    """True when `exc` (or the error it was raised from) is a write refused because the
    session's server is read-only as a whole: SQLSTATE 25006 (cannot execute ... in a
    read-only transaction) in a session whose server reports default_transaction_read_only
    or in_hot_standby on (PostgreSQL 14+ reports both to the client at every change; an
    older server reports neither, and then a 25006 counts as well: duetime's own read-only
    transactions never write). The pooled connection was opened on a read-write primary
    (target_session_attrs) since demoted or fenced, for instance by a failover manager that
    keeps the old primary running read-only. A write in a transaction declared READ ONLY
    on a read-write server is not that."""
    if not any(isinstance(e, psycopg.errors.ReadOnlySqlTransaction) for e in (exc, exc.__cause__)):
        return False
    try:
        reported = [
            native.info.parameter_status(name)
            for name in ("default_transaction_read_only", "in_hot_standby")
        ]
    except psycopg.Error:
        return True  # closed meanwhile: replaced either way
    return "on" in reported or reported == [None, None]


def _rows(
    cur: psycopg.Cursor[Any], sql: str, params: Mapping[str, Any], prepare: bool | None
) -> tuple[list[Row] | None, int]:
    """Run one statement on `cur`: its rows (None when it returns none) and its row count.
    Whether it returned rows is read from the result's status (cursor.description would build
    a Column per column)."""
    cur.execute(sql, params, prepare=prepare)
    result = cur.pgresult
    if result is None or result.status != _TUPLES_OK:
        return None, cur.rowcount
    return cur.fetchall(), cur.rowcount


_TUPLES_OK = psycopg.pq.ExecStatus.TUPLES_OK


def _no_autocommit(native: psycopg.Connection[Any]) -> None:
    """Back to the pool's transactions; a connection that cannot be is closed (the pool then
    discards it rather than hand out an autocommit connection)."""
    try:
        native.autocommit = False
    except Exception:
        native.close()


def _configure(conn: psycopg.Connection[Any]) -> None:
    """Each new connection plans every statement of duetime's for its own parameters: the pool's
    connections prepare no statement server-side but enqueue_one and insert_job_batch (plain
    inserts), finish_jobs (a batch from JSON) and the claims (each with its transaction's
    plan_cache_mode: queries.sql), so each other is planned as it is sent. A cached generic
    plan of those others cannot know that `due_at <= now` selects only the due rows, and could
    read them all (the claim's generic plan is kept on its indexes by settings of its own
    transaction). plan_cache_mode stays as it is session-wide:
    forcing custom plans session-wide would also re-plan the foreign-key check of every attempt
    inserted (the server's own cached query), 3 to 6 ms of a 40-job claim's 7. No JIT: its
    compiling costs hundreds of milliseconds, and these statements run in one or two (claim and
    next_due turn sorting off, which makes their estimated cost look huge). Instants come back
    in UTC, the zone duetime hands them out in (no conversion per value; no statement depends on
    the session's time zone). And the session's timeouts (SESSION_DEFAULTS), each only where the
    server is at its built-in default: a value set in the URL (options=-c ...), PGOPTIONS, ALTER
    ROLE/DATABASE ... SET or the server's configuration wins. One round trip, and one more for
    client_connection_check_interval, which a server on a system without the kernel events it
    needs (Windows) refuses: there it stays off. Both in autocommit (the settings are the
    session's either way), so no BEGIN and COMMIT round trips."""
    autocommit = conn.autocommit
    conn.autocommit = True
    try:
        conn.execute(_CONFIGURE)
        try:
            conn.execute(_CHECK_INTERVAL)
        except psycopg.errors.InvalidParameterValue:
            pass
    finally:
        conn.autocommit = autocommit


def _configure_pooled(conn: _PooledConnection) -> None:
    """A new connection of the pool, configured; it counts as just used, so its first checkout
    sends no check (_ReconnectingPool.getconn)."""
    _configure(conn)
    conn.used_at = conn.opened_at = time.monotonic()


# PostgreSQL's refusal to run a prepared statement whose result's columns changed since
_PLAN_CHANGED = "cached plan must not change result type"

# Settings of each session, so that a connection lost in the middle of a transaction (a
# partition: packets dropped, nothing refused) gives its row locks back in bounded time and
# the server stops waiting on a dead peer (docs/workers.md, "Partitions"). No statement_timeout
# and no lock_timeout: migrations, a concurrent migrator waiting on the migration lock and the
# statements a handler runs in its completion transaction may rightly take long; set them in
# the URL's options when wanted.
SESSION_DEFAULTS: dict[str, str] = {
    # a session idle inside a transaction this long is ended and its transaction rolled back
    # (duetime's own transactions are never idle longer than a round trip; a handler's
    # completion block between two of its statements must not be either)
    "idle_in_transaction_session_timeout": "60s",
    # the server's side of the TCP connection: probes after 10 s of silence, every 5 s, 3 of
    # them; unacknowledged data for 30 s ends it
    "tcp_keepalives_idle": "10",
    "tcp_keepalives_interval": "5",
    "tcp_keepalives_count": "3",
    "tcp_user_timeout": "30000",
}
# PostgreSQL 14+ (set apart, see _configure): a running statement whose client is gone is
# cancelled, checked every 5 s
CHECK_INTERVAL_MS = 5000

# libpq's parameters for the client's side of the TCP connection (the URL's own win)
CLIENT_DEFAULTS: dict[str, str] = {
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",  # milliseconds of unacknowledged data before giving up
}


def with_connection_defaults(url: str) -> str:
    """`url` with CLIENT_DEFAULTS for the libpq parameters it does not name itself."""
    try:
        given = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return url  # psycopg.connect says what is wrong with it
    missing = {k: v for k, v in CLIENT_DEFAULTS.items() if k not in given}
    return make_conninfo(url, **missing) if missing else url


def _session_defaults_sql() -> sql.Composed:
    values = sql.SQL(", ").join(
        sql.SQL("({}, {})").format(sql.Literal(name), sql.Literal(value))
        for name, value in SESSION_DEFAULTS.items()
    )
    return sql.SQL(
        "SET TimeZone = 'UTC'; SET jit = off; "
        "SELECT set_config(s.name, d.setting, false) FROM (VALUES {}) AS d(name, setting) "
        "JOIN pg_settings AS s ON s.name = d.name WHERE s.source = 'default'"
    ).format(values)


_CONFIGURE = _session_defaults_sql()
_CHECK_INTERVAL = sql.SQL(
    "SELECT set_config(name, {}, false) FROM pg_settings "
    "WHERE name = 'client_connection_check_interval' AND source = 'default'"
).format(sql.Literal(str(CHECK_INTERVAL_MS)))


CHANNEL = "duetime_due"  # NOTIFY payload: "<queue>\t<due instant, microseconds since epoch>"


def _micros(at: datetime) -> int:
    return (at - _EPOCH) // timedelta(microseconds=1)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# how often (s) a listener asks its server whether it is read-only now (_Listener.wait)
LISTENER_CHECK_EVERY = 5.0
_READ_ONLY_NOW = (
    "SELECT pg_is_in_recovery() OR current_setting('default_transaction_read_only')::boolean"
)


class _Listener:
    """LISTEN on a connection of its own (autocommit): the worker's wake-ups.

    It never writes, so a node turned read-only under it (a primary fenced in place by a
    failover manager, the standby promoted) would never show it the 25006 the pool's
    connections meet, and it would hear nothing from the new primary until the process
    restarted. So every LISTENER_CHECK_EVERY s, and in its first wait, it asks the server
    (one round trip); on a read-only node it fails with StoreUnavailable, and the worker
    opens it again (runtime/wakeups.py), where target_session_attrs=read-write leads.
    A worker watches its socket in the event loop (a SocketListener: fileno, arrived) and
    calls wait(0) in a thread every half second, for those checks."""

    def __init__(self, url: str, driver: PostgresDriver) -> None:
        self.driver = driver
        self.conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
        _configure(self.conn)  # its keepalives tell a silently lost server within seconds
        self.conn.execute(f"LISTEN {CHANNEL}")
        self._checked = 0.0  # time.monotonic() of the last _READ_ONLY_NOW

    def wait(self, timeout: float) -> list[Wakeup]:
        found: list[Wakeup] = []
        with self.driver.translated():
            if time.monotonic() - self._checked >= LISTENER_CHECK_EVERY:
                self._check_writable()
            for note in self.conn.notifies(timeout=timeout, stop_after=1):
                found.append(_wakeup(note.payload))
        if found:  # and whatever else is waiting, without waiting
            found.extend(self.arrived())
        return found

    def fileno(self) -> int:
        return self.conn.fileno()

    def arrived(self) -> list[Wakeup]:
        with self.driver.translated():
            return [_wakeup(note.payload) for note in self.conn.notifies(timeout=0)]

    def _check_writable(self) -> None:
        row = self.conn.execute(_READ_ONLY_NOW).fetchone()
        self._checked = time.monotonic()
        if row is not None and row[0]:
            raise StoreUnavailable(
                f"PostgreSQL at {self.driver.where()}: the listener's server is read-only now "
                "(a standby, or a primary demoted or fenced by a failover); its wake-ups "
                "stopped, reconnecting"
            )

    def close(self) -> None:
        self.conn.close()


def _wakeup(payload: str) -> Wakeup:
    queue, _, micros = payload.partition("\t")
    try:
        return Wakeup(queue, _EPOCH + timedelta(microseconds=int(micros)))
    except ValueError:
        return Wakeup()


_COPY = re.compile(r"\s*COPY\s+(\w+)\s*\(([^)]*)\)", re.IGNORECASE)


# a str as JSON text (quoted, escaped, ASCII): json's own C function
_json_string: Callable[[str], str] = json.encoder.encode_basestring_ascii


def _json_from_bytes(data: str | bytes) -> Any:
    """A JSON value as a claim's cursor receives it (UTF-8 bytes), parsed from text:
    json.loads of bytes first guesses their encoding in Python, once per value (the bytes
    decoded as json.loads decodes UTF-8)."""
    return json.loads(data if isinstance(data, str) else data.decode("utf-8", "surrogatepass"))


class _JsonbFromText(JsonbBinaryLoader):
    """The claims' jsonb columns (their args, a schedule's covers), in binary, parsed by
    _json_from_bytes. Registered on the claim's cursor only: an application's own loader
    (psycopg's set_json_loads) still reads JSON everywhere else on duetime's connections,
    such as the one a handler's ctx.transaction() hands it."""

    _loads = staticmethod(_json_from_bytes)


def _json_text(obj: Any) -> str:
    """JSON columns in a COPY receive their text already serialised (once, at enqueue)."""
    return obj if isinstance(obj, str) else json.dumps(obj)


def _reason(exc: BaseException) -> str:
    """The first line of an error's message."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def open_driver(url: str, *, pool_timeout: float | None = None) -> PostgresDriver:
    if pool_timeout is not None:
        return PostgresDriver(url, pool_timeout=pool_timeout)
    return PostgresDriver(url)
