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

# Enqueues with idempotency keys wait for each other's uncommitted keys; two batches that take
# the same keys in different orders can deadlock. The loser is rolled back and runs again.
_ENQUEUE_TRIES = 5


def _utc(value: Any) -> datetime:
    result: datetime = value.astimezone(UTC)
    return result


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
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigurationError(
                f"cannot connect to PostgreSQL at {_describe(url)}: {reason}"
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
    def _tx(self) -> Iterator[psycopg.Cursor[DictRow]]:
        """One transaction: committed when the block ends, rolled back when it raises."""
        with self._pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
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
        params = [_job_params(job, now) for job in jobs]
        for attempt in range(_ENQUEUE_TRIES):
            try:
                return self._enqueue_once(jobs, params)
            except psycopg.errors.DeadlockDetected:
                if attempt == _ENQUEUE_TRIES - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _enqueue_once(self, jobs: Sequence[NewJob], params: list[dict[str, Any]]) -> list[Enqueued]:
        results: list[Enqueued] = []
        with self._tx() as cur:
            cur.executemany(self._q["insert_job"], params, returning=True)
            inserted: list[DictRow | None] = []
            while True:
                inserted.append(cur.fetchone())
                if not cur.nextset():
                    break
            for job, job_params, row in zip(jobs, params, inserted, strict=True):
                while row is None:  # the key is taken: return the original, or refuse
                    existing = cur.execute(
                        self._q["job_by_key"], {"tenant": job.tenant, "key": job.idempotency_key}
                    ).fetchone()
                    if existing is not None:
                        if existing["request_hash"] != job.request_hash:
                            raise IdempotencyConflict(
                                f"idempotency key {job.idempotency_key!r} was already used for "
                                f"job {existing['id']} with a different request; use a new key"
                            )
                        results.append(Enqueued(job_from_row(existing, _utc), False))
                        break
                    # the holder of the key was deleted meanwhile: the key is free again
                    row = cur.execute(self._q["insert_job"], job_params).fetchone()
                else:
                    results.append(Enqueued(job_from_row(row, _utc), True))
        return results

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
        with self._tx() as cur:
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


def _job_params(job: NewJob, now: datetime) -> dict[str, Any]:
    return {
        "tenant": job.tenant,
        "queue": job.queue,
        "task": job.task,
        "args": job.args_json,
        "priority": job.priority,
        "due_at": job.due_at,
        "deadline_at": job.deadline_at,
        "max_attempts": job.max_attempts,
        "retry_base": job.retry_base,
        "retry_cap": job.retry_cap,
        "lease_seconds": job.lease_seconds,
        "timeout_seconds": job.timeout_seconds,
        "idempotency_key": job.idempotency_key,
        "request_hash": job.request_hash,
        "business_key": job.business_key,
        "now": now,
    }
