"""DuetimeBackend: Django's tasks framework (django.tasks) on duetime. Settings:
TASKS = {"default": {"BACKEND": "duetime.django.DuetimeBackend", "OPTIONS": {...}}}
(docs/django.md has the options, the status mapping and the transaction rules)."""

from __future__ import annotations

import importlib
import threading
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.db import connections, transaction
from django.utils import timezone
from django.utils.module_loading import import_string, module_has_submodule

from duetime.client import App
from duetime.core.errors import InvalidRequest
from duetime.core.models import Job, JobFilter
from duetime.core.requests import DEFAULT_MAX_ATTEMPTS, check_url_name
from duetime.django.compat import (
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    normalize_json,
    task_enqueued,
)
from duetime.django.results import task_result
from duetime.django.runner import handler_for

OPTIONS = ("DATABASE", "DATABASE_URL", "TENANT", "MAX_ATTEMPTS", "MODULES")

# Django keeps one backend object per thread (its connection handler); they share one App per
# configuration, so that a process has one connection pool and one task registry per backend
_apps: dict[tuple[str, str, str, int], App] = {}
_apps_lock = threading.Lock()

# Django's database settings that are not libpq connection parameters
_NOT_LIBPQ = {"isolation_level", "server_side_binding", "assume_role", "pool", "cursor_factory"}


