"""The task registry: a registered handler (Task), its typed defer (Deferral), the check of a
job's arguments against the handler's signature (misfit), and the registry's two verbs,
register_task (App.task) and known_task. The registry itself is a dict of name -> Task
(App.tasks); the runtime reads it to run jobs and never needs the App itself.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, ParamSpec, Protocol, TypeVar

from duetime.core.clock import Clock
from duetime.core.durations import parse_duration
from duetime.core.errors import ArgsMismatch, ConfigurationError, InvalidRequest, UnknownTask
from duetime.core.limits import check_limit_keys
from duetime.core.models import Attempt, Job
from duetime.core.requests import (
    DEFAULT_MAX_ATTEMPTS,
    TaskDefaults,
    build_new_job,
    check_lateness,
    check_sequence_template,
    check_unique_for,
)
from duetime.core.results import check_result_limit
from duetime.core.retry import RetryPolicy
from duetime.twins import async_twin

P = ParamSpec("P")
R = TypeVar("R")


class TaskOwner(Protocol):
    """What a task enqueues through (its App): enqueue and enqueue_many with their options."""

    @property
    def enqueue(self) -> Callable[..., Job]: ...

    @property
    def enqueue_many(self) -> Callable[..., list[Job]]: ...


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

    app: TaskOwner
    name: str
    fn: Callable[P, R]
    defaults: TaskDefaults
    reconcile: Callable[[Job, Attempt], Any] | None = None
    # the bound of its results' compact JSON (None: the App's; docs/workflows.md, "Results")
    result_max_bytes: int | None = None

    @functools.cached_property
    def is_async(self) -> bool:
        """Whether the handler is a coroutine function (asked once per job: read once)."""
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

    def check_args(
        self, args: Mapping[str, Any], where: str = "", *, job: tuple[int, int] | None = None
    ) -> None:
        """Raise ArgsMismatch unless the handler can be called with `args` as keywords
        (the way a worker calls it). `where` ends its reason; `job` (number, count), the job
        of a batch it is about, adds " (job number of count)" to it (formatted only then: a
        batch checks every job)."""
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
            if job is not None:
                where = f"{where} (job {job[0]} of {job[1]})"
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
        at or delay, sequence, unique_for, unique_key) for a typed defer:
        `task.options(key="order-42").defer(order_id=42)`."""
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

    aenqueue = async_twin(enqueue)
    aenqueue_many = async_twin(enqueue_many)

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


def register_task(
    owner: TaskOwner,
    registry: dict[str, AnyTask],
    func: Callable[..., Any],
    *,
    clock: Clock,
    tenant: str,
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
) -> AnyTask:
    """Register `func` in `registry` as a task of `owner` (App.task: the options are its own),
    its defaults checked once with the rules of an enqueue."""
    if isinstance(func, Task):
        raise ConfigurationError(
            f"{func.name!r} is registered already; put @app.schedule above @app.task"
        )
    task_name = name or f"{func.__module__}.{func.__qualname__}"
    if task_name in registry:
        raise ConfigurationError(f"task {task_name!r} is registered twice; give one a name=")
    lease_s = parse_duration(lease, "lease").total_seconds()
    if lease_s < 1:
        raise ConfigurationError(f"task {task_name!r}: lease must be at least 1 second")
    timeout_s = parse_duration(timeout, "timeout").total_seconds() if timeout else None
    lateness_s = check_lateness(max_lateness, on_late, f"task {task_name!r}")
    try:
        if sequence is not None:
            check_sequence_template(sequence, sequence_on_dead, f"task {task_name!r}")
        unique_s = None if unique_for is None else check_unique_for(unique_for)
    except InvalidRequest as exc:
        raise ConfigurationError(str(exc)) from None
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
        sequence=sequence,
        sequence_on_dead=sequence_on_dead,
        unique_for_seconds=unique_s,
    )
    # validate the defaults once, at registration, with the same rules as enqueue (the
    # sequence template needs a job's args: checked above)
    build_new_job(task_name, {}, now=clock.now(), tenant=tenant, defaults=defaults, keyed=False)
    if result_max_bytes is not None:
        check_result_limit(result_max_bytes, f"task {task_name!r}: result_max_bytes")
    task: AnyTask = Task(owner, task_name, func, defaults, reconcile, result_max_bytes)
    registry[task_name] = task
    return task


def known_task(registry: Mapping[str, AnyTask], task_name: str) -> AnyTask | None:
    """The registered task; None when the app registers no task (it cannot tell);
    UnknownTask when it registers others."""
    task = registry.get(task_name)
    if task is None and registry:
        raise UnknownTask(task_name, list(registry))
    return task
