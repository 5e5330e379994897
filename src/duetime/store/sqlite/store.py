"""The embedded SQLite store: one file, WAL journal, write transactions under BEGIN IMMEDIATE."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from duetime.core.errors import (
    ConfigurationError,
    IdempotencyConflict,
    JobNotFound,
    ScheduleNotFound,
    SchemaError,
    StaleAttempt,
)
from duetime.core.models import (
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

log = logging.getLogger("duetime.store")


class _Fenced(Exception):
    """Raised inside a completion transaction to roll it back."""


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def to_us(value: datetime) -> int:
    return (value - _EPOCH) // _US


def from_us(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def _opt_us(value: datetime | None) -> int | None:
    return None if value is None else to_us(value)


class SQLiteStore(SchemaChecks):
    """A Store on one SQLite file. Safe for many threads and many processes on one machine."""

    dialect = "sqlite"

    def __init__(self, path: str | Path, *, busy_timeout: float = 60.0) -> None:
        self.path = str(path)
        self._q = load_queries("sqlite")
        self._migrations = load_migrations("sqlite")
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

    # -- plumbing ---------------------------------------------------------------------------

    @contextmanager
    def _tx(self, mode: str = "IMMEDIATE") -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute(f"BEGIN {mode}")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:  # also when COMMIT itself failed
                    self._conn.execute("ROLLBACK")
                raise

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # -- schema -----------------------------------------------------------------------------

    def _applied_version(self, conn: sqlite3.Connection) -> int:
        exists = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'duetime_migrations'"
        ).fetchone()
        if not exists:
            return 0
        return int(conn.execute(self._q["schema_version"]).fetchone()[0])

    def schema_version(self) -> int:
        with self._tx("DEFERRED") as conn:
            return self._applied_version(conn)

    def migrate(self) -> list[int]:
        applied: list[int] = []
        with self._tx() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS duetime_migrations ("
                "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
            )
            current = self._applied_version(conn)
            self._refuse_newer(current)
            for version, name, sql in self._migrations:
                if version <= current:
                    continue
                for statement in _statements(sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO duetime_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    (version, name, to_us(datetime.now(UTC))),
                )
                applied.append(version)
        return applied

    # -- enqueue and reads ------------------------------------------------------------------

    def enqueue(
        self, jobs: Sequence[NewJob], now: datetime, *, connection: Any = None
    ) -> list[Enqueued]:
        if connection is not None:
            raise ConfigurationError(
                "enqueue inside your own transaction (connection=...) needs PostgreSQL; the "
                "SQLite store commits each enqueue on its own connection"
            )
        results: list[tuple[int, bool]] = []
        with self._tx() as conn:
            for job in jobs:
                row = conn.execute(self._q["insert_job"], _job_params(job, now)).fetchone()
                if row is not None:
                    results.append((row["id"], True))
                    continue
                existing = conn.execute(
                    self._q["job_by_key"], {"tenant": job.tenant, "key": job.idempotency_key}
                ).fetchone()
                if existing["request_hash"] != job.request_hash:
                    raise IdempotencyConflict(
                        f"idempotency key {job.idempotency_key!r} was already used for job "
                        f"{existing['id']} with a different request; use a new key"
                    )
                results.append((existing["id"], False))
            loaded = {job_id: self._load(conn, job_id, None, False) for job_id, _ in results}
        return [Enqueued(loaded[job_id], created) for job_id, created in results]  # type: ignore[arg-type]

    def _load(
        self, conn: sqlite3.Connection, job_id: int, tenant: str | None, with_attempts: bool
    ) -> Job | None:
        row = conn.execute(self._q["select_job"], {"id": job_id, "tenant": tenant}).fetchone()
        if row is None:
            return None
        history: tuple[Any, ...] = ()
        if with_attempts:
            history = tuple(
                attempt_from_row(a, from_us)
                for a in conn.execute(self._q["select_attempts"], {"id": job_id})
            )
        return job_from_row(row, from_us, history)

    def get_job(self, job_id: int, *, tenant: str | None = None) -> Job | None:
        with self._tx("DEFERRED") as conn:
            return self._load(conn, job_id, tenant, True)

    def list_jobs(self, f: JobFilter) -> list[Job]:
        params = {
            "tenant": f.tenant,
            "status": str(f.status) if f.status else None,
            "task": f.task,
            "queue": f.queue,
            "schedule_id": f.schedule_id,
            "before_id": f.before_id,
            "due_after": _opt_us(f.due_after),
            "due_before": _opt_us(f.due_before),
            "limit": f.limit,
        }
        with self._tx("DEFERRED") as conn:
            rows = conn.execute(self._q["list_jobs"], params).fetchall()
            history = {}
            if f.with_attempts and rows:
                ids = json.dumps([r["id"] for r in rows])
                attempts = conn.execute(self._q["select_attempts_of_jobs"], {"ids": ids})
                history = attempts_by_job(attempts, from_us)
        return [job_from_row(r, from_us, history.get(r["id"], ())) for r in rows]

    # -- the worker's path ------------------------------------------------------------------

    def claim(
        self, *, worker_id: str, queues: Sequence[str] | None, limit: int, now: datetime
    ) -> list[Claim]:
        if limit <= 0:
            return []
        now_us = to_us(now)
        claims: list[Claim] = []
        with self._tx() as conn:
            picked = conn.execute(
                self._q["pick_due"],
                {
                    "now": now_us,
                    "limit": limit,
                    "queues": json.dumps(list(queues)) if queues is not None else None,
                },
            ).fetchall()
            for pick in picked:
                row = conn.execute(
                    self._q["claim_job"], {"id": pick["id"], "now": now_us}
                ).fetchone()
                job = job_from_row(row, from_us)
                attempt_row = conn.execute(
                    self._q["insert_attempt"],
                    {
                        "job_id": job.id,
                        "generation": job.generation,
                        "worker_id": worker_id,
                        "lease_expires_at": now_us + int(job.lease_seconds * 1_000_000),
                        "now": now_us,
                        "due_at": to_us(job.due_at),
                    },
                ).fetchone()
                claims.append(Claim(job, attempt_from_row(attempt_row, from_us)))
        return claims

    def heartbeat(self, leases: Sequence[Lease], now: datetime) -> list[LeaseState]:
        states: list[LeaseState] = []
        with self._tx() as conn:
            for lease in leases:
                row = conn.execute(
                    self._q["renew_lease"],
                    {
                        "now": to_us(now),
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
                            lease_expires_at=from_us(row["lease_expires_at"]),
                        )
                    )
        return states

    def finish(
        self, lease: Lease, outcome: Outcome, now: datetime, *, only_if_expired: bool = False
    ) -> bool:
        with self._tx() as conn:
            if self._finish_on(conn, lease, outcome, now, only_if_expired):
                return True
            if not only_if_expired:
                conn.execute(
                    self._q["late_report"],
                    {
                        "outcome": str(outcome.attempt_status or ATTEMPT_END[outcome.event]),
                        "now": to_us(now),
                        "attempt_id": lease.attempt_id,
                        "generation": lease.generation,
                    },
                )
            return False

    def _finish_on(
        self,
        conn: sqlite3.Connection,
        lease: Lease,
        outcome: Outcome,
        now: datetime,
        only_if_expired: bool = False,
    ) -> bool:
        """The fenced finish statements, in the caller's transaction; True when applied."""
        now_us = to_us(now)
        moved = conn.execute(
            self._q["finish_job"],
            {
                "moves": moves_json(outcome.event),
                "due_at": _opt_us(outcome.due_at),
                "now": now_us,
                "job_id": lease.job_id,
                "generation": lease.generation,
                "attempt_id": lease.attempt_id,
                "only_if_expired": int(only_if_expired),
            },
        ).fetchone()
        if moved is None:
            return False
        conn.execute(
            self._q["finish_attempt"],
            {
                "status": str(outcome.attempt_status or ATTEMPT_END[outcome.event]),
                "now": now_us,
                "error_category": outcome.error_category,
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
    ) -> Iterator[sqlite3.Connection]:
        """Keep it short: the SQLite write lock is held while the caller writes."""
        with self._lock:
            try:
                with self._tx() as conn:
                    yield conn  # the caller's own writes, in this transaction
                    if not self._finish_on(conn, lease, outcome, now()):
                        raise _Fenced  # rolls the caller's writes back too
            except _Fenced:
                pass
            else:
                return
            self.finish(lease, outcome, now())  # records the late report
        raise StaleAttempt(lease.job_id, lease.generation)

    def expired_leases(self, now: datetime, limit: int) -> list[ExpiredLease]:
        with self._tx("DEFERRED") as conn:
            rows = conn.execute(
                self._q["expired_leases"], {"now": to_us(now), "limit": limit}
            ).fetchall()
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
        with self._tx() as conn:
            cursor = conn.execute(
                self._q["expire_overdue"],
                {"moves": moves_json(Event.EXPIRE), "now": to_us(now), "limit": limit},
            )
            return cursor.rowcount

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
        with self._tx() as conn:
            row = conn.execute(
                self._q["transition"],
                {
                    "moves": moves_json(event),
                    "due_at": _opt_us(due_at),
                    "replay": int(replay),
                    "now": to_us(now),
                    "job_id": job_id,
                    "tenant": tenant,
                },
            ).fetchone()
            job = self._load(conn, job_id, tenant, True)
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
        with self._tx() as conn:
            row = conn.execute(
                self._q["insert_schedule"],
                {
                    "tenant": tenant,
                    "name": spec.name,
                    "spec": json.dumps(spec.to_json()),
                    "definition_hash": spec.definition_hash,
                    "anchor_at": to_us(anchor_at),
                    "next_fire_at": _opt_us(next_fire_at),
                    "now": to_us(now),
                },
            ).fetchone()
            if row is not None:
                return _schedule(row), True
            existing = conn.execute(
                self._q["select_schedule"], {"tenant": tenant, "name": spec.name}
            ).fetchone()
            return _schedule(existing), False

    def get_schedule(self, tenant: str, name: str) -> Schedule | None:
        with self._tx("DEFERRED") as conn:
            row = conn.execute(self._q["select_schedule"], {"tenant": tenant, "name": name})
            found = row.fetchone()
        return _schedule(found) if found else None

    def list_schedules(self, tenant: str | None) -> list[Schedule]:
        with self._tx("DEFERRED") as conn:
            rows = conn.execute(self._q["list_schedules"], {"tenant": tenant}).fetchall()
        return [_schedule(r) for r in rows]

    def apply_schedule(self, tenant: str, name: str, now: datetime, decide: Decide) -> Plan:
        with self._tx() as conn:
            row = conn.execute(
                self._q["select_schedule"], {"tenant": tenant, "name": name}
            ).fetchone()
            if row is None:
                raise ScheduleNotFound(name)
            return self._decide_and_apply(conn, _schedule(row), now, decide)

    def plan_due_schedules(self, now: datetime, limit: int, decide: Decide) -> int:
        with self._tx("DEFERRED") as conn:
            ids = [
                r["id"]
                for r in conn.execute(self._q["due_schedules"], {"now": to_us(now), "limit": limit})
            ]
        handled = 0
        for schedule_id in ids:
            try:
                with self._tx() as conn:
                    row = conn.execute(
                        self._q["lock_due_schedule"], {"id": schedule_id, "now": to_us(now)}
                    ).fetchone()
                    if row is None:
                        continue  # another planner handled it meanwhile
                    self._decide_and_apply(conn, _schedule(row), now, decide)
                    handled += 1
            except Exception:  # one broken schedule must not stop the others
                log.exception("planning schedule %s failed; it is retried next pass", schedule_id)
        return handled

    def _decide_and_apply(
        self, conn: sqlite3.Connection, schedule: Schedule, now: datetime, decide: Decide
    ) -> Plan:
        active = [
            Occurrence(
                job_id=r["id"],
                nominal_at=from_us(r["nominal_at"]),
                status=JobStatus(r["status"]),
                started=r["generation"] > 0,
                origin=r["origin"] or "tick",
            )
            for r in conn.execute(self._q["active_occurrences"], {"schedule_id": schedule.id})
        ]
        plan = decide(schedule, active)
        now_us = to_us(now)
        if plan.delete_unstarted:
            conn.execute(self._q["delete_unstarted"], {"schedule_id": schedule.id})
        for job_id in plan.cancel_job_ids:
            conn.execute(
                self._q["transition"],
                {
                    "moves": moves_json(Event.CANCEL),
                    "due_at": None,
                    "replay": 0,
                    "now": now_us,
                    "job_id": job_id,
                    "tenant": None,
                },
            )
        job_ids: dict[datetime, int] = {}
        for occ in plan.new_jobs:
            new = occurrence_job(schedule, occ)
            params = {
                **_job_params(new, now),
                "status": str(new.status),
                "schedule_id": new.schedule_id,
                "schedule_name": new.schedule_name,
                "nominal_at": _opt_us(new.nominal_at),
                "covers": covers_json(new.covers),
                "origin": new.origin,
            }
            row = conn.execute(self._q["insert_occurrence"], params).fetchone()
            if row is not None:
                plan.created_job_ids.append(row["id"])
            else:  # this tick became a job already: the unique identity holds
                row = conn.execute(
                    self._q["occurrence_id"],
                    {"schedule_id": schedule.id, "nominal_at": params["nominal_at"]},
                ).fetchone()
            job_ids[occ.nominal_at] = row["id"]
            plan.job_ids.append(row["id"])
        for tick in plan.ticks:
            conn.execute(
                self._q["insert_tick"],
                {
                    "schedule_id": schedule.id,
                    "nominal_at": to_us(tick.nominal_at),
                    "outcome": str(tick.outcome),
                    "origin": str(tick.origin),
                    "job_id": job_ids.get(tick.nominal_at) if tick.creates_job else None,
                    "detail": tick.detail,
                    "now": now_us,
                },
            )
        spec = plan.spec
        conn.execute(
            self._q["update_schedule"],
            {
                "spec": json.dumps(spec.to_json()) if spec else None,
                "definition_hash": spec.definition_hash if spec else None,
                "paused": None if plan.paused is None else int(plan.paused),
                "anchor_at": _opt_us(plan.anchor_at),
                "move_cursor": int(plan.moves_cursor),
                "next_fire_at": _opt_us(plan.next_fire_at) if plan.moves_cursor else None,
                "bump": int(spec is not None or plan.paused is not None),
                "now": now_us,
                "id": schedule.id,
            },
        )
        return plan

    def release_waiting(self, now: datetime, limit: int) -> int:
        with self._tx() as conn:
            cursor = conn.execute(
                self._q["release_waiting"],
                {"moves": moves_json(Event.RELEASE), "now": to_us(now), "limit": limit},
            )
            return cursor.rowcount

    def delete_schedule(self, tenant: str, name: str, now: datetime) -> None:
        with self._tx() as conn:
            row = conn.execute(
                self._q["select_schedule"], {"tenant": tenant, "name": name}
            ).fetchone()
            if row is None:
                raise ScheduleNotFound(name)
            conn.execute(
                self._q["cancel_unstarted"],
                {"moves": moves_json(Event.CANCEL), "now": to_us(now), "schedule_id": row["id"]},
            )
            conn.execute(self._q["delete_schedule"], {"id": row["id"]})

    def schedule_ticks(self, schedule_id: int, limit: int, before_id: int | None) -> list[Tick]:
        with self._tx("DEFERRED") as conn:
            rows = conn.execute(
                self._q["list_ticks"],
                {"schedule_id": schedule_id, "limit": limit, "before_id": before_id},
            ).fetchall()
        return [
            Tick(
                id=r["id"],
                schedule_id=r["schedule_id"],
                nominal_at=from_us(r["nominal_at"]),
                outcome=r["outcome"],
                origin=r["origin"],
                detail=r["detail"],
                recorded_at=from_us(r["recorded_at"]),
                job_id=r["job_id"],
                job_status=JobStatus(r["job_status"]) if r["job_status"] else None,
                started_at=from_us(r["started_at"]) if r["started_at"] is not None else None,
            )
            for r in rows
        ]

    def latest_run(self, schedule_id: int) -> Job | None:
        with self._tx("DEFERRED") as conn:
            row = conn.execute(self._q["latest_run"], {"schedule_id": schedule_id}).fetchone()
            return self._load(conn, row["id"], None, True) if row else None

    # -- nodes ------------------------------------------------------------------------------

    def register_node(self, node: Node, now: datetime) -> None:
        with self._tx() as conn:
            conn.execute(
                self._q["upsert_node"],
                {
                    "id": node.id,
                    "hostname": node.hostname,
                    "pid": node.pid,
                    "queues": json.dumps(list(node.queues)) if node.queues is not None else None,
                    "concurrency": node.concurrency,
                    "duties": json.dumps(list(node.duties)),
                    "version": node.version,
                    "now": to_us(now),
                },
            )

    def touch_node(self, node_id: str, now: datetime) -> None:
        with self._tx() as conn:
            conn.execute(self._q["touch_node"], {"id": node_id, "now": to_us(now)})

    def stop_node(self, node_id: str, now: datetime) -> None:
        with self._tx() as conn:
            conn.execute(self._q["stop_node"], {"id": node_id, "now": to_us(now)})

    def list_nodes(self, limit: int = 200) -> list[Node]:
        with self._tx("DEFERRED") as conn:
            rows = conn.execute(self._q["list_nodes"], {"limit": limit}).fetchall()
        return [
            Node(
                id=r["id"],
                hostname=r["hostname"],
                pid=r["pid"],
                queues=tuple(json.loads(r["queues"])) if r["queues"] is not None else None,
                concurrency=r["concurrency"],
                duties=tuple(json.loads(r["duties"])),
                version=r["version"],
                started_at=from_us(r["started_at"]),
                last_seen_at=from_us(r["last_seen_at"]),
                stopped_at=from_us(r["stopped_at"]) if r["stopped_at"] is not None else None,
                holding=tuple(sorted(json.loads(r["holding"]))),
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
            "now": to_us(now),
        }
        with self._tx() as c:
            row = c.execute(self._q["insert_token"], params).fetchone()
        return token_from_row(row, from_us)

    def list_tokens(self, tenant: str | None) -> list[ApiToken]:
        with self._tx() as c:
            rows = c.execute(self._q["list_tokens"], {"tenant": tenant}).fetchall()
        return [token_from_row(r, from_us) for r in rows]

    def revoke_token(self, token_id: int, now: datetime) -> ApiToken | None:
        with self._tx() as c:
            row = c.execute(self._q["revoke_token"], {"id": token_id, "now": to_us(now)}).fetchone()
        return token_from_row(row, from_us) if row is not None else None

    def find_token(self, secret_hash: str, now: datetime) -> ApiToken | None:
        params = {"secret_hash": secret_hash, "now": to_us(now)}
        with self._tx("DEFERRED") as c:  # most requests only read
            row = c.execute(self._q["token_by_hash_read"], params).fetchone()
        if row is None:
            return None
        token = token_from_row(row, from_us)
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() >= 60:
            with self._tx() as c:  # noted to the minute, so a busy token rarely writes
                c.execute(self._q["token_by_hash"], params)
            token = replace(token, last_used_at=now)
        return token

    # -- figures ----------------------------------------------------------------------------

    def job_counts(self, tenant: str | None) -> list[JobCount]:
        with self._tx("DEFERRED") as c:
            rows = c.execute(self._q["job_counts"], {"tenant": tenant}).fetchall()
        return [JobCount(r["status"], r["queue"], int(r["n"])) for r in rows]

    def oldest_overdue(self, tenant: str | None, now: datetime) -> datetime | None:
        with self._tx("DEFERRED") as c:
            row = c.execute(
                self._q["oldest_overdue"], {"tenant": tenant, "now": to_us(now)}
            ).fetchone()
        return from_us(row["due_at"]) if row is not None and row["due_at"] is not None else None

    def attempt_samples(
        self, tenant: str | None, since: datetime, limit: int
    ) -> list[AttemptSample]:
        params = {"tenant": tenant, "since": to_us(since), "limit": limit}
        with self._tx("DEFERRED") as c:
            rows = c.execute(self._q["attempt_samples"], params).fetchall()
        return [sample_from_row(r, from_us) for r in rows]


def _schedule(row: sqlite3.Row) -> Schedule:
    return Schedule(
        id=row["id"],
        tenant=row["tenant"],
        spec=spec_from_json(json.loads(row["spec"])),
        paused=bool(row["paused"]),
        anchor_at=from_us(row["anchor_at"]),
        next_fire_at=from_us(row["next_fire_at"]) if row["next_fire_at"] is not None else None,
        version=row["version"],
        created_at=from_us(row["created_at"]),
        updated_at=from_us(row["updated_at"]),
    )


def _job_params(job: NewJob, now: datetime) -> dict[str, Any]:
    return {
        "tenant": job.tenant,
        "queue": job.queue,
        "task": job.task,
        "args": job.args_json,
        "priority": job.priority,
        "due_at": to_us(job.due_at),
        "deadline_at": _opt_us(job.deadline_at),
        "max_attempts": job.max_attempts,
        "retry_base": job.retry_base,
        "retry_cap": job.retry_cap,
        "lease_seconds": job.lease_seconds,
        "timeout_seconds": job.timeout_seconds,
        "idempotency_key": job.idempotency_key,
        "request_hash": job.request_hash,
        "business_key": job.business_key,
        "now": to_us(now),
    }


def _statements(script: str) -> Iterator[str]:
    """Split a migration script into complete statements."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        if not buffer and line.strip().startswith("--"):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer.strip()
            buffer = ""
    if buffer.strip():
        raise SchemaError(f"incomplete statement in migration: {buffer.strip()[:80]}")
