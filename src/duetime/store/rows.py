"""Dialect-neutral store helpers: rows into core records, move maps, refusal errors."""

from __future__ import annotations

import functools
import json
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from duetime.core.errors import IllegalTransition, InvalidRequest
from duetime.core.models import Attempt, Claim, Job, built
from duetime.core.outbox import DISPATCH_HOLDER
from duetime.core.retry import ErrorCategory
from duetime.core.states import AttemptStatus, Event, JobStatus, allowed_from
from duetime.core.stats import AttemptSample
from duetime.core.tokens import ApiToken, Role

Row = Mapping[str, Any]
ToTime = Callable[[Any], datetime]


# an attempt's columns, as select_claim returns them prefixed with "attempt_" beside its job's
ATTEMPT_COLUMNS = (
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
    "claim_token",
)


# what a claim returns per job (the part claimed_columns of store/sql/parts.sql, and
# claim_epoch): the columns claims_from_rows reads, no more (store/sql/limits.py spend, the
# relay's dispatch in store/sql/outbox.py and attempt_ids.Reserved.used read some of them
# too). A claimed row is the hottest read a worker makes, and each column costs the
# database's output and the driver's parse of it.
CLAIMED_COLUMNS = (
    "id",
    "tenant",
    "queue",
    "task",
    "args",
    "priority",
    "due_at",
    "deadline_at",
    "status",
    "version",
    "attempts",
    "max_attempts",
    "generation",
    "retry_base",
    "retry_cap",
    "lease_seconds",
    "timeout_seconds",
    "idempotency_key",
    "business_key",
    "created_at",
    "updated_at",
    "cancel_requested_at",
    "schedule_id",
    "schedule_name",
    "nominal_at",
    "covers",
    "origin",
    "limits",
    "result",
    "progress",
    "progress_message",
    "progress_at",
    "trace_context",
    "on_parent_failure",
    "cancel_reason",
    "sequence_key",
    "sequence_hold",
    "unique_key",
    "unique_until",
    "claim_token",
    "attempt_id",
    "attempt_lease_expires_at",
    "claim_epoch",
)


def json_list(value: Any) -> list[Any]:
    """A JSON array column: parsed already (PostgreSQL), text (SQLite, MySQL) or NULL."""
    if value is None:
        return []
    return list(json.loads(value) if isinstance(value, str | bytes) else value)


def moves_json(event: Event) -> str:
    """The {from: to} map of one event, as the JSON the SQL statements look statuses up in."""
    from duetime.core.states import TRANSITIONS

    return json.dumps({str(k): str(v) for k, v in TRANSITIONS[event].items()}, sort_keys=True)


# the columns a job's record is built from (job_from_values), in the order a claim returns
# them: CLAIMED_COLUMNS up to the claim's own (claim_token, the attempt's, claim_epoch)
JOB_COLUMNS_READ = CLAIMED_COLUMNS[: CLAIMED_COLUMNS.index("claim_token")]
_JOB_COLUMN_COUNT = len(JOB_COLUMNS_READ)
_job_values = operator.itemgetter(*JOB_COLUMNS_READ)
_claimed_values = operator.itemgetter(*CLAIMED_COLUMNS)
# columns a database of an earlier schema lacks until it migrates (18: results and progress;
# 20: dependencies): a migration test reads its jobs before migrating, and they read as NULL
_ADDED_LATER = frozenset(
    {"result", "progress", "progress_message", "progress_at", "on_parent_failure", "cancel_reason"}
)


def job_from_row(
    row: Row, t: ToTime, attempts: tuple[Attempt, ...] = (), *, current: Sequence[Attempt] = ()
) -> Job:
    """A job from its row (by column name), with `attempts` as its history; `current`:
    attempts read only to tell whether it waits in the broker (dispatched_at), when its
    history is not wanted."""
    try:
        values = _job_values(row)
    except (KeyError, IndexError):  # a database of an earlier schema (before it migrates)
        values = tuple(_or_none(row, name) for name in JOB_COLUMNS_READ)
    return job_from_values(values, t, attempts, current=current)


def _or_none(row: Row, name: str) -> Any:
    try:
        return row[name]
    except (KeyError, IndexError):
        if name in _ADDED_LATER:
            return None
        raise


