"""The store contract (store/base.py), implemented once for every SQL dialect.

Every rule lives here: which statements run in which transaction, in which order rows are
locked, how a fenced write is recognised, how an idempotency key is honoured. A Driver
(store/driver.py) supplies only what differs between databases. The schedules, nodes, tokens
and figures parts of the contract are in store/sql/schedules.py, the queue settings and the
outbox in store/sql/outbox.py, flow control (pause, caps, weights, max backlog) in
store/sql/flow.py, all mixed into SQLStore. Past 400 lines because the claim, heartbeat and
completion rules must be read together to be trusted.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from duetime.core.errors import (
    IdempotencyConflict,
    JobNotFound,
    SchemaError,
    StaleAttempt,
    StoreError,
)
from duetime.core.flow import PriorityShare, TenantRotation
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
    NewJobs,
    Outcome,
    variant,
)
from duetime.core.outbox import DISPATCH_HOLDER
from duetime.core.retry import ErrorCategory
from duetime.core.states import ATTEMPT_END, HELD, AttemptStatus, Event, JobStatus, next_status
from duetime.store.base import Listener
from duetime.store.driver import Connection, Driver, Row, Rows, refuse_newer
from duetime.store.rows import (
    attempts_by_job,
    claims_from_rows,
    job_from_row,
    moves_json,
    refusal,
)
from duetime.store.sql.flow import QueuesTenantsFlow
from duetime.store.sql.schedules import SchedulesNodesTokens
from duetime.store.sql.shared import (
    claim_statement,
    conflicts_retried,
    earliest,
    earliest_of,
    job_params,
    key_order,
    like_pattern,
    load_job,
    move,
    new_job_record,
    pick_filters,
    reserve_ids,
)

BATCH_SLICE = 250  # jobs per insert of a bulk enqueue


class _Fenced(Exception):
    """Raised inside a completion transaction to roll it back."""


class SQLStore(SchedulesNodesTokens, QueuesTenantsFlow):
    """A Store on any SQL database a Driver speaks for. Safe for many threads; safe for many
    processes and machines as far as the database is (SQLite: one machine)."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.dialect = driver.dialect
        self.lock_wait = driver.lock_wait
        self._t = driver.to_time
        self.priorities = PriorityShare()  # each lower priority class's share of the claims
        self.tenant_rotation = TenantRotation()  # saturated claims rotate over tenants
        self.dispatch_rotation = TenantRotation()  # and the relay's saturated dispatches
        self.queue_credit: dict[str, float] = {}  # weighted queues' turns, claim to claim

    def set_priority_share(self, share: float) -> None:
        """The minimum share of this process's claimed slots each lower priority class keeps
        under saturation (docs/flow-control.md, Priorities); 0 claims in strict order."""
        self.priorities = PriorityShare(share)

    def close(self) -> None:
        self.driver.close()

    # -- schema -----------------------------------------------------------------------------

    @property
    def latest_version(self) -> int:
        return self.driver.migrations[-1].version

    def schema_version(self) -> int:
        with self.driver.transaction(write=False) as c:
            return self._applied_version(c)

    def check_schema(self) -> None:
        current = self.schema_version()
        refuse_newer(current, self.latest_version)
        if current < self.latest_version:
            raise SchemaError(
                f"the database schema is at version {current} but this duetime needs "
                f"{self.latest_version}; run `duetime migrate` first"
            )

    def migrate(self) -> list[int]:
        applied: list[int] = []
        with self.driver.transaction() as c:
            c.run("lock_migrations")  # concurrent migrators take their turns
            try:
                c.run("create_migrations_table")
                current = self._applied_version(c)
                refuse_newer(current, self.latest_version)
                for migration in self.driver.migrations:
                    if migration.version <= current:
                        continue
                    with self.driver.translated():
                        self.driver.run_script(c.native, migration.script)
                    c.run(
                        "insert_migration",
                        version=migration.version,
                        name=migration.name,
                        now=datetime.now(UTC),
                    )
                    applied.append(migration.version)
            finally:
                c.run("unlock_migrations")
        return applied

    def _applied_version(self, c: Connection) -> int:
        if not c.rows("migrations_table_exists"):
            return 0
        row = c.one("schema_version")
        return int(row["version"]) if row is not None and row["version"] is not None else 0

    # -- enqueue and reads ------------------------------------------------------------------

    @conflicts_retried
    def enqueue(
        self, jobs: Sequence[NewJob], now: datetime, *, connection: Any = None
    ) -> list[Enqueued]:
        if not jobs:
            return []
        controls = self.flow_controls()  # a max_backlog (docs/flow-control.md)
        if connection is not None:
            with self.driver.joined(connection) as c:
                self._admit(c, jobs, controls)
                return self._enqueue(c, jobs, now)
        if len(jobs) == 1 and not controls.bounds(jobs[0].queue, jobs[0].tenant):
            # one statement that commits on its own (PostgreSQL: one round trip, its wake-up
            # included); a key or occurrence met on the way, or a backlog bound to check
            # first, goes the long way below
            with self.driver.single() as c:
                created = self._enqueue_one(c, jobs[0], now)
            if created is not None:
                return [created]
        with self.driver.transaction() as c:
            self._admit(c, jobs, controls)
            return self._enqueue(c, jobs, now)

    def _enqueue_one(self, c: Connection, job: NewJob, now: datetime) -> Enqueued | None:
        """One job in one statement, its id from the database (and its wake-up, where the
        statement sends it); None when its idempotency key or occurrence exists already."""
        row = c.one(
            "enqueue_one",
            **job_params(0, job, now),
            wake=self.driver.wake_payload(job.queue, job.due_at),
        )
        return None if row is None else Enqueued(new_job_record(row["id"], job, now), True)

    def _enqueue(self, c: Connection, jobs: Sequence[NewJob], now: datetime) -> list[Enqueued]:
        if len(jobs) == 1:
            one = self._enqueue_one(c, jobs[0], now)
            if one is not None:
                return [one]
        if isinstance(jobs, NewJobs) and _fresh(jobs.template):
            return self._enqueue_batch(c, jobs, now)
        if len(jobs) > 1 and all(_fresh(j) for j in jobs):
            return self._enqueue_fresh(c, jobs, now)
        # An insert waits for another transaction's uncommitted row with the same key, so two
        # batches taking the same keys in different orders could deadlock. Rows therefore go
        # in in the order of their keys (the sort is stable: of two equal keys the first in the
        # request goes first), while their ids, reserved up front, follow the request's order.
        ids = reserve_ids(c, len(jobs))
        order = sorted(range(len(jobs)), key=lambda i: key_order(jobs[i]))
        c.run_many("insert_job", [job_params(ids[i], jobs[i], now) for i in order])
        created = {row["id"]: row for row in c.rows("jobs_by_ids", ids=ids)}
        taken = [job for job_id, job in zip(ids, jobs, strict=True) if job_id not in created]
        originals = self._jobs_by_key(c, taken)
        results: list[Enqueued] = []
        for job_id, job in zip(ids, jobs, strict=True):
            row = created.get(job_id)
            tries = 0
            if row is None and job.idempotency_key is None and job.schedule_id is not None:
                # an occurrence whose tick became a job already: that job is the original
                found = c.one(
                    "occurrence_id", schedule_id=job.schedule_id, nominal_at=job.nominal_at
                )
                original_job = load_job(c, self._t, found["id"], None, False) if found else None
                if original_job is not None:
                    results.append(Enqueued(original_job, False))
                    continue
            while row is None:  # the key is taken: return the original, or refuse
                tries += 1
                if tries > 5:
                    raise StoreError(
                        f"idempotency key {job.idempotency_key!r} is taken but its job cannot "
                        "be read (a transaction isolation above READ COMMITTED?); try again"
                    )
                original = originals.get((job.tenant, job.idempotency_key))
                if original is not None:
                    if original["request_hash"] != job.request_hash:
                        raise IdempotencyConflict(
                            f"idempotency key {job.idempotency_key!r} was already used for "
                            f"job {original['id']} with a different request; use a new key"
                        )
                    results.append(Enqueued(job_from_row(original, self._t), False))
                    break
                # the holder of the key was deleted meanwhile: the key is free again
                c.run("insert_job", **job_params(job_id, job, now))
                row = c.one("select_job", id=job_id, tenant=None)
                if row is None:
                    originals.update(self._jobs_by_key(c, [job]))
            else:
                results.append(Enqueued(job_from_row(row, self._t), True))
        self.driver.notify(c, earliest(r.job for r in results if r.created))
        return results

    def _enqueue_fresh(
        self, c: Connection, jobs: Sequence[NewJob], now: datetime
    ) -> list[Enqueued]:
        """A batch that cannot meet a unique key (no idempotency keys, no occurrences): one
        bulk insert (PostgreSQL: COPY), and the records built from what was inserted."""
        ids = reserve_ids(c, len(jobs))
        pairs = list(zip(ids, jobs, strict=True))
        c.run_many("insert_new_jobs", [job_params(i, job, now) for i, job in pairs])
        self.driver.notify(c, earliest(jobs))
        return [Enqueued(new_job_record(i, job, now), True) for i, job in pairs]

    def _enqueue_batch(self, c: Connection, jobs: NewJobs, now: datetime) -> list[Enqueued]:
        """enqueue_many's jobs (no keys, no occurrences): an insert per slice of jobs, with
        what they share sent once and a JSON array of what differs. Where the driver pipelines
        (PostgreSQL), the database inserts one slice while the next is made and checked, and
        the records (built from the template) are made while it inserts the last."""
        jobs[:BATCH_SLICE]  # the first slice is checked before anything is sent
        ids = reserve_ids(c, len(jobs))
        shared = job_params(0, jobs.template, now)
        shared_due = jobs.template.due_at
        json_time = self.driver.json_time
        with self.driver.pipeline(c):
            for start in range(0, len(jobs), BATCH_SLICE):
                stop = min(start + BATCH_SLICE, len(jobs))
                rows = [
                    [
                        job_id,
                        job.args_json,
                        None if job.due_at is shared_due else json_time(job.due_at),
                        job.business_key,
                    ]
                    for job_id, job in zip(ids[start:stop], jobs[start:stop], strict=True)
                ]
                c.send("insert_job_batch", **shared, rows=json.dumps(rows))
            self.driver.notify(c, earliest(jobs))
            record = new_job_record(0, jobs.template, now)
            return [
                Enqueued(
                    variant(
                        record,
                        id=job_id,
                        args=job.args,
                        due_at=job.due_at,
                        business_key=job.business_key,
                    ),
                    True,
                )
                for job_id, job in zip(ids, jobs, strict=True)
            ]

    def _jobs_by_key(
        self, c: Connection, jobs: Sequence[NewJob]
    ) -> dict[tuple[str, str | None], Row]:
        keyed = [j for j in jobs if j.idempotency_key is not None]
        if not keyed:
            return {}
        rows = c.rows(
            "jobs_by_keys",
            tenants=sorted({j.tenant for j in keyed}),
            keys=sorted({str(j.idempotency_key) for j in keyed}),
        )
        return {(r["tenant"], r["idempotency_key"]): r for r in rows}

    def get_job(self, job_id: int, *, tenant: str | None = None) -> Job | None:
        with self.driver.transaction(snapshot=True) as c:
            return load_job(c, self._t, job_id, tenant, True)

    def list_jobs(self, f: JobFilter) -> list[Job]:
        with self.driver.transaction(snapshot=True) as c:
            rows = c.rows(
                "list_jobs",
                tenant=f.tenant,
                status=str(f.status) if f.status else None,
                task=f.task,
                queue=f.queue,
                schedule_id=f.schedule_id,
                before_id=f.before_id,
                due_after=f.due_after,
                due_before=f.due_before,
                business_key=f.business_key,
                idempotency_key=f.idempotency_key,
                args_like=like_pattern(f.args_text) if f.args_text is not None else None,
                limit=f.limit,
            )
            history: dict[int, tuple[Attempt, ...]] = {}
            current: dict[int, tuple[Attempt, ...]] = {}
            if f.with_attempts and rows:
                found = c.rows("select_attempts_of_jobs", ids=[r["id"] for r in rows])
                history = attempts_by_job(found, self._t)
            held = [r["id"] for r in rows if r["status"] in HELD]
            if held and not f.with_attempts:  # to tell which of them wait in the broker
                found = c.rows("select_attempts_of_jobs", ids=held)
                current = attempts_by_job(found, self._t)
        return [
            job_from_row(r, self._t, history.get(r["id"], ()), current=current.get(r["id"], ()))
            for r in rows
        ]

    # -- the worker's path ------------------------------------------------------------------

    @conflicts_retried
    def claim(
        self,
        *,
        worker_id: str,
        queues: Sequence[str] | None,
        limit: int,
        now: datetime,
        tasks: Sequence[str] | None = None,
    ) -> list[Claim]:
        if limit <= 0:
            return []
        self._next_start = None  # the limited paths say when a limit allows a start again
        controls = self.flow_controls()  # pause, caps, weights (docs/flow-control.md)
        per_class = self.priorities.reserve(limit)  # lower priorities' share, now and then
        rotate = self.tenant_rotation.wanted()  # after a saturated claim: tenants take turns
        if controls.restricts_claim or per_class or self.priorities.owed or rotate:
            claims, found = self._claim_controlled(
                controls,
                worker_id=worker_id,
                queues=queues,
                limit=limit,
                now=now,
                tasks=tasks,
                per_class=per_class,
                rotate=rotate,
            )
            if not claims and not controls.restricts_claim:
                # a detour for fairness only that started nothing: its candidates are read
                # without locks, so concurrent claims may have started them all; the plain
                # claim (which skips locked rows) looks again, so a claim under contention is
                # not empty while jobs are due (a partial detour stays as it is: its slots kept
                # the classes' shares)
                claims = self._claim_plain(worker_id, queues, limit, now, tasks)
                found = len(claims)
        else:
            claims = self._claim_plain(worker_id, queues, limit, now, tasks)
            found = len(claims)  # it skips locked rows: short only when nothing more is due
        # what the claim found due, not what it started, tells whether it took every due job:
        # a controlled claim starts fewer than it chose when concurrent claims took some first
        self.priorities.claimed(limit, found)
        self.tenant_rotation.claimed(limit, found)
        return claims

    def _claim_plain(
        self,
        worker_id: str,
        queues: Sequence[str] | None,
        limit: int,
        now: datetime,
        tasks: Sequence[str] | None,
    ) -> list[Claim]:
        """The claim without flow control: the limited path while limits exist, else the claim
        statement alone."""
        outbox = self.outbox_queues()
        if self.limit_names():  # limits exist: the limited path (store/sql/limits.py)
            with self.driver.transaction() as c:
                # the pick leaves out the paused queues as their rows say now (claim_chosen
                # checks again as it starts the jobs), not as the copy of the control rows does
                leave_out = sorted(set(outbox) | self._paused_now(c))
                rows = self._claim_limited(
                    c,
                    now,
                    limit,
                    worker_id,
                    {
                        **pick_filters(queues, tasks),
                        "all_direct": not leave_out,
                        "outbox_queues": leave_out,
                    },
                )
        else:
            # a transaction of its own, in as few round trips as the dialect can
            # (Driver.rows_alone)
            rows = self.driver.rows_alone(
                claim_statement(queues),
                now=now,
                limit=limit,
                **pick_filters(queues, tasks),
                moves=moves_json(Event.CLAIM),
                worker_id=worker_id,
                all_direct=not outbox,
                outbox_queues=outbox,
            )
        return claims_from_rows(rows, self._t)

    @conflicts_retried
    def heartbeat(self, leases: Sequence[Lease], now: datetime) -> list[LeaseState]:
        if not leases:
            return []
        attempt_ids = [lease.attempt_id for lease in leases]
        with self.driver.transaction() as c:
            c.run("renew_leases", attempt_ids=attempt_ids, now=now)
            rows = {r["attempt_id"]: r for r in c.rows("lease_states", attempt_ids=attempt_ids)}
        states = []
        for lease in leases:
            row = rows.get(lease.attempt_id)
            if row is None or (row["job_id"], row["generation"]) != (
                lease.job_id,
                lease.generation,
            ):
                states.append(LeaseState(lease, held=False))
            else:
                states.append(
                    LeaseState(
                        lease,
                        held=True,
                        cancel_requested=row["job_status"] == JobStatus.CANCEL_REQUESTED,
                        lease_expires_at=self._t(row["lease_expires_at"]),
                    )
                )
        return states

    def finish(
        self, lease: Lease, outcome: Outcome, now: datetime, *, only_if_expired: bool = False
    ) -> bool:
        return self.finish_many([(lease, outcome)], now, only_if_expired=only_if_expired)[0]

    @conflicts_retried
    def finish_many(
        self,
        items: Sequence[tuple[Lease, Outcome]],
        now: datetime | Callable[[], datetime],
        *,
        only_if_expired: bool = False,
    ) -> list[bool]:
        if not items:
            return []
        with self.driver.transaction() as c:
            applied, at = self._finish_on(c, items, now, only_if_expired)
            refused = [item for item, ok in zip(items, applied, strict=True) if not ok]
            if refused and not only_if_expired:
                c.run("late_reports", batch=Rows(_late_report(*item) for item in refused), now=at)
        return applied

    def _finish_on(
        self,
        c: Connection,
        items: Sequence[tuple[Lease, Outcome]],
        when: datetime | Callable[[], datetime],
        only_if_expired: bool = False,
    ) -> tuple[list[bool], datetime]:
        """The fenced finish of a batch, in the caller's transaction; which items applied, and
        the instant recorded (`when`, or what `when()` says once the rows are locked).

        The jobs' rows are locked first, in id order (every writer locks a job before its
        attempt, and batches in id order cannot deadlock each other). What applies is read
        under those locks, and the update re-checks it in its own WHERE: the generation (the
        fencing token), the status the move starts from, and for a reap the expired lease.
        """
        job_ids = sorted({lease.job_id for lease, _ in items})
        locked = c.rows("lock_jobs", ids=job_ids)
        now = when() if callable(when) else when  # after the wait for the locks
        jobs = {r["id"]: r for r in locked}
        leases = {}
        if only_if_expired:
            found = c.rows("attempt_leases", ids=[lease.attempt_id for lease, _ in items])
            leases = {r["id"]: r for r in found}
        applied: list[bool] = []
        moves = Rows()
        for lease, outcome in items:
            job = jobs.pop(lease.job_id, None)  # one outcome per job and batch at most
            target = None
            if job is not None and job["generation"] == lease.generation:
                target = next_status(outcome.event, JobStatus(job["status"]))
            if target is not None and only_if_expired:
                attempt = leases.get(lease.attempt_id)
                if not (
                    attempt is not None
                    and attempt["status"] == AttemptStatus.RUNNING
                    and self._t(attempt["lease_expires_at"]) <= now
                ):
                    target = None
            applied.append(target is not None)
            if job is None or target is None:
                continue
            moves.append(
                {
                    "job_id": lease.job_id,
                    "generation": lease.generation,
                    "from_status": str(job["status"]),
                    "to_status": str(target),
                    "due_at": _delay_from(outcome, now),
                    "attempt_id": lease.attempt_id,
                    "only_if_expired": only_if_expired,
                    "status": str(outcome.attempt_status or ATTEMPT_END[outcome.event]),
                    "error_category": str(outcome.error_category)
                    if outcome.error_category
                    else None,
                    "error_message": storable(outcome.error_message),
                    "error_traceback": storable(outcome.error_traceback),
                }
            )
        if moves:
            ended = c.run("finish_jobs", batch=moves, now=now)
            if ended != len(moves):  # the row locks make this impossible: refuse to guess
                raise StoreError(f"finished {ended} of the {len(moves)} jobs locked; nothing kept")
            self._count_outcomes(c, _outcomes(items, applied), now)
            again = {
                m["job_id"]: m["due_at"] for m in moves if m["to_status"] == JobStatus.SCHEDULED
            }
            if again:  # retries: due again later (the queue is the job's)
                queues = {r["id"]: r["queue"] for r in locked if r["id"] in again}
                self.driver.notify(
                    c, earliest_of((queues[i], at or now) for i, at in again.items())
                )
        return applied, now

    @contextmanager
    def completion(
        self, lease: Lease, outcome: Outcome, now: Callable[[], datetime]
    ) -> Iterator[Any]:
        """Keep the block short: the job's row (SQLite: the whole file) stays locked."""
        try:
            with self.driver.transaction() as c:
                yield c.native  # the handler's own writes, in this transaction
                if not self._finish_on(c, [(lease, outcome)], now)[0][0]:
                    raise _Fenced  # rolls the handler's writes back too
        except _Fenced:
            pass
        else:
            return
        self.finish(lease, outcome, now())  # records the late report
        raise StaleAttempt(lease.job_id, lease.generation)

    def next_due(
        self, now: datetime, until: datetime, queues: Sequence[str] | None, limit: int
    ) -> list[datetime]:
        with self.driver.transaction(write=False) as c:
            rows = c.rows(
                "next_due",
                now=now,
                until=until,
                all_queues=queues is None,
                queues=list(queues) if queues is not None else [],
                limit=limit,
            )
        # the same instant comes back once per job due then: each converted once
        return sorted({self._t(at) for at in {r["due_at"] for r in rows}})

    def listen(self) -> Listener | None:
        return self.driver.listener()

    @conflicts_retried
    def prune(self, before: datetime, limit: int) -> int:
        with self.driver.transaction() as c:
            return c.run("prune", before=before, limit=limit)

    def expired_leases(self, now: datetime, limit: int) -> list[ExpiredLease]:
        with self.driver.transaction(write=False) as c:
            rows = c.rows("expired_leases", now=now, limit=limit, holder=DISPATCH_HOLDER)
        return [
            ExpiredLease(
                lease=Lease(r["job_id"], r["attempt_id"], r["generation"]),
                job_status=JobStatus(r["status"]),
                attempts=r["attempts"],
                max_attempts=r["max_attempts"],
                retry_base=float(r["retry_base"]),
                retry_cap=float(r["retry_cap"]),
            )
            for r in rows
        ]

    def held_leases(self, worker_id: str) -> list[Lease]:
        with self.driver.transaction(write=False) as c:
            rows = c.rows("held_leases", worker_id=worker_id)
        return [Lease(r["job_id"], r["attempt_id"], r["generation"]) for r in rows]

    @conflicts_retried
    def expire_overdue(self, now: datetime, limit: int) -> int:
        with self.driver.transaction() as c:
            return c.run("expire_overdue", moves=moves_json(Event.EXPIRE), now=now, limit=limit)

    # -- operators' moves -------------------------------------------------------------------

    @conflicts_retried
    def transition(
        self,
        job_id: int,
        event: Event,
        now: datetime,
        *,
        tenant: str | None = None,
        due_at: datetime | None = None,
        ignore_backlog: bool = False,
    ) -> Job:
        replay = event in (Event.REPLAY, Event.RESOLVE_RETRY)  # a fresh start, due now
        if replay and due_at is None:
            due_at = now
        bounded = event is Event.REPLAY and not ignore_backlog
        controls = self.flow_controls() if bounded else None  # a max_backlog admits a replay
        with self.driver.transaction() as c:
            if controls is not None:
                self._admit_replay(c, controls, job_id, tenant)
            moved = move(c, job_id, event, now, tenant=tenant, due_at=due_at, replay=replay)
            job = load_job(c, self._t, job_id, tenant, True)
            # raised inside: a dispatched attempt withdrawn for this move is rolled back too
            if job is None:
                raise JobNotFound(job_id)
            if not moved:
                raise refusal(job, event, due_at)
            if job.status is JobStatus.SCHEDULED:
                self.driver.notify(c, {job.queue: job.due_at})
        return job


