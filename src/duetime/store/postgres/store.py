"""The PostgreSQL store: a connection pool, one transaction per method, row locks for races."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
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
    ScheduleNotFound,
    StaleAttempt,
    StoreUnavailable,
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
    Node,
    Outcome,
    Tick,
)
from duetime.core.schedule_spec import ScheduleSpec, spec_from_json
from duetime.core.schedules import Occurrence, Plan, Schedule, occurrence_job
from duetime.core.states import ATTEMPT_END, Event, JobStatus
from duetime.core.stats import AttemptSample, JobCount
from duetime.core.tokens import ApiToken, Role
from duetime.store.base import Decide
from duetime.store.rows import (
    attempt_from_row,
    attempts_by_job,
    covers_json,
    job_from_row,
    moves_json,
    refusal,
    sample_from_row,
    token_from_row,
)
from duetime.store.schema import SchemaChecks
from duetime.store.sql import load_migrations, load_queries

# Taken (per transaction) by migrate, so that concurrent migrators run one after the other.
_MIGRATION_LOCK = 0x6475_6574_696D_6500  # "duetime\0"

# Every writer locks a job's row before its attempt's row. A reap (finish with
# only_if_expired) takes the job's row lock in a statement of its own, so that its check of
# the lease (in the next statement) sees a renewal that committed while it waited.
log = logging.getLogger("duetime.store")


class _Fenced(Exception):
    """Raised inside a completion transaction to roll it back."""


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
    "due_at",
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


class PostgresStore(SchemaChecks):
    """A Store on one PostgreSQL database. Safe for many threads, processes and machines."""

    dialect = "postgres"

    def __init__(
        self, url: str, *, min_size: int = 1, max_size: int = 10, pool_timeout: float = 30.0
    ) -> None:
        self.url = url
        self._q = load_queries("postgres")
        self._migrations = load_migrations("postgres")
        self._claim_sql = _claim_statement(self._q)
        # apply_schedule and delete_schedule hold the schedule's row lock: a planner (which
        # locks a schedule before its jobs) and they thus take their turns.
        self._lock_schedule = self._q["select_schedule"] + "\nFOR UPDATE"
        try:  # fail fast and clearly when the server is not there
            psycopg.connect(url, connect_timeout=10).close()
        except psycopg.Error as exc:
            raise StoreUnavailable(
                f"cannot connect to PostgreSQL at {_describe(url)}: {_reason(exc)}"
            ) from None
        self._pool: ConnectionPool[psycopg.Connection[TupleRow]] = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            open=True,
            kwargs={"autocommit": False},
            # a connection that died (server restart, network drop) is replaced on checkout
            check=ConnectionPool.check_connection,
            name="duetime",
            timeout=pool_timeout,  # how long a caller waits for a connection in an outage
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

    # -- enqueue and reads ------------------------------------------------------------------

    def enqueue(
        self, jobs: Sequence[NewJob], now: datetime, *, connection: Any = None
    ) -> list[Enqueued]:
        if not jobs:
            return []
        # An insert waits for another transaction's uncommitted row with the same key, so two
        # batches taking the same keys in different orders would deadlock. Rows therefore go in
        # in the order of their keys (the sort is stable: of two equal keys the first in the
        # request goes first), while their ids, reserved up front, follow the request's order.
        order = sorted(range(len(jobs)), key=lambda i: _key_order(jobs[i]))
        try:
            if connection is None:
                with self._tx() as cur:
                    return self._enqueue(cur, jobs, order, now)
            conn = _psycopg_connection(connection)
            # a savepoint inside the caller's transaction (or a transaction of its own if the
            # connection is in autocommit mode): the jobs exist iff the caller commits
            with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
                return self._enqueue(cur, jobs, order, now)
        except psycopg.DataError as exc:  # a value PostgreSQL cannot store; nothing was stored
            raise InvalidRequest(
                f"PostgreSQL cannot store this job ({_reason(exc)}); text in args, names and keys "
                "must not contain NUL characters (\\u0000) or unpaired surrogates"
            ) from None

    def _enqueue(
        self,
        cur: psycopg.Cursor[DictRow],
        jobs: Sequence[NewJob],
        order: list[int],
        now: datetime,
    ) -> list[Enqueued]:
        results: list[Enqueued] = []
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
            "schedule_id": f.schedule_id,
            "before_id": f.before_id,
            "due_after": f.due_after,
            "due_before": f.due_before,
            "limit": f.limit,
        }
        with self._tx(snapshot=True) as cur:
            rows = cur.execute(self._q["list_jobs"], params).fetchall()
            history = {}
            if f.with_attempts and rows:
                ids = [r["id"] for r in rows]
                attempts = cur.execute(self._q["select_attempts_of_jobs"], {"ids": ids})
                history = attempts_by_job(attempts.fetchall(), _utc)
        return [job_from_row(r, _utc, history.get(r["id"], ())) for r in rows]

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
        with self._tx() as cur:
            if only_if_expired:
                cur.execute(_LOCK_JOB, {"job_id": lease.job_id})
            if self._finish_on(cur, lease, outcome, now, only_if_expired):
                return True
            if not only_if_expired:
                cur.execute(
                    self._q["late_report"],
                    {
                        "outcome": str(outcome.attempt_status or ATTEMPT_END[outcome.event]),
                        "now": now,
                        "attempt_id": lease.attempt_id,
                        "generation": lease.generation,
                    },
                )
            return False

    def _finish_on(
        self,
        cur: psycopg.Cursor[DictRow],
        lease: Lease,
        outcome: Outcome,
        now: datetime,
        only_if_expired: bool = False,
    ) -> bool:
        """The fenced finish statements, in the caller's transaction; True when applied."""
        attempt_status = outcome.attempt_status or ATTEMPT_END[outcome.event]
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

    @contextmanager
    def completion(
        self, lease: Lease, outcome: Outcome, now: Callable[[], datetime]
    ) -> Iterator[psycopg.Connection[Any]]:
        with self._pool.connection() as conn:
            try:
                with conn.transaction():
                    yield conn  # the handler's own writes, in this transaction
                    with conn.cursor(row_factory=dict_row) as cur:
                        cur.execute(_LOCK_JOB, {"job_id": lease.job_id})
                        if not self._finish_on(cur, lease, outcome, now()):
                            raise _Fenced  # rolls the handler's writes back too
            except _Fenced:
                pass
            else:
                return
        self.finish(lease, outcome, now())  # records the late report
        raise StaleAttempt(lease.job_id, lease.generation)

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
        replay = event in (Event.REPLAY, Event.RESOLVE_RETRY)  # a fresh start, due now
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

    # -- schedules --------------------------------------------------------------------------

    def create_schedule(
        self,
        tenant: str,
        spec: ScheduleSpec,
        *,
        anchor_at: datetime,
        next_fire_at: datetime | None,
        now: datetime,
    ) -> tuple[Schedule, bool]:
        params = {
            "tenant": tenant,
            "name": spec.name,
            "spec": json.dumps(spec.to_json()),
            "definition_hash": spec.definition_hash,
            "anchor_at": anchor_at,
            "next_fire_at": next_fire_at,
            "now": now,
        }
        with _storable("schedule"), self._tx() as cur:
            while True:
                row = cur.execute(self._q["insert_schedule"], params).fetchone()
                if row is not None:
                    return _schedule(row), True
                existing = cur.execute(
                    self._q["select_schedule"], {"tenant": tenant, "name": spec.name}
                ).fetchone()
                if existing is not None:
                    return _schedule(existing), False
                # the holder of the name was deleted meanwhile: the name is free again

    def get_schedule(self, tenant: str, name: str) -> Schedule | None:
        with self._tx() as cur:
            row = cur.execute(
                self._q["select_schedule"], {"tenant": tenant, "name": name}
            ).fetchone()
        return _schedule(row) if row is not None else None

    def list_schedules(self, tenant: str | None) -> list[Schedule]:
        with self._tx() as cur:
            rows = cur.execute(self._q["list_schedules"], {"tenant": tenant}).fetchall()
        return [_schedule(r) for r in rows]

    def apply_schedule(self, tenant: str, name: str, now: datetime, decide: Decide) -> Plan:
        with _storable("schedule"), self._tx() as cur:
            row = cur.execute(self._lock_schedule, {"tenant": tenant, "name": name}).fetchone()
            if row is None:
                raise ScheduleNotFound(name)
            return self._decide_and_apply(cur, _schedule(row), now, decide)

    def plan_due_schedules(self, now: datetime, limit: int, decide: Decide) -> int:
        with self._tx() as cur:
            rows = cur.execute(self._q["due_schedules"], {"now": now, "limit": limit}).fetchall()
        handled = 0
        for schedule_id in [r["id"] for r in rows]:
            try:
                with self._tx() as cur:
                    row = cur.execute(
                        self._q["lock_due_schedule"], {"id": schedule_id, "now": now}
                    ).fetchone()
                    if row is None:
                        continue  # another planner holds it, or handled it meanwhile
                    self._decide_and_apply(cur, _schedule(row), now, decide)
                    handled += 1
            except psycopg.OperationalError:
                raise  # the database is gone: the caller backs off
            except Exception:  # one broken schedule must not stop the others
                log.exception("planning schedule %s failed; it is retried next pass", schedule_id)
        return handled

    def _decide_and_apply(
        self, cur: psycopg.Cursor[DictRow], schedule: Schedule, now: datetime, decide: Decide
    ) -> Plan:
        """Apply decide's plan; the caller holds the schedule's row lock in this transaction."""
        active = [
            Occurrence(
                job_id=r["id"],
                nominal_at=_utc(r["nominal_at"]),
                status=JobStatus(r["status"]),
                started=r["generation"] > 0,
                origin=r["origin"] or "tick",
            )
            for r in cur.execute(
                self._q["active_occurrences"], {"schedule_id": schedule.id}
            ).fetchall()
        ]
        plan = decide(schedule, active)
        if plan.delete_unstarted:
            cur.execute(self._q["delete_unstarted"], {"schedule_id": schedule.id})
        for job_id in plan.cancel_job_ids:
            cur.execute(
                self._q["transition"],
                {
                    "moves": moves_json(Event.CANCEL),
                    "due_at": None,
                    "replay": False,
                    "now": now,
                    "job_id": job_id,
                    "tenant": None,
                },
            )
        job_ids: dict[datetime, int] = {}
        for occ in plan.new_jobs:
            new = occurrence_job(schedule, occ)
            params = {
                "tenant": new.tenant,
                "queue": new.queue,
                "task": new.task,
                "args": new.args_json,
                "priority": int(new.priority),
                "due_at": new.due_at,
                "max_attempts": int(new.max_attempts),
                "retry_base": float(new.retry_base),
                "retry_cap": float(new.retry_cap),
                "lease_seconds": float(new.lease_seconds),
                "timeout_seconds": _opt_float(new.timeout_seconds),
                "request_hash": new.request_hash,
                "business_key": new.business_key,
                "now": now,
                "status": str(new.status),
                "schedule_id": new.schedule_id,
                "schedule_name": new.schedule_name,
                "nominal_at": new.nominal_at,
                "covers": covers_json(new.covers),
                "origin": new.origin,
            }
            row = cur.execute(self._q["insert_occurrence"], params).fetchone()
            if row is not None:
                plan.created_job_ids.append(row["id"])
            else:  # this tick became a job already: the unique identity holds
                row = cur.execute(
                    self._q["occurrence_id"],
                    {"schedule_id": schedule.id, "nominal_at": new.nominal_at},
                ).fetchone()
            assert row is not None  # the schedule's row lock keeps its occurrences in place
            job_ids[occ.nominal_at] = row["id"]
            plan.job_ids.append(row["id"])
        for tick in plan.ticks:
            cur.execute(
                self._q["insert_tick"],
                {
                    "schedule_id": schedule.id,
                    "nominal_at": tick.nominal_at,
                    "outcome": str(tick.outcome),
                    "origin": str(tick.origin),
                    "job_id": job_ids.get(tick.nominal_at) if tick.creates_job else None,
                    "detail": tick.detail,
                    "now": now,
                },
            )
        spec = plan.spec
        cur.execute(
            self._q["update_schedule"],
            {
                "spec": json.dumps(spec.to_json()) if spec else None,
                "definition_hash": spec.definition_hash if spec else None,
                "paused": plan.paused,
                "anchor_at": plan.anchor_at,
                "move_cursor": plan.moves_cursor,
                "next_fire_at": plan.next_fire_at if plan.moves_cursor else None,
                "bump": int(spec is not None or plan.paused is not None),
                "now": now,
                "id": schedule.id,
            },
        )
        return plan

    def release_waiting(self, now: datetime, limit: int) -> int:
        with self._tx() as cur:
            cur.execute(
                self._q["release_waiting"],
                {"moves": moves_json(Event.RELEASE), "now": now, "limit": limit},
            )
            return cur.rowcount

    def delete_schedule(self, tenant: str, name: str, now: datetime) -> None:
        with self._tx() as cur:
            row = cur.execute(self._lock_schedule, {"tenant": tenant, "name": name}).fetchone()
            if row is None:
                raise ScheduleNotFound(name)
            cur.execute(
                self._q["cancel_unstarted"],
                {"moves": moves_json(Event.CANCEL), "now": now, "schedule_id": row["id"]},
            )
            cur.execute(self._q["delete_schedule"], {"id": row["id"]})

    def schedule_ticks(self, schedule_id: int, limit: int, before_id: int | None) -> list[Tick]:
        with self._tx() as cur:
            rows = cur.execute(
                self._q["list_ticks"],
                {"schedule_id": schedule_id, "limit": limit, "before_id": before_id},
            ).fetchall()
        return [
            Tick(
                id=r["id"],
                schedule_id=r["schedule_id"],
                nominal_at=_utc(r["nominal_at"]),
                outcome=r["outcome"],
                origin=r["origin"],
                detail=r["detail"],
                recorded_at=_utc(r["recorded_at"]),
                job_id=r["job_id"],
                job_status=JobStatus(r["job_status"]) if r["job_status"] else None,
                started_at=_utc(r["started_at"]) if r["started_at"] is not None else None,
            )
            for r in rows
        ]

    def latest_run(self, schedule_id: int) -> Job | None:
        with self._tx(snapshot=True) as cur:
            row = cur.execute(self._q["latest_run"], {"schedule_id": schedule_id}).fetchone()
            return self._load(cur, row["id"], None, True) if row is not None else None

    # -- nodes ------------------------------------------------------------------------------

    def register_node(self, node: Node, now: datetime) -> None:
        with self._tx() as cur:
            cur.execute(
                self._q["upsert_node"],
                {
                    "id": node.id,
                    "hostname": node.hostname,
                    "pid": node.pid,
                    "queues": json.dumps(list(node.queues)) if node.queues is not None else None,
                    "concurrency": node.concurrency,
                    "duties": json.dumps(list(node.duties)),
                    "version": node.version,
                    "now": now,
                },
            )

    def touch_node(self, node_id: str, now: datetime) -> None:
        with self._tx() as cur:
            cur.execute(self._q["touch_node"], {"id": node_id, "now": now})

    def stop_node(self, node_id: str, now: datetime) -> None:
        with self._tx() as cur:
            cur.execute(self._q["stop_node"], {"id": node_id, "now": now})

    def list_nodes(self, limit: int = 200) -> list[Node]:
        with self._tx() as cur:
            rows = cur.execute(self._q["list_nodes"], {"limit": limit}).fetchall()
        return [
            Node(
                id=r["id"],
                hostname=r["hostname"],
                pid=r["pid"],
                queues=tuple(r["queues"]) if r["queues"] is not None else None,
                concurrency=r["concurrency"],
                duties=tuple(r["duties"]),
                version=r["version"],
                started_at=_utc(r["started_at"]),
                last_seen_at=_utc(r["last_seen_at"]),
                stopped_at=_utc(r["stopped_at"]) if r["stopped_at"] is not None else None,
                holding=tuple(r["holding"]),
            )
            for r in rows
        ]

    # -- API tokens -------------------------------------------------------------------------

    def create_token(
        self, *, tenant: str, role: Role, name: str, prefix: str, secret_hash: str, now: datetime
    ) -> ApiToken:
        params = {
            "tenant": tenant,
            "role": str(role),
            "name": name,
            "prefix": prefix,
            "secret_hash": secret_hash,
            "now": now,
        }
        with self._tx() as c:
            row = c.execute(self._q["insert_token"], params).fetchone()
        assert row is not None  # INSERT ... RETURNING gives the row
        return token_from_row(row, _utc)

    def list_tokens(self, tenant: str | None) -> list[ApiToken]:
        with self._tx() as c:
            rows = c.execute(self._q["list_tokens"], {"tenant": tenant}).fetchall()
        return [token_from_row(r, _utc) for r in rows]

    def revoke_token(self, token_id: int, now: datetime) -> ApiToken | None:
        with self._tx() as c:
            row = c.execute(self._q["revoke_token"], {"id": token_id, "now": now}).fetchone()
        return token_from_row(row, _utc) if row is not None else None

    def find_token(self, secret_hash: str, now: datetime) -> ApiToken | None:
        params = {"secret_hash": secret_hash, "now": now}
        with self._tx() as c:  # most requests only read
            row = c.execute(self._q["token_by_hash_read"], params).fetchone()
        if row is None:
            return None
        token = token_from_row(row, _utc)
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() >= 60:
            with self._tx() as c:  # noted to the minute, so a busy token rarely writes
                c.execute(self._q["token_by_hash"], params)
            token = replace(token, last_used_at=now)
        return token

    # -- figures ----------------------------------------------------------------------------

    def job_counts(self, tenant: str | None) -> list[JobCount]:
        with self._tx(snapshot=True) as c:
            rows = c.execute(self._q["job_counts"], {"tenant": tenant}).fetchall()
        return [JobCount(r["status"], r["queue"], int(r["n"])) for r in rows]

    def oldest_overdue(self, tenant: str | None, now: datetime) -> datetime | None:
        with self._tx(snapshot=True) as c:
            row = c.execute(self._q["oldest_overdue"], {"tenant": tenant, "now": now}).fetchone()
        return _utc(row["due_at"]) if row is not None and row["due_at"] is not None else None

    def attempt_samples(
        self, tenant: str | None, since: datetime, limit: int
    ) -> list[AttemptSample]:
        params = {"tenant": tenant, "since": since, "limit": limit}
        with self._tx(snapshot=True) as c:
            rows = c.execute(self._q["attempt_samples"], params).fetchall()
        return [sample_from_row(r, _utc) for r in rows]