def job_from_values(
    values: Sequence[Any],
    t: ToTime,
    attempts: tuple[Attempt, ...] = (),
    *,
    current: Sequence[Attempt] = (),
) -> Job:
    """A job from its columns' values in JOB_COLUMNS_READ's order (more may follow: a claim's
    row has its own after them), the one builder of a job's record: every claimed row passes
    here, its values unpacked at once rather than looked up by name (a claim's rows come as
    tuples, with no dict each: docs/performance.md, "Claim rows as tuples"), the optional
    columns read inline, and the record built from a dict display."""
    (
        job_id, tenant, queue, task, args, priority, due_at, deadline_at, status, version,
        tries, max_attempts, generation, retry_base, retry_cap, lease_seconds, timeout,
        idempotency_key, business_key, created_at, updated_at, cancel_requested_at,
        schedule_id, schedule_name, nominal_at, covers, origin, limits, result, progress,
        message, progress_at, trace_context, on_parent_failure, cancel_reason, sequence_key,
        sequence_hold, unique_key, unique_until,
    ) = values[:_JOB_COLUMN_COUNT]  # fmt: skip
    return built(
        Job,
        {
            "id": job_id,
            "tenant": tenant,
            "queue": queue,
            "task": task,
            # PostgreSQL's driver parses JSON into a fresh dict; SQLite and MySQL give text
            "args": args if type(args) is dict else _args(args),
            "priority": priority,
            "due_at": t(due_at),
            "deadline_at": None if deadline_at is None else t(deadline_at),
            "status": _JOB_STATUS[status],
            "version": version,
            "attempts": tries,
            "max_attempts": max_attempts,
            "generation": generation,
            "retry_base": float(retry_base),
            "retry_cap": float(retry_cap),
            "lease_seconds": float(lease_seconds),
            "timeout_seconds": None if timeout is None else float(timeout),
            "idempotency_key": idempotency_key,
            "business_key": business_key,
            "created_at": t(created_at),
            "updated_at": t(updated_at),
            "cancel_requested_at": None if cancel_requested_at is None else t(cancel_requested_at),
            "schedule_id": schedule_id,
            "schedule_name": schedule_name,
            "nominal_at": None if nominal_at is None else t(nominal_at),
            "covers": () if covers is None else _covers(covers),
            "origin": origin,
            "attempt_history": attempts,
            "limits": () if limits is None else tuple(json_list(limits)),
            "dispatched_at": dispatched_since(generation, attempts or current)
            if attempts or current
            else None,
            "result": None if result is None else json.loads(result),
            "progress": None if progress is None else float(progress),
            "progress_message": message,
            "progress_at": None if progress_at is None else t(progress_at),
            "trace_context": trace_context,
            "on_parent_failure": on_parent_failure,
            "cancel_reason": cancel_reason,
            "parents": (),
            "children": (),
            "sequence_key": sequence_key,
            "sequence_hold": bool(sequence_hold),
            "unique_key": unique_key,
            "unique_until": None if unique_until is None else t(unique_until),
            "sequence_ahead": None,
        },
    )


def _args(value: Any) -> dict[str, Any]:
    """A job's args as the driver gave them: JSON text (SQLite, MySQL) or a mapping."""
    return json.loads(value) if isinstance(value, str | bytes) else dict(value)


def dispatched_since(generation: int, attempts: Sequence[Attempt]) -> datetime | None:
    """When the job's current attempt (of `generation`) was dispatched, while it is still held
    by the outbox (no worker accepted it); None otherwise."""
    for a in attempts:
        if (
            a.generation == generation
            and a.status is AttemptStatus.RUNNING
            and a.worker_id == DISPATCH_HOLDER
        ):
            return a.started_at
    return None


def attempt_from_row(row: Row, t: ToTime, prefix: str = "", epoch: int = 0) -> Attempt:
    """An attempt from its columns, each named `prefix` + the column (select_claim:
    "attempt_"); `epoch`: the database's history it was claimed in (a claim's claim_epoch)."""
    k = _named(prefix)
    category = row[k["error_category"]]
    return built(
        Attempt,
        {
            "id": row[k["id"]],
            "job_id": row[k["job_id"]],
            "generation": row[k["generation"]],
            "worker_id": row[k["worker_id"]],
            "status": _ATTEMPT_STATUS[row[k["status"]]],
            "lease_expires_at": t(row[k["lease_expires_at"]]),
            "started_at": t(row[k["started_at"]]),
            "finished_at": _opt(row[k["finished_at"]], t),
            "error_category": ErrorCategory(category) if category else None,
            "error_message": row[k["error_message"]],
            "error_traceback": row[k["error_traceback"]],
            "late_outcome": row[k["late_outcome"]],
            "late_reported_at": _opt(row[k["late_reported_at"]], t),
            "due_at": _opt(row[k["due_at"]], t),
            "claim_token": row[k["claim_token"]],
            "epoch": epoch,
        },
    )


# statuses by their stored text: a dict lookup costs less than the enum's call (every claim)
_JOB_STATUS: dict[str, JobStatus] = {str(s): s for s in JobStatus}
_ATTEMPT_STATUS: dict[str, AttemptStatus] = {str(s): s for s in AttemptStatus}


@functools.cache
def _named(prefix: str) -> dict[str, str]:
    """Each of ATTEMPT_COLUMNS: its name with `prefix`, built once per prefix."""
    return {col: prefix + col for col in ATTEMPT_COLUMNS}


