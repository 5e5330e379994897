"""Django's tasks framework where it is: `django.tasks` (Django 6, Python 3.12+), else the
`django-tasks` backport (`django_tasks`, Django 4.2 to 5.2, on Python 3.11): the same API under
another module name, and InvalidTask named InvalidTaskError. The rest of duetime.django imports
these names from here only."""

from __future__ import annotations

__all__ = [
    "BaseTaskBackend",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "normalize_json",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]

try:
    from django.tasks import Task, TaskContext, TaskResult, TaskResultStatus, task, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import TaskError
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json
except ImportError:  # Django before 6: the backport (with "django_tasks" in INSTALLED_APPS)
    from django_tasks import (  # type: ignore[no-redef,unused-ignore]
        TaskContext,
        TaskResult,
        TaskResultStatus,
        task,
        task_backends,
    )
    from django_tasks.backends.base import (  # type: ignore[no-redef,unused-ignore]
        BaseTaskBackend,
    )
    from django_tasks.base import Task, TaskError  # type: ignore[no-redef,unused-ignore]
    from django_tasks.exceptions import (  # type: ignore[no-redef,unused-ignore]
        InvalidTaskError as InvalidTask,
    )
    from django_tasks.exceptions import (  # type: ignore[no-redef,unused-ignore]
        TaskResultDoesNotExist,
    )
    from django_tasks.signals import (  # type: ignore[no-redef,unused-ignore]
        task_enqueued,
        task_finished,
        task_started,
    )
    from django_tasks.utils import normalize_json  # type: ignore[no-redef,unused-ignore]
