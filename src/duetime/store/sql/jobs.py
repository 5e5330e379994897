"""The SQL store's jobs part: enqueue (one job, a batch, in the caller's transaction), the
reads of jobs, the next due instants, and the operators' moves of a job (transition).

An enqueue or a replay into a queue or tenant with a max_backlog is admitted by the flow part
(store/sql/flow.py admit, admit_replay) in the same transaction. One module past 450 lines
because every enqueue path (one, a batch, keyed jobs of a sequence or window, a graph) shares
its insert and original-job lookups, and the operators' moves share its sequence follow-up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeGuard

from duetime.core.errors import IdempotencyConflict, InvalidRequest, JobNotFound, StoreError
from duetime.core.models import (
    Attempt,
    Enqueued,
    Job,
    JobFilter,
    NewJob,
    NewJobs,
    batch_records,
    variant,
)
from duetime.core.states import HELD, TRANSITIONS, Event, JobStatus
from duetime.store.base import Listener
from duetime.store.driver import Connection, Driver, Row
from duetime.store.rows import attempts_by_job, job_from_row, refusal
from duetime.store.sql.dependencies import Dependencies
from duetime.store.sql.flow import Flow
from duetime.store.sql.shared import (
    Part,
    conflicts_retried,
    earliest,
    job_params,
    key_order,
    like_pattern,
    load_job,
    lock_either,
    move,
    new_job_record,
    reserve_ids,
    returned_ids,
    sequence_status,
    settle_sequences,
)

BATCH_SLICE = 250  # jobs per insert of a bulk enqueue
# ... but the first, where the driver pipelines: the database starts inserting while the rest
# is made
FIRST_SLICE = 50


class Jobs(Part):
    def __init__(self, driver: Driver, flow: Flow, dependencies: Dependencies) -> None:
        super().__init__(driver)
        self.flow = flow
        self.dependencies = dependencies

    @conflicts_retried
    def enqueue(
        self, jobs: Sequence[NewJob], now: datetime, *, connection: Any = None
    ) -> list[Enqueued]:
        if not jobs:
            return []
        controls = self.flow.flow_controls()  # a max_backlog (docs/flow-control.md)
        if connection is not None:
            with self.driver.joined(connection) as c:
                self.flow.admit(c, jobs, controls)
                return self._enqueue(c, jobs, now)
        if (
            len(jobs) == 1
            and not jobs[0].parents
            and not _keyed(jobs[0])
            and not controls.bounds(jobs[0].queue, jobs[0].tenant)
        ):
            # one statement that commits on its own (PostgreSQL: one round trip, its wake-up
            # included); a key or occurrence met on the way, or a backlog bound to check
            # first, goes the long way below
            with self.driver.single() as c:
                created = self._enqueue_one(c, jobs[0], now)
            if created is not None:
                return [created]
        if (
            self.driver.pipelines
            and _batched(jobs)
            and not controls.bounds(jobs.template.queue, jobs.template.tenant)
        ):
            # enqueue_many's jobs with no backlog to count first (admit would do nothing):
            # the inserts, numbering their jobs, and their wake-up in a transaction sent as
            # one pipeline, or one statement committing alone for a batch of one insert
            # (PostgreSQL: one round trip, where transaction() takes four)
            with self.driver.single() as c:
                return self._enqueue_batch(c, jobs, now, own_transaction=True)
        with self.driver.transaction() as c:
            self.flow.admit(c, jobs, controls)
            return self._enqueue(c, jobs, now)

    @conflicts_retried
    def enqueue_graph(
        self,
        jobs: Sequence[NewJob],
        links: Sequence[Sequence[int]],
        now: datetime,
        *,
        connection: Any = None,
    ) -> list[Enqueued]:
        """Jobs that depend on each other, in one transaction: job i also waits for the jobs
        of this call at the positions links[i] (each before i). They go in by waves, each a
        run of jobs whose parents in the call are in already, given their parents' new ids."""
        if len(links) != len(jobs):
            raise InvalidRequest(f"{len(jobs)} jobs but {len(links)} lists of links; give one each")
        for i, refs in enumerate(links):
            if any(not 0 <= r < i for r in refs):
                raise InvalidRequest(
                    f"job {i} of the graph links to {list(refs)}; link to jobs before it"
                )
        if not jobs:
            return []
        controls = self.flow.flow_controls()
        with (
            self.driver.joined(connection) if connection is not None else self.driver.transaction()
        ) as c:
            self.flow.admit(c, jobs, controls)
            made: list[Enqueued] = []
            while len(made) < len(jobs):
                start = end = len(made)
                while end < len(jobs) and (end == start or all(r < start for r in links[end])):
                    end += 1
                wave = [
                    _linked(jobs[i], [made[r].job.id for r in links[i]]) for i in range(start, end)
                ]
                made.extend(self._enqueue(c, wave, now))
            return made

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
        if not isinstance(jobs, NewJobs) and any(_keyed(j) for j in jobs):
            # jobs of a sequence or with a unique window go one at a time, in the request's
            # order; the others as one job each. A batch of several sequences locks their
            # rows in key order first (as settle_sequences does), so that two batches naming
            # the same sequences in other orders take turns instead of deadlocking
            keys = sorted({(j.tenant, j.sequence_key) for j in jobs if j.sequence_key})
            for tenant, key in keys if len(keys) > 1 else ():
                c.run("lock_sequence", tenant=tenant, sequence_key=key)
            return [
                self._enqueue_keyed(c, j, now) if _keyed(j) else self._enqueue(c, [j], now)[0]
                for j in jobs
            ]
        if len(jobs) == 1 and not jobs[0].parents:
            one = self._enqueue_one(c, jobs[0], now)
            if one is not None:
                return [one]
        if _batched(jobs):
            return self._enqueue_batch(c, jobs, now)
        if len(jobs) > 1 and all(_fresh(j) for j in jobs):
            return self._enqueue_fresh(c, jobs, now)
        # An insert waits for another transaction's uncommitted row with the same key, so two
        # batches taking the same keys in different orders could deadlock. Rows therefore go
        # in in the order of their keys (the sort is stable: of two equal keys the first in the
        # request goes first), while their ids, reserved up front, follow the request's order.
        # a job with parents: the parents' rows locked (their ends wait for this enqueue), and
        # how it starts (blocked, or as its parents' outcomes say) set before it is read back
        starts, statuses = self.dependencies.starts(c, jobs)
        ids = reserve_ids(c, len(jobs))
        order = sorted(range(len(jobs)), key=lambda i: key_order(jobs[i]))
        c.run_many("insert_job", [job_params(ids[i], jobs[i], now) for i in order])
        self.dependencies.apply_starts(c, ids, jobs, starts)
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
                self.dependencies.apply_starts(c, [job_id], [job], [starts[ids.index(job_id)]])
                row = c.one("select_job", id=job_id, tenant=None)
                if row is None:
                    originals.update(self._jobs_by_key(c, [job]))
            else:
                results.append(Enqueued(job_from_row(row, self._t), True))
        if statuses:
            made = [(r.job.id, job) for r, job in zip(results, jobs, strict=True) if r.created]
            self.dependencies.link(c, made, statuses)
        self.driver.notify(c, earliest(r.job for r in results if r.created and _due(r.job)))
        return results

    def _enqueue_keyed(self, c: Connection, job: NewJob, now: datetime) -> Enqueued:
        """A job of a sequence, or with a unique window (docs/workflows.md). Its unique key is
        first taken back from a job whose window ended; the unique index then refuses a second
        job of the key, and the one that holds it is returned (created=False). A job of a
        sequence locks its sequence's row and starts waiting behind any job of it not ended."""
        for _ in range(5):
            if job.unique_key is not None:
                c.run("clear_unique", tenant=job.tenant, unique_key=job.unique_key, now=now)
            if job.sequence_key is not None:
                job = variant(job, status=sequence_status(c, job))
            row = c.one(
                "enqueue_one",
                **job_params(0, job, now),
                wake=self.driver.wake_payload(job.queue, job.due_at),
            )
            if row is not None:
                return Enqueued(new_job_record(row["id"], job, now), True)
            if job.sequence_key is not None:  # its row may have been made for nothing
                settle_sequences(c, [(job.tenant, job.sequence_key)], now, self._t)
            if job.unique_key is not None:
                found = c.one("job_by_unique", tenant=job.tenant, unique_key=job.unique_key)
                if found is not None:
                    return Enqueued(job_from_row(found, self._t), False)
            elif job.idempotency_key is not None:
                original = self._jobs_by_key(c, [job]).get((job.tenant, job.idempotency_key))
                if original is not None:
                    if original["request_hash"] != job.request_hash:
                        raise IdempotencyConflict(
                            f"idempotency key {job.idempotency_key!r} was already used for "
                            f"job {original['id']} with a different request; use a new key"
                        )
                    return Enqueued(job_from_row(original, self._t), False)
            # the holder of the key was deleted (or its window ended) meanwhile: again
        raise StoreError(
            f"the unique key of a {job.task!r} job is taken but its job cannot be read "
            "(a transaction isolation above READ COMMITTED?); try again"
        )

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

    def _enqueue_batch(
        self, c: Connection, jobs: NewJobs, now: datetime, *, own_transaction: bool = False
    ) -> list[Enqueued]:
        """enqueue_many's jobs (no keys, no occurrences): an insert per slice of jobs, with
        what they share sent once and a JSON array of what differs. Where the driver pipelines
        (PostgreSQL), the database inserts one slice while the next is made and checked; the
        first slice is short there (FIRST_SLICE), so that the database starts early. Where the
        driver numbers jobs (PostgreSQL), each insert gives its jobs their ids and returns them,
        read once the pipeline ends; elsewhere the ids are reserved first, and the records
        (built from the template) are made while the database inserts the last slice. The jobs
        are read as their parts (NewJobs.parts): no NewJob is built for any of them.
        `own_transaction`: `c` is single()'s (autocommit), and the pipeline is a transaction of
        its own (Driver.pipelined_transaction); a batch of one slice there is one insert that
        commits alone, its wake-up sent by the statement (PostgreSQL: one round trip)."""
        # a short first slice where the driver pipelines: the database starts on it early
        first = FIRST_SLICE if self.driver.pipelines else BATCH_SLICE
        jobs.parts(0, first)  # the first slice is checked before anything is sent
        ids = None if self.driver.numbers_jobs else reserve_ids(c, len(jobs))
        template = jobs.template
        shared = job_params(0, template, now)
        shared_due = template.due_at
        job_batch = self.driver.job_batch
        record = new_job_record(0, template, now)
        if own_transaction and ids is None and len(jobs) <= first:
            # one insert numbering its jobs, committing alone with its wake-up (the statement
            # sends it): one statement, no pipeline
            parts = jobs.parts(0, len(jobs))
            wake = self.driver.wake_payload(template.queue, min(p[2] for p in parts))
            inserted = c.rows(
                "insert_job_batch", **shared, rows=job_batch(None, parts, shared_due), wake=wake
            )
            made = batch_records(record, [0] * len(jobs), parts)
            return self._numbered(jobs, made, [inserted])
        # each insert's rows (its ids where the driver numbers jobs), once the block ends
        numbered: list[Callable[[], list[Row]]] = []
        earliest_due: datetime | None = None  # of the batch: its wake-up
        block = self.driver.pipelined_transaction if own_transaction else self.driver.pipeline
        with block(c):
            for start in (0, *range(first, len(jobs), BATCH_SLICE)):
                stop = min(start + (first if start == 0 else BATCH_SLICE), len(jobs))
                parts = jobs.parts(start, stop)
                rows = job_batch(None if ids is None else ids[start:stop], parts, shared_due)
                numbered.append(c.sent("insert_job_batch", **shared, rows=rows, wake=None))
                due_at = min(p[2] for p in parts)
                if earliest_due is None or due_at < earliest_due:
                    earliest_due = due_at
            self.driver.notify(c, {template.queue: earliest_due} if earliest_due else {})
            # the records, while the database inserts the last slice (ids to come: 0 until
            # the block ends)
            made = batch_records(record, ids or [0] * len(jobs), jobs.parts(0, len(jobs)))
        return self._numbered(jobs, made, [read() for read in numbered] if ids is None else [])

    @staticmethod
    def _numbered(jobs: NewJobs, made: list[Job], inserts: list[list[Row]]) -> list[Enqueued]:
        """A batch's records, given the ids its inserts returned (`inserts`: each insert's
        rows, in order, where the driver numbers jobs; none where the ids were reserved and
        the records hold them already)."""
        if inserts:
            numbers = [i for rows in inserts for i in returned_ids(rows)]
            if len(numbers) != len(jobs):
                raise StoreError(
                    f"the batch's {len(jobs)} jobs were inserted but {len(numbers)} ids came "
                    "back (a bug of duetime's: please report it)"
                )
            for job, job_id in zip(made, numbers, strict=True):
                job.__dict__["id"] = job_id  # not yet handed out: set as batch_records sets it
        return [Enqueued(job, True) for job in made]

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
            job = load_job(c, self._t, job_id, tenant, True)
            if job is None:
                return None
            if job.sequence_key is not None and not job.terminal:
                row = c.one(
                    "sequence_ahead", tenant=job.tenant, sequence_key=job.sequence_key, id=job.id
                )
                job = variant(job, sequence_ahead=int(row["ahead"]) if row else 0)
            # a job has parents only when enqueued with depends_on (on_parent_failure set): the
            # others (most, and every look of app.result()) skip that read
            waits = job.on_parent_failure is not None
            parents = self.dependencies.parents_of(c, job_id) if waits else ()
            children = self.dependencies.children_of(c, job_id)
        if parents or children:
            job = variant(job, parents=parents, children=children)
        return job

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

    def next_due(
        self,
        now: datetime,
        until: datetime,
        queues: Sequence[str] | None,
        limit: int,
        known: Sequence[int] = (),
    ) -> list[datetime]:
        """As Store.next_due; `known`: the priority classes to name to the seeks of the
        classes (PostgreSQL; Claimer.known_classes: a hint, as for a claim)."""
        with self.driver.transaction(write=False) as c:
            rows = c.rows(
                "next_due",
                now=now,
                floor=now,  # where the seeks of the classes start (PostgreSQL)
                known=list(known),
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
        controls = self.flow.flow_controls() if bounded else None  # a max_backlog admits a replay
        with self.driver.transaction() as c:
            if controls is not None:
                self.flow.admit_replay(c, controls, job_id, tenant)
            # its row locked first, and the status it had: a job that waited in a sequence
            # held nothing, so its end releases nothing (and takes no sequence lock, which
            # the release of the job before it, holding that lock, may be waiting on)
            locked = lock_either(c, [job_id])
            _restore(c, locked, event, tenant)
            moved = move(c, job_id, event, now, tenant=tenant, due_at=due_at, replay=replay)
            job = load_job(c, self._t, job_id, tenant, True)
            if not moved and event is Event.CANCEL and job is not None and _held_by(job):
                # a dead job that holds its sequence: a cancel dismisses it
                _restore(c, locked, Event.DISMISS, tenant)
                moved = move(c, job_id, Event.DISMISS, now, tenant=tenant)
                job = load_job(c, self._t, job_id, tenant, True)
            # raised inside: a dispatched attempt withdrawn for this move is rolled back too
            if job is None:
                raise JobNotFound(job_id)
            if not moved:
                raise refusal(job, event, due_at)
            if job.terminal:  # its children learn of its end (a cancel, a resolve)
                self.dependencies.settle_ids(c, [job_id], now)
            if job.sequence_key is not None:
                waited = bool(locked) and locked[0]["status"] == JobStatus.WAITING
                job = self._in_sequence(c, job, now, waited=waited)
            if job.status is JobStatus.SCHEDULED:
                self.driver.notify(c, {job.queue: job.due_at})
        return job

    def _in_sequence(self, c: Connection, job: Job, now: datetime, *, waited: bool) -> Job:
        """After an operator's move of a job of a sequence: a job that ended lets the next
        one run (unless it was waiting: then it held nothing); a job due again (a replay)
        while another job of its sequence runs rejoins the sequence, waiting (its id keeps its
        place: it runs next)."""
        where = {"tenant": job.tenant, "sequence_key": job.sequence_key}
        if job.terminal and not waited:
            self.driver.notify(
                c, settle_sequences(c, [(job.tenant, str(job.sequence_key))], now, self._t)
            )
        elif job.status is JobStatus.SCHEDULED:
            c.run("lock_sequence", **where)
            if c.one("sequence_busy", **where, exclude=job.id, waiting=False) is not None:
                c.run("rejoin_sequence", id=job.id, now=now)
                found = load_job(c, self._t, job.id, None, True)
                assert found is not None  # locked by the move above
                return found
        return job


def _linked(job: NewJob, parents: Sequence[int]) -> NewJob:
    """The job with `parents` (its parents' ids, just made) added to those it names."""
    if not parents:
        return job
    return replace(job, parents=job.parents + tuple(p for p in parents if p not in job.parents))


def _fresh(job: NewJob) -> bool:
    """True when the job cannot meet a unique key (no idempotency key, no occurrence, no
    unique window, no sequence) and has no parents."""
    return (
        job.idempotency_key is None
        and job.schedule_id is None
        and not _keyed(job)
        and not job.parents
    )


def _due(job: Job) -> bool:
    """A job just created that a worker may claim when due (not blocked, not cancelled)."""
    return job.status not in (JobStatus.BLOCKED, JobStatus.CANCELLED)


def _restore(c: Connection, locked: Sequence[Row], event: Event, tenant: str | None) -> None:
    """A job of the history table (an ended job, `locked` by lock_either) that `event` moves
    (a replay, a dismissal) comes back to the jobs table first, where the move applies as to
    any job (docs/history-plan.md, step 4). A move refused afterwards rolls the restore back
    with the transaction; the checks here only spare a restore that cannot be used (another
    tenant's job, a status the event does not move)."""
    if not locked or not locked[0]["done"]:
        return
    row = locked[0]
    if (tenant is None or row["tenant"] == tenant) and JobStatus(row["status"]) in TRANSITIONS[
        event
    ]:
        c.run("restore_job", id=row["id"])


def _held_by(job: Job) -> bool:
    """A dead job that holds its sequence (sequence_on_dead="hold")."""
    return job.status is JobStatus.DEAD and job.sequence_hold and job.sequence_key is not None


def _batched(jobs: Sequence[NewJob]) -> TypeGuard[NewJobs]:
    """True for enqueue_many's jobs that go in by _enqueue_batch: one template that cannot
    meet a unique key and has no parents."""
    return isinstance(jobs, NewJobs) and _fresh(jobs.template)


def _keyed(job: NewJob) -> bool:
    """True for a job of a sequence or with a unique window (Jobs._enqueue_keyed)."""
    return job.sequence_key is not None or job.unique_key is not None
