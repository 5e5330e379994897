"""What a database dialect gives the one SQL store: transactions, its way of passing
parameters and storing instants, its SQL files, and its errors translated into duetime's.

The store (store/sql/front.py) holds every rule of the contract and talks to the database only
through a Driver: it opens a transaction, runs the dialect's named statements in it and reads
rows back as mappings. A named statement has one contract in every dialect (its parameters,
what it changes, which columns it returns); only its SQL differs. A name may hold several
statements (separated by a `;` at the end of a line): they run in order with the same
parameters; the result is the rows of the last one that returns rows, and the count of rows
the last one changed.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from typing import Any, ClassVar, Literal

from duetime.core.errors import ConfigurationError, DuetimeError, SchemaError, StoreError
from duetime.core.models import JobParts
from duetime.store.base import Listener

Row = Mapping[str, Any]
# parameter types every dialect takes as they are (exact types: bool is a subclass of int)
PLAIN: frozenset[type] = frozenset({str, int, float, type(None)})

_NAME = re.compile(r"^--\s*(name|part):\s*(\w+)\s*$", re.MULTILINE)
_PART_USE = re.compile(r"^[ \t]*@(\w+)[ \t]*$", re.MULTILINE)
_STATEMENT_END = re.compile(r";[ \t]*(?:--[^\n]*)?\n")
_MIGRATION = re.compile(r"(\d{4})_(\w+)\.sql")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    script: str


def load_queries(package: str) -> dict[str, tuple[str, ...]]:
    """The named statements of a dialect's queries.sql (`-- name: x` starts a block). A block
    whose one statement is `@other` runs the statements of the block `other` defined above it
    (a dialect whose one statement serves both contracts). A `-- part: p` block is no
    statement: a line `@p` in a statement (or a part) below it stands for its text (one piece
    of SQL that several statements share, written once). The parts of store/sql/parts.sql,
    the same in every dialect, come first."""
    shared = resources.files("duetime.store.sql").joinpath("parts.sql").read_text()
    text = resources.files(package).joinpath("queries.sql").read_text()
    # each file's blocks (kind, name, body) after its own preamble, the shared ones first
    parts = _NAME.split(shared)[1:] + _NAME.split(text)[1:]
    queries: dict[str, tuple[str, ...]] = {}
    pieces: dict[str, str] = {}

    def expand(body: str) -> str:  # each `@p` line of a part defined above it, by its text
        return _PART_USE.sub(lambda m: pieces.get(m.group(1), m.group(0)), body)

    for kind, name, body in zip(parts[0::3], parts[1::3], parts[2::3], strict=True):
        if name in queries or name in pieces:
            raise ValueError(f"{package}/queries.sql defines {name} twice")
        if kind == "part":  # it may use the parts defined above it
            pieces[name] = expand(_strip(body))
            continue
        body = expand(body)
        statements = tuple(s for s in (_strip(p) for p in _STATEMENT_END.split(body + "\n")) if s)
        if not statements:
            raise ValueError(f"{package}/queries.sql: {name} has no statement")
        if len(statements) == 1 and re.fullmatch(r"@\w+", statements[0]):
            other = statements[0][1:]
            if other not in queries:
                raise ValueError(f"{package}/queries.sql: {name} names {other}, not defined above")
            statements = queries[other]
        for statement in statements:
            unknown = _PART_USE.search(statement)
            if unknown is not None:
                raise ValueError(
                    f"{package}/queries.sql: {name} names the part {unknown.group(1)}, "
                    "not defined above"
                )
        queries[name] = statements
    return queries


def load_migrations(package: str) -> list[Migration]:
    """Each migrations/NNNN_name.sql of a dialect, in version order."""
    found = []
    for entry in resources.files(package).joinpath("migrations").iterdir():
        match = _MIGRATION.fullmatch(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text()))
    return sorted(found, key=lambda m: m.version)


def _strip(statement: str) -> str:
    """A statement without its surrounding comment-only lines and trailing semicolon."""
    lines = [line for line in statement.strip().splitlines() if line.strip()]
    while lines and lines[0].lstrip().startswith("--"):
        lines.pop(0)
    return "\n".join(lines).strip().rstrip(";").strip()


class Rows(list[dict[str, Any]]):
    """A batch of records passed as one parameter: every dialect receives it as a JSON array
    of objects and reads it as a table (json_to_recordset, json_each, JSON_TABLE). Values are
    JSON values; instants are written as the dialect's JSON form (Driver.json_time)."""


