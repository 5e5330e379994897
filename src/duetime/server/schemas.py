"""The JSON shapes of the REST API (v1): what requests carry and what responses return.
Past 400 lines because every route's request and response model stands here, with its bounds.

Field names follow the Python API's JSON (Job.to_json, Schedule.to_json) so that the CLI's
--json output, the API and the docs agree.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    model_validator,
)

from duetime.core.dependencies import MAX_PARENTS, MAX_RELATIVES_SHOWN
from duetime.core.flow.parsers import MAX_LIMIT, MAX_WEIGHT, MIN_WEIGHT
from duetime.core.recurrence import MAX_ZONE_NAME
from duetime.core.schedule_spec import (
    MAX_EVERY_SECONDS,
    MAX_JITTER_SECONDS,
    MAX_LATE_AFTER_SECONDS,
    MAX_WINDOW_SECONDS,
)


def clean_text(value: str) -> str:
    """Refuse text no database can store: NUL characters and lone surrogates."""
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode (it has a lone surrogate)") from None
    return value


def parse_id(text: str | None) -> int | None:
    """A job or schedule id typed into a URL or form (ASCII digits, 1 to 2**63 - 1), or None."""
    text = (text or "").strip()
    if not (text.isascii() and text.isdigit()):
        return None
    number = int(text)
    return number if 0 < number < 2**63 else None


def sane_instant(value: datetime) -> datetime:
    """An aware instant between 1970 and 9000, in UTC."""
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        raise ValueError("is out of range; use an instant between 1970 and 9000") from None
    if not 1970 <= utc.year <= 9000:
        raise ValueError("is out of range; use an instant between 1970 and 9000")
    return utc


Text = Annotated[str, AfterValidator(clean_text)]
Instant = Annotated[AwareDatetime, AfterValidator(sane_instant)]

Status = Literal[
    "scheduled",
    "waiting",
    "running",
    "cancel_requested",
    "succeeded",
    "dead",
    "cancelled",
    "expired",
    "parked",
    "blocked",
]
NAME = Field(min_length=1, max_length=200)


class Problem(BaseModel):
    """Every error answer: a one-line explanation of what was wrong and what to do."""

    detail: str


class FieldError(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class ValidationProblem(BaseModel):
    """422: what was wrong with which field."""

    detail: list[FieldError]


# the error answers every authenticated route documents
AUTH: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "missing, unknown or revoked token"},
    403: {"model": Problem, "description": "the token's role does not allow this"},
    422: {"model": ValidationProblem, "description": "invalid input, field by field"},
    503: {"model": Problem, "description": "the database is unavailable; nothing committed"},
}
# a replay past a max backlog (docs/flow-control.md)
FULL: dict[int | str, dict[str, Any]] = {
    429: {
        "model": Problem,
        "description": "the queue's or tenant's max backlog is reached: nothing changed; "
        "retry after Retry-After seconds",
    }
}


class Retry(BaseModel):
    base_seconds: float
    cap_seconds: float


class AttemptOut(BaseModel):
    id: int
    generation: int = Field(description="the fencing token: strictly increasing per job")
    worker_id: str
    status: Literal["running", "succeeded", "failed", "lost", "cancelled", "parked"]
    lease_expires_at: AwareDatetime
    started_at: AwareDatetime
    finished_at: AwareDatetime | None
    error_category: str | None
    error_message: str | None
    error_traceback: str | None
    late_outcome: str | None = Field(description="what a fenced-out worker tried to report")
    late_reported_at: AwareDatetime | None
    due_at: AwareDatetime | None = Field(description="when the job was due as this attempt began")


class RelativeOut(BaseModel):
    id: int
    status: Status


class JobOut(BaseModel):
    id: int
    tenant: str
    queue: str
    task: str
    args: dict[str, Any]
    priority: int
    due_at: AwareDatetime
    deadline_at: AwareDatetime | None
    status: Status
    version: int
    attempts: int = Field(description="attempts used from the current budget")
    max_attempts: int
    generation: int
    retry: Retry
    lease_seconds: float
    timeout_seconds: float | None
    idempotency_key: str | None
    business_key: str
    created_at: AwareDatetime
    updated_at: AwareDatetime
    cancel_requested_at: AwareDatetime | None
    schedule: str | None = Field(description="the schedule this job is an occurrence of")
    nominal_at: AwareDatetime | None
    covers: list[AwareDatetime]
    origin: str | None
    attempt_history: list[AttemptOut] = Field(description="oldest first; empty in lists")
    dispatched_at: AwareDatetime | None = Field(
        default=None,
        description="set while the job is running but its attempt only waits in the broker "
        "(outbox mode: dispatched, no worker accepted it yet): since when; null otherwise",
    )
    progress: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="the latest progress its handler reported, from 0 to 1; null: none",
    )
    progress_message: str | None = Field(
        default=None, description="the message of that report (at most 200 characters)"
    )
    progress_at: AwareDatetime | None = Field(default=None, description="when it was written")
    on_parent_failure: Literal["cancel", "run"] | None = Field(
        default=None,
        description="with depends_on: what a parent ending dead, cancelled or expired does",
    )
    cancel_reason: str | None = Field(
        default=None, description="why a parent's failure cancelled the job; null otherwise"
    )
    parents: list[RelativeOut] = Field(
        default_factory=list,
        description=f"the jobs it depends on, the first {MAX_RELATIVES_SHOWN} by id "
        "(GET /v1/jobs/{id} only)",
    )
    children: list[RelativeOut] = Field(
        default_factory=list,
        description=f"the jobs that depend on it, the first {MAX_RELATIVES_SHOWN} by id "
        "(GET /v1/jobs/{id} only)",
    )
    sequence: str | None = Field(
        default=None, description="the job's sequence key (docs/workflows.md); null: none"
    )
    sequence_ahead: int | None = Field(
        default=None,
        description="GET /v1/jobs/{id} of a job of a sequence not ended: how many jobs of its "
        "sequence are ahead of it; null otherwise",
    )
    unique_until: AwareDatetime | None = Field(
        default=None, description="enqueued with unique_for: the end of its unique window"
    )


class JobDetail(JobOut):
    unserved: str | None = Field(
        default=None,
        description="why a scheduled job waits when no live worker serves its task "
        '("no worker serves task ..."); null otherwise',
    )
    result: Any = Field(
        default=None,
        description="what its handler returned (JSON) once the job succeeded; null: nothing "
        "(not succeeded, or it returned None). Not in lists (docs/workflows.md)",
    )


class JobPage(BaseModel):
    items: list[JobOut]
    next_cursor: str | None = Field(description="pass as ?cursor= for the next page; null: no more")


class JobIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: Text = NAME
    args: dict[str, Any] = Field(default_factory=dict)
    queue: Text | None = Field(default=None, min_length=1, max_length=200)
    priority: int | None = Field(default=None, ge=-1000, le=1000, strict=True)
    due_at: Instant | None = None
    delay_seconds: float | None = Field(default=None, ge=0, le=10 * 365 * 86400, strict=True)
    deadline_at: Instant | None = None
    max_attempts: int | None = Field(default=None, ge=1, le=1000, strict=True)
    business_key: Text | None = Field(default=None, min_length=1, max_length=500)
    depends_on: list[Annotated[int, Field(ge=1, le=2**63 - 1, strict=True)]] | None = Field(
        default=None,
        max_length=MAX_PARENTS,
        description="ids of jobs of the same tenant: the job is blocked until they end",
    )
    on_parent_failure: Literal["cancel", "run"] | None = Field(
        default=None,
        description="with depends_on: when a parent ends dead, cancelled or expired, cancel "
        "the job and its descendants (cancel, the default) or run it once every parent ended",
    )
    sequence: Text | None = Field(
        default=None,
        min_length=1,
        max_length=255,
        description="the sequence key: the job runs after every job enqueued before it in "
        "this sequence has ended (default: the task's sequence template, if its app has one)",
    )
    unique_for: StrictFloat | Text | None = Field(
        default=None,
        description="seconds, or a duration like '10m' (1s to 366d): a job of this task with "
        "equal args (or unique_key) created within this window is returned (200) instead",
    )
    unique_key: Text | None = Field(
        default=None,
        min_length=1,
        max_length=255,
        description="with unique_for: compare this key instead of the args",
    )

    @model_validator(mode="after")
    def _one_start(self) -> JobIn:
        if self.due_at is not None and self.delay_seconds is not None:
            raise ValueError("give due_at or delay_seconds, not both")
        return self


class RescheduleIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    due_at: Instant


class ResolveIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    done: bool = Field(
        strict=True, description="true: the effect happened (succeeded); false: run again now"
    )


class ScheduleOut(BaseModel):
    id: int
    tenant: str
    name: str
    task: str
    args: dict[str, Any]
    cron: str | None
    every_seconds: float | None
    timezone: str
    misfire: str
    catchup_window_seconds: float
    overlap: str
    dst_gap: str
    dst_fold: str
    start_at: AwareDatetime | None
    end_at: AwareDatetime | None
    jitter_seconds: float
    late_after_seconds: float | None = Field(
        description="a tick handled this long after its time is late; null: once the next "
        "tick is due"
    )
    queue: str
    priority: int
    max_attempts: int
    retry: Retry
    lease_seconds: float
    timeout_seconds: float | None
    paused: bool
    next_fire_at: AwareDatetime | None
    next_run_at: AwareDatetime | None
    version: int
    created_at: AwareDatetime
    updated_at: AwareDatetime


class ScheduleList(BaseModel):
    items: list[ScheduleOut]


class ScheduleFields(BaseModel):
    """The words of `duetime schedules add`; durations are seconds."""

    model_config = ConfigDict(extra="forbid")

    task: Text | None = Field(default=None, min_length=1, max_length=200)
    args: dict[str, Any] | None = None
    cron: Text | None = Field(default=None, min_length=1, max_length=200)
    every_seconds: float | None = Field(default=None, gt=0, le=MAX_EVERY_SECONDS, strict=True)
    timezone: Text | None = Field(default=None, min_length=1, max_length=MAX_ZONE_NAME)
    misfire: Literal["skip", "catch_up", "coalesce"] | None = None
    catchup_window_seconds: float | None = Field(
        default=None, ge=0, le=MAX_WINDOW_SECONDS, strict=True
    )
    overlap: Literal["allow", "skip", "buffer_one", "buffer_all", "cancel_other"] | None = None
    dst_gap: Literal["skip", "shift"] | None = None
    dst_fold: Literal["first", "second", "both"] | None = None
    start_at: Instant | None = None
    end_at: Instant | None = None
    jitter_seconds: float | None = Field(default=None, ge=0, le=MAX_JITTER_SECONDS, strict=True)
    late_after_seconds: float | None = Field(
        default=None,
        ge=0,
        le=MAX_LATE_AFTER_SECONDS,
        strict=True,
        description="a tick handled this long after its time is late; leave out (or, to "
        "change a schedule back, send null) for late once the next tick is due",
    )


def addressable_name(value: str) -> str:
    """A schedule name the API can put in a URL path (a '/' in it is sent as %2F): not '.'
    or '..', as core.requests.check_url_name says."""
    if value in (".", ".."):
        raise ValueError("must not be '.' or '..' (it is part of URLs)")
    return value


class ScheduleIn(ScheduleFields):
    name: Annotated[Text, AfterValidator(addressable_name)] = Field(min_length=1, max_length=200)
    task: Text = NAME
    timezone: Text = Field(min_length=1, max_length=MAX_ZONE_NAME)


class FireOut(BaseModel):
    at: AwareDatetime = Field(description="the nominal fire instant (UTC)")
    local: str = Field(description="the wall time in the schedule's zone, with its offset")
    kind: str


class Preview(BaseModel):
    name: str
    timezone: str
    fires: list[FireOut]


class BackfillIn(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    from_: Instant = Field(alias="from")
    to: Instant


class BackfillOut(BaseModel):
    jobs: list[int]
    ticks: int


class DeadLetterFilter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: Text | None = Field(default=None, min_length=1, max_length=200)
    queue: Text | None = Field(default=None, min_length=1, max_length=200)
    tenant: Text | None = Field(default=None, min_length=1, max_length=200)


MAX_REPLAY_SECONDS = 30  # a request waits at most this long; longer: `duetime dlq replay`


class DeadLetterReplayIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ids: list[Annotated[int, Field(ge=1, le=2**63 - 1, strict=True)]] | None = Field(
        default=None, max_length=100_000
    )
    filter: DeadLetterFilter | None = None
    per_second: float | None = Field(default=None, gt=0, le=10_000, strict=True)
    ignore_backlog: bool = Field(
        default=False, strict=True, description="replay past the queues' and tenants' max backlogs"
    )

    @model_validator(mode="after")
    def _one_selection(self) -> DeadLetterReplayIn:
        if (self.ids is None) == (self.filter is None):
            raise ValueError("give either ids or filter (an empty filter {} means every dead job)")
        return self


class SkippedOut(BaseModel):
    id: int
    reason: str


class DeadLetterReplayOut(BaseModel):
    matched: int
    replayed: int
    replayed_ids: list[int]
    skipped: list[SkippedOut]
    stopped: str | None = Field(
        default=None,
        description="why the replay stopped before the end (a full backlog); null: it did not",
    )


class LagOut(BaseModel):
    p50: float | None
    p95: float | None
    p99: float | None


class WindowOut(BaseModel):
    minutes: int
    started: int
    succeeded: int
    failed: int
    throughput_per_second: float
    lag_seconds: LagOut


class PointOut(BaseModel):
    at: AwareDatetime
    succeeded: int
    failed: int
    lag_p95_seconds: float | None


# -- flow control of queues and tenants (docs/flow-control.md) --------------------------------

LIMIT_FIELD = Field(
    default=None, ge=0, le=MAX_LIMIT, strict=True, description="a whole number; null: no limit"
)
WEIGHT_FIELD = Field(
    default=None,
    ge=MIN_WEIGHT,
    le=MAX_WEIGHT,
    strict=True,
    description="share of a claim; default 1",
)
WAITING_FIELD = Field(
    description="of the backlog, the jobs due and not started: scheduled, due_at passed"
)
WAITING_SECONDS_FIELD = Field(
    description="how long the oldest of the waiting jobs has been due; 0: none waits"
)


class QueueOut(BaseModel):
    queue: str
    dispatch: str
    paused: bool = Field(description="a paused queue accepts jobs and starts none")
    concurrency: int | None = Field(description="attempts running at once, cluster-wide")
    max_backlog: int | None = Field(description="enqueues past this many waiting are refused")
    weight: float
    updated_at: AwareDatetime | None
    backlog: int = Field(description="jobs waiting: scheduled (due or not) or waiting")
    running: int = Field(description="jobs running (or running with cancellation requested)")
    waiting: int = WAITING_FIELD
    waiting_seconds: float = WAITING_SECONDS_FIELD


class TenantOut(BaseModel):
    tenant: str
    concurrency: int | None = Field(description="attempts running at once, cluster-wide")
    max_backlog: int | None = Field(description="enqueues past this many waiting are refused")
    weight: float
    updated_at: AwareDatetime | None
    backlog: int = Field(description="jobs waiting: scheduled (due or not) or waiting")
    running: int = Field(description="jobs running (or running with cancellation requested)")
    waiting: int = WAITING_FIELD
    waiting_seconds: float = WAITING_SECONDS_FIELD


class FlowOut(BaseModel):
    queues: list[QueueOut]
    tenants: list[TenantOut]


class LimitsIn(BaseModel):
    """Only the fields sent change; null removes a limit."""

    model_config = ConfigDict(extra="forbid")
    concurrency: int | None = LIMIT_FIELD
    max_backlog: int | None = LIMIT_FIELD
    weight: float | None = WEIGHT_FIELD


class QueueIn(LimitsIn):
    paused: bool | None = Field(default=None, strict=True)


class RecentOut(BaseModel):
    """The last window_seconds of the key, estimated from two buckets."""

    window_seconds: float
    starts: float
    retries: float
    failures: float
    successes: float


class LimitOut(BaseModel):
    key: str
    rate: str | None = Field(description="starts per period: N/s, N/m or N/h")
    burst: int | None
    bucket_size: float | None = Field(description="the bucket's capacity (burst or its default)")
    concurrency: int | None
    retry_budget: float | None
    breaker_threshold: float | None
    breaker_cooldown_seconds: float = Field(
        description="how long the breaker, once open, holds the key's jobs before one probe: "
        "the key's breaker_cooldown, by default 30"
    )
    running: int = Field(description="attempts of jobs carrying the key holding a lease")
    waiting: int = Field(description="due scheduled jobs carrying the key")
    waiting_seconds: float = Field(description="how long the oldest of them has been due")
    tokens: float | None = Field(description="the bucket's tokens now (null: no rate)")
    paused_until: str | None = Field(description="a dependency pause still running")
    breaker: str | None = Field(description="closed, open or half_open; null: no breaker")
    breaker_until: str | None = Field(description="when open: the end of the cool-down")
    recent: RecentOut
    retries_allowed: int | None = Field(description="retries the budget allows now")
    updated_at: str


class StatsOut(BaseModel):
    now: AwareDatetime
    by_status: dict[str, int]
    by_queue: dict[str, dict[str, int]]
    oldest_overdue_seconds: float | None
    windows: dict[str, WindowOut]
    series: list[PointOut]
    sampled_attempts: int
    sample_limit_hit: bool
    flow: FlowOut = Field(description="settings, backlog, running and waiting per queue and tenant")
    limits: list[LimitOut] | None = Field(
        default=None,
        description="each limit key (docs/flow-control.md); admin tokens without tenant only",
    )