def claims_from_rows(rows: Iterable[Row], t: ToTime, worker_id: str) -> list[Claim]:
    """The claims of rows (by column name) a claim started for `worker_id`, each with the
    columns CLAIMED_COLUMNS names: see claims_from_values."""
    return claims_from_values(CLAIMED_COLUMNS, map(_claimed_values, rows), t, worker_id)


def claims_from_values(
    names: Sequence[str], rows: Iterable[Sequence[Any]], t: ToTime, worker_id: str
) -> list[Claim]:
    """The claims of the rows a claim started for `worker_id`, each row the values of the
    columns `names` (in CLAIMED_COLUMNS' order, as every claim statement returns them: the
    part claimed_columns, then claim_epoch; in any other order they are put in that one, at
    a cost): its job's columns as the claim left them, its attempt's id and lease end as
    attempt_id and attempt_lease_expires_at, and the database's epoch as claim_epoch. The
    rest of a just-started attempt is not read back: it is the job's (generation, claim
    token, due_at; started_at is the claim's now, as the job's updated_at), the worker's, or
    what every new attempt has (running, no outcome)."""
    if names and tuple(names) != CLAIMED_COLUMNS:  # (no names: no row)
        at = {name: i for i, name in enumerate(names)}
        rows = map(operator.itemgetter(*(at[name] for name in CLAIMED_COLUMNS)), rows)
    claims = []
    for values in rows:
        job = job_from_values(values, t)
        claim_token, attempt_id, lease_end, epoch = values[_JOB_COLUMN_COUNT:]
        attempt = built(
            Attempt,
            {
                "id": attempt_id,
                "job_id": job.id,
                "generation": job.generation,
                "worker_id": worker_id,
                "status": AttemptStatus.RUNNING,
                "lease_expires_at": t(lease_end),
                "started_at": job.updated_at,
                "finished_at": None,
                "error_category": None,
                "error_message": None,
                "error_traceback": None,
                "late_outcome": None,
                "late_reported_at": None,
                "due_at": job.due_at,
                "claim_token": claim_token,
                "epoch": int(epoch),
            },
        )
        claims.append(built(Claim, {"job": job, "attempt": attempt}))
    return claims


def attempts_by_job(rows: Iterable[Row], t: ToTime) -> dict[int, tuple[Attempt, ...]]:
    """Attempt rows of many jobs (ordered by job, then generation), grouped by job id."""
    grouped: dict[int, list[Attempt]] = {}
    for row in rows:
        grouped.setdefault(row["job_id"], []).append(attempt_from_row(row, t))
    return {job_id: tuple(attempts) for job_id, attempts in grouped.items()}


def token_from_row(row: Row, t: ToTime) -> ApiToken:
    return ApiToken(
        id=row["id"],
        tenant=row["tenant"],
        role=Role(row["role"]),
        name=row["name"],
        prefix=row["prefix"],
        created_at=t(row["created_at"]),
        last_used_at=_opt(row["last_used_at"], t),
        revoked_at=_opt(row["revoked_at"], t),
        expires_at=_opt(row["expires_at"], t),
    )


def sample_from_row(row: Row, t: ToTime) -> AttemptSample:
    return AttemptSample(
        task=row["task"],
        queue=row["queue"],
        status=AttemptStatus(row["status"]),
        started_at=t(row["started_at"]),
        due_at=_opt(row["due_at"], t),
        finished_at=_opt(row["finished_at"], t),
        error_category=row["error_category"],
    )


def _covers(value: Any) -> tuple[datetime, ...]:
    return tuple(datetime.fromisoformat(item) for item in json_list(value))


def covers_json(covers: tuple[datetime, ...]) -> str | None:
    return json.dumps([c.isoformat() for c in covers]) if covers else None


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _opt(value: Any, t: ToTime) -> datetime | None:
    return None if value is None else t(value)


ACTION_NAMES = {
    Event.RESOLVE_DONE: "resolve (done)",
    Event.RESOLVE_RETRY: "resolve (run again)",
    Event.CANCEL: "cancel",
    Event.RESCHEDULE: "reschedule",
    Event.REPLAY: "replay",
    Event.EXPIRE: "expire",
}


def action_name(event: Event) -> str:
    return ACTION_NAMES.get(event, str(event))


def allowed(event: Event) -> list[str]:
    return allowed_from(event)


def refusal(job: Job, event: Event, due_at: datetime | None) -> Exception:
    """The error that explains why a conditional move did not apply to `job`."""
    if str(job.status) in allowed(event) and due_at is not None and job.deadline_at is not None:
        return InvalidRequest(
            f"cannot {action_name(event)} job {job.id} to {due_at.isoformat()}: it is not before "
            f"the job's deadline {job.deadline_at.isoformat()}"
        )
    return IllegalTransition(job.id, action_name(event), str(job.status), allowed(event))