class Connection:
    """One open transaction of a driver, running the dialect's named statements."""

    def __init__(self, driver: Driver, native: Any) -> None:
        self.driver = driver
        self.native = native  # the driver's own connection (given to completion blocks)

    def rows(self, name: str, /, **params: Any) -> list[Row]:
        """The rows of the named statement (of its last statement, when it has several)."""
        return self._run(name, params)[0]

    def one(self, name: str, /, **params: Any) -> Row | None:
        found = self._run(name, params)[0]
        return found[0] if found else None

    def run(self, name: str, /, **params: Any) -> int:
        """Run the named statement; return how many rows its last statement changed."""
        return self._run(name, params)[1]

    def send(self, name: str, /, **params: Any) -> None:
        """Run a one-statement name whose result is not read. Inside Driver.pipeline it may
        return before the database has run it; its errors are then raised as the pipeline
        ends."""
        [statement] = self.driver.statements(name)
        with self.driver.translated():
            self.driver.send(self.native, statement, self.driver.encode(params))

    def sent(self, name: str, /, **params: Any) -> Callable[[], list[Row]]:
        """Run a one-statement name whose rows are read later: as send, but the callable
        returned gives its rows once the Driver.pipeline block it was sent in has ended."""
        [statement] = self.driver.statements(name)
        with self.driver.translated():
            return self.driver.sent(self.native, statement, self.driver.encode(params))

    def run_many(self, name: str, params: Sequence[Mapping[str, Any]]) -> None:
        """Run a one-statement name once per parameter set, batched as the driver can."""
        if not params:
            return
        [statement] = self.driver.statements(name)
        with self.driver.translated():
            self.driver.execute_many(
                self.native, statement, [self.driver.encode(p) for p in params]
            )

    def _run(self, name: str, params: Mapping[str, Any]) -> tuple[list[Row], int]:
        encoded = self.driver.encode(params)
        found: list[Row] = []
        count = 0
        with self.driver.translated():
            for statement in self.driver.statements(name):
                rows, count = self.driver.execute(self.native, statement, encoded)
                if rows is not None:
                    found = rows
        return found, count