def _fresh(job: NewJob) -> bool:
    """True when the job cannot meet a unique key: no idempotency key, no occurrence."""
    return job.idempotency_key is None and job.schedule_id is None


def _delay_from(outcome: Outcome, now: datetime) -> datetime | None:
    """A retry's due time, its delay counted from `now`, the instant recorded (the delay is
    due_at - decided_at; an outcome without decided_at is due when it says)."""
    due, decided = outcome.due_at, outcome.decided_at
    if due is None or decided is None or now <= decided:
        return due
    return due + (now - decided)


def _outcomes(items: Sequence[tuple[Lease, Outcome]], applied: Sequence[bool]) -> dict[int, bool]:
    """The attempts that ended and count for limits (docs/flow-control.md): job id -> failed.
    A shutdown's interruption, a cancellation or a reconciliation says nothing about the
    dependency and is left out."""
    found = {}
    for (lease, outcome), ok in zip(items, applied, strict=False):
        if not ok or outcome.error_category in _NOT_COUNTED:
            continue
        if outcome.event is Event.SUCCEED:
            found[lease.job_id] = False
        elif outcome.event in (Event.RETRY, Event.GIVE_UP):
            found[lease.job_id] = True
    return found


_NOT_COUNTED = (ErrorCategory.INTERRUPTED, ErrorCategory.CANCELLED, ErrorCategory.RECONCILED)


def _late_report(lease: Lease, outcome: Outcome) -> dict[str, object]:
    return {
        "attempt_id": lease.attempt_id,
        "generation": lease.generation,
        "outcome": str(outcome.attempt_status or ATTEMPT_END[outcome.event]),
    }


def storable(text: str | None) -> str | None:
    """Error text as every dialect can store it: no NUL, no unpaired surrogate (a handler's
    exception message may hold either; its outcome must still be recorded)."""
    if text is None:
        return None
    return text.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")
