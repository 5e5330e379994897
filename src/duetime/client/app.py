"""The App facade: its configuration, the store it opens, task registration, the schedules
declared in code, and tenant views (scoped).

The rest of its public surface is mixed in by group, one module each, every async twin beside
its method: jobs (client/jobs.py), results (client/results.py), chains and groups
(client/workflows.py), schedules, queues, tenants,
limits, the outbox, tokens and figures. Each group reads only what client/part.py declares
(tenant, clock, store, tasks).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, ParamSpec, TypeVar, cast, overload

from duetime.client.figures import Figures
from duetime.client.jobs import Jobs
from duetime.client.limits import Limits
from duetime.client.outbox import Outbox
from duetime.client.queues import Queues
from duetime.client.results import Results
from duetime.client.schedules import (
    Schedules,
    apply_schedule,
    create_schedule,
    spec_for,
    update_plan,
)
from duetime.client.tenants import Tenants
from duetime.client.tokens import Tokens
from duetime.client.workflows import Workflows
from duetime.core.clock import Clock, CorrectedClock, SystemClock
from duetime.core.errors import ConfigurationError, DuetimeError
from duetime.core.flow.share import PRIORITY_SHARE, check_share
from duetime.core.models import Attempt, Job
from duetime.core.requests import DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_PAYLOAD_BYTES
from duetime.core.results import DEFAULT_MAX_RESULT_BYTES, check_result_limit
from duetime.core.retry import RetryPolicy
from duetime.core.schedule_spec import ScheduleSpec
from duetime.logs import error_field, log_event
from duetime.store import Store, open_store, resolve_url
from duetime.tasks import AnyTask, Task, register_task
from duetime.twins import async_twin

log = logging.getLogger("duetime.app")

P = ParamSpec("P")
R = TypeVar("R")

Handler = Callable[..., Any]


class App(Jobs, Results, Workflows, Schedules, Queues, Tenants, Limits, Outbox, Tokens, Figures):
    """duetime's public entry point.

    `App()` uses DUETIME_DATABASE_URL, else `sqlite:///duetime.db` in the working directory.
    The database is opened on first use. An SQLite database is migrated automatically; a
    PostgreSQL or MariaDB/MySQL database must be migrated with `duetime migrate` (it is
    checked on open).

    Without a `clock`, the App runs on this machine's clock corrected by the database's
    (core.clock.CorrectedClock): it reads the database's time when it opens the database and
    again when its reading is a minute old (a worker's node, every heartbeat), so every instant
    it and its workers use (due, started, leases, ticks, last seen) is the database's time, not
    this machine's (docs/guarantees.md, "Clocks"). Until the database is opened it tells this
    machine's time. An injected clock (a ManualClock in tests) is used as it is.
    """

    def __init__(
        self,
        database_url: str | None = None,
        *,
        tenant: str = "default",
        clock: Clock | None = None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        pool_timeout: float | None = None,
        priority_share: float = PRIORITY_SHARE,
        result_max_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    ) -> None:
        self._database_url = database_url
        # under saturation each lower priority class keeps this share of a worker's claimed
        # slots (docs/flow-control.md, "Priorities"); 0 claims in strict priority order
        self._priority_share = check_share(priority_share)
        self.pool_timeout = pool_timeout  # PostgreSQL: seconds a call waits for a connection
        self.tenant = tenant
        # without a clock given: this machine's, corrected by the database's (read on open)
        self._corrected = clock is None
        self.clock: Clock = clock or CorrectedClock(SystemClock())
        self._retry_reading: datetime | None = None  # after a failed reading: not before then
        self._clock_on_demand = False  # read_clock_on_demand(): the first now() reads it
        self.max_payload_bytes = max_payload_bytes
        # a handler's return value is stored when its compact JSON is at most this many bytes
        # (a task may say otherwise); a larger one fails its attempt for good (docs/workflows.md)
        self.result_max_bytes = check_result_limit(result_max_bytes)
        self.tasks: dict[str, AnyTask] = {}
        self._store: Store | None = None
        self._lock = threading.Lock()
        self._declared: list[ScheduleSpec] = []

    @property
    def database_url(self) -> str:
        """The database URL in use: the one given, else $DUETIME_DATABASE_URL, else
        sqlite:///duetime.db. It can be set until the database is opened."""
        return resolve_url(self._database_url)

    @database_url.setter
    def database_url(self, url: str) -> None:
        if self._store is not None:
            raise ConfigurationError("the database URL cannot change after the store was opened")
        self._database_url = url

    @property
    def priority_share(self) -> float:
        """The minimum share of each worker's claimed slots each lower priority class keeps
        under saturation (default 0.1; docs/flow-control.md, "Priorities")."""
        return self._priority_share

    @priority_share.setter
    def priority_share(self, share: float) -> None:
        self._priority_share = check_share(share)  # the workers' next claims use it

    @property
    def store(self) -> Store:
        """The store (the database), opened on first use; SQLite is migrated then. Opening
        it reads the database's clock (see the class); so does a use once that reading is a
        minute old."""
        with self._lock:
            if self._store is None:
                store = open_store(self.database_url, pool_timeout=self.pool_timeout)
                try:
                    if store.dialect == "sqlite":
                        store.migrate()
                    store.check_schema()
                    self._read_clock(store)
                except BaseException:
                    store.close()
                    raise
                self._store = store
            store = self._store
        if self._corrected and isinstance(self.clock, CorrectedClock) and self.clock.stale():
            self._read_clock_again(store, self.clock)
        return store

    def _read_clock(self, store: Store) -> None:
        """Measure this machine's clock against the database's (nothing to measure on SQLite,
        which reads this machine's clock); with read_clock_on_demand(), at the first now()."""
        if self._corrected and isinstance(self.clock, CorrectedClock):
            read = lambda: None if store.clock_is_local else store.database_now()  # noqa: E731
            if self._clock_on_demand and self.clock.offset is None:
                self.clock.defer(read)
            else:
                self.clock.measure(read)

    def _read_clock_again(self, store: Store, clock: CorrectedClock) -> None:
        """A new reading once the last is a minute old; while the database cannot answer the
        last reading stays in use, and the next try waits 5 s."""
        now = clock.base.now()
        retry = self._retry_reading
        if retry is not None and now < retry:
            return
        self._retry_reading = now + timedelta(seconds=5)  # threads arriving meanwhile skip it
        try:
            self._read_clock(store)
        except DuetimeError as exc:
            log_event(log, "clock.reading_failed", logging.DEBUG, error=error_field(exc))
            return
        self._retry_reading = None

    def _defer_clock_reading(self) -> None:
        with self._lock:  # the next opening of the store defers its reading (_read_clock)
            self._clock_on_demand = True

    def migrate(self) -> list[int]:
        """Apply pending migrations; returns the versions applied."""
        store = open_store(self.database_url)
        try:
            return store.migrate()
        finally:
            store.close()

    def close(self) -> None:
        """Close the database connections; the next use opens them again."""
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    @overload
    def task(
        self,
        fn: Callable[P, R],
        *,
        name: str | None = None,
        queue: str = "default",
        priority: int = 0,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        lease: float | timedelta | str = 30.0,
        timeout: float | timedelta | str | None = None,
        retry: RetryPolicy | None = None,
        reconcile: Callable[[Job, Attempt], Any] | None = None,
        limits: Sequence[str] | None = None,
        max_lateness: float | timedelta | str | None = None,
        on_late: str = "expire",
        result_max_bytes: int | None = None,
        sequence: str | None = None,
        sequence_on_dead: str = "release",
        unique_for: float | timedelta | str | None = None,
    ) -> Task[P, R]: ...

    @overload
    def task(
        self,
        fn: None = None,
        *,
        name: str | None = None,
        queue: str = "default",
        priority: int = 0,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        lease: float | timedelta | str = 30.0,
        timeout: float | timedelta | str | None = None,
        retry: RetryPolicy | None = None,
        reconcile: Callable[[Job, Attempt], Any] | None = None,
        limits: Sequence[str] | None = None,
        max_lateness: float | timedelta | str | None = None,
        on_late: str = "expire",
        result_max_bytes: int | None = None,
        sequence: str | None = None,
        sequence_on_dead: str = "release",
        unique_for: float | timedelta | str | None = None,
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...

    def task(
        self,
        fn: Any = None,
        *,
        name: str | None = None,
        queue: str = "default",
        priority: int = 0,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        lease: float | timedelta | str = 30.0,
        timeout: float | timedelta | str | None = None,
        retry: RetryPolicy | None = None,
        reconcile: Callable[[Job, Attempt], Any] | None = None,
        limits: Sequence[str] | None = None,
        max_lateness: float | timedelta | str | None = None,
        on_late: str = "expire",
        result_max_bytes: int | None = None,
        sequence: str | None = None,
        sequence_on_dead: str = "release",
        unique_for: float | timedelta | str | None = None,
    ) -> Any:
        """Register a handler: `@app.task` or `@app.task(name=..., queue=..., ...)`.

        `reconcile(job, lost_attempt)` is called before the next attempt whenever an attempt
        of this task was lost (its lease lapsed after it started, so its effect is unknown). It
        answers duetime.Reconcile.DONE (record success without running the handler), NOT_DONE
        (run the handler) or UNKNOWN (park the job for an operator). Without it, the handler
        simply runs again.

        `limits` names the dependencies the task calls (limit keys such as "payments-api"):
        its jobs then start only within each key's limits (`duetime limits set`,
        docs/flow-control.md).

        `max_lateness` (seconds, a timedelta or text like "5m") bounds how late a job may
        start after its due time: with on_late="expire" (the default) each job gets the
        deadline due time + max_lateness and is expired if not started by then; with
        on_late="run" it runs anyway, logged as job.late and counted (docs/flow-control.md).

        `sequence` (a template over the job's args, like "{account_id}") puts each job in the
        sequence of that key: jobs of one key (and tenant) run one at a time, in the order they
        were enqueued; a retry keeps its place. A job that ends dead lets the next run, unless
        sequence_on_dead="hold": then the next waits until the dead one is replayed or
        cancelled. `unique_for` (a window like "10m") makes a second enqueue with equal args
        within the window return the first job (docs/workflows.md).

        The handler receives the job's args as keyword arguments; it may be `async def`
        (run on the event loop) or a plain function (run in a thread pool). What it returns
        (JSON data) is stored as the job's result (App.result); `result_max_bytes` bounds its
        compact JSON for this task (default: the App's; docs/workflows.md, "Results").
        """

        def register(func: Handler) -> AnyTask:
            return register_task(
                self,
                self.tasks,
                func,
                clock=self.clock,
                tenant=self.tenant,
                name=name,
                queue=queue,
                priority=priority,
                max_attempts=max_attempts,
                lease=lease,
                timeout=timeout,
                retry=retry,
                reconcile=reconcile,
                limits=limits,
                max_lateness=max_lateness,
                on_late=on_late,
                result_max_bytes=result_max_bytes,
                sequence=sequence,
                sequence_on_dead=sequence_on_dead,
                unique_for=unique_for,
            )

        return register(fn) if fn is not None else register

    def schedule(self, name: str, **options: Any) -> Callable[[Callable[P, R]], Task[P, R]]:
        """Declare a schedule in code: `@app.schedule("nightly", cron=..., timezone=...)`.

        Stacks on `@app.task(...)`, or registers the function as a task with default options.
        Declared schedules are created or updated in the store by sync_schedules(), which
        every worker calls when it starts; an unchanged schedule is left alone.
        """

        def declare(fn: Callable[P, R]) -> Task[P, R]:
            task = cast(Task[P, R], fn) if isinstance(fn, Task) else self.task(fn)
            self.declare_schedule(name, task=task.name, **options)
            return task

        return declare

    def declare_schedule(self, name: str, *, task: str, **options: Any) -> None:
        """Like add_schedule, but only remembered until sync_schedules() writes it."""
        if any(spec.name == name for spec in self._declared):
            raise ConfigurationError(f"schedule {name!r} is declared twice")
        self._declared.append(spec_for(self, name, task, dict(options)))

    def sync_schedules(self) -> dict[str, str]:
        """Write declared schedules to the store: created, updated, or unchanged (per name)."""
        result: dict[str, str] = {}
        for spec in self._declared:
            current, created = create_schedule(self, spec)
            if created:
                result[spec.name] = "created"
            elif current.spec.definition_hash == spec.definition_hash:
                result[spec.name] = "unchanged"
            else:
                now = self.clock.now()
                apply_schedule(self, spec.name, functools.partial(update_plan, spec=spec, now=now))
                result[spec.name] = "updated"
                log_event(log, "schedule.updated", schedule=spec.name, source="code")
        return result

    async_schedules = async_twin(sync_schedules)

    def scoped(self, tenant: str) -> App:
        """A view of this app for another tenant: same tasks, clock and open store."""
        view = App(
            self._database_url,
            tenant=tenant,
            clock=self.clock,
            max_payload_bytes=self.max_payload_bytes,
        )
        view.tasks = self.tasks
        view._corrected = self._corrected  # the same clock, read again by either
        view._store = self.store
        view._lock = self._lock
        return view


def read_clock_on_demand(app: App) -> None:
    """Let `app` read the database's clock only when it is first asked the time (its clock's
    now()), not when it opens the database: a one-shot command that never computes or judges
    an instant (`duetime jobs list`, `duetime dlq list`) then costs no reading of it, and one
    that does still gets the database's time (core.clock.CorrectedClock.defer). The CLI's
    one-shot commands use it; a long-running process (worker, serve, relay) reads the clock on
    open, as every App does by default. An app whose database is open already is unchanged."""
    app._defer_clock_reading()
