"""A duetime job as Django's TaskResult: the status mapping, the attempts' errors as
TaskErrors (exception_class_path and traceback) and the timestamps (docs/django.md)."""

from __future__ import annotations

import builtins
import re
from typing import Any

from duetime.core.models import Attempt, Job
from duetime.django.compat import Task, TaskError, TaskResult, TaskResultStatus

# duetime's job statuses (core/states.py) as Django's four; compared by value, so that a status
# this module does not know yet reads as READY (it has not run to an end)
STATUS_MAP: dict[str, TaskResultStatus] = {
    "scheduled": TaskResultStatus.READY,  # due later, due now, or waiting for its retry
    "waiting": TaskResultStatus.READY,  # a schedule's occurrence behind the running one
    "blocked": TaskResultStatus.READY,  # waiting for the jobs it depends on
    "running": TaskResultStatus.RUNNING,
    "cancel_requested": TaskResultStatus.RUNNING,  # running until its handler stops
    # a lost attempt whose outcome is unknown, waiting for an operator: it has not ended
    "parked": TaskResultStatus.RUNNING,
    "succeeded": TaskResultStatus.SUCCESSFUL,
    "dead": TaskResultStatus.FAILED,
    "cancelled": TaskResultStatus.FAILED,
    "expired": TaskResultStatus.FAILED,
}

# the note the worker adds to a Django task's exception (runner.py), read back from the
# traceback duetime keeps: the exception's class path, exact, whatever its message holds
NOTE_PREFIX = "duetime.django exception_class_path="
_LAST_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")


def task_status(job: Job) -> TaskResultStatus:
    return STATUS_MAP.get(str(job.status), TaskResultStatus.READY)


def task_errors(attempts: tuple[Attempt, ...]) -> list[TaskError]:
    """One TaskError per attempt that failed with a traceback, oldest first."""
    return [_error(a.error_traceback) for a in attempts if a.error_traceback]


def _error(text: str) -> TaskError:
    lines = text.splitlines(keepends=True)
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith(NOTE_PREFIX):
            path = lines[i][len(NOTE_PREFIX) :].strip()
            return TaskError(
                exception_class_path=path, traceback="".join(lines[:i] + lines[i + 1 :])
            )
    return TaskError(exception_class_path=_guess_class_path(lines), traceback=text)


def _guess_class_path(lines: list[str]) -> str:
    """An exception the worker raised itself (a timeout): its class from the traceback's
    last unindented line, as Python prints it (module.Class, or Class for builtins)."""
    for line in reversed(lines):
        found = _LAST_LINE.match(line)
        if found and not line.startswith(("Traceback", " ")):
            name = found.group(1)
            if "." in name:
                return name
            if isinstance(getattr(builtins, name, None), type):
                return f"builtins.{name}"
    return "builtins.Exception"


def class_path(exc: BaseException) -> str:
    kind = type(exc)
    return f"{kind.__module__}.{kind.__qualname__}"


def task_result(task: Task, job: Job, result_id: str, backend: str) -> TaskResult:
    """The TaskResult of `job` (read with its attempt history) for the Django `task`."""
    attempts = job.attempt_history
    status = task_status(job)
    finished = status in (TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED)
    payload: dict[str, Any] = job.args
    result = TaskResult(
        task=task,
        id=result_id,
        status=status,
        enqueued_at=job.created_at,
        started_at=attempts[0].started_at if attempts else None,
        finished_at=job.updated_at if finished else None,  # its last change: how it ended
        last_attempted_at=attempts[-1].started_at if attempts else None,
        args=list(payload.get("args", [])),
        kwargs=dict(payload.get("kwargs", {})),
        backend=backend,
        errors=task_errors(attempts),
        worker_ids=[a.worker_id for a in attempts],
    )
    if status is TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", job.result)
    return result
