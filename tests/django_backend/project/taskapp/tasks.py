"""The test project's Django tasks; the worker finds them by this module's name. (A project
writes `from django.tasks import task`, or `from django_tasks import task` with the backport;
the tests run on both, so they import through duetime's shim.)"""

import duetime
from duetime.django.compat import TaskContext, task
from taskapp import signals  # noqa: F401 - connects the receivers the tests read


class ReportError(Exception):
    """An exception of the project's own: its class path reaches TaskResult.errors."""


@task
def add(a: int, b: int) -> int:
    return a + b


@task(queue_name="emails", priority=10)
def send_email(to: str) -> dict[str, str]:
    return {"sent": to}


@task
def fail(message: str) -> None:
    raise ValueError(message)


@task
def fail_report(message: str) -> None:
    try:
        raise KeyError(message)
    except KeyError as exc:
        raise ReportError(f"report failed:\n{message}") from exc


@task
def refuse(reason: str) -> None:
    raise duetime.PermanentError(reason)


@task
async def double(x: int) -> int:
    return 2 * x


@task(takes_context=True)
def attempt_of(context: TaskContext, label: str) -> dict[str, object]:
    return {"label": label, "attempt": context.attempt, "id": context.task_result.id}


@task
def count_orders() -> int:
    from taskapp.models import Order

    return Order.objects.using("pg").count()
