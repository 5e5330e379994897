"""SQLStore: the Store contract (store/base.py), implemented once for every SQL dialect, as a
thin front over the parts of the SQL store, each a use case. It is past 450 lines only
because it is the whole Store contract, one short forwarding method per Store method:

  jobs.py       Jobs: enqueue, reads of jobs, next due instants, operators' moves
  claim.py      Claimer: the worker's claim (plain, limited and controlled picks)
  finish.py     Finisher: heartbeats, finishes and completions, the reaper's reads, pruning
  outbox.py     Outbox: the relay's dispatch, outbox events, broker-fed workers' acceptance
  flow.py       Flow: queue and tenant settings, the controls' copy, admission control
  limits.py     Limits: limits per dependency, what a claim and a finish do to them
  schedules.py  Schedules: schedules, their planning, their occurrences' runs
  registry.py   Registry: nodes, API tokens and sessions, figures

Every rule lives in the parts: which statements run in which transaction, in which order rows
are locked, how a fenced write is recognised, how an idempotency key is honoured. A Driver
(store/driver.py) supplies only what differs between databases. The front owns the parts and
gives each the others it needs in its constructor; it adds no rule of its own but the schema's.
It keeps no claim policy (the runtime's, runtime/fairness.py, passed in as a ClaimPlan) and no
clock but the monotonic one it injects into the parts' caches (cache.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any

from duetime.core.clock import Instant
from duetime.core.errors import SchemaError
from duetime.core.flow.parsers import KEEP, Keep
from duetime.core.flow.records import FlowControls, FlowCounts, TenantSettings
from duetime.core.flow.rotation import TenantRotation
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
)
from duetime.core.outbox import (
    Dispatch,
    Dispatched,
    OutboxEvent,
    OutboxFigures,
    QueueSettings,
)
from duetime.core.schedule_spec import ScheduleSpec
from duetime.core.schedules import Plan, Schedule
from duetime.core.states import Event
from duetime.core.stats import AttemptSample, JobCount
from duetime.core.tokens import ApiToken, Role
from duetime.store.base import Claimed, ClaimPlan, Decide, DispatchedEvents, Listener
from duetime.store.driver import Connection, Driver, refuse_newer
from duetime.store.sql.claim import Claimer
from duetime.store.sql.dependencies import Dependencies
from duetime.store.sql.finish import Finisher
from duetime.store.sql.flow import Flow
from duetime.store.sql.jobs import BATCH_SLICE, Jobs
from duetime.store.sql.limits import Limits
from duetime.store.sql.outbox import Outbox
from duetime.store.sql.registry import Registry
from duetime.store.sql.schedules import Schedules

NO_PLAN = ClaimPlan()  # claim(): strict claim order, no policy


class SQLStore:
    """A Store on any SQL database a Driver speaks for. Safe for many threads; safe for many
    processes and machines as far as the database is (SQLite: one machine)."""

    def __init__(self, driver: Driver, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        """`monotonic`: the clock of the parts' caches of rows (store/sql/cache.py)."""
        self.driver = driver
        self.dialect = driver.dialect
        self.lock_wait = driver.lock_wait
        self.clock_is_local = driver.clock_is_local
        self.dependencies = Dependencies(driver)
        self.flow = Flow(driver, monotonic, self.dependencies)
        self.limiter = Limits(driver, monotonic)
        self.jobs = Jobs(driver, self.flow, self.dependencies)
        self.claimer = Claimer(driver, self.flow, self.limiter)
        self.finisher = Finisher(driver, self.limiter, self.dependencies)
        self.outbox = Outbox(driver, self.flow, self.limiter, self.claimer, self.finisher)
        self.schedules = Schedules(driver, self.dependencies)
        self.registry = Registry(driver)

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

    # -- the rest of the contract, each method its part's ------------------------------------

    def enqueue(
        self, jobs: Sequence[NewJob], now: datetime, *, connection: Any = None
    ) -> list[Enqueued]:
        return self.jobs.enqueue(jobs, now, connection=connection)

    def enqueue_graph(
        self,
        jobs: Sequence[NewJob],
        links: Sequence[Sequence[int]],
        now: datetime,
        *,
        connection: Any = None,
    ) -> list[Enqueued]:
        return self.jobs.enqueue_graph(jobs, links, now, connection=connection)

    def get_job(self, job_id: int, *, tenant: str | None = None) -> Job | None:
        return self.jobs.get_job(job_id, tenant=tenant)

    def parent_results(self, job_id: int) -> dict[int, Any]:
        return self.dependencies.parent_results(job_id)

    def list_jobs(self, f: JobFilter) -> list[Job]:
        return self.jobs.list_jobs(f)

    def claim(
        self,
        *,
        worker_id: str,
        queues: Sequence[str] | None,
        limit: int,
        now: Instant,
        tasks: Sequence[str] | None = None,
    ) -> list[Claim]:
        return self.claimer.claim(
            NO_PLAN, worker_id=worker_id, queues=queues, limit=limit, now=now, tasks=tasks
        ).claims

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
        return self.claimer.claim(
            plan, worker_id=worker_id, queues=queues, limit=limit, now=now, tasks=tasks
        )

    def heartbeat(self, leases: Sequence[Lease], now: datetime) -> list[LeaseState]:
        return self.finisher.heartbeat(leases, now)

    def finish(
        self, lease: Lease, outcome: Outcome, now: datetime, *, only_if_expired: bool = False
    ) -> bool:
        return self.finisher.finish(lease, outcome, now, only_if_expired=only_if_expired)

    def finish_many(
        self,
        items: Sequence[tuple[Lease, Outcome]],
        now: datetime | Callable[[], datetime],
        *,
        only_if_expired: bool = False,
    ) -> list[bool]:
        return self.finisher.finish_many(items, now, only_if_expired=only_if_expired)

    def record_progress(
        self, reports: Sequence[tuple[Lease, float, str | None]], now: datetime
    ) -> list[bool]:
        return self.finisher.record_progress(reports, now)

    def completion(
        self, lease: Lease, outcome: Outcome, now: Callable[[], datetime]
    ) -> AbstractContextManager[Any]:
        return self.finisher.completion(lease, outcome, now)

    def next_due(
        self, now: datetime, until: datetime, queues: Sequence[str] | None, limit: int
    ) -> list[datetime]:
        # the classes this store's claims started lately: the timer's seeks of the classes
        # look between them, as the claims' do (under a transaction held open, a seek of a
        # class from `now` would step over every entry of it the hold keeps)
        return self.jobs.next_due(now, until, queues, limit, self.claimer.known_classes())

    def earliest_due(
        self, until: datetime, queues: Sequence[str] | None, tasks: Sequence[str] | None
    ) -> datetime | None:
        return self.claimer.earliest_due(until, queues, tasks)

    def listen(self) -> Listener | None:
        return self.jobs.listen()

    def prune(self, before: datetime, limit: int) -> int:
        return self.finisher.prune(before, limit)

    def expired_leases(self, now: datetime, limit: int) -> list[ExpiredLease]:
        return self.finisher.expired_leases(now, limit)

    def held_leases(self, worker_id: str) -> list[Lease]:
        return self.finisher.held_leases(worker_id)

    def expire_overdue(self, now: datetime, limit: int) -> int:
        return self.finisher.expire_overdue(now, limit)

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
        return self.jobs.transition(
            job_id, event, now, tenant=tenant, due_at=due_at, ignore_backlog=ignore_backlog
        )

    def create_schedule(
        self,
        tenant: str,
        spec: ScheduleSpec,
        *,
        anchor_at: datetime,
        next_fire_at: datetime | None,
        now: datetime,
    ) -> tuple[Schedule, bool]:
        return self.schedules.create_schedule(
            tenant, spec, anchor_at=anchor_at, next_fire_at=next_fire_at, now=now
        )

    def get_schedule(self, tenant: str, name: str) -> Schedule | None:
        return self.schedules.get_schedule(tenant, name)

    def list_schedules(self, tenant: str | None) -> list[Schedule]:
        return self.schedules.list_schedules(tenant)

    def apply_schedule(self, tenant: str, name: str, now: datetime, decide: Decide) -> Plan:
        return self.schedules.apply_schedule(tenant, name, now, decide)

    def plan_due_schedules(self, now: datetime, limit: int, decide: Decide) -> int:
        return self.schedules.plan_due_schedules(now, limit, decide)

    def release_waiting(self, now: datetime, limit: int) -> int:
        return self.schedules.release_waiting(now, limit)

    def delete_schedule(self, tenant: str, name: str, now: datetime) -> None:
        return self.schedules.delete_schedule(tenant, name, now)

    def schedule_ticks(self, schedule_id: int, limit: int, before_id: int | None) -> list[Tick]:
        return self.schedules.schedule_ticks(schedule_id, limit, before_id)

    def latest_run(self, schedule_id: int) -> Job | None:
        return self.schedules.latest_run(schedule_id)

    def register_node(self, node: Node, now: datetime) -> None:
        return self.registry.register_node(node, now)

    def touch_node(self, node_id: str, now: datetime, clock_offset: float | None = None) -> None:
        return self.registry.touch_node(node_id, now, clock_offset)

    def stop_node(self, node_id: str, now: datetime) -> None:
        return self.registry.stop_node(node_id, now)

    def list_nodes(self, limit: int = 200) -> list[Node]:
        return self.registry.list_nodes(limit)

    def take_turn(self, duty: str, holder: str, every: float) -> bool:
        return self.registry.take_turn(duty, holder, every)

    def database_now(self) -> datetime:
        return self.registry.database_now()

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
        return self.registry.create_token(
            tenant=tenant,
            role=role,
            name=name,
            prefix=prefix,
            secret_hash=secret_hash,
            now=now,
            expires_at=expires_at,
        )

    def list_tokens(self, tenant: str | None) -> list[ApiToken]:
        return self.registry.list_tokens(tenant)

    def revoke_token(self, token_id: int, now: datetime) -> ApiToken | None:
        return self.registry.revoke_token(token_id, now)

    def find_token(self, secret_hash: str, now: datetime) -> ApiToken | None:
        return self.registry.find_token(secret_hash, now)

    def create_session(
        self, *, secret_hash: str, token_id: int, now: datetime, expires_at: datetime
    ) -> None:
        return self.registry.create_session(
            secret_hash=secret_hash, token_id=token_id, now=now, expires_at=expires_at
        )

    def find_session(self, secret_hash: str, now: datetime) -> ApiToken | None:
        return self.registry.find_session(secret_hash, now)

    def end_session(self, secret_hash: str) -> None:
        return self.registry.end_session(secret_hash)

    def queue_settings(self) -> list[QueueSettings]:
        return self.flow.queue_settings()

    def outbox_queues(self) -> list[str]:
        return self.flow.outbox_queues()

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
        return self.flow.set_queue(
            queue,
            now,
            dispatch=dispatch,
            paused=paused,
            concurrency=concurrency,
            max_backlog=max_backlog,
            weight=weight,
        )

    def tenant_settings(self) -> list[TenantSettings]:
        return self.flow.tenant_settings()

    def set_tenant(
        self,
        tenant: str,
        now: datetime,
        *,
        concurrency: int | Keep | None = KEEP,
        max_backlog: int | Keep | None = KEEP,
        weight: float | None = None,
    ) -> TenantSettings:
        return self.flow.set_tenant(
            tenant, now, concurrency=concurrency, max_backlog=max_backlog, weight=weight
        )

    def flow_controls(self) -> FlowControls:
        return self.flow.flow_controls()

    def flow_counts(self, now: datetime) -> list[tuple[str, str, FlowCounts]]:
        return self.flow.flow_counts(now)

    def dispatch_outbox(self, now: Instant, limit: int, lease_seconds: float) -> list[OutboxEvent]:
        return self.outbox.dispatch(now, limit, lease_seconds).events

    def dispatch_planned(
        self,
        now: Instant,
        limit: int,
        lease_seconds: float,
        *,
        rotation: TenantRotation | None = None,
    ) -> DispatchedEvents:
        return self.outbox.dispatch(now, limit, lease_seconds, rotation)

    def take_events(
        self, relay_id: str, now: datetime, until: datetime, limit: int
    ) -> list[OutboxEvent]:
        return self.outbox.take_events(relay_id, now, until, limit)

    def mark_published(self, event_ids: Sequence[int], now: datetime, lease_seconds: float) -> int:
        return self.outbox.mark_published(event_ids, now, lease_seconds)

    def accept_dispatch(self, message: Dispatched, worker_id: str, now: Instant) -> Claim | None:
        return self.outbox.accept_dispatch(message, worker_id, now)

    def withdraw_stranded(self, now: datetime) -> int:
        return self.flow.withdraw_stranded(now)

    def outbox_figures(self, now: datetime, window_seconds: float = 60.0) -> OutboxFigures:
        return self.outbox.outbox_figures(now, window_seconds)

    def prune_outbox(self, before: datetime, limit: int) -> int:
        return self.outbox.prune_outbox(before, limit)

    def limits(self, now: datetime) -> list[LimitStatus]:
        return self.limiter.limits(now)

    def limit_names(self) -> list[str]:
        return self.limiter.limit_names()

    def set_limit(self, settings: LimitSettings, now: datetime) -> None:
        return self.limiter.set_limit(settings, now)

    def delete_limit(self, key: str) -> bool:
        return self.limiter.delete_limit(key)

    def pause_limits(self, keys: Sequence[str], until: datetime, now: datetime) -> None:
        return self.limiter.pause_limits(keys, until, now)

    def job_counts(self, tenant: str | None) -> list[JobCount]:
        return self.registry.job_counts(tenant)

    def oldest_overdue(self, tenant: str | None, now: datetime) -> datetime | None:
        return self.registry.oldest_overdue(tenant, now)

    def attempt_samples(
        self, tenant: str | None, since: datetime, limit: int
    ) -> list[AttemptSample]:
        return self.registry.attempt_samples(tenant, since, limit)


__all__ = ["BATCH_SLICE", "SQLStore"]