@contextmanager
def _storable(what: str) -> Iterator[None]:
    """A value PostgreSQL cannot store (in a schedule's args, names) is an InvalidRequest."""
    try:
        yield
    except psycopg.DataError as exc:
        raise InvalidRequest(
            f"PostgreSQL cannot store this {what} ({_reason(exc)}); text in args, names and "
            "keys must not contain NUL characters (\\u0000) or unpaired surrogates"
        ) from None


def _schedule(row: DictRow) -> Schedule:
    spec = row["spec"]
    return Schedule(
        id=row["id"],
        tenant=row["tenant"],
        spec=spec_from_json(json.loads(spec) if isinstance(spec, str) else spec),
        paused=bool(row["paused"]),
        anchor_at=_utc(row["anchor_at"]),
        next_fire_at=_utc(row["next_fire_at"]) if row["next_fire_at"] is not None else None,
        version=row["version"],
        created_at=_utc(row["created_at"]),
        updated_at=_utc(row["updated_at"]),
    )


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


def _opt_float(value: float | None) -> float | None:
    return None if value is None else float(value)


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


def _psycopg_connection(connection: Any) -> psycopg.Connection[Any]:
    """The psycopg connection behind what the application passed for a transactional enqueue:
    a psycopg Connection, or a SQLAlchemy Session or Connection using the psycopg driver."""
    if isinstance(connection, psycopg.Connection):
        return connection
    if hasattr(connection, "connection") and callable(getattr(connection, "execute", None)):
        # SQLAlchemy: Session.connection() -> Connection; Connection.connection -> DBAPI proxy
        sa_connection = connection.connection() if callable(connection.connection) else connection
        driver = getattr(sa_connection.connection, "driver_connection", None)
        if isinstance(driver, psycopg.Connection):
            return driver
    raise ConfigurationError(
        f"transactional enqueue needs a psycopg 3 connection or a SQLAlchemy session/connection "
        f"on the psycopg driver (postgresql+psycopg://), not {type(connection).__name__}"
    )
