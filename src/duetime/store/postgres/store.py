"""The PostgreSQL store: a connection pool, one transaction per method, row locks for races."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import DictRow, TupleRow, dict_row
from psycopg_pool import ConnectionPool

from duetime.core.errors import (
    ConfigurationError,
    IdempotencyConflict,
    InvalidRequest,
    JobNotFound,
    SchemaError,
)
from duetime.core.models import (
    Attempt,
    Claim,
    Enqueued,
    ExpiredLease,
    Job,
    JobFilter,
    Lease,
    LeaseState,
    NewJob,
    Outcome,
)
from duetime.core.states import ATTEMPT_END, Event, JobStatus
from duetime.store.rows import attempt_from_row, job_from_row, moves_json, refusal
from duetime.store.sql import load_migrations, load_queries

# Taken (per transaction) by migrate, so that concurrent migrators run one after the other.
_MIGRATION_LOCK = 0x6475_6574_696D_6500  # "duetime\0"

# Every writer locks a job's row before its attempt's row. A reap (finish with
# only_if_expired) takes the job's row lock in a statement of its own, so that its check of
# the lease (in the next statement) sees a renewal that committed while it waited.
_LOCK_JOB = "SELECT id FROM duetime_jobs WHERE id = %(job_id)s FOR UPDATE"

_ATTEMPT_COLUMNS = (
    "id",
    "job_id",
    "generation",
    "worker_id",
    "status",
    "lease_expires_at",
    "started_at",
    "finished_at",
    "error_category",
    "error_message",
    "error_traceback",
    "late_outcome",
    "late_reported_at",
)

# A batch's job ids, reserved before its rows go in (see PostgresStore.enqueue).
_RESERVE_IDS = (
    "SELECT nextval(pg_get_serial_sequence('duetime_jobs', 'id')) AS id "
    "FROM generate_series(1, %(count)s)"
)


def _utc(value: Any) -> datetime:
    result: datetime = value.astimezone(UTC)
    return result


def _reason(exc: Exception) -> str:
    """The first line of an error's message."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _describe(url: str) -> str:
    """Where a URL points, without its password."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the configured URL (it could not be parsed)"
    host = parts.get("host") or "localhost"
    port = parts.get("port") or 5432
    return f"{host}:{port}/{parts.get('dbname') or ''}"


class PostgresStore:
    """A Store on one PostgreSQL database. Safe for many threads, processes and machines."""

    dialect = "postgres"

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 10) -> None:
        self.url = url
        self._q = load_queries("postgres")
        self._migrations = load_migrations("postgres")
        self._claim_sql = _claim_statement(self._q)
        try:  # fail fast and clearly when the server is not there
            psycopg.connect(url, connect_timeout=10).close()
        except psycopg.Error as exc:
            raise ConfigurationError(
                f"cannot connect to PostgreSQL at {_describe(url)}: {_reason(exc)}"
            ) from None
        self._pool: ConnectionPool[psycopg.Connection[TupleRow]] = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            open=True,
            kwargs={"autocommit": False},
            name="duetime",
        )

    # -- plumbing ---------------------------------------------------------------------------

    @contextmanager
    def _tx(self, *, snapshot: bool = False) -> Iterator[psycopg.Cursor[DictRow]]:
        """One transaction: committed when the block ends, rolled back when it raises.

        With snapshot, a read-only one whose statements all see the same snapshot (reads of a
        job and then of its attempts agree, as in SQLite's read transactions).
        """
        with self._pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            if snapshot:
                cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield cur

    def close(self) -> None:
        self._pool.close()

    # -- schema -----------------------------------------------------------------------------

    def _applied_version(self, cur: psycopg.Cursor[DictRow]) -> int:
        row = cur.execute(
            "SELECT to_regclass('duetime_migrations') IS NOT NULL AS found"
        ).fetchone()
        if row is None or not row["found"]:
            return 0
        version = cur.execute(self._q["schema_version"]).fetchone()
        return int(version["version"]) if version is not None else 0

    def schema_version(self) -> int:
        with self._tx() as cur:
            return self._applied_version(cur)

    def migrate(self) -> list[int]:
        applied: list[int] = []
        with self._tx() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            cur.execute(
                "CREATE TABLE IF NOT EXISTS duetime_migrations ("
                "version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)"
            )
            current = self._applied_version(cur)
            self._refuse_newer(current)
            for version, name, script in self._migrations:
                if version <= current:
                    continue
                cur.execute(script)  # no parameters: the whole script runs as one batch
                cur.execute(
                    "INSERT INTO duetime_migrations (version, name, applied_at) "
                    "VALUES (%s, %s, %s)",
                    (version, name, datetime.now(UTC)),
                )
                applied.append(version)
        return applied

    @property
    def latest_version(self) -> int:
        return self._migrations[-1][0]

    def _refuse_newer(self, current: int) -> None:
        if current > self.latest_version:
            raise SchemaError(
                f"the database schema is at version {current}, newer than this duetime knows "
                f"({self.latest_version}); upgrade duetime before using this database"
            )

    def check_schema(self) -> None:
        current = self.schema_version()
        self._refuse_newer(current)
        if current < self.latest_version:
            raise SchemaError(
                f"the database schema is at version {current} but this duetime needs "
                f"{self.latest_version}; run `duetime migrate` first"
            )

    # -- enqueue and reads ------------------------------------------------------------------

    def enqueue(self, jobs: Sequence[NewJob], now: datetime) -> list[Enqueued]:
        if not jobs:
            return []
        # An insert waits for another transaction's uncommitted row with the same key, so two
        # batches taking the same keys in different orders would deadlock. Rows therefore go in
        # in the order of their keys (the sort is stable: of two equal keys the first in the
        # request goes first), while their ids, reserved up front, follow the request's order.
        order = sorted(range(len(jobs)), key=lambda i: _key_order(jobs[i]))
        try:
            return self._enqueue(jobs, order, now)
        except psycopg.DataError as exc:  # a value PostgreSQL cannot store; nothing was stored
            raise InvalidRequest(
                f"PostgreSQL cannot store this job ({_reason(exc)}); text in args, names and keys "
                "must not contain NUL characters (\\u0000) or unpaired surrogates"
            ) from None

    def _enqueue(self, jobs: Sequence[NewJob], order: list[int], now: datetime) -> list[Enqueued]:
        results: list[Enqueued] = []
        with self._tx() as cur:
            reserved = cur.execute(_RESERVE_IDS, {"count": len(jobs)}).fetchall()
            ids = sorted(int(r["id"]) for r in reserved)
            rows = cur.execute(
                self._q["insert_job"], _insert_params([(ids[i], jobs[i]) for i in order], now)
            ).fetchall()
            created = {row["id"]: row for row in rows}
            taken = [job for job_id, job in zip(ids, jobs, strict=True) if job_id not in created]
            originals = self._jobs_by_key(cur, taken)
            for job_id, job in zip(ids, jobs, strict=True):
                row = created.get(job_id)
                while row is None:  # the key is taken: return the original, or refuse
                    original = originals.get((job.tenant, job.idempotency_key))
                    if original is not None:
                        if original["request_hash"] != job.request_hash:
                            raise IdempotencyConflict(
                                f"idempotency key {job.idempotency_key!r} was already used for "
                                f"job {original['id']} with a different request; use a new key"
                            )
                        results.append(Enqueued(job_from_row(original, _utc), False))
                        break
                    # the holder of the key was deleted meanwhile: the key is free again
                    params = _insert_params([(job_id, job)], now)
                    row = cur.execute(self._q["insert_job"], params).fetchone()
                    if row is None:
                        originals.update(self._jobs_by_key(cur, [job]))
                else:
                    results.append(Enqueued(job_from_row(row, _utc), True))
        return results

    def _jobs_by_key(
        self, cur: psycopg.Cursor[DictRow], jobs: Sequence[NewJob]
    ) -> dict[tuple[str, str | None], DictRow]:
        if not jobs:
            return {}
        rows = cur.execute(
            self._q["job_by_key"],
            {"tenant": [j.tenant for j in jobs], "key": [j.idempotency_key for j in jobs]},
        ).fetchall()
        return {(r["tenant"], r["idempotency_key"]): r for r in rows}

    def _load(
        self, cur: psycopg.Cursor[DictRow], job_id: int, tenant: str | None, with_attempts: bool
    ) -> Job | None:
        row = cur.execute(self._q["select_job"], {"id": job_id, "tenant": tenant}).fetchone()
        if row is None:
            return None
        history: tuple[Attempt, ...] = ()
        if with_attempts:
            history = tuple(
                attempt_from_row(a, _utc)
                for a in cur.execute(self._q["select_attempts"], {"id": job_id}).fetchall()
            )
        return job_from_row(row, _utc, history)

    def get_job(self, job_id: int, *, tenant: str | None = None) -> Job | None:
        with self._tx(snapshot=True) as cur:
            return self._load(cur, job_id, tenant, True)

    def list_jobs(self, f: JobFilter) -> list[Job]:
        params = {
            "tenant": f.tenant,
            "status": str(f.status) if f.status else None,
            "task": f.task,
            "queue": f.queue,
            "before_id": f.before_id,
            "limit": f.limit,
        }
        with self._tx() as cur:
            rows = cur.execute(self._q["list_jobs"], params).fetchall()
        return [job_from_row(r, _utc) for r in rows]

    # -- the worker's path ------------------------------------------------------------------

    def claim(
        self, *, worker_id: str, queues: Sequence[str] | None, limit: int, now: datetime
    ) -> list[Claim]:
        if limit <= 0:
            return []
        with self._tx() as cur:
            rows = cur.execute(
                self._claim_sql,
                {
                    "now": now,
                    "limit": limit,
                    "queues": list(queues) if queues is not None else None,
                    "worker_id": worker_id,
                },
            ).fetchall()
        return [
            Claim(
                job_from_row(row, _utc),
                attempt_from_row({c: row[f"attempt_{c}"] for c in _ATTEMPT_COLUMNS}, _utc),
            )
            for row in rows
        ]

    def heartbeat(self, leases: Sequence[Lease], now: datetime) -> list[LeaseState]:
        states: list[LeaseState] = []
        with self._tx() as cur:
            for lease in leases:
                row = cur.execute(
                    self._q["renew_lease"],
                    {
                        "now": now,
                        "job_id": lease.job_id,
                        "attempt_id": lease.attempt_id,
                        "generation": lease.generation,
                    },
                ).fetchone()
                if row is None:
                    states.append(LeaseState(lease, held=False))
                else:
                    states.append(
                        LeaseState(
                            lease,
                            held=True,
                            cancel_requested=row["job_status"] == JobStatus.CANCEL_REQUESTED,
                            lease_expires_at=_utc(row["lease_expires_at"]),
                        )
                    )
        return states

    def finish(
        self, lease: Lease, outcome: Outcome, now: datetime, *, only_if_expired: bool = False
    ) -> bool:
        attempt_status = outcome.attempt_status or ATTEMPT_END[outcome.event]
        with self._tx() as cur:
            if only_if_expired:
                cur.execute(_LOCK_JOB, {"job_id": lease.job_id})
            moved = cur.execute(
                self._q["finish_job"],
                {
                    "moves": moves_json(outcome.event),
                    "due_at": outcome.due_at,
                    "now": now,
                    "job_id": lease.job_id,
                    "generation": lease.generation,
                    "attempt_id": lease.attempt_id,
                    "only_if_expired": only_if_expired,
                },
            ).fetchone()
            if moved is None:
                if not only_if_expired:
                    cur.execute(
                        self._q["late_report"],
                        {
                            "outcome": str(attempt_status),
                            "now": now,
                            "attempt_id": lease.attempt_id,
                            "generation": lease.generation,
                        },
                    )
                return False
            cur.execute(
                self._q["finish_attempt"],
                {
                    "status": str(attempt_status),
                    "now": now,
                    "error_category": _opt_str(outcome.error_category),
                    "error_message": outcome.error_message,
                    "error_traceback": outcome.error_traceback,
                    "attempt_id": lease.attempt_id,
                    "generation": lease.generation,
                },
            )
            return True

    def expired_leases(self, now: datetime, limit: int) -> list[ExpiredLease]:
        with self._tx() as cur:
            rows = cur.execute(self._q["expired_leases"], {"now": now, "limit": limit}).fetchall()
        return [
            ExpiredLease(
                lease=Lease(r["job_id"], r["attempt_id"], r["generation"]),
                job_status=JobStatus(r["status"]),
                attempts=r["attempts"],
                max_attempts=r["max_attempts"],
                retry_base=r["retry_base"],
                retry_cap=r["retry_cap"],
            )
            for r in rows
        ]

    def expire_overdue(self, now: datetime, limit: int) -> int:
        with self._tx() as cur:
            cur.execute(
                self._q["expire_overdue"],
                {"moves": moves_json(Event.EXPIRE), "now": now, "limit": limit},
            )
            return cur.rowcount

    # -- operators' moves -------------------------------------------------------------------

    def transition(
        self,
        job_id: int,
        event: Event,
        now: datetime,
        *,
        tenant: str | None = None,
        due_at: datetime | None = None,
    ) -> Job:
        replay = event is Event.REPLAY
        if replay and due_at is None:
            due_at = now
        with self._tx() as cur:
            row = cur.execute(
                self._q["transition"],
                {
                    "moves": moves_json(event),
                    "due_at": due_at,
                    "replay": replay,
                    "now": now,
                    "job_id": job_id,
                    "tenant": tenant,
                },
            ).fetchone()
            job = self._load(cur, job_id, tenant, True)
        if job is None:
            raise JobNotFound(job_id)
        if row is None:
            raise refusal(job, event, due_at)
        return job


def _claim_statement(q: dict[str, str]) -> sql.Composed:
    """The claim as one statement: pick due jobs, move them to running, start their attempts."""
    attempt_columns = sql.SQL(", ").join(
        sql.SQL("s.{} AS {}").format(sql.Identifier(c), sql.Identifier(f"attempt_{c}"))
        for c in _ATTEMPT_COLUMNS
    )
    return sql.SQL(
        "WITH picked AS ({pick}), claimed AS ({claim}), started AS ({start}) "
        "SELECT c.*, {attempt} FROM claimed AS c JOIN started AS s ON s.job_id = c.id "
        "ORDER BY c.priority DESC, c.due_at, c.id"
    ).format(
        pick=sql.SQL(q["pick_due"]),
        claim=sql.SQL(q["claim_job"]),
        start=sql.SQL(q["insert_attempt"]),
        attempt=attempt_columns,
    )


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


def _key_order(job: NewJob) -> tuple[bool, str, str]:
    return (job.idempotency_key is not None, job.tenant, job.idempotency_key or "")


def _insert_params(jobs: Sequence[tuple[int, NewJob]], now: datetime) -> dict[str, Any]:
    """insert_job's parameters: one array per column, one element per job."""

    def opt_float(value: float | None) -> float | None:
        return None if value is None else float(value)

    return {
        "now": now,
        "id": [job_id for job_id, _ in jobs],
        "tenant": [j.tenant for _, j in jobs],
        "queue": [j.queue for _, j in jobs],
        "task": [j.task for _, j in jobs],
        "args": [j.args_json for _, j in jobs],
        "priority": [int(j.priority) for _, j in jobs],
        "due_at": [j.due_at for _, j in jobs],
        "deadline_at": [j.deadline_at for _, j in jobs],
        "max_attempts": [int(j.max_attempts) for _, j in jobs],
        "retry_base": [float(j.retry_base) for _, j in jobs],
        "retry_cap": [float(j.retry_cap) for _, j in jobs],
        "lease_seconds": [float(j.lease_seconds) for _, j in jobs],
        "timeout_seconds": [opt_float(j.timeout_seconds) for _, j in jobs],
        "idempotency_key": [j.idempotency_key for _, j in jobs],
        "request_hash": [j.request_hash for _, j in jobs],
        "business_key": [j.business_key for _, j in jobs],
    }
