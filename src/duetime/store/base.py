"""The store contract every dialect implements, and that the shared contract suite checks.
Past 400 lines because each method's docstring is its specification (which rows, what changes).

Rules that hold for every method:
- `now` is always a parameter: a store never reads a clock (the one exception: migrate()
  stamps each applied migration with the wall-clock time).
- Every change of a job's status is one conditional write whose condition is the job's current
  status (from duetime.core.states.TRANSITIONS) and, for writes made by a worker, the attempt's
  generation. A write whose condition fails changes nothing.
- Each method is one transaction: it commits before it returns, or changes nothing.
- A store keeps no claim policy: the fairness memory of a claimer (priority share, tenant
  rotation, weighted queues' credit) is the runtime's (runtime/fairness.py), which passes it
  into each claim as a ClaimPlan and gets back what the claim found and started (Claimed).
  The store keeps only copies of rows it read (flow controls, queue modes, limit names), for
  at most a second or two.

Past 400 lines because the whole contract, with each method's rules, is kept in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from duetime.core.clock import Instant
from duetime.core.flow.parsers import KEEP, Keep
from duetime.core.flow.records import FlowControls, FlowCounts, TenantSettings
from duetime.core.flow.rotation import TenantRotation
from duetime.core.flow.share import PriorityShare
from duetime.core.limits import LimitSettings, LimitStatus
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
    Wakeup,
)
from duetime.core.outbox import Dispatch, Dispatched, OutboxEvent, OutboxFigures, QueueSettings
from duetime.core.schedule_spec import ScheduleSpec
from duetime.core.schedules import Occurrence, Plan, Schedule
from duetime.core.states import Event
from duetime.core.stats import AttemptSample, JobCount
from duetime.core.tokens import ApiToken, Role

Decide = Callable[[Schedule, list[Occurrence]], Plan]


@dataclass(frozen=True)
class ClaimPlan:
    """What a claimer's policy (runtime/fairness.py) asks of one claim (docs/flow-control.md):
    `per_class` slots for each priority class below the highest due one, walked by
    `priorities` (which also holds the slots earlier walks owe; None: no lower class is
    looked for); `rotation` when this claim rotates over the tenants with due work (None: it
    does not); `credit`, the weighted queues' turns carried from claim to claim (None: none
    carried). The claim reads and updates these objects as it picks; the store keeps none of
    them. `floor`: the claim leaves out the jobs due before it, on PostgreSQL (where its walks
    of the due index otherwise start at each class's first entry, dead ones included; the
    other dialects walk from the start; core/claim_floor.py): the plain claim and the
    controlled one (flow control, a fairness detour), not the limited path (limits per
    dependency). The empty plan claims in strict claim order."""

    per_class: int = 0
    priorities: PriorityShare | None = None
    rotation: TenantRotation | None = None
    credit: dict[str, float] | None = None
    floor: datetime | None = None


@dataclass(frozen=True)
class Claimed:
    """What a claim did: the attempts it started; how many due jobs it chose (`found`: more
    than it started when concurrent claims took some first, which tells the policy whether
    the claim took every due job); and when a limit per dependency that allowed it no more
    starts allows one again (its bucket's next token, the end of its pause or of its
    breaker's cool-down), where known; None otherwise. `plain`: the plain claim statement
    ran (no flow control, no limits per dependency, no fairness detour), so a claim that
    found fewer than its limit left no job of its filters due from its plan's floor to its
    instant, but for rows other transactions held locked (ClaimPlan.floor)."""

    claims: list[Claim]
    found: int
    next_start: datetime | None = None
    plain: bool = False


@dataclass(frozen=True)
class DispatchedEvents:
    """What the relay's dispatch did: the outbox events of the attempts it started, and when
    a limit per dependency that held it back allows a start again (as Claimed.next_start)."""

    events: list[OutboxEvent]
    next_start: datetime | None = None


class Listener(Protocol):
    """A feed of wake-ups from the database (see Store.listen)."""

    def wait(self, timeout: float) -> list[Wakeup]:
        """Block up to `timeout` seconds for wake-ups; return those that came (maybe none)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class SocketListener(Listener, Protocol):
    """A feed whose wake-ups arrive on a socket (PostgreSQL's LISTEN): the worker watches
    `fileno()` in its event loop and reads what came with `arrived()` as it comes, without a
    thread between the socket and the loop (runtime/wakeups.py). `wait` is still called now
    and then, in a thread: the checks that take a round trip happen there. The two never
    overlap: the socket is unwatched while wait() runs."""

    def fileno(self) -> int:
        """The socket the wake-ups arrive on."""
        ...

    def arrived(self) -> list[Wakeup]:
        """The wake-ups the socket holds now, read without waiting and without a round trip
        (maybe none); raises StoreUnavailable when the connection was lost."""
        ...


class Store(Protocol):
    dialect: str
    # how long a write may wait for the database's lock before failing (SQLite: the busy
    # timeout, 60 s); None when the dialect sets no such bound. A lease shorter than this can
    # lapse while a live worker's heartbeat or outcome waits for the lock.
    lock_wait: float | None
    # True when the database reads the clock of this very process (SQLite: a file opened on
    # this machine), so there is no offset between them to measure (see database_now)
    clock_is_local: bool

    def migrate(self) -> list[int]:
        """Apply every migration not yet applied; return the versions applied now."""
        ...

    def schema_version(self) -> int:
        """The newest migration applied to the database (0 for an empty database)."""
        ...

    def check_schema(self) -> None:
        """Raise SchemaError unless the database is at exactly the version this code knows."""
        ...

    def close(self) -> None: ...

    def enqueue(
        self, jobs: Sequence[NewJob], now: datetime, *, connection: Any = None
    ) -> list[Enqueued]:
        """Insert jobs in one transaction, all or none.

        With `connection` (PostgreSQL or MariaDB/MySQL: the application's own driver
        connection, or a SQLAlchemy session/connection on that driver), the inserts join that
        connection's transaction: the jobs exist if and only if the application commits it.

        A job whose (tenant, idempotency_key) exists already is not inserted: the original is
        returned with created=False when its request_hash matches, and IdempotencyConflict is
        raised (nothing is stored) when it differs.

        A batch that would take a queue's or a tenant's backlog past its max_backlog raises
        BacklogFull, nothing stored (a schedule's occurrences are always admitted).

        A job with parents (NewJob.parents: docs/workflows.md, "Dependencies") locks them
        first; a parent that does not exist or is of another tenant raises InvalidRequest,
        nothing stored. The job is inserted blocked, or scheduled when every parent has ended
        as its on_parent_failure needs, or cancelled (with cancel_reason) when one failed.

        Every move that ends a job (finish, finish_many, a completion, expire_overdue,
        transition, a schedule's cancel or delete of its occurrences) tells its blocked
        children in its own transaction: each is released (scheduled, due per
        core.dependencies.released_due) or cancelled with its descendants, exactly once.

        A job with a unique_key (docs/workflows.md) first takes the key back from the job of
        (tenant, unique_key) whose unique_until has passed; a job of the key still in its
        window is returned instead, created=False. A job with a sequence_key locks the row of
        its sequence (duetime_sequences, made if absent) and is inserted waiting when a job of
        the sequence is not ended (or is dead and holds it), else scheduled. Such jobs go in
        one at a time, in the request's order.
        """
        ...

    def enqueue_graph(
        self,
        jobs: Sequence[NewJob],
        links: Sequence[Sequence[int]],
        now: datetime,
        *,
        connection: Any = None,
    ) -> list[Enqueued]:
        """As enqueue, for jobs that depend on each other (chains and groups: docs/workflows.md,
        "Chains and groups"), all in one transaction: job i also depends on the jobs of this
        call at the positions links[i], each before i (InvalidRequest otherwise). Returns them
        in order."""
        ...

    def get_job(self, job_id: int, *, tenant: str | None = None) -> Job | None:
        """The job with its attempt history, its parents and (the first MAX_RELATIVES_SHOWN by
        id) children with their statuses, or None (also when it belongs to another tenant); for
        a job of a sequence not ended, sequence_ahead: the jobs of its sequence ahead."""
        ...

    def parent_results(self, job_id: int) -> dict[int, Any]:
        """The results of job `job_id`'s parents that succeeded, by parent id (None for one
        that returned nothing), in one read; a parent that did not succeed, or was pruned, is
        absent."""
        ...

    def list_jobs(self, f: JobFilter) -> list[Job]:
        """Jobs matching the filter, newest first; with f.with_attempts, each with its attempt
        history (read in the same snapshot), else without."""
        ...

    def claim(
        self,
        *,
        worker_id: str,
        queues: Sequence[str] | None,
        limit: int,
        now: Instant,
        tasks: Sequence[str] | None = None,
    ) -> list[Claim]:
        """Atomically take up to `limit` due jobs and start one attempt on each.

        Never from a paused queue, never past a queue's or tenant's concurrency (running
        attempts count), slots split by weights (docs/flow-control.md).

        Eligible: status scheduled, due_at <= now, deadline_at absent or > now, queue in
        `queues` (any queue when None), task in `tasks` (any task when None: a worker passes
        the tasks it has handlers for, so a job no worker knows waits unclaimed). Order:
        priority descending, then due_at, then id (claim_planned: a claimer's policy may take
        lower priority classes and other tenants first). Each claimed job becomes running with
        generation + 1 and attempts + 1, and gets a new attempt row with that generation and
        lease_expires_at = now + the job's lease_seconds.
        Concurrent callers never receive the same job. Jobs carrying a limit key take only
        what every limit of theirs allows now (docs/flow-control.md); the others are skipped,
        their attempts untouched, and the claim fills up with other due work.
        `now` is the claim's instant, or a callable telling it (a clock's `now`, Instant):
        then read once the claim's connection is held (in each transaction it opens), so a
        wait for a pooled connection neither stamps started_at and the lease end early nor
        lets a job start past its deadline. A worker passes its clock's `now`.
        """
        ...

    def claim_planned(
        self,
        plan: ClaimPlan,
        *,
        worker_id: str,
        queues: Sequence[str] | None,
        limit: int,
        now: Instant,
        tasks: Sequence[str] | None = None,
    ) -> Claimed:
        """claim() as a claimer's policy plans it (ClaimPlan): under saturation each lower
        priority class keeps its minimum share of the slots, the tenants with due work take
        turns, weighted queues' turns carry over (docs/flow-control.md "Priorities",
        "Tenants"). Returns what it started, what it found, and when a limit allows a start
        again (Claimed); the caller's policy learns from `found` (runtime/fairness.py)."""
        ...

    def heartbeat(self, leases: Sequence[Lease], now: datetime) -> list[LeaseState]:
        """Renew each lease still held (attempt running with that generation) to now + lease.

        A lease not held any more is reported with held=False and changes nothing.
        """
        ...

    def finish(
        self, lease: Lease, outcome: Outcome, now: datetime, *, only_if_expired: bool = False
    ) -> bool:
        """Record how the attempt ended and move its job, fenced by the lease's generation.

        Applies when the job is still held (running or cancel_requested) by this generation
        and, with only_if_expired, when the attempt's lease is expired at `now`. Then the job
        moves by TRANSITIONS[outcome.event], due_at is set for RETRY, and the attempt ends.
        A RETRY outcome with decided_at keeps its delay (due_at - decided_at) from `now`: a
        write the database kept waiting does not shorten the wait before the next attempt.
        A SUCCEED outcome's result (JSON text) is kept on the job, and any outcome's progress
        (progress, progress_message, progress_at = now), in the same transaction; an outcome
        with neither runs no more statements than before (docs/workflows.md).
        Otherwise nothing changes in the job; the attempt keeps its status and records the
        late report (late_outcome, late_reported_at); returns False.
        """
        ...

    def finish_many(
        self,
        items: Sequence[tuple[Lease, Outcome]],
        now: datetime | Callable[[], datetime],
        *,
        only_if_expired: bool = False,
    ) -> list[bool]:
        """finish() for many attempts in one transaction; which of them applied, in order.

        Each item is fenced on its own: a stale one is refused (and its late report kept)
        while the others commit. At most one item per job counts; a second is refused.
        `now` may be a clock's now(): it is then read once the jobs' rows are locked, so that
        finished_at and late_reported_at say when the write happened, however long the
        database kept it waiting (a worker's completer passes its clock so).
        A job of a sequence that ends (succeeded, dead, cancelled) releases the next job of
        its sequence (its waiting job of lowest id becomes scheduled) in the same transaction,
        unless it ends dead and holds its sequence; an emptied sequence's row is deleted.
        """
        ...

    def record_progress(
        self, reports: Sequence[tuple[Lease, float, str | None]], now: datetime
    ) -> list[bool]:
        """Write each running attempt's progress (lease, fraction, message) on its job, with
        progress_at = now, fenced by the lease's generation and claim token: an attempt that no
        longer holds its job writes nothing. Which were written, in order (docs/workflows.md).
        An outcome's own progress (Outcome.progress) is written by the finish instead."""
        ...

    def completion(
        self, lease: Lease, outcome: Outcome, now: Callable[[], datetime]
    ) -> AbstractContextManager[Any]:
        """A transaction for a handler's own writes that also records `outcome`, fenced.

        Yields the store's database connection inside an open transaction. When the block
        ends, `outcome` is recorded as by finish() in that same transaction and everything
        commits together. If the lease is no longer held, everything (the caller's writes
        included) rolls back, the late report is recorded, and StaleAttempt is raised. An
        exception in the block rolls everything back and propagates.
        """
        ...

    def next_due(
        self, now: datetime, until: datetime, queues: Sequence[str] | None, limit: int
    ) -> list[datetime]:
        """The distinct instants in (now, until] at which scheduled jobs of `queues` (any queue
        when None) fall due, earliest first, at most `limit` of them: a node's timer."""
        ...

    def earliest_due(
        self, until: datetime, queues: Sequence[str] | None, tasks: Sequence[str] | None
    ) -> datetime | None:
        """The earliest instant at or before `until` at which a scheduled job a claim of
        `queues` and `tasks` (any when None) may take is due (not past its deadline at
        `until`, not of an outbox-mode queue); None when there is none. A walk from each
        class's first entry: a worker's timer looks below its claims' floor with it now and
        then (runtime/timer.py, core/claim_floor.py)."""
        ...

    def listen(self) -> Listener | None:
        """A feed of wake-ups: word that jobs were enqueued or became due again (enqueue, a
        retry, a replay, a reschedule, a released or planned occurrence), on a connection of
        its own; None where the database has no such feed (workers then poll)."""
        ...

    def prune(self, before: datetime, limit: int) -> int:
        """Delete up to `limit` succeeded, cancelled or expired jobs last changed before
        `before` (oldest first) with their attempts; return how many. Dead and parked jobs
        are never pruned."""
        ...

    def expired_leases(self, now: datetime, limit: int) -> list[ExpiredLease]:
        """Up to `limit` running attempts whose lease_expires_at <= now, oldest first."""
        ...

    def held_leases(self, worker_id: str) -> list[Lease]:
        """The leases of the attempts still running under `worker_id`, oldest first: how a
        worker finds attempts a claim made for it whose answer never reached it."""
        ...

    def expire_overdue(self, now: datetime, limit: int) -> int:
        """Move scheduled jobs whose deadline_at <= now to expired; return how many. An
        expired job of a sequence releases the next one, in the same transaction."""
        ...

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
        """An operator's move (CANCEL, RESCHEDULE, REPLAY, RESOLVE_DONE, RESOLVE_RETRY, and
        the planner's RELEASE): conditional on the current status.

        RESCHEDULE sets due_at. REPLAY and RESOLVE_RETRY set due_at (default now), start a new
        attempt budget (attempts = 0) while generation keeps counting, and drop a deadline
        that has passed. Every move bumps version.
        A REPLAY is admitted like an enqueue: one that would take its queue's or tenant's
        backlog past its max_backlog raises BacklogFull and changes nothing, unless
        `ignore_backlog` (an operator's override).
        Raises JobNotFound, or IllegalTransition when the status forbids the move.
        Of a job of a sequence: a CANCEL of a dead job that holds its sequence DISMISSes it
        (cancelled); a move that ends the job releases the next one of its sequence; a job due
        again (a REPLAY) while another job of its sequence is not ended waits (rejoin).
        """
        ...

    # -- schedules ----------------------------------------------------------------------------

    def create_schedule(
        self,
        tenant: str,
        spec: ScheduleSpec,
        *,
        anchor_at: datetime,
        next_fire_at: datetime | None,
        now: datetime,
    ) -> tuple[Schedule, bool]:
        """Insert a schedule unless (tenant, name) exists; return it and whether it is new."""
        ...

    def get_schedule(self, tenant: str, name: str) -> Schedule | None: ...

    def list_schedules(self, tenant: str | None) -> list[Schedule]:
        """Schedules by name (every tenant's when tenant is None)."""
        ...

    def apply_schedule(self, tenant: str, name: str, now: datetime, decide: Decide) -> Plan:
        """Lock one schedule, call decide(schedule, its unfinished occurrences), apply the plan.

        Applying a plan, in one transaction: delete occurrences that never started (when
        asked), cancel the listed jobs (CANCEL moves), insert each new occurrence unless
        (schedule_id, nominal_at) exists already, record the ticks, and update the schedule
        (definition, paused, anchor, cursor; version + 1 when the definition or paused
        changed). Raises ScheduleNotFound.
        """
        ...

    def plan_due_schedules(self, now: datetime, limit: int, decide: Decide) -> int:
        """Apply decide to up to `limit` unpaused schedules whose cursor is <= now.

        Each schedule is handled in its own transaction under its row lock; a schedule locked
        by another planner is skipped. Returns how many schedules were handled.
        """
        ...

    def release_waiting(self, now: datetime, limit: int) -> int:
        """Move the oldest waiting occurrence of each schedule with no scheduled, running or
        cancel_requested occurrence to scheduled, due now. Returns how many moved."""
        ...

    def delete_schedule(self, tenant: str, name: str, now: datetime) -> None:
        """Cancel the schedule's occurrences that never started, then delete it and its tick
        history (its other jobs stay, detached). Raises ScheduleNotFound."""
        ...

    def schedule_ticks(self, schedule_id: int, limit: int, before_id: int | None) -> list[Tick]:
        """Tick history, newest first, with each occurrence's status and first start."""
        ...

    def latest_run(self, schedule_id: int) -> Job | None:
        """The newest occurrence (by nominal time) that started at least once, with attempts."""
        ...

    # -- nodes --------------------------------------------------------------------------------

    def register_node(self, node: Node, now: datetime) -> None:
        """Insert or revive the node's row (last_seen_at = now, not stopped)."""
        ...

    def touch_node(self, node_id: str, now: datetime, clock_offset: float | None = None) -> None:
        """The node's heartbeat: last_seen_at = now, clock_offset_seconds = clock_offset (how
        far its clock is ahead of the database's, as last measured; None: not measured)."""
        ...

    def stop_node(self, node_id: str, now: datetime) -> None:
        """The node shut down cleanly."""
        ...

    def take_turn(self, duty: str, holder: str, every: float) -> bool:
        """Whether `holder` (a node) runs `duty`'s pass now: True, and the pass recorded as
        holder's from now, when the duty's last pass (by any node) began at least `every`
        seconds ago by the database's clock, or never ran; False otherwise. For a duty that
        one pass serves for the whole fleet (the reaper's), so that its cost does not grow
        with the number of nodes; of nodes that ask at once, one gets the turn."""
        ...

    def list_nodes(self, limit: int = 200) -> list[Node]:
        """Nodes, newest first, each with the jobs it holds running attempts of."""
        ...

    def database_now(self) -> datetime:
        """The database's own current time (aware, UTC), read by the database in a statement
        of its own and nothing else: PostgreSQL's clock_timestamp(), MariaDB/MySQL's
        UTC_TIMESTAMP(6), SQLite's 'now' (the clock of this machine, see clock_is_local). A
        node measures its clock's offset from it (core.clock.CorrectedClock); the store never
        uses it itself."""
        ...

    # -- API tokens -------------------------------------------------------------------------

    def create_token(
        self,
        *,
        tenant: str,
        role: Role,
        name: str,
        prefix: str,
        secret_hash: str,
        now: datetime,
        expires_at: datetime | None = None,
    ) -> ApiToken:
        """Store a new token by its hash (the secret itself is never given to the store);
        expires_at None: it never expires."""
        ...

    def list_tokens(self, tenant: str | None) -> list[ApiToken]:
        """Tokens of one tenant (None: every tenant), revoked ones included, oldest first."""
        ...

    def revoke_token(self, token_id: int, now: datetime) -> ApiToken | None:
        """Revoke a token (idempotent); None when there is no such token."""
        ...

    def find_token(self, secret_hash: str, now: datetime) -> ApiToken | None:
        """The token with this hash, revoked or expired or not; notes its use (to the minute)."""
        ...

    def create_session(
        self, *, secret_hash: str, token_id: int, now: datetime, expires_at: datetime
    ) -> None:
        """Store a dashboard session by the hash of its id, for a token, until expires_at;
        sessions already expired are deleted on the way."""
        ...

    def find_session(self, secret_hash: str, now: datetime) -> ApiToken | None:
        """The token behind an unexpired session with this hash (revoked or expired or not:
        the caller decides); notes the token's use (to the minute). None: no such session."""
        ...

    def end_session(self, secret_hash: str) -> None:
        """Delete the session with this hash (logout); nothing when there is none."""
        ...

    # -- queue settings and the outbox (docs/outbox.md) --------------------------------------

    def queue_settings(self) -> list[QueueSettings]:
        """Every queue that has settings, by name; a queue not listed has the defaults."""
        ...

    def outbox_queues(self) -> list[str]:
        """The names of the queues in outbox mode, as read at most a second ago."""
        ...

    def set_queue(
        self,
        queue: str,
        now: datetime,
        *,
        dispatch: Dispatch | None = None,
        paused: bool | None = None,
        concurrency: int | Keep | None = KEEP,
        max_backlog: int | Keep | None = KEEP,
        weight: float | None = None,
    ) -> QueueSettings:
        """Change a queue's settings (each given: not None, limits not KEEP; a limit of None
        is no limit); create its row if it has none.

        A queue switched to outbox is no longer claimed by workers' claim() from the next
        claim on; one switched back to direct is, while its already dispatched attempts run
        from the broker. A pause (or resume) holds every claim and dispatch that starts after
        it commits (each checks the queue's row as it starts jobs); the other flow settings
        (docs/flow-control.md) reach other processes' claims within CONTROLS_SECONDS.
        """
        ...

    # -- flow control of queues and tenants (docs/flow-control.md) ---------------------------

    def tenant_settings(self) -> list[TenantSettings]:
        """Every tenant that has settings, by name; a tenant not listed has the defaults."""
        ...

    def set_tenant(
        self,
        tenant: str,
        now: datetime,
        *,
        concurrency: int | Keep | None = KEEP,
        max_backlog: int | Keep | None = KEEP,
        weight: float | None = None,
    ) -> TenantSettings:
        """Change a tenant's settings, as set_queue does a queue's limits."""
        ...

    def flow_controls(self) -> FlowControls:
        """Every control row, as read at most CONTROLS_SECONDS ago."""
        ...

    def flow_counts(self, now: datetime) -> list[tuple[str, str, FlowCounts]]:
        """(queue, tenant, counts) of every pair with jobs in its backlog or running: backlog,
        running, and of the backlog the jobs due at `now` and not started (waiting) with how
        long the oldest of them has been due at `now` (waiting_seconds)."""
        ...

    def dispatch_outbox(self, now: Instant, limit: int, lease_seconds: float) -> list[OutboxEvent]:
        """The relay's claim: take up to `limit` due jobs of outbox-mode queues (as claim()
        picks them), start an attempt on each held by DISPATCH_HOLDER with a lease of
        `lease_seconds`, and write one outbox event per attempt, in one transaction. Only
        jobs that the flow controls allow start, as in claim(): pauses, the caps and weights
        of queues and tenants, the limits per dependency (their tokens are spent here); the
        attempts it starts count as running against those caps from now.

        While its event is unpublished the attempt is not reaped (expired_leases skips it).
        `now` as claim()'s: a callable (the relay's clock's `now`) is read once the
        dispatch's connection is held.
        """
        ...

    def dispatch_planned(
        self,
        now: Instant,
        limit: int,
        lease_seconds: float,
        *,
        rotation: TenantRotation | None = None,
    ) -> DispatchedEvents:
        """dispatch_outbox() as the relay's policy plans it: with `rotation`, this dispatch
        rotates over the tenants with due work (after a saturated one, runtime/fairness.py);
        also says when a limit that held it back allows a start again."""
        ...

    def take_events(
        self, relay_id: str, now: datetime, until: datetime, limit: int
    ) -> list[OutboxEvent]:
        """Lease up to `limit` unpublished events (oldest first) to one relay until `until`:
        concurrent relays never take the same event while its lease runs."""
        ...

    def mark_published(self, event_ids: Sequence[int], now: datetime, lease_seconds: float) -> int:
        """The broker confirmed these events: mark them published (idempotent) and give the
        attempts no worker accepted yet a lease of `lease_seconds` from now."""
        ...

    def accept_dispatch(self, message: Dispatched, worker_id: str, now: Instant) -> Claim | None:
        """A broker-fed worker takes the attempt a message names: only when the job still
        holds that generation (and version, unless cancellation was requested) and no worker
        took the attempt before. The attempt is then the worker's, with the job's own lease
        from now, and is returned as a claim; None: the message is stale or a duplicate
        (acknowledge and drop it). `now` as claim()'s: a callable (the worker's clock's
        `now`) is read once the connection is held."""
        ...

    def withdraw_stranded(self, now: datetime) -> int:
        """Withdraw the attempts held by the outbox (dispatched, accepted by no worker) of the
        queues not in outbox mode: their jobs go back to `scheduled` (a cancel-requested one
        to `cancelled`), the attempts do not count and their messages become stale. How many
        jobs moved. set_queue(dispatch=direct) does it in its own transaction; this catches a
        dispatch that raced that switch (docs/outbox.md)."""
        ...

    def outbox_figures(self, now: datetime, window_seconds: float = 60.0) -> OutboxFigures:
        """The outbox's backlog, oldest unpublished event and publications in the window."""
        ...

    def prune_outbox(self, before: datetime, limit: int) -> int:
        """Delete up to `limit` events published before `before`; return how many."""
        ...

    # -- limits per dependency (docs/flow-control.md) ----------------------------------------

    def limits(self, now: datetime) -> list[LimitStatus]:
        """Every limit key with its settings, state and figures at `now`, by key."""
        ...

    def limit_names(self) -> list[str]:
        """The keys with a limit, as read at most a second ago (what claim() looks at)."""
        ...

    def set_limit(self, settings: LimitSettings, now: datetime) -> None:
        """Create the key's limit or replace its settings (its bucket and pause stay)."""
        ...

    def delete_limit(self, key: str) -> bool:
        """Delete the key's limit (its jobs are then unlimited); False when it had none."""
        ...

    def pause_limits(self, keys: Sequence[str], until: datetime, now: datetime) -> None:
        """Nothing carrying one of `keys` starts before `until` (a longer pause stays)."""
        ...

    # -- figures ----------------------------------------------------------------------------

    def job_counts(self, tenant: str | None) -> list[JobCount]:
        """Jobs by status and queue."""
        ...

    def oldest_overdue(self, tenant: str | None, now: datetime) -> datetime | None:
        """The due instant of the longest-waiting scheduled job that is due, if any."""
        ...

    def attempt_samples(
        self, tenant: str | None, since: datetime, limit: int
    ) -> list[AttemptSample]:
        """The attempts started at or after `since`, newest start first, at most `limit`.
        Where more than `limit` successes ended since `since`, the successes among them may
        be those that ended last rather than those that started last (PostgreSQL:
        docs/stores.md, "Attempts written once")."""
        ...