class DuetimeBackend(BaseTaskBackend):
    """Enqueues Django tasks as duetime jobs (task: the function's module path; args: the
    call's args and kwargs; idempotency key: the TaskResult's id) and reads them back as
    TaskResults; `python manage.py duetime_worker` runs them."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True  # Django's -100..100 is duetime's priority as it is: higher first

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        unknown = sorted(set(self.options) - set(OPTIONS))
        if unknown:
            raise ImproperlyConfigured(
                f"TASKS[{alias!r}] OPTIONS has unknown keys {unknown}; known: {list(OPTIONS)}"
            )
        for queue in self.queues:
            try:
                check_url_name(queue, "queue", 100)
            except InvalidRequest as exc:
                raise ImproperlyConfigured(f"TASKS[{alias!r}] QUEUES: {exc}") from None
        self.database: str = self.options.get("DATABASE", "default")
        if self.database not in connections.settings:
            raise ImproperlyConfigured(
                f"TASKS[{alias!r}] OPTIONS DATABASE {self.database!r} is not in DATABASES"
            )
        own_url = self.options.get("DATABASE_URL")
        # without a URL of its own, duetime keeps its jobs in Django's database: an enqueue
        # in atomic() is then part of Django's transaction
        self.same_database = not own_url
        url = own_url or django_database_url(alias, self.database)
        tenant = self.options.get("TENANT", "default")
        max_attempts = self.options.get("MAX_ATTEMPTS", DEFAULT_MAX_ATTEMPTS)
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ImproperlyConfigured(
                f"TASKS[{alias!r}] OPTIONS MAX_ATTEMPTS must be a whole number, 1 or more"
            )
        self.max_attempts = max_attempts
        modules = self.options.get("MODULES", [])
        if not isinstance(modules, list | tuple) or not all(isinstance(m, str) for m in modules):
            raise ImproperlyConfigured(
                f"TASKS[{alias!r}] OPTIONS MODULES must be a list of module names"
            )
        self.modules: list[str] = list(modules)
        key = (alias, url, tenant, max_attempts)
        with _apps_lock:
            app = _apps.get(key)
            if app is None:
                app = _apps[key] = App(url, tenant=tenant)
        self.app = app

    def validate_task(self, task: Task) -> None:
        super().validate_task(task)
        try:
            check_url_name(task.queue_name, "queue", 100)
        except InvalidRequest as exc:
            raise InvalidTask(str(exc)) from None
        self._register(task)

    def _register(self, task: Task) -> None:
        """Make the worker able to run `task`: a duetime handler under its module path."""
        name = task.module_path
        with _apps_lock:
            if name not in self.app.tasks:
                self.app.task(name=name, max_attempts=self.max_attempts)(
                    handler_for(self.alias, name)
                )

    def load_tasks(self) -> None:
        """Import every installed app's `tasks` module and OPTIONS MODULES, and register each
        Django task they hold with this backend, whatever backend it names (one enqueued with
        `.using(backend=...)` runs here too): the worker runs only the tasks registered."""
        names = [f"{c.name}.tasks" for c in apps.get_app_configs() if has_tasks(c.module)]
        for name in [*names, *self.modules]:
            for value in vars(importlib.import_module(name)).values():
                if isinstance(value, Task):
                    self._register(value)

    def enqueue(self, task: Task, args: Sequence[Any], kwargs: dict[str, Any]) -> TaskResult:
        self.validate_task(task)
        result_id = uuid.uuid4().hex
        payload: dict[str, Any] = {
            "args": normalize_json(list(args)),
            "kwargs": normalize_json(dict(kwargs)),
        }
        at = None
        if task.run_after is not None:
            at = _aware(task.run_after)
            payload["run_after"] = at.isoformat()
        result = TaskResult(
            task=task,
            id=result_id,
            status=TaskResultStatus.READY,
            enqueued_at=None,
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=payload["args"],
            kwargs=payload["kwargs"],
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        options = {"key": result_id, "queue": task.queue_name, "priority": task.priority, "at": at}
        conn = connections[self.database]

        def send(connection: Any = None) -> Job:
            job = self.app.enqueue(task.module_path, payload, connection=connection, **options)
            object.__setattr__(result, "enqueued_at", job.created_at)
            task_enqueued.send(type(self), task_result=result)
            return job

        if not conn.in_atomic_block:  # autocommit: the job is committed at once
            send()
        elif self.same_database:  # in Django's open transaction: committed with it, or not
            send(conn.connection)
        else:  # another database: once Django's transaction has committed
            transaction.on_commit(send, using=self.database)
        return result

    def get_result(self, result_id: str) -> TaskResult:
        found = self.app.store.list_jobs(
            JobFilter(
                tenant=self.app.tenant,
                idempotency_key=str(result_id),
                limit=1,
                with_attempts=True,
            )
        )
        if not found or "args" not in found[0].args:
            raise TaskResultDoesNotExist(result_id)
        job = found[0]
        try:
            task = import_string(job.task)
        except ImportError:
            raise TaskResultDoesNotExist(
                f"{result_id}: task {job.task} cannot be imported"
            ) from None
        if not isinstance(task, Task):
            raise TaskResultDoesNotExist(f"{result_id}: {job.task} is not a Django task")
        run_after = job.args.get("run_after")
        task = task.using(
            priority=job.priority,
            queue_name=job.queue,
            backend=self.alias,
            run_after=datetime.fromisoformat(run_after) if run_after else None,
        )
        return task_result(task, job, result_id, self.alias)


def has_tasks(module: Any) -> bool:
    return bool(module_has_submodule(module, "tasks"))


def _aware(instant: datetime) -> datetime:
    """run_after as duetime takes it: aware (a naive one, with USE_TZ = False, is in Django's
    current time zone)."""
    return instant if timezone.is_aware(instant) else timezone.make_aware(instant)


def django_database_url(alias: str, database: str) -> str:
    """duetime's URL for Django's database `database` (PostgreSQL only): its NAME, USER,
    PASSWORD, HOST, PORT and the libpq parameters of its OPTIONS (sslmode, ...)."""
    conn = connections[database]
    if conn.vendor != "postgresql":
        raise ImproperlyConfigured(
            f"TASKS[{alias!r}]: duetime shares Django's database only on PostgreSQL "
            f"(DATABASES[{database!r}] is {conn.vendor}); give OPTIONS DATABASE_URL, a "
            "database of duetime's own"
        )
    s = conn.settings_dict
    user = quote(str(s.get("USER") or ""), safe="")
    password = quote(str(s.get("PASSWORD") or ""), safe="")
    credentials = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = str(s.get("HOST") or "")
    params = {
        k: str(v)
        for k, v in (s.get("OPTIONS") or {}).items()
        if k not in _NOT_LIBPQ and isinstance(v, str | int) and not isinstance(v, bool)
    }
    if host.startswith("/"):  # a Unix socket directory
        params["host"] = host
        host = ""
    port = f":{s['PORT']}" if s.get("PORT") and host else ""
    if s.get("PORT") and not host:
        params["port"] = str(s["PORT"])
    query = f"?{urlencode(params)}" if params else ""
    return f"postgresql://{credentials}{host}{port}/{quote(str(s['NAME']), safe='')}{query}"