class Driver(ABC):
    """A database dialect under the SQL store. Subclasses set `dialect` and `package`, and
    implement transactions, statement execution, time decoding and error translation."""

    dialect: ClassVar[str]  # "sqlite", "postgres", "mysql"
    package: ClassVar[str]  # the package holding queries.sql and migrations/
    # how long a write may wait for the database's lock before it fails (SQLite: the busy
    # timeout); None when the dialect sets no such bound
    lock_wait: float | None = None
    # the database reads the clock of the process that opened it (SQLite): nothing to measure
    clock_is_local: ClassVar[bool] = False
    # pipeline() lets the database run sent statements while the caller goes on (PostgreSQL)
    pipelines: ClassVar[bool] = False
    # the claim statements take the priority classes of the scheduled jobs as `classes`
    # (Claimer.due_classes): without a skip scan, their pick's range reads end at now only in
    # a class they name (SQLite, MariaDB/MySQL; PostgreSQL's pick walks the classes itself)
    names_classes: ClassVar[bool] = False
    # insert_job_batch gives its jobs their ids and returns them (rows without ids; no
    # reserve_job_ids round trip first): PostgreSQL
    numbers_jobs: ClassVar[bool] = False
    # a batch of outcomes whose attempts all still hold their jobs is finished by finish_held
    # alone (it locks and fences the rows, and answers how many moved and those the rest of
    # the finish acts on), without lock_jobs reading them first (PostgreSQL)
    finishes_held: ClassVar[bool] = False
    # parameter types encode passes as they are (exact types): those every dialect takes, and
    # a dialect's own whose encode_time or encode_bool returns the value itself
    unchanged: ClassVar[frozenset[type]] = PLAIN

    _converters: dict[type, Callable[[Any], Any]] | None = None

    def __init__(self) -> None:
        self.queries = load_queries(self.package)
        self._translating = _Translating(self)  # one block object serves every statement
        self.migrations = load_migrations(self.package)

    def statements(self, name: str) -> tuple[str, ...]:
        return self.queries[name]

    # -- what each dialect supplies ----------------------------------------------------------

    @abstractmethod
    def transaction(
        self, *, write: bool = True, snapshot: bool = False
    ) -> AbstractContextManager[Connection]:
        """A transaction, committed when the block ends and rolled back when it raises.

        write=False: the block only reads. snapshot=True: a read-only one whose statements
        all see the same snapshot. Errors of the database in beginning and committing it are
        raised as duetime's own (see translate), as Connection does for its statements; an
        error of the caller's own code in the block passes through unchanged.
        """

    def single(self) -> AbstractContextManager[Connection]:
        """A connection for one statement that commits on its own (autocommit): no BEGIN and
        COMMIT round trips. Only for a name of one statement (each statement of a longer name
        would commit alone) that is safe to run alone, or, where the driver pipelines, for
        statements safe to run alone followed by a pipelined_transaction() block. Default: a
        transaction."""
        return self.transaction()

    def values_alone(
        self, name: str, /, **params: Any
    ) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
        """The rows of a named statement run in a transaction of its own, committed before
        they are returned: its columns' names, and each row as its values in that order (no
        mapping each: the claims', store/rows.py claims_from_values). A dialect may send it in
        fewer round trips (PostgreSQL: BEGIN, the statements and COMMIT at once); the default
        opens a transaction as any other. A parameter given as an Instant's callable (a
        clock's `now`) is read once the connection is held (at_connection): a wait for one
        stamps nothing early. With no row, the default gives no names either."""
        with self.transaction() as c:
            rows = c.rows(name, **at_connection(params))
        if not rows:
            return (), []
        first = rows[0]
        names = tuple(first.keys())
        if isinstance(first, Mapping):  # a dict keeps its columns' order
            return names, [tuple(row.values()) for row in rows]
        return names, [tuple(row) for row in rows]  # a sequence of its values (sqlite3.Row)

    @abstractmethod
    def joined(self, native: Any) -> AbstractContextManager[Connection]:
        """A savepoint in the application's own open transaction (transactional enqueue);
        raises ConfigurationError when the dialect cannot join what the application gave."""

    @abstractmethod
    def execute(
        self, native: Any, sql: str, params: Mapping[str, Any]
    ) -> tuple[list[Row] | None, int]:
        """Run one statement with encoded parameters: its rows (None when it returns none)
        and how many rows it changed."""

    @abstractmethod
    def execute_many(self, native: Any, sql: str, params: list[Mapping[str, Any]]) -> None: ...

    def send(self, native: Any, sql: str, params: Mapping[str, Any]) -> None:
        """Connection.send: run a statement without reading its result. Default: execute."""
        self.execute(native, sql, params)

    def sent(self, native: Any, sql: str, params: Mapping[str, Any]) -> Callable[[], list[Row]]:
        """Connection.sent: its rows, read when called. Default: executed now."""
        rows = self.execute(native, sql, params)[0] or []
        return lambda: rows

    def pipeline(self, c: Connection) -> AbstractContextManager[None]:
        """A block in which `c.send` need not wait for each statement: the database runs them
        while the caller goes on, and the block's end waits for them all (raising the first
        error). Default: nothing (every statement waits for its result)."""
        return nullcontext()

    def pipelined_transaction(self, c: Connection) -> AbstractContextManager[None]:
        """Where the driver pipelines, on a connection of single() (autocommit): a pipeline()
        whose statements are one transaction, its BEGIN and COMMIT sent with them, so that the
        block costs one round trip; an error rolls it back. Drivers that do not pipeline have
        no such block (their callers take transaction())."""
        raise NotImplementedError(f"the {self.dialect} driver does not pipeline")

    @abstractmethod
    def run_script(self, native: Any, script: str) -> None:
        """Run a migration script (several statements, no parameters)."""

    @abstractmethod
    def to_time(self, value: Any) -> datetime:
        """An instant as the database returns it, as an aware UTC datetime."""

    @abstractmethod
    def encode_time(self, value: datetime) -> Any: ...

    @abstractmethod
    def translate(self, exc: BaseException) -> DuetimeError | None:
        """duetime's error for an error of the database driver, or None when `exc` is not
        the driver's (it then propagates unchanged)."""

    @abstractmethod
    def close(self) -> None: ...

    def notify(self, c: Connection, due: Mapping[str, datetime]) -> None:  # noqa: B027
        """Tell listeners, once `c`'s transaction commits, that jobs of each queue fall due at
        the instant given (the earliest of them). Default: nothing (no feed; see listener)."""

    def wake_payload(self, queue: str, at: datetime) -> str:
        """What a statement that wakes listeners itself (enqueue_one) sends for a job of
        `queue` due at `at`: the payload notify sends. Default: empty (no feed)."""
        return ""

    def listener(self) -> Listener | None:
        """A feed of wake-ups on a connection of its own, or None (the dialect has none)."""
        return None

    # -- parameter encoding (a dialect overrides what it stores differently) -----------------

    def encode_bool(self, value: bool) -> Any:
        return value

    def encode_list(self, value: Sequence[Any]) -> Any:
        return list(value)

    def json_time(self, value: datetime) -> Any:
        """An instant inside a Rows batch (JSON): ISO 8601 unless the dialect reads another."""
        return value.isoformat()

    def job_batch(
        self, ids: Sequence[int] | None, parts: Sequence[JobParts], shared_due: datetime
    ) -> str:
        """insert_job_batch's `rows` for these jobs (ids, and each job's parts): a JSON array
        of [id, args JSON text, due_at as json_time or null where it is `shared_due`,
        business_key]. A dialect may write it otherwise, as its statement reads it; ids are
        None where the driver numbers jobs (numbers_jobs)."""
        assert ids is not None, "a driver that numbers jobs writes its own job_batch"
        json_time = self.json_time
        return json.dumps(
            [
                [job_id, args_json, None if due_at is shared_due else json_time(due_at), key]
                for job_id, (_, args_json, due_at, key) in zip(ids, parts, strict=True)
            ]
        )

    def encode_rows(self, rows: Rows) -> str:
        """A batch as JSON, its instants as json_time writes them (json's C encoder writes the
        rest and calls json_value only for what it cannot write: instants, per value)."""
        return json.dumps(rows, default=self.json_value)

    def json_value(self, value: Any) -> Any:
        """A value of a Rows batch the json module cannot write: an instant, as json_time."""
        if isinstance(value, datetime):
            return self.json_time(value)
        raise TypeError(f"a batch of rows cannot hold {type(value).__name__} values")

    def encode(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Parameters as the dialect takes them: instants, booleans, lists and Rows converted
        (found by exact type: this runs for every row of a bulk insert)."""
        converters = self._converters
        unchanged = self.unchanged
        if converters is None:
            converters = self._converters = {
                datetime: self.encode_time,
                bool: self.encode_bool,
                list: self.encode_list,
                tuple: self.encode_list,
                Rows: self.encode_rows,
            }
        out = dict(params)
        for key, value in params.items():
            kind = type(value)
            if kind in unchanged:
                continue
            convert = converters.get(kind)
            if convert is not None:
                out[key] = convert(value)
            elif isinstance(value, datetime | bool | list | tuple):  # a subclass: rare
                out[key] = converters[next(t for t in converters if isinstance(value, t))](value)
        return out

    def translated(self) -> AbstractContextManager[None]:
        """Raise the database's errors as duetime's own (StoreUnavailable, InvalidRequest...)."""
        return self._translating


class _Translating:
    """Driver.translated's block: an exception of the database driver's leaves it as
    duetime's own, one that is duetime's or no database's passes through. One object serves
    every block of its driver (it keeps no state), and a class's __exit__ costs less than a
    generator's context manager, which every statement went through (docs/performance.md)."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> Literal[False]:
        if exc is None or isinstance(exc, DuetimeError) or not isinstance(exc, Exception):
            return False
        mine = self.driver.translate(exc)
        if mine is None:
            return False
        raise mine from exc


def driver_connection(connection: Any, kind: type[Any], accepted: str) -> Any:
    """The driver's own connection (of type `kind`) behind what an application passed for a
    transactional enqueue: that connection itself, or a SQLAlchemy Session or Connection using
    that driver. Anything else is refused, naming what is `accepted`."""
    if isinstance(connection, kind):
        return connection
    if hasattr(connection, "connection") and callable(getattr(connection, "execute", None)):
        # SQLAlchemy: Session.connection() -> Connection; Connection.connection -> DBAPI proxy
        sa_connection = connection.connection() if callable(connection.connection) else connection
        native = getattr(sa_connection.connection, "driver_connection", None)
        if isinstance(native, kind):
            return native
    raise ConfigurationError(
        f"transactional enqueue needs {accepted}, not {type(connection).__name__}"
    )


def refuse_newer(current: int, latest: int) -> None:
    if current > latest:
        raise SchemaError(
            f"the database schema is at version {current}, newer than this duetime knows "
            f"({latest}); upgrade duetime before using this database"
        )


def unexpected(dialect: str, exc: BaseException) -> StoreError:
    """The error for a database failure duetime has no specific meaning for."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return StoreError(f"the {dialect} database refused a statement: {first}")


def at_connection(params: Mapping[str, Any]) -> dict[str, Any]:
    """`params` with each callable (an Instant's, core/clock.py) replaced by what it tells
    now: called once the statement's connection is held."""
    return {k: v() if callable(v) else v for k, v in params.items()}
