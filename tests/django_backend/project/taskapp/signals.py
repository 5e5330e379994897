"""Receivers of Django's task signals that keep what they saw (SignalSeen, in the database both
the tests and the worker processes see)."""

from typing import Any

from duetime.django.compat import task_enqueued, task_finished, task_started


def _recorder(name: str) -> Any:
    def record(sender: Any, task_result: Any, **kwargs: Any) -> None:
        from taskapp.models import SignalSeen

        SignalSeen.objects.using("pg").create(
            result_id=task_result.id, signal=name, status=str(task_result.status)
        )

    return record


for _name, _signal in (
    ("enqueued", task_enqueued),
    ("started", task_started),
    ("finished", task_finished),
):
    _signal.connect(_recorder(_name), weak=False, dispatch_uid=f"taskapp-{_name}")
