"""What the parts of the SQL store share: their base (Part), the conflict retry, and statement
sequences more than one part runs (reserve_ids, load_job, move, job_params...)."""

from __future__ import annotations

import functools
import json
import random
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, Concatenate, ParamSpec, TypeVar

from duetime.core.errors import StoreConflict, StoreError
from duetime.core.limits import limits_text
from duetime.core.models import Attempt, Job, NewJob, made
from duetime.core.outbox import DISPATCH_HOLDER
from duetime.core.states import TRANSITIONS, Event, JobStatus, withdrawn_for
from duetime.store.driver import Connection, Driver, Row
from duetime.store.rows import (
    ToTime,
    attempt_from_row,
    covers_json,
    job_from_row,
    json_list,
    moves_json,
)

CONFLICT_TRIES = 5  # how often a transaction runs before its StoreConflict is raised

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


def conflicts_retried(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Run a store method's transaction again when the database broke a deadlock by rolling
    it back (MySQL/MariaDB under concurrent claims, reaping and pruning; PostgreSQL rarely).
    The whole method reruns: its transaction left nothing behind. A caller's own transaction
    (connection=...) is never rerun: the conflict aborted it, and it is the caller's."""

    def rerun(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if kwargs.get("connection") is not None:
            return method(self, *args, **kwargs)
        for attempt in range(1, CONFLICT_TRIES + 1):
            try:
                return method(self, *args, **kwargs)
            except StoreConflict:
                if attempt == CONFLICT_TRIES:
                    raise
                time.sleep(random.uniform(0.001, 0.005) * attempt)  # the other side goes first
        raise AssertionError("unreachable")

    functools.update_wrapper(rerun, method)
    return rerun


class Part:
    """A part of the SQL store (store/sql/front.py owns them): the driver it runs statements
    on, and the driver's reading of a time column. A part that needs another is given it in
    its constructor; no part reaches a sibling through itself."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self._t: ToTime = driver.to_time


def reserve_ids(c: Connection, count: int) -> list[int]:
    """`count` new job ids, ascending (inserts give them explicitly, in every dialect)."""
    row = c.one("reserve_job_ids", count=count)
    ids = sorted(int(i) for i in json_list(row["ids"] if row is not None else None))
    if len(ids) != count:
        raise StoreError(f"asked the database for {count} job ids and got {len(ids)}")
    return ids


def returned_ids(rows: list[Row]) -> list[int]:
    """The ids an insert_job_batch that numbers its jobs returned: its jobs', in their order."""
    return [int(i) for i in json_list(rows[0]["ids"] if rows else None)]


def load_job(
    c: Connection, t: ToTime, job_id: int, tenant: str | None, history: bool
) -> Job | None:
    """The job (of `tenant`, when given), with its attempts when `history`."""
    row = c.one("select_job", id=job_id, tenant=tenant)
    if row is None:
        return None
    attempts: tuple[Attempt, ...] = ()
    if history:
        attempts = tuple(attempt_from_row(a, t) for a in c.rows("select_attempts", id=job_id))
    return job_from_row(row, t, attempts)


LOCK_ROUNDS = 3  # how often lock_either reads again for jobs it did not find


def lock_either(c: Connection, ids: Sequence[int]) -> list[Row]:
    """The rows (id, tenant, status) of the jobs of `ids`, locked for the transaction, from
    whichever table holds each (the jobs table or, once it ended, the history table). A job
    that moves between the two while the read waits for its row lock is found by neither part
    of that read (on PostgreSQL both parts read one snapshot, taken before the move
    committed), so the ids not found are read again, in a statement that sees the move; an id
    of no job costs LOCK_ROUNDS reads. The rows are locked in id order within each table and
    each round, no longer across all of them: two transactions that lock the same jobs in
    other orders may deadlock, and the database then rolls one back (StoreConflict, which
    the store's methods retry)."""
    found: list[Row] = []
    wanted = sorted(set(ids))
    for _ in range(LOCK_ROUNDS):
        rows = c.rows("lock_parents", ids=wanted)
        found += rows
        seen = {r["id"] for r in rows}
        wanted = [i for i in wanted if i not in seen]
        if not wanted:
            break
    return found


def move(
    c: Connection,
    job_id: int,
    event: Event,
    now: datetime,
    *,
    tenant: str | None = None,
    due_at: datetime | None = None,
    replay: bool = False,
) -> bool:
    """An operator's (or a planner's) move of one job by core.states.TRANSITIONS[event],
    conditional on its current status; True when it applied. A job whose attempt is only
    dispatched to the broker (no worker accepted it) is moved as a job still waiting: the
    attempt is withdrawn first (core.states.withdrawn_for), in this transaction, which the
    caller rolls back when the move then does not apply."""
    withdraw = withdrawn_for(event)
    if withdraw:
        withdraw_dispatched(c, now, withdraw, ids=[job_id])
    moved = c.run(
        "transition",
        moves=moves_json(event),
        due_at=due_at,
        replay=replay,
        now=now,
        job_id=job_id,
        tenant=tenant,
    )
    return moved > 0


def withdraw_dispatched(
    c: Connection,
    now: datetime,
    moves: dict[JobStatus, JobStatus] | None = None,
    *,
    ids: Sequence[int] = (),
    direct: bool = False,
) -> list[Row]:
    """Withdraw the attempts held by the outbox (dispatched, not accepted by any worker) of
    the jobs of `ids` and, when `direct`, of every queue not in outbox mode; the jobs move by
    `moves` (default: core.states.TRANSITIONS[WITHDRAW]). One statement, fenced against a
    worker's accept_dispatch by the jobs' row locks. Returns the moved jobs' id, queue,
    status, due_at."""
    table = TRANSITIONS[Event.WITHDRAW] if moves is None else moves
    return c.rows(
        "withdraw_dispatched",
        ids=list(ids),
        direct=direct,
        moves=json.dumps({str(k): str(v) for k, v in table.items()}, sort_keys=True),
        holder=DISPATCH_HOLDER,
        now=now,
    )


def job_params(job_id: int, job: NewJob, now: datetime) -> dict[str, Any]:
    """insert_job's parameters for one job (a plain enqueue or a schedule's occurrence)."""
    return {
        "id": job_id,
        "tenant": job.tenant,
        "queue": job.queue,
        "task": job.task,
        "args": job.args_json,
        "priority": int(job.priority),
        "due_at": job.due_at,
        "deadline_at": job.deadline_at,
        "status": str(job.status),
        "max_attempts": int(job.max_attempts),
        "retry_base": float(job.retry_base),
        "retry_cap": float(job.retry_cap),
        "lease_seconds": float(job.lease_seconds),
        "timeout_seconds": None if job.timeout_seconds is None else float(job.timeout_seconds),
        "idempotency_key": job.idempotency_key,
        "request_hash": job.request_hash,
        "business_key": job.business_key,
        "schedule_id": job.schedule_id,
        "schedule_name": job.schedule_name,
        "nominal_at": job.nominal_at,
        "covers": covers_json(job.covers),
        "origin": job.origin,
        "limits": limits_text(job.limits),
        "trace_context": job.trace_context,
        "sequence_key": job.sequence_key,
        "sequence_hold": 1 if job.sequence_hold else None,
        "unique_key": job.unique_key,
        "unique_until": job.unique_until,
        "now": now,
        "created_at": now,  # by name, for a COPY (insert_new_jobs on PostgreSQL)
        "updated_at": now,
    }


def key_order(job: NewJob) -> tuple[bool, str, str]:
    return (job.idempotency_key is not None, job.tenant, job.idempotency_key or "")


def earliest_of(pairs: Iterable[tuple[str, datetime]]) -> dict[str, datetime]:
    """The earliest instant per queue, from (queue, instant) pairs: what a wake-up carries."""
    found: dict[str, datetime] = {}
    for queue, at in pairs:
        if queue not in found or at < found[queue]:
            found[queue] = at
    return found


def earliest(jobs: Iterable[Job | NewJob]) -> dict[str, datetime]:
    """The earliest due instant per queue of these jobs."""
    return earliest_of((job.queue, job.due_at) for job in jobs)


def new_job_record(job_id: int, new: NewJob, now: datetime) -> Job:
    """The record of a job just inserted from `new` (as select_job would read it back)."""
    return made(
        Job,
        id=job_id,
        tenant=new.tenant,
        queue=new.queue,
        task=new.task,
        args=new.args,
        priority=new.priority,
        due_at=new.due_at,
        deadline_at=new.deadline_at,
        status=new.status,
        version=1,
        attempts=0,
        max_attempts=new.max_attempts,
        generation=0,
        retry_base=new.retry_base,
        retry_cap=new.retry_cap,
        lease_seconds=new.lease_seconds,
        timeout_seconds=new.timeout_seconds,
        idempotency_key=new.idempotency_key,
        business_key=new.business_key,
        created_at=now,
        updated_at=now,
        schedule_id=new.schedule_id,
        schedule_name=new.schedule_name,
        nominal_at=new.nominal_at,
        covers=new.covers,
        origin=new.origin,
        limits=new.limits,
        trace_context=new.trace_context,
        sequence_key=new.sequence_key,
        sequence_hold=new.sequence_hold,
        unique_key=new.unique_key,
        unique_until=new.unique_until,
    )


def like_pattern(text: str) -> str:
    """A LIKE pattern (escape character '!') that finds `text` anywhere, lowercased: the
    statements compare it with the lowercased column."""
    escaped = text.lower().replace("!", "!!").replace("%", "!%").replace("_", "!_")
    return f"%{escaped}%"


SEEKED_QUEUES = 4  # claim_queues reads up to this many named queues, each through its index


def claim_statement(queues: Sequence[str] | None) -> str:
    """The claim statement of a worker of `queues`: claim_queues for 1 to SEEKED_QUEUES
    distinct named queues, else claim (every queue; or more named ones, filtered)."""
    if queues is None or len(set(queues)) > SEEKED_QUEUES:
        return "claim"
    return "claim_queues"


def pick_filters(queues: Sequence[str] | None, tasks: Sequence[str] | None) -> dict[str, Any]:
    """A claim's filters of queues and tasks as its statements take them (None: any)."""
    return {
        "all_queues": queues is None,
        "queues": list(dict.fromkeys(queues)) if queues is not None else [],  # each once
        "all_tasks": tasks is None,
        "tasks": list(tasks) if tasks is not None else [],
    }


def settle_sequences(
    c: Connection, keys: Iterable[tuple[str, str]], now: datetime, t: ToTime
) -> dict[str, datetime]:
    """Release the next job of each sequence (tenant, key) that nothing holds any more (its
    waiting job of lowest id becomes scheduled), or drop the sequence's row when it has no job
    left to run; in the caller's transaction, after a job of it ended (or may have). Each
    sequence's row is locked first (in key order), so that an enqueue into it and this
    release take turns. Idempotent: a sequence still held is left as it is. Returns the
    released jobs' earliest due instant per queue (for the caller's wake-up)."""
    released: list[tuple[str, datetime]] = []
    for tenant, key in sorted(set(keys)):
        where = {"tenant": tenant, "sequence_key": key}
        c.run("lock_sequence", **where)
        if c.one("sequence_busy", **where, exclude=0, waiting=False) is not None:
            continue
        after = 0
        while True:
            nxt = c.one("sequence_next", **where, after=after)
            if nxt is None:
                c.run("drop_sequence", **where)
                break
            moves = moves_json(Event.RELEASE)
            if c.run("release_sequence_job", id=nxt["id"], moves=moves, now=now):
                released.append((nxt["queue"], t(nxt["due_at"])))
                break
            # it stopped waiting meanwhile (an operator's cancel, which held its row and
            # released nothing: a waiting job holds no sequence): the next one, then
            after = nxt["id"]
    return earliest_of(released)


def sequence_status(c: Connection, job: NewJob) -> JobStatus:
    """The status a new job of a sequence starts in, its sequence's row locked (so that no
    other enqueue or release of it runs meanwhile): waiting behind a job of its sequence not
    ended (or dead and holding it), else its own."""
    where = {"tenant": job.tenant, "sequence_key": job.sequence_key}
    c.run("lock_sequence", **where)
    if c.one("sequence_busy", **where, exclude=0, waiting=True) is not None:
        return JobStatus.WAITING
    return job.status


def sequence_keys(c: Connection, ids: Sequence[int]) -> list[tuple[str, str]]:
    """The sequences of the jobs of `ids` (the ones that have one)."""
    if not ids:
        return []
    return [(r["tenant"], r["sequence_key"]) for r in c.rows("sequence_keys_of", ids=list(ids))]
