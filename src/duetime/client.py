"""The App facade: register tasks, enqueue jobs, inspect and steer them (sync and async).

Longer than most modules on purpose: it is the whole public Python surface in one place, each
method a thin call into operators/ or the store, and every one with its async twin beside it.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Generic, ParamSpec, TypeVar, cast, overload

from duetime import operators
from duetime.core.clock import Clock, SystemClock
from duetime.core.durations import parse_duration
from duetime.core.errors import (
    ArgsMismatch,
    ConfigurationError,
    InvalidRequest,
    JobNotFound,
    ScheduleExists,
    ScheduleNotFound,
    UnknownTask,
)
from duetime.core.flow import (
    KEEP,
    PRIORITY_SHARE,
    Keep,
    QueueFlow,
    TenantFlow,
    TenantSettings,
    check_share,
)
from duetime.core.limits import (
    LimitStatus,
    Rate,
    check_limit_key,
    check_limit_keys,
    updated_settings,
)
from duetime.core.models import Attempt, Enqueued, Job, JobFilter, NewJob, Tick, unserved
from duetime.core.outbox import (
    Dispatch,
    OutboxFigures,
    QueueSettings,
    check_window,
    dispatch_mode,
)
from duetime.core.recurrence import Fire
from duetime.core.requests import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_PAYLOAD_BYTES,
    TaskDefaults,
    build_new_job,
    build_new_jobs,
    check_lateness,
    check_name,
    parse_instant,
)
from duetime.core.retry import RetryPolicy
from duetime.core.schedule_spec import (
    DEFAULT_CATCHUP_WINDOW,
    DEFAULT_DST_FOLD,
    DEFAULT_DST_GAP,
    DEFAULT_MISFIRE,
    DEFAULT_OVERLAP,
    ScheduleSpec,
    build_spec,
    first_fire,
    preview,
    spec_defaults,
    spec_options,
)
from duetime.core.schedules import (
    Occurrence,
    Plan,
    Schedule,
    plan_backfill,
    plan_pause,
    plan_trigger,
    plan_update,
)
from duetime.core.states import Event, JobStatus
from duetime.core.stats import Stats
from duetime.core.tokens import ApiToken
from duetime.logs import log_event
from duetime.store import Store, open_store, resolve_url
from duetime.store.base import Decide

log = logging.getLogger("duetime.app")

P = ParamSpec("P")
R = TypeVar("R")

Handler = Callable[..., Any]


def _async_twin(method: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
    """The async twin of a blocking method: the same code, run in a worker thread."""

    @functools.wraps(method)
    async def twin(*args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(method, *args, **kwargs)

    twin.__name__ = twin.__qualname__ = f"a{method.__name__}"
    return twin


def _update(
    schedule: Schedule, active: list[Occurrence], *, spec: ScheduleSpec, now: datetime
) -> Plan:
    return plan_update(schedule, active, spec, now)


_ACCEPTED_LIMIT = 256  # sets of argument names remembered per task


def misfit(sig: inspect.Signature, names: Iterable[str]) -> str | None:
    """Why keyword arguments of these names do not bind to `sig`, as Python words it but
    complete: first the unexpected keywords (a typo), then the required parameters missing
    (what the typo left out); None when neither explains it (a positional-only parameter)."""
    given = list(names)
    params = sig.parameters.values()
    by_keyword = [
        p
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]
    known = {p.name for p in by_keyword}
    any_keyword = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    unexpected = [] if any_keyword else [n for n in given if n not in known]
    missing = [
        p.name for p in by_keyword if p.default is inspect.Parameter.empty and p.name not in given
    ]
    parts = []
    if unexpected:
        plural = "s" if len(unexpected) > 1 else ""
        parts.append(f"unexpected keyword argument{plural} {_quoted(unexpected)}")
    if missing:
        which = "a required argument:" if len(missing) == 1 else "required arguments:"
        parts.append(f"missing {which} {_quoted(missing)}")
    return "; ".join(parts) or None


def _quoted(names: list[str]) -> str:
    return ", ".join(repr(n) for n in names)


@dataclass(frozen=True)
class Task(Generic[P, R]):
    """A registered handler. Calling it runs the function directly; `defer(...)` enqueues a
    job with the handler's own arguments (checked by mypy against its signature);
    `enqueue(args_dict, ...)` enqueues with a dict and the enqueue options."""

    app: App
    name: str
    fn: Callable[P, R]
    defaults: TaskDefaults
    reconcile: Callable[[Job, Attempt], Any] | None = None

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)

    @functools.cached_property
    def signature(self) -> inspect.Signature | None:
        """The handler's signature without annotations, None when Python cannot tell it."""
        try:
            sig = inspect.signature(self.fn)
        except (TypeError, ValueError):
            return None
        empty = inspect.Parameter.empty
        return sig.replace(
            parameters=[p.replace(annotation=empty) for p in sig.parameters.values()],
            return_annotation=empty,
        )

    @functools.cached_property
    def _accepted(self) -> set[frozenset[str]]:
        """The sets of argument names the handler was found to accept (binding depends on
        the names only), so that a batch of jobs with the same names binds once."""
        return set()

    def check_args(self, args: Mapping[str, Any], where: str = "") -> None:
        """Raise ArgsMismatch unless the handler can be called with `args` as keywords
        (the way a worker calls it)."""
        sig = self.signature
        if sig is None:
            return
        names = frozenset(args)
        accepted = self._accepted
        if names in accepted:
            return
        try:
            sig.bind(**args)
        except TypeError as exc:
            name = getattr(self.fn, "__name__", self.name)
            reason = misfit(sig, args) or str(exc)
            raise ArgsMismatch(self.name, f"{name}{sig}", f"{reason}{where}") from None
        if len(accepted) < _ACCEPTED_LIMIT:
            accepted.add(names)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def enqueue(self, args: Mapping[str, Any] | None = None, **options: Any) -> Job:
        return self.app.enqueue(self.name, args, **options)

    def enqueue_many(self, list_of_args: Iterable[Mapping[str, Any]], **options: Any) -> list[Job]:
        return self.app.enqueue_many(self.name, list_of_args, **options)

    def options(self, **options: Any) -> Deferral[P]:
        """The enqueue options (key, queue, priority, max_attempts, deadline, business_key,
        at or delay) for a typed defer: `task.options(key="order-42").defer(order_id=42)`."""
        return Deferral(self, options)

    def defer(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Enqueue a job due now, with the handler's own arguments: `greet.defer(name="Ada")`.
        mypy checks them against the handler; they are stored by parameter name."""
        return Deferral(self, {}).defer(*args, **kwargs)

    def defer_at(self, when: datetime | str, /, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Like defer, due at `when` (an aware datetime or ISO 8601 text)."""
        return Deferral(self, {"at": when}).defer(*args, **kwargs)

    def defer_in(self, delay: float | timedelta | str, /, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Like defer, due after `delay` (seconds, a timedelta or text like "5m")."""
        return Deferral(self, {"delay": delay}).defer(*args, **kwargs)

    def call_args(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """A call's arguments as the job's args: every argument by its parameter's name."""
        sig = self.signature
        if sig is None:
            if args:
                raise ArgsMismatch(self.name, "(...)", "pass the arguments by name")
            return dict(kwargs)
        name = getattr(self.fn, "__name__", self.name)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as exc:
            reason = (misfit(sig, kwargs) if not args else None) or str(exc)
            raise ArgsMismatch(self.name, f"{name}{sig}", reason) from None
        stored: dict[str, Any] = {}
        for param, value in bound.arguments.items():
            kind = sig.parameters[param].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                stored.update(value)
            elif kind is inspect.Parameter.VAR_POSITIONAL:
                if value:
                    raise ArgsMismatch(
                        self.name, f"{name}{sig}", f"*{param} cannot be stored by name"
                    )
            elif kind is inspect.Parameter.POSITIONAL_ONLY:
                raise ArgsMismatch(
                    self.name,
                    f"{name}{sig}",
                    f"{param!r} is positional-only: a job cannot "
                    "pass it (the worker calls handlers with keyword arguments)",
                )
            else:
                stored[param] = value
        return stored

    aenqueue = _async_twin(enqueue)
    aenqueue_many = _async_twin(enqueue_many)

    async def adefer(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """The async twin of defer."""
        return await asyncio.to_thread(functools.partial(self.defer, *args, **kwargs))

    async def adefer_at(self, when: datetime | str, /, *args: P.args, **kwargs: P.kwargs) -> Job:
        """The async twin of defer_at."""
        return await asyncio.to_thread(functools.partial(self.defer_at, when, *args, **kwargs))


@dataclass(frozen=True)
class Deferral(Generic[P]):
    """A task with enqueue options chosen (Task.options): defer with the handler's arguments."""

    task: Task[P, Any]
    settings: Mapping[str, Any]

    def defer(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        return self.task.app.enqueue(
            self.task.name, self.task.call_args(*args, **kwargs), **self.settings
        )

    def defer_at(self, when: datetime | str, /, *args: P.args, **kwargs: P.kwargs) -> Job:
        return Deferral(self.task, {**self.settings, "at": when}).defer(*args, **kwargs)

    async def adefer(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        return await asyncio.to_thread(functools.partial(self.defer, *args, **kwargs))


AnyTask = Task[..., Any]


class App:
    """duetime's public entry point.

    `App()` uses DUETIME_DATABASE_URL, else `sqlite:///duetime.db` in the working directory.
    The database is opened on first use. An SQLite database is migrated automatically; a
    PostgreSQL or MariaDB/MySQL database must be migrated with `duetime migrate` (it is
    checked on open).
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
    ) -> None:
        self._database_url = database_url
        # under saturation each lower priority class keeps this share of a worker's claimed
        # slots (docs/flow-control.md, "Priorities"); 0 claims in strict priority order
        self._priority_share = check_share(priority_share)
        self.pool_timeout = pool_timeout  # PostgreSQL: seconds a call waits for a connection
        self.tenant = tenant
        self.clock: Clock = clock or SystemClock()
        self.max_payload_bytes = max_payload_bytes
        self.tasks: dict[str, AnyTask] = {}
        self._store: Store | None = None
        self._lock = threading.Lock()
        self._declared: list[ScheduleSpec] = []

    # -- configuration ----------------------------------------------------------------------

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
        """The store (the database), opened on first use; SQLite is migrated then."""
        with self._lock:
            if self._store is None:
                store = open_store(self.database_url, pool_timeout=self.pool_timeout)
                try:
                    if store.dialect == "sqlite":
                        store.migrate()
                    store.check_schema()
                except BaseException:
                    store.close()
                    raise
                self._store = store
            return self._store

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

    # -- tasks ------------------------------------------------------------------------------

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

        The handler receives the job's args as keyword arguments; it may be `async def`
        (run on the event loop) or a plain function (run in a thread pool).
        """

        def register(func: Handler) -> AnyTask:
            if isinstance(func, Task):
                raise ConfigurationError(
                    f"{func.name!r} is registered already; put @app.schedule above @app.task"
                )
            task_name = name or f"{func.__module__}.{func.__qualname__}"
            if task_name in self.tasks:
                raise ConfigurationError(
                    f"task {task_name!r} is registered twice; give one a name="
                )
            lease_s = parse_duration(lease, "lease").total_seconds()
            if lease_s < 1:
                raise ConfigurationError(f"task {task_name!r}: lease must be at least 1 second")
            timeout_s = parse_duration(timeout, "timeout").total_seconds() if timeout else None
            lateness_s = check_lateness(max_lateness, on_late, f"task {task_name!r}")
            defaults = TaskDefaults(
                queue=queue,
                priority=priority,
                max_attempts=max_attempts,
                retry=retry or RetryPolicy(),
                lease_seconds=lease_s,
                timeout_seconds=timeout_s,
                limits=check_limit_keys(limits),
                max_lateness_seconds=lateness_s,
                on_late=on_late,
            )
            # validate the defaults once, at registration, with the same rules as enqueue
            build_new_job(
                task_name, {}, now=self.clock.now(), tenant=self.tenant, defaults=defaults
            )
            task: AnyTask = Task(self, task_name, func, defaults, reconcile)
            self.tasks[task_name] = task
            return task

        return register(fn) if fn is not None else register

    # -- enqueue ----------------------------------------------------------------------------

    def _new_job(
        self,
        task_name: str,
        args: Mapping[str, Any] | None,
        options: dict[str, Any],
        *,
        check_args: bool = True,
    ) -> NewJob:
        task = self._known_task(task_name)
        new = build_new_job(
            task_name,
            args,
            now=self.clock.now(),
            tenant=self.tenant,
            defaults=task.defaults if task else TaskDefaults(),
            max_payload_bytes=self.max_payload_bytes,
            **options,
        )
        if task is not None and check_args:
            task.check_args(new.args)
        return new

    def _known_task(self, task_name: str) -> AnyTask | None:
        """The registered task; None when this app registers no task (it cannot tell);
        UnknownTask when it registers others."""
        task = self.tasks.get(task_name)
        if task is None and self.tasks:
            raise UnknownTask(task_name, list(self.tasks))
        return task

    def check_args(self, task_name: str, args: Mapping[str, Any] | None = None) -> None:
        """Raise UnknownTask or ArgsMismatch when this app registers tasks and a job of
        `task_name` with `args` would not run; an app that registers no task accepts any."""
        task = self._known_task(task_name)
        if task is not None:
            task.check_args(args or {})

    def enqueue(
        self,
        task_name: str,
        args: Mapping[str, Any] | None = None,
        *,
        at: datetime | str | None = None,
        delay: float | timedelta | str | None = None,
        key: str | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        deadline: datetime | str | None = None,
        business_key: str | None = None,
        connection: Any = None,
    ) -> Job:
        """Create one job, durably, and return it. `key` makes the call idempotent.

        With `connection` (PostgreSQL or MariaDB/MySQL), the job is inserted in that
        connection's open transaction (a psycopg or PyMySQL connection, or a SQLAlchemy session
        or connection on that driver): it exists if and only if your transaction commits.
        """
        return self.submit(
            task_name,
            args,
            at=at,
            delay=delay,
            key=key,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            deadline=deadline,
            business_key=business_key,
            connection=connection,
        ).job

    def submit(
        self,
        task_name: str,
        args: Mapping[str, Any] | None = None,
        *,
        connection: Any = None,
        **options: Any,
    ) -> Enqueued:
        """enqueue, also telling whether the job was created (False: an idempotency key
        returned the original job). Options are those of enqueue."""
        new = self._new_job(task_name, args, options)
        result = self.store.enqueue([new], self.clock.now(), connection=connection)[0]
        log_event(
            log,
            "job.enqueued" if result.created else "job.enqueue_deduplicated",
            job_id=result.job.id,
            task=task_name,
            due_at=result.job.due_at.isoformat(),
        )
        return result

    def enqueue_many(
        self,
        task_name: str,
        list_of_args: Iterable[Mapping[str, Any] | None],
        *,
        at: datetime | str | None = None,
        delay: float | timedelta | str | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        deadline: datetime | str | None = None,
        connection: Any = None,
        at_each: Sequence[datetime | str] | None = None,
    ) -> list[Job]:
        """Create many jobs of one task in one transaction: all of them or none.

        `at_each` gives each job its own due instant (one per job, in order) instead of
        `at`/`delay`. `connection` works as for enqueue: the batch joins your transaction.
        """
        if at_each is not None and (at is not None or delay is not None):
            raise InvalidRequest("give at_each (one instant per job) or at/delay, not both")
        options = dict(
            at=at,
            delay=delay,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            deadline=None if at_each is not None else deadline,
        )
        # every option checked once; each job's args below
        template = self._new_job(task_name, {}, options, check_args=False)
        task = self.tasks.get(task_name)
        if at_each is not None:  # each job's deadline from its own due instant
            given = parse_instant(deadline, "deadline") if deadline is not None else None
            template = replace(template, deadline_at=given)

        def check(new: NewJob, number: int, count: int) -> None:
            if task is not None:
                task.check_args(new.args, f" (job {number} of {count})")

        # each job's args are checked as the store reads them (raising from there, before its
        # transaction commits), so that it can send some while it checks the next
        batch = build_new_jobs(
            template,
            list_of_args,
            max_payload_bytes=self.max_payload_bytes,
            at_each=at_each,
            check=check if task is not None else None,
            defaults=task.defaults if task is not None else None,
        )
        jobs = [r.job for r in self.store.enqueue(batch, self.clock.now(), connection=connection)]
        log_event(log, "jobs.enqueued", task=task_name, count=len(jobs))
        return jobs

    # -- inspect and steer ------------------------------------------------------------------

    def get_job(self, job_id: int) -> Job:
        """The job with its attempt history; raises JobNotFound."""
        job = self.store.get_job(job_id, tenant=self.tenant)
        if job is None:
            raise JobNotFound(job_id)
        return job

    def unserved(self, job: Job) -> str | None:
        """For a scheduled job whose task no live worker node serves: the one-line reason it
        waits ("no worker serves task ..."); None otherwise. Workers claim only the tasks they
        have handlers for, so such a job is not tried (it keeps its attempts) until one does."""
        if job.status is not JobStatus.SCHEDULED:
            return None
        return unserved(job.task, self.store.list_nodes(), self.clock.now())

    def list_jobs(
        self,
        *,
        status: JobStatus | str | None = None,
        task: str | None = None,
        queue: str | None = None,
        schedule: str | None = None,
        before_id: int | None = None,
        limit: int = 100,
        due_after: datetime | str | None = None,
        due_before: datetime | str | None = None,
        with_attempts: bool = False,
    ) -> list[Job]:
        """Jobs of this app's tenant, newest first; page with before_id=<last id seen>.
        due_after/due_before keep jobs due in [due_after, due_before); with_attempts loads
        each job's attempt history too."""
        return self.store.list_jobs(
            JobFilter(
                tenant=self.tenant,
                status=JobStatus(status) if status else None,
                task=task,
                queue=queue,
                schedule_id=self.get_schedule(schedule).id if schedule else None,
                before_id=before_id,
                due_after=parse_instant(due_after, "due_after") if due_after else None,
                due_before=parse_instant(due_before, "due_before") if due_before else None,
                limit=limit,
                with_attempts=with_attempts,
            )
        )

    def cancel(self, job_id: int) -> Job:
        """Cancel a scheduled job (cancelled) or ask a running one to stop (cancel_requested);
        a job only dispatched to the broker (no worker accepted it) is cancelled at once."""
        return self._move(job_id, Event.CANCEL)

    def reschedule(self, job_id: int, at: datetime | str) -> Job:
        """Move a scheduled job's due time, or a dispatched one's that no worker accepted yet
        (its attempt is withdrawn, docs/outbox.md); bumps its version."""
        return self._move(job_id, Event.RESCHEDULE, parse_instant(at, "due time"))

    def replay(self, job_id: int, *, ignore_backlog: bool = False) -> Job:
        """Run a dead, cancelled or expired job again: a new attempt, the same business key.
        Admitted like an enqueue: past its queue's or tenant's max_backlog it raises
        BacklogFull, unless ignore_backlog (an operator's override; docs/flow-control.md)."""
        return self._move(job_id, Event.REPLAY, ignore_backlog=ignore_backlog)

    def resolve(self, job_id: int, *, done: bool) -> Job:
        """Settle a parked job: done=True records it succeeded (the effect happened);
        done=False schedules it to run again now."""
        if done:
            return self._move(job_id, Event.RESOLVE_DONE)
        return self._move(job_id, Event.RESOLVE_RETRY)

    def _move(
        self,
        job_id: int,
        event: Event,
        due_at: datetime | None = None,
        *,
        ignore_backlog: bool = False,
    ) -> Job:
        job = self.store.transition(
            job_id,
            event,
            self.clock.now(),
            tenant=self.tenant,
            due_at=due_at,
            ignore_backlog=ignore_backlog,
        )
        log_event(log, f"job.{event}", job_id=job.id, status=str(job.status), version=job.version)
        return job

    # -- schedules --------------------------------------------------------------------------

    def _spec(self, name: str, task: str, options: dict[str, Any]) -> ScheduleSpec:
        registered = self.tasks.get(task)
        defaults = options.pop("defaults", None) or (
            registered.defaults if registered else TaskDefaults()
        )
        spec = build_spec(
            name, task, defaults=defaults, max_payload_bytes=self.max_payload_bytes, **options
        )
        if registered is not None:  # its occurrences would be dead at once: refuse them now
            registered.check_args(spec.args)
        return spec

    def add_schedule(
        self,
        name: str,
        *,
        task: str,
        timezone: str,
        cron: str | None = None,
        every: float | timedelta | str | None = None,
        args: Mapping[str, Any] | None = None,
        misfire: str = DEFAULT_MISFIRE,
        catchup_window: float | timedelta | str = DEFAULT_CATCHUP_WINDOW,
        overlap: str = DEFAULT_OVERLAP,
        dst_gap: str = DEFAULT_DST_GAP,
        dst_fold: str = DEFAULT_DST_FOLD,
        start: datetime | str | None = None,
        end: datetime | str | None = None,
        jitter: float | timedelta | str = 0,
        late_after: float | timedelta | str | None = None,
    ) -> Schedule:
        """Create a recurring schedule; its first tick is the first fire at or after now.

        A tick handled more than `late_after` after its time is late (its misfire policy
        applies); by default a tick is late once the next tick is due.

        Raises ScheduleExists when the name is taken in this tenant (use update_schedule);
        UnknownTask or ArgsMismatch when this app registers tasks and the task is not one of
        them or its handler cannot take `args`.
        """
        self._known_task(task)
        spec = self._spec(
            name,
            task,
            dict(
                timezone=timezone,
                cron=cron,
                every=every,
                args=args,
                misfire=misfire,
                catchup_window=catchup_window,
                overlap=overlap,
                dst_gap=dst_gap,
                dst_fold=dst_fold,
                start=start,
                end=end,
                jitter=jitter,
                late_after=late_after,
            ),
        )
        schedule, created = self._create_schedule(spec)
        if not created:
            raise ScheduleExists(
                f"schedule {name!r} exists already; change it with update_schedule "
                "(duetime schedules update) or delete it first"
            )
        return schedule

    def _create_schedule(self, spec: ScheduleSpec) -> tuple[Schedule, bool]:
        now = self.clock.now()
        anchor = spec.start_at or now
        schedule, created = self.store.create_schedule(
            self.tenant,
            spec,
            anchor_at=anchor,
            next_fire_at=first_fire(spec, anchor, now),
            now=now,
        )
        if created:
            log_event(log, "schedule.added", schedule=spec.name, next=schedule.next_fire_at)
        return schedule, created

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
        self._declared.append(self._spec(name, task, dict(options)))

    def sync_schedules(self) -> dict[str, str]:
        """Write declared schedules to the store: created, updated, or unchanged (per name)."""
        result: dict[str, str] = {}
        for spec in self._declared:
            current, created = self._create_schedule(spec)
            if created:
                result[spec.name] = "created"
            elif current.spec.definition_hash == spec.definition_hash:
                result[spec.name] = "unchanged"
            else:
                now = self.clock.now()
                self._apply_schedule(spec.name, functools.partial(_update, spec=spec, now=now))
                result[spec.name] = "updated"
                log_event(log, "schedule.updated", schedule=spec.name, source="code")
        return result

    def _apply_schedule(self, name: str, decide: Decide) -> Plan:
        return self.store.apply_schedule(self.tenant, name, self.clock.now(), decide)

    def get_schedule(self, name: str) -> Schedule:
        """The schedule of this name in the tenant; raises ScheduleNotFound."""
        schedule = self.store.get_schedule(self.tenant, name)
        if schedule is None:
            raise ScheduleNotFound(name)
        return schedule

    def list_schedules(self) -> list[Schedule]:
        """Every schedule of the tenant."""
        return self.store.list_schedules(self.tenant)

    def update_schedule(self, name: str, **changes: Any) -> Schedule:
        """Change a schedule. Future ticks follow the new definition; occurrences generated but
        not started are regenerated. Options are those of add_schedule (task included)."""
        current = self.get_schedule(name)
        if "cron" in changes and changes["cron"] is not None:
            changes.setdefault("every", None)
        if "every" in changes and changes["every"] is not None:
            changes.setdefault("cron", None)
        task = changes.pop("task", current.spec.task)
        options = {**spec_options(current.spec), **changes}
        if task not in self.tasks:  # keep the stored job options unless this app knows the task
            options["defaults"] = spec_defaults(current.spec)
        spec = self._spec(name, task, options)
        self._apply_schedule(name, functools.partial(_update, spec=spec, now=self.clock.now()))
        log_event(log, "schedule.updated", schedule=name, source="api")
        return self.get_schedule(name)

    def pause_schedule(self, name: str) -> Schedule:
        """Stop generating ticks until resume; ticks due meanwhile meet the misfire policy."""
        self._apply_schedule(name, lambda s, active: plan_pause(s, True))
        log_event(log, "schedule.paused", schedule=name)
        return self.get_schedule(name)

    def resume_schedule(self, name: str) -> Schedule:
        """Generate ticks again; the ticks missed while paused meet the misfire policy."""
        self._apply_schedule(name, lambda s, active: plan_pause(s, False))
        log_event(log, "schedule.resumed", schedule=name)
        return self.get_schedule(name)

    def delete_schedule(self, name: str) -> None:
        """Delete a schedule and its tick history; occurrences that never started are cancelled."""
        self.store.delete_schedule(self.tenant, name, self.clock.now())
        log_event(log, "schedule.deleted", schedule=name)

    def preview_schedule(
        self, name: str, count: int = 10, after: datetime | str | None = None
    ) -> list[Fire]:
        """The next `count` nominal fire times (after now, or after `after`)."""
        schedule = self.get_schedule(name)
        start = parse_instant(after, "after") if after is not None else self.clock.now()
        return preview(schedule.spec, schedule.anchor_at, start, count)

    def trigger_schedule(self, name: str) -> Job:
        """Run one occurrence now, with its own identity (nominal time = now)."""
        now = self.clock.now()
        plan = self._apply_schedule(name, lambda s, active: plan_trigger(s, now))
        job_id = plan.job_ids[0]  # a second trigger in the same instant returns the first
        log_event(log, "schedule.triggered", schedule=name, job_id=job_id)
        return self.get_job(job_id)

    def backfill_schedule(self, name: str, start: datetime | str, end: datetime | str) -> Plan:
        """Run the ticks of a past range [start, end], honouring the overlap policy."""
        first = parse_instant(start, "backfill start")
        last = parse_instant(end, "backfill end")
        now = self.clock.now()
        plan = self._apply_schedule(
            name, lambda s, active: plan_backfill(s, active, first, last, now)
        )
        log_event(
            log,
            "schedule.backfilled",
            schedule=name,
            jobs=len(plan.new_jobs),
            ticks=len(plan.ticks),
        )
        return plan

    def schedule_history(
        self, name: str, limit: int = 50, before_id: int | None = None
    ) -> list[Tick]:
        """What became of each tick, newest first (enqueued, missed, skipped, ... and why)."""
        return self.store.schedule_ticks(self.get_schedule(name).id, limit, before_id)

    def last_run(self, name: str) -> Job | None:
        """The newest occurrence that started, with its attempts."""
        return self.store.latest_run(self.get_schedule(name).id)

    # -- operators --------------------------------------------------------------------------

    def scoped(self, tenant: str) -> App:
        """A view of this app for another tenant: same tasks, clock and open store."""
        view = App(
            self._database_url,
            tenant=tenant,
            clock=self.clock,
            max_payload_bytes=self.max_payload_bytes,
        )
        view.tasks = self.tasks
        view._store = self.store
        view._lock = self._lock
        return view

    def stats(self) -> Stats:
        """Jobs by status and queue, oldest overdue age, lag and throughput (5 and 60 min)."""
        return operators.stats(self, self.tenant)

    # -- queues and the outbox (docs/outbox.md) -------------------------------------------------

    def set_queue(
        self,
        name: str,
        *,
        dispatch: Dispatch | str | None = None,
        concurrency: int | Keep | None = KEEP,
        max_backlog: int | Keep | None = KEEP,
        weight: float | None = None,
    ) -> QueueSettings:
        """Change a queue's settings: dispatch="outbox" sends its due jobs through the broker
        (`duetime relay`), "direct" (the default) lets workers claim them from the database.
        concurrency: at most this many of its attempts run at once, cluster-wide;
        max_backlog: an enqueue past this many waiting jobs raises BacklogFull; weight: its
        share of a claim against other queues (docs/flow-control.md). Settings not given are
        kept; concurrency=None or max_backlog=None removes that limit. Queues are shared by
        every tenant."""
        queue = check_name(name, "queue", 100)
        mode = dispatch_mode(str(dispatch)) if dispatch is not None else None
        if mode is not None:
            self.store.set_queue(queue, self.clock.now(), dispatch=mode)
        if mode is None or not (
            isinstance(concurrency, Keep) and isinstance(max_backlog, Keep) and weight is None
        ):
            return operators.set_queue_flow(
                self, queue, concurrency=concurrency, max_backlog=max_backlog, weight=weight
            )
        return self.queue(queue)

    def pause_queue(self, name: str) -> QueueSettings:
        """Start no more jobs of this queue (enqueues are still accepted, running attempts
        finish); every worker's claims hold it from the moment this returns: each claim checks
        the queue's row as it starts jobs (docs/flow-control.md)."""
        return operators.set_queue_flow(self, name, paused=True)

    def resume_queue(self, name: str) -> QueueSettings:
        """Start the queue's jobs again after pause_queue."""
        return operators.set_queue_flow(self, name, paused=False)

    def queue_flows(self) -> list[QueueFlow]:
        """Every queue with settings or waiting/running jobs: settings, backlog, running."""
        return operators.queue_flows(self, None)

    def tenants(self) -> list[TenantSettings]:
        """Every tenant with settings, by name (a tenant not listed has the defaults)."""
        return self.store.tenant_settings()

    def tenant_settings(self, name: str) -> TenantSettings:
        """A tenant's flow settings (the defaults for a tenant never set)."""
        found = [t for t in self.store.tenant_settings() if t.tenant == name]
        return found[0] if found else TenantSettings(name)

    def tenant_flows(self) -> list[TenantFlow]:
        """Every tenant with settings or waiting/running jobs: settings, backlog, running."""
        return operators.tenant_flows(self, None)

    def set_tenant(
        self,
        name: str,
        *,
        concurrency: int | Keep | None = KEEP,
        max_backlog: int | Keep | None = KEEP,
        weight: float | None = None,
    ) -> TenantSettings:
        """Change a tenant's limits, cluster-wide: concurrency (its attempts running at once,
        over every queue), max_backlog (its waiting jobs), weight (its share of a claim
        against other tenants). Settings not given are kept; None removes a limit."""
        return operators.set_tenant_flow(
            self, name, concurrency=concurrency, max_backlog=max_backlog, weight=weight
        )

    def queue(self, name: str) -> QueueSettings:
        """A queue's settings (the defaults for a queue never set)."""
        found = [q for q in self.store.queue_settings() if q.queue == name]
        return found[0] if found else QueueSettings(name)

    def queues(self) -> list[QueueSettings]:
        """Every queue that has settings or jobs, by name, with its settings."""
        settings = {q.queue: q for q in self.store.queue_settings()}
        for count in self.store.job_counts(None):
            settings.setdefault(count.queue, QueueSettings(count.queue))
        return [settings[name] for name in sorted(settings)]

    # -- limits per dependency (docs/flow-control.md) ----------------------------------------

    def limits(self) -> list[LimitStatus]:
        """Every limit key with its settings, running and waiting jobs, tokens and pause."""
        return self.store.limits(self.clock.now())

    def limit(self, key: str) -> LimitStatus:
        """One key's limit; InvalidRequest when it has none."""
        for found in self.limits():
            if found.settings.key == key:
                return found
        raise InvalidRequest(f"no limit {key!r}; set one with `duetime limits set {key} ...`")

    def set_limit(
        self,
        key: str,
        *,
        rate: str | Rate | None = None,
        burst: int | str | None = None,
        concurrency: int | str | None = None,
        retry_budget: float | str | None = None,
        breaker_threshold: float | str | None = None,
        breaker_cooldown: float | str | timedelta | None = None,
    ) -> LimitStatus:
        """Create or change the limit of `key`: each option given replaces that setting
        ("off" switches it off; an option left None stays as it was). `rate` is "N/s", "N/m"
        or "N/h"; `breaker_cooldown` is seconds or a duration ("30s", "2m"), 1 s to 1 day
        ("off": the default of 30 s)."""
        check_limit_key(key)
        current = next((s.settings for s in self.limits() if s.settings.key == key), None)
        settings = updated_settings(
            current,
            key,
            rate=rate,
            burst=burst,
            concurrency=concurrency,
            retry_budget=retry_budget,
            breaker_threshold=breaker_threshold,
            breaker_cooldown=breaker_cooldown,
        )
        self.store.set_limit(settings, self.clock.now())
        return self.limit(key)

    def delete_limit(self, key: str) -> None:
        """Delete the limit of `key` (its jobs then start unlimited); InvalidRequest when it
        has none."""
        if not self.store.delete_limit(check_limit_key(key)):
            raise InvalidRequest(f"no limit {key!r}; `duetime limits list` shows the limits")

    def outbox_status(self, window_seconds: float = 60.0) -> OutboxFigures:
        """The outbox: unpublished events, the oldest one's age, the publish rate over the
        last `window_seconds` (1 s to 1 day)."""
        return self.store.outbox_figures(self.clock.now(), check_window(window_seconds))

    def replay_dead(
        self,
        ids: Iterable[int] | None = None,
        *,
        task: str | None = None,
        queue: str | None = None,
        per_second: float | None = None,
        progress: Callable[[int, int], None] | None = None,
        ignore_backlog: bool = False,
    ) -> operators.ReplayReport:
        """Replay dead jobs: the given ids, or every dead job of a task/queue, paced. At a
        full backlog the replay stops (report.stopped says why), or raises BacklogFull when
        it replayed none; ignore_backlog replays past the max backlogs."""
        chosen = (
            list(ids)
            if ids is not None
            else operators.dead_job_ids(self, self.tenant, task=task, queue=queue)
        )
        return operators.replay_many(
            self,
            chosen,
            tenant=self.tenant,
            per_second=per_second,
            progress=progress,
            ignore_backlog=ignore_backlog,
        )

    def create_token(
        self,
        role: str = "read",
        *,
        name: str = "",
        expires_in: float | timedelta | str | None = None,
    ) -> tuple[ApiToken, str]:
        """A new API token for this app's tenant and its secret (shown once, stored hashed).
        With `expires_in` (seconds, a timedelta or '30d') it is refused from then on."""
        expiry = parse_duration(expires_in, "expires_in") if expires_in is not None else None
        return operators.create_token(self, self.tenant, role, name, expires_in=expiry)

    def list_tokens(self) -> list[ApiToken]:
        """This tenant's tokens, revoked ones included."""
        return self.store.list_tokens(self.tenant)

    def revoke_token(self, token_id: int) -> ApiToken:
        """Revoke an API token of the tenant by id: it is refused from then on."""
        return operators.revoke_token(self, token_id)

    aenqueue = _async_twin(enqueue)
    aenqueue_many = _async_twin(enqueue_many)
    astats = _async_twin(stats)
    apause_queue = _async_twin(pause_queue)
    aresume_queue = _async_twin(resume_queue)
    aset_queue = _async_twin(set_queue)
    aset_tenant = _async_twin(set_tenant)
    areplay_dead = _async_twin(replay_dead)
    aget_job = _async_twin(get_job)
    alist_jobs = _async_twin(list_jobs)
    acancel = _async_twin(cancel)
    areschedule = _async_twin(reschedule)
    areplay = _async_twin(replay)
    aresolve = _async_twin(resolve)
    aadd_schedule = _async_twin(add_schedule)
    aget_schedule = _async_twin(get_schedule)
    alist_schedules = _async_twin(list_schedules)
    aupdate_schedule = _async_twin(update_schedule)
    apause_schedule = _async_twin(pause_schedule)
    aresume_schedule = _async_twin(resume_schedule)
    adelete_schedule = _async_twin(delete_schedule)
    atrigger_schedule = _async_twin(trigger_schedule)
    abackfill_schedule = _async_twin(backfill_schedule)
    apreview_schedule = _async_twin(preview_schedule)
    aschedule_history = _async_twin(schedule_history)
    alast_run = _async_twin(last_run)
    async_schedules = _async_twin(sync_schedules)
