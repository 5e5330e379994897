"""What a duetime worker runs for a Django task: the handler registered under the task's
module path, which calls the @task function with Django's database connections handled as
Django does around a request, sends Django's task_started and task_finished signals, and
returns its JSON-normalized value (the job's result)."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from typing import Any

from django.db import close_old_connections
from django.dispatch import Signal
from django.utils import timezone
from django.utils.module_loading import import_string

from duetime.core.models import Job
from duetime.core.retry import ErrorCategory, RetryPolicy, classify
from duetime.django.compat import (
    Task,
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultStatus,
    normalize_json,
    task_backends,
    task_finished,
    task_started,
)
from duetime.django.results import NOTE_PREFIX, class_path
from duetime.runtime.context import current

log = logging.getLogger("duetime.django")


def handler_for(alias: str, module_path: str) -> Callable[..., Any]:
    """The duetime handler of the Django task at `module_path` of the TASKS backend `alias`:
    a plain function (run in the worker's thread pool; an `async def` task runs on an event
    loop of that thread, through Django's Task.call)."""

    def run(args: list[Any], kwargs: dict[str, Any], run_after: str | None = None) -> Any:
        task = import_string(module_path)
        if not isinstance(task, Task):
            raise TypeError(f"{module_path} is a {type(task).__name__}, not a Django task")
        close_old_connections()  # as Django does before a request
        try:
            backend = task_backends[alias]
            job = current().claim.job
            running = backend.get_result(job.idempotency_key)  # RUNNING, with this attempt
            _send(task_started, backend, running)
            try:
                if task.takes_context:
                    value = task.call(TaskContext(task_result=running), *args, **kwargs)
                else:
                    value = task.call(*args, **kwargs)
                value = normalize_json(value)
            except Exception as exc:
                if _for_good(exc, job):  # FAILED, as duetime will record it
                    error = TaskError(
                        exception_class_path=class_path(exc),
                        traceback="".join(traceback.format_exception(exc)),
                    )
                    _ended(running, TaskResultStatus.FAILED, errors=[*running.errors, error])
                    _send(task_finished, backend, running)
                # read back by results.py: TaskError.exception_class_path, exact
                exc.add_note(f"{NOTE_PREFIX}{class_path(exc)}")
                raise
            _ended(running, TaskResultStatus.SUCCESSFUL, _return_value=value)
            _send(task_finished, backend, running)
            return value
        finally:
            close_old_connections()  # and after it

    run.__name__ = run.__qualname__ = module_path.rpartition(".")[2]
    run.__module__ = module_path.rpartition(".")[0]
    return run


def _for_good(exc: Exception, job: Job) -> bool:
    """Whether duetime gives the job up after this exception (docs/retries.md): a permanent
    one, or its last attempt; otherwise it runs again (READY: no task_finished)."""
    failure = classify(exc, RetryPolicy())
    return failure.category is ErrorCategory.PERMANENT or job.attempts >= job.max_attempts


def _ended(result: TaskResult, status: Any, **fields: Any) -> None:
    object.__setattr__(result, "status", status)
    object.__setattr__(result, "finished_at", timezone.now())
    for name, value in fields.items():
        object.__setattr__(result, name, value)


def _send(signal: Signal, backend: Any, result: TaskResult) -> None:
    """Send a Django task signal; a receiver's exception is logged, and changes nothing about
    the task's outcome."""
    for receiver, answer in signal.send_robust(type(backend), task_result=result):
        if isinstance(answer, Exception):
            log.error("a receiver of a Django task signal failed: %r", receiver, exc_info=answer)
