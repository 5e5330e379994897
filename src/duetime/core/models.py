"""Plain records that cross the store boundary: jobs, attempts, claims, outcomes.
Past 400 lines because each record carries its JSON form and documented fields."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar, overload

from duetime.core.retry import ErrorCategory
from duetime.core.states import AttemptStatus, Event, JobStatus

JSONObject = dict[str, Any]

_Record = TypeVar("_Record")


def built(cls: type[_Record], fields: dict[str, Any]) -> _Record:
    """A frozen record of `cls` from a dict of every one of its fields, made without running
    its __init__: a claim builds a job and an attempt per row, and this is several times
    cheaper than __init__ for records of 16 and 45 fields. The fields come as a dict (a dict
    display at the caller), not as keywords: a call with 45 keywords costs 2 us of its own.
    Only for values of the types the fields declare, with no field left out
    (tests/unit/test_rows.py checks the stores' builders)."""
    return _filled(cls, fields)


def made(cls: type[_Record], **fields: Any) -> _Record:
    """A frozen record of `cls` made as built() makes it, but with the fields left out at
    their declared defaults: each one-job enqueue makes a NewJob and a Job this way (36 and 44
    fields; their __init__ took about a quarter of the client's Python per call)."""
    return _filled(cls, _defaults(cls), fields)


_DEFAULTS: dict[type, dict[str, Any]] = {}


def _defaults(cls: type) -> dict[str, Any]:
    """The declared default of each field of the dataclass `cls` that has one (a field with
    a default_factory is refused: its value would be shared between records)."""
    found = _DEFAULTS.get(cls)
    if found is None:
        found = {}
        for f in dataclasses.fields(cls):
            if f.default_factory is not dataclasses.MISSING:
                raise TypeError(f"{cls.__name__}.{f.name} has a default_factory; use __init__")
            if f.default is not dataclasses.MISSING:
                found[f.name] = f.default
        _DEFAULTS[cls] = found
    return found


def variant(base: _Record, **changes: Any) -> _Record:
    """A copy of the frozen record `base` with some fields changed, made as built() makes
    records (a bulk enqueue makes thousands of these)."""
    return _filled(type(base), base.__dict__, changes)


def batch_records(record: Job, ids: Sequence[int], parts: Sequence[JobParts]) -> list[Job]:
    """The records of a batch's jobs: copies of `record` (its template's job), each with its
    id and its parts' args, due_at and business_key, made as variant() makes records but
    without a dict of changes per job."""
    fields = record.__dict__
    new = object.__new__
    made = []
    for job_id, (args, _, due_at, business_key) in zip(ids, parts, strict=True):
        job = new(Job)
        values = job.__dict__
        values.update(fields)
        values["id"] = job_id
        values["args"] = args
        values["due_at"] = due_at
        values["business_key"] = business_key
        made.append(job)
    return made


def _filled(cls: type[_Record], *parts: dict[str, Any]) -> _Record:
    """A record of `cls` whose fields are `parts`, merged in order, without its __init__."""
    new = object.__new__(cls)
    fields = new.__dict__
    for part in parts:
        fields.update(part)
    return new


@dataclass(frozen=True)
class Attempt:
    """One execution of a job by one worker, under a lease, with its outcome once it ended."""

    id: int
    job_id: int
    generation: int  # the fencing token: strictly increasing per job
    worker_id: str
    status: AttemptStatus
    lease_expires_at: datetime
    started_at: datetime
    finished_at: datetime | None = None
    error_category: ErrorCategory | None = None
    error_message: str | None = None
    error_traceback: str | None = None
    late_outcome: str | None = None  # what a fenced-out worker tried to report, if it did
    late_reported_at: datetime | None = None
    due_at: datetime | None = None  # when the job was due as this attempt claimed it
    # the claim's random token (docs/at-least-once.md): every fenced write matches it; None for
    # an attempt started before migration 14 that was not running then
    claim_token: int | None = None
    # the database's history this attempt was claimed in (PostgreSQL: its timeline, which
    # grows with each promotion; 0 on SQLite and MariaDB/MySQL, and on attempts not read by a
    # claim): the high half of the downstream fencing token
    epoch: int = 0

    @property
    def fencing_token(self) -> int:
        """(epoch << 32) | generation: strictly increasing per job, across a promotion too."""
        return fencing_token(self.epoch, self.generation)

    @property
    def lag_seconds(self) -> float | None:
        """Scheduling lag: how long after its due instant this attempt started."""
        if self.due_at is None:
            return None
        return (self.started_at - self.due_at).total_seconds()


@dataclass(frozen=True)
class Relative:
    """A job's parent or child (depends_on), as a job's page shows it: its id and status."""

    id: int
    status: JobStatus

    def to_json(self) -> JSONObject:
        return {"id": self.id, "status": str(self.status)}


@dataclass(frozen=True)
class Job:
    """A job as stored: its task, args, status, timing and keys (`App.get_job` adds its
    attempt history)."""

    id: int
    tenant: str
    queue: str
    task: str
    args: JSONObject
    priority: int
    due_at: datetime
    deadline_at: datetime | None
    status: JobStatus
    version: int
    attempts: int  # attempts used from the current budget (a replay starts a new budget)
    max_attempts: int
    generation: int  # the generation of the newest attempt (0 before the first claim)
    retry_base: float
    retry_cap: float
    lease_seconds: float
    timeout_seconds: float | None
    idempotency_key: str | None
    business_key: str
    created_at: datetime
    updated_at: datetime
    cancel_requested_at: datetime | None = None
    schedule_id: int | None = None  # set on a schedule's occurrences
    schedule_name: str | None = None
    nominal_at: datetime | None = None  # the tick this occurrence stands for (its identity)
    covers: tuple[datetime, ...] = ()  # a coalesced run: every late tick it stands for
    origin: str | None = None  # tick, trigger or backfill
    attempt_history: tuple[Attempt, ...] = field(default=(), compare=False)
    limits: tuple[str, ...] = ()  # the limit keys of its task (core/limits.py), sorted
    # while its attempt is dispatched to the broker and no worker accepted it yet (held by the
    # outbox, docs/outbox.md): since when. The job is `running` but waits in the broker.
    dispatched_at: datetime | None = None
    # what the handler returned when the job succeeded (JSON data; None: nothing), and the
    # latest progress its attempts reported (docs/workflows.md)
    result: Any = None
    progress: float | None = None
    progress_message: str | None = None
    progress_at: datetime | None = None
    # the trace context of the enqueue that made it (JSON text of the headers the propagator
    # injects: W3C traceparent and tracestate by default, docs/tracing.md); None when the
    # enqueuing process did not trace
    trace_context: str | None = None
    # with depends_on (docs/workflows.md, "Dependencies"): what a parent's failure does
    # ("cancel" or "run"), why a parent's failure cancelled it, and (read by get_job) its
    # parents and children with their statuses
    on_parent_failure: str | None = None
    cancel_reason: str | None = None
    parents: tuple[Relative, ...] = field(default=(), compare=False)
    children: tuple[Relative, ...] = field(default=(), compare=False)
    sequence_key: str | None = None  # its sequence (docs/workflows.md, "Sequences")
    sequence_hold: bool = False  # its death holds the sequence (sequence_on_dead="hold")
    # how many jobs of its sequence are ahead of it (get_job reads it; None: not read)
    sequence_ahead: int | None = None
    unique_key: str | None = None  # the digest of its unique key ("Unique within a window")
    unique_until: datetime | None = None  # the end of its unique window

    def dispatched_seconds(self, now: datetime) -> float | None:
        """How long the job has waited in the broker for a worker (dispatched_at), or None."""
        if self.dispatched_at is None:
            return None
        return max(0.0, (now - self.dispatched_at).total_seconds())

    @property
    def terminal(self) -> bool:
        from duetime.core.states import TERMINAL

        return self.status in TERMINAL

    def to_json(self) -> JSONObject:
        """A JSON-ready view with RFC 3339 times."""
        return {
            "id": self.id,
            "tenant": self.tenant,
            "queue": self.queue,
            "task": self.task,
            "args": self.args,
            "priority": self.priority,
            "due_at": _iso(self.due_at),
            "deadline_at": _iso(self.deadline_at),
            "status": str(self.status),
            "version": self.version,
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "generation": self.generation,
            "retry": {"base_seconds": self.retry_base, "cap_seconds": self.retry_cap},
            "lease_seconds": self.lease_seconds,
            "timeout_seconds": self.timeout_seconds,
            "idempotency_key": self.idempotency_key,
            "business_key": self.business_key,
            "created_at": _iso(self.created_at),
            "updated_at": _iso(self.updated_at),
            "cancel_requested_at": _iso(self.cancel_requested_at),
            "schedule": self.schedule_name,
            "nominal_at": _iso(self.nominal_at),
            "covers": [c.isoformat() for c in self.covers],
            "origin": self.origin,
            "limits": list(self.limits),
            "dispatched_at": _iso(self.dispatched_at),
            "result": self.result,
            "progress": self.progress,
            "progress_message": self.progress_message,
            "progress_at": _iso(self.progress_at),
            "on_parent_failure": self.on_parent_failure,
            "cancel_reason": self.cancel_reason,
            "parents": [r.to_json() for r in self.parents],
            "children": [r.to_json() for r in self.children],
            "sequence": self.sequence_key,
            "sequence_ahead": self.sequence_ahead,
            "unique_until": _iso(self.unique_until),
            "attempt_history": [attempt_to_json(a) for a in self.attempt_history],
        }


def attempt_to_json(a: Attempt) -> JSONObject:
    return {
        "id": a.id,
        "generation": a.generation,
        "worker_id": a.worker_id,
        "status": str(a.status),
        "lease_expires_at": _iso(a.lease_expires_at),
        "started_at": _iso(a.started_at),
        "finished_at": _iso(a.finished_at),
        "error_category": str(a.error_category) if a.error_category else None,
        "error_message": a.error_message,
        "error_traceback": a.error_traceback,
        "late_outcome": a.late_outcome,
        "late_reported_at": _iso(a.late_reported_at),
        "due_at": _iso(a.due_at),
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


@dataclass(frozen=True)
class NewJob:
    """A validated request to create one job (see duetime.core.requests)."""

    tenant: str
    task: str
    args: JSONObject
    args_json: str
    queue: str
    priority: int
    due_at: datetime
    deadline_at: datetime | None
    max_attempts: int
    retry_base: float
    retry_cap: float
    lease_seconds: float
    timeout_seconds: float | None
    idempotency_key: str | None
    request_hash: str
    business_key: str  # stable across attempts and replays
    status: JobStatus = JobStatus.SCHEDULED  # or waiting, for a buffered occurrence
    schedule_id: int | None = None
    schedule_name: str | None = None
    nominal_at: datetime | None = None
    covers: tuple[datetime, ...] = ()
    origin: str | None = None
    limits: tuple[str, ...] = ()  # the limit keys of its task (core/limits.py), sorted
    trace_context: str | None = None  # as Job.trace_context: set by duetime.tracing
    # depends_on (docs/workflows.md, "Dependencies"): the parents' ids, what a parent's
    # failure does ("cancel" or "run"; None without parents), and the delay= given at enqueue,
    # which then counts from the release
    parents: tuple[int, ...] = ()
    on_parent_failure: str | None = None
    release_delay: float | None = None
    sequence_key: str | None = None  # its sequence (docs/workflows.md, "Sequences")
    sequence_hold: bool = False  # its death holds the sequence (sequence_on_dead="hold")
    unique_key: str | None = None  # the digest of its unique key ("Unique within a window")
    unique_until: datetime | None = None  # the end of its unique window


# What sets one job of a batch apart from its template: (args, args_json, due_at, business_key)
JobParts = tuple[JSONObject, str, datetime, str]


class NewJobs(Sequence[NewJob]):
    """The jobs of one enqueue_many call, all like `template` but for args, args_json, due_at
    and business_key. They are made (and checked, raising what make raises) in order, as they
    are first read: a store that reads them a slice at a time can send one slice to the
    database while the next is being made. Each is kept as its parts (JobParts, what a bulk
    insert reads, with parts()); a NewJob is built only when one is indexed, so a batch that
    is only inserted builds none (each costs about 2 us: a NewJob has 36 fields)."""

    def __init__(
        self, template: NewJob, count: int, make: Callable[[int, int], list[JobParts]]
    ) -> None:
        self.template = template
        self._count = count
        self._make = make  # make(start, stop): the parts of the jobs numbered start to stop - 1
        self._made: list[JobParts] = []

    def __len__(self) -> int:
        return self._count

    def parts(self, start: int, stop: int) -> list[JobParts]:
        """The parts of the jobs numbered start to stop - 1 (made, and checked, if not yet)."""
        stop = min(stop, self._count)
        self._make_upto(stop)
        return self._made[start:stop]

    @overload
    def __getitem__(self, index: int) -> NewJob: ...

    @overload
    def __getitem__(self, index: slice) -> list[NewJob]: ...

    def __getitem__(self, index: int | slice) -> NewJob | list[NewJob]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._count)
            self._make_upto(stop if step > 0 else self._count)
            chosen = self._made[start:stop:step] if step > 0 else self._made[index]
            return [self._job(p) for p in chosen]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError("job index out of range")
        self._make_upto(index + 1)
        return self._job(self._made[index])

    def __iter__(self) -> Iterator[NewJob]:
        for start in range(0, self._count, 256):
            yield from self[start : start + 256]

    def _job(self, parts: JobParts) -> NewJob:
        args, args_json, due_at, business_key = parts
        return variant(
            self.template,
            args=args,
            args_json=args_json,
            due_at=due_at,
            business_key=business_key,
        )

    def _make_upto(self, stop: int) -> None:
        if len(self._made) < stop:
            self._made.extend(self._make(len(self._made), stop))


@dataclass(frozen=True)
class Enqueued:
    job: Job
    created: bool  # False when an idempotency key returned the original job


@dataclass(frozen=True)
class Lease:
    """What a worker holds while it runs an attempt; every write it makes is fenced by it."""

    job_id: int
    attempt_id: int
    generation: int
    # the claim's random token: every fenced write matches the job and the attempt by it (None:
    # a lease of a worker that carries none, which every fenced write refuses)
    claim_token: int | None = None


def fencing_token(epoch: int, generation: int) -> int:
    """The token a handler passes downstream (duetime.current().fencing_token): the database's
    epoch (PostgreSQL's timeline) in the high 32 bits, the generation in the low 32. A claim on
    a promoted primary has a higher epoch than any claim on the one it replaced, so its token
    outranks every earlier one even when a lost history hands the same generation out again."""
    if not 0 <= generation < 1 << 32 or epoch < 0:
        raise ValueError(f"no fencing token for epoch {epoch}, generation {generation}")
    return (epoch << 32) | generation


@dataclass(frozen=True)
class Claim:
    job: Job
    attempt: Attempt

    @functools.cached_property
    def lease(self) -> Lease:
        """The attempt's lease, made once per claim (the completer, heartbeats and progress
        reports each ask for it) as built() makes records: Lease's frozen __init__ costs more."""
        a = self.attempt
        return built(
            Lease,
            {
                "job_id": self.job.id,
                "attempt_id": a.id,
                "generation": a.generation,
                "claim_token": a.claim_token,
            },
        )


@dataclass(frozen=True)
class LeaseState:
    """A heartbeat's answer for one lease."""

    lease: Lease
    held: bool  # False: the lease was lost (reaped, or the job moved on); stop reporting
    cancel_requested: bool = False
    lease_expires_at: datetime | None = None


@dataclass(frozen=True)
class Outcome:
    """How an attempt ended, as the worker (or the reaper) records it."""

    event: Event  # SUCCEED, RETRY, GIVE_UP or STOP
    due_at: datetime | None = None  # next due instant for RETRY
    error_category: ErrorCategory | None = None
    error_message: str | None = None
    error_traceback: str | None = None
    attempt_status: AttemptStatus | None = None  # default: from states.ATTEMPT_END
    decided_at: datetime | None = None  # when due_at was decided (a retry's delay counts from it)
    # a success's return value as compact JSON text (core/results.py; None: nothing stored)
    result: str | None = None
    # the attempt's latest progress report, written with the outcome (None: it reported none)
    progress: float | None = None
    progress_message: str | None = None


@dataclass(frozen=True)
class ExpiredLease:
    """An attempt whose lease ran out, with what the reaper needs to decide its job's fate."""

    lease: Lease
    job_status: JobStatus
    attempts: int
    max_attempts: int
    retry_base: float
    retry_cap: float


@dataclass(frozen=True)
class Wakeup:
    """Word from the database that work falls due: jobs of `queue` at `due_at`. Both are None
    when the database can only say that something changed (SQLite)."""

    queue: str | None = None
    due_at: datetime | None = None


@dataclass(frozen=True)
class Tick:
    """One line of a schedule's history: a nominal tick and what became of it."""

    id: int
    schedule_id: int
    nominal_at: datetime
    outcome: str
    origin: str
    detail: str
    recorded_at: datetime
    job_id: int | None = None
    job_status: JobStatus | None = None
    started_at: datetime | None = None  # the occurrence's first attempt, if it ran

    def to_json(self) -> JSONObject:
        return {
            "id": self.id,
            "nominal_at": _iso(self.nominal_at),
            "outcome": self.outcome,
            "origin": self.origin,
            "detail": self.detail,
            "recorded_at": _iso(self.recorded_at),
            "job_id": self.job_id,
            "job_status": str(self.job_status) if self.job_status else None,
            "started_at": _iso(self.started_at),
        }


@dataclass(frozen=True)
class Node:
    """A worker process as the store knows it: registered at start, heartbeated, stopped."""

    id: str
    hostname: str
    pid: int
    queues: tuple[str, ...] | None  # None: every queue
    concurrency: int
    duties: tuple[str, ...]
    version: str
    started_at: datetime
    last_seen_at: datetime
    stopped_at: datetime | None = None
    holding: tuple[int, ...] = ()  # jobs it runs attempts of right now
    tasks: tuple[str, ...] | None = None  # the tasks it serves (None: it did not say)
    # how far its clock was ahead of the database's when it last measured (seconds; negative:
    # behind); None when not measured (an injected clock, or an older version)
    clock_offset: float | None = None

    def state(self, now: datetime, dead_after: float) -> str:
        """stopped (shut down cleanly), dead (silent for dead_after seconds) or live."""
        if self.stopped_at is not None:
            return "stopped"
        return "dead" if (now - self.last_seen_at).total_seconds() > dead_after else "live"

    def serves(self, task: str) -> bool:
        """Whether its worker may run jobs of `task` (yes when it did not say which)."""
        return self.tasks is None or task in self.tasks

    def to_json(self, now: datetime, dead_after: float) -> JSONObject:
        return {
            "id": self.id,
            "state": self.state(now, dead_after),
            "hostname": self.hostname,
            "pid": self.pid,
            "queues": list(self.queues) if self.queues is not None else None,
            "concurrency": self.concurrency,
            "duties": list(self.duties),
            "version": self.version,
            "started_at": _iso(self.started_at),
            "last_seen_at": _iso(self.last_seen_at),
            "stopped_at": _iso(self.stopped_at),
            "holding": list(self.holding),
            "tasks": list(self.tasks) if self.tasks is not None else None,
            "clock_offset_seconds": self.clock_offset,
        }

    def clock_skewed(self, threshold: float) -> bool:
        """Whether its clock was off the database's by more than `threshold` seconds (its
        times are corrected for it; the warning says the machine's clock needs fixing)."""
        return self.clock_offset is not None and abs(self.clock_offset) > threshold


NODE_DEAD_AFTER = 30.0  # seconds of silence after which a node counts as dead (duetime nodes)


def unserved(
    task: str, nodes: Iterable[Node], now: datetime, dead_after: float = NODE_DEAD_AFTER
) -> str | None:
    """Why a job of `task` waits when no live node serves it ("no worker serves task ..."),
    or None when one does (or may: a node that did not say which tasks it serves)."""
    if any(n.state(now, dead_after) == "live" and n.serves(task) for n in nodes):
        return None
    return (
        f"no worker serves task {task!r}: no live node lists it, so the job waits; start a "
        "worker whose app registers it (duetime worker --app ...)"
    )


@dataclass(frozen=True)
class JobFilter:
    tenant: str | None = None  # None: every tenant (operators only)
    status: JobStatus | None = None
    task: str | None = None
    queue: str | None = None
    schedule_id: int | None = None
    before_id: int | None = None  # cursor: newest first, ids below this
    due_after: datetime | None = None  # due at or after this instant
    due_before: datetime | None = None  # due before this instant
    business_key: str | None = None  # exactly this business key
    idempotency_key: str | None = None  # exactly this idempotency key
    args_text: str | None = None  # text found in the args' JSON, ignoring case
    limit: int = 100
    with_attempts: bool = False  # load each job's attempt history too (one more query)


def page_of(found: Sequence[Job], limit: int) -> tuple[list[Job], int | None]:
    """Split what a listing read with limit + 1 into the page to show and the cursor of the
    next page: the last id shown when more follow, None when nothing does."""
    page = list(found[:limit])
    return page, (page[-1].id if len(found) > limit else None)
