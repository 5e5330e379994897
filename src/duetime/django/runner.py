"""What a duetime worker runs for a Django task: the handler registered under the task's
module path, which calls the @task function with Django's database connections handled as
Django does around a request, and returns its JSON-normalized value (the job's result)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import close_old_connections
from django.utils.module_loading import import_string

from duetime.django.compat import Task, TaskContext, normalize_json, task_backends
from duetime.django.results import NOTE_PREFIX, class_path
from duetime.runtime.context import current


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
            if task.takes_context:
                backend = task_backends[alias]
                running = backend.get_result(current().claim.job.idempotency_key)
                value = task.call(TaskContext(task_result=running), *args, **kwargs)
            else:
                value = task.call(*args, **kwargs)
            return normalize_json(value)
        except Exception as exc:
            # read back by results.py: TaskError.exception_class_path, exact
            exc.add_note(f"{NOTE_PREFIX}{class_path(exc)}")
            raise
        finally:
            close_old_connections()  # and after it

    run.__name__ = run.__qualname__ = module_path.rpartition(".")[2]
    run.__module__ = module_path.rpartition(".")[0]
    return run
