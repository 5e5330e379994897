"""duetime as Django's tasks backend, in a real Django project (project/): enqueue, results,
deferral, priorities, queues, transactions (same database and on_commit), errors, async."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import transaction
from django.utils import timezone
from taskapp.models import Order, SignalSeen
from taskapp.more import triple
from taskapp.tasks import (
    ReportError,
    add,
    attempt_of,
    count_orders,
    double,
    fail,
    fail_report,
    refuse,
    send_email,
)

import duetime
from duetime.django import DuetimeBackend
from duetime.django.backend import django_database_url
from duetime.django.compat import (
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
)
from duetime.django.results import task_errors, task_status


class Boom(Exception):
    pass


def seen(result: Any) -> list[tuple[str, str]]:
    """The Django task signals sent about `result`, in order: (signal, status)."""
    rows = SignalSeen.objects.using("pg").filter(result_id=result.id).order_by("id")
    return list(rows.values_list("signal", "status"))


def job_of(result: Any) -> Any:
    """The duetime job behind a TaskResult (its idempotency key is the result's id)."""
    backend = task_backends[result.backend]
    (job,) = [j for j in backend.app.list_jobs(limit=1000) if j.idempotency_key == result.id]
    return job


def test_the_backend_says_what_it_supports() -> None:
    backend = task_backends["default"]
    assert isinstance(backend, DuetimeBackend)
    assert backend.supports_defer and backend.supports_async_task
    assert backend.supports_get_result and backend.supports_priority


def test_enqueue_runs_in_the_worker_process_and_reports_the_result(
    worker: Any, finished: Any
) -> None:
    result = add.enqueue(2, b=3)
    assert result.status == TaskResultStatus.READY
    assert result.enqueued_at is not None and result.args == [2] and result.kwargs == {"b": 3}
    job = job_of(result)
    assert (job.task, job.args) == ("taskapp.tasks.add", {"args": [2], "kwargs": {"b": 3}})
    finished(result)
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 5
    assert result.errors == [] and result.attempts == 1 and len(result.worker_ids) == 1
    assert result.started_at <= result.finished_at  # both by the worker's clock
    assert result.last_attempted_at == result.started_at
    again = add.get_result(result.id)
    assert (again.status, again.return_value, again.task.func) == (
        TaskResultStatus.SUCCESSFUL,
        5,
        add.func,
    )


def test_a_task_using_the_orm_runs_with_django_set_up(worker: Any, finished: Any) -> None:
    Order.objects.using("pg").create(customer="ada")
    assert finished(count_orders.enqueue()).return_value == Order.objects.using("pg").count()


def test_a_deferred_task_runs_after_run_after(worker: Any, finished: Any) -> None:
    run_after = timezone.now() + timedelta(seconds=1.5)
    result = add.using(run_after=run_after).enqueue(1, 1)
    assert job_of(result).due_at == run_after
    time.sleep(0.5)
    result.refresh()
    assert result.status == TaskResultStatus.READY  # not yet due
    finished(result)
    assert result.started_at >= run_after
    assert add.get_result(result.id).task.run_after == run_after


def test_priorities_and_queues_are_the_jobs(start_worker: Any, finished: Any) -> None:
    # enqueued before any worker of pg_own runs: one slot, strict priority order (no share
    # kept for lower classes), so the higher priority runs first
    low = add.using(backend="pg_own", priority=-5).enqueue(0, 1)
    high = send_email.using(backend="pg_own").enqueue("ada@example.com")
    assert (job_of(low).priority, job_of(high).priority) == (-5, 10)
    assert (job_of(low).queue, job_of(high).queue) == ("default", "emails")
    start_worker("pg_own", "--concurrency", "1", "--priority-share", "0")
    finished(low)
    finished(high)
    assert high.return_value == {"sent": "ada@example.com"}
    assert high.started_at < low.started_at
    assert add.using(backend="pg_own").get_result(low.id).task.priority == -5


def test_queue_names_are_checked_as_duetime_checks_them() -> None:
    with pytest.raises(InvalidTask, match="not valid for backend"):
        add.using(queue_name="reports")  # not in the backend's QUEUES
    with pytest.raises(InvalidTask, match=r"queue '\.\.' is refused"):
        add.using(backend="pg_own", queue_name="..")  # QUEUES = []: any name duetime takes
    with pytest.raises(InvalidTask, match="priority must be a whole number between -100 and 100"):
        add.using(priority=101)


def test_rollback_in_djangos_transaction_leaves_no_job() -> None:
    with pytest.raises(Boom), transaction.atomic(using="pg"):
        Order.objects.using("pg").create(customer="rolled back")
        result = add.enqueue(1, 2)
        assert result.enqueued_at is not None  # written, in Django's transaction
        raise Boom
    with pytest.raises(TaskResultDoesNotExist):
        add.get_result(result.id)


def test_an_enqueue_in_djangos_transaction_commits_with_it() -> None:
    with transaction.atomic(using="pg"):
        result = add.enqueue(1, 2)
        with pytest.raises(TaskResultDoesNotExist):  # another connection cannot see it yet
            add.get_result(result.id)
    assert add.get_result(result.id).args == [1, 2]  # committed (a worker may have run it)
    assert task_backends["default"].same_database is True
    assert task_backends["pg_own"].same_database is False


@pytest.mark.parametrize(("alias", "database"), [("sqlite_own", "default"), ("pg_own", "pg")])
def test_another_database_enqueues_on_commit(alias: str, database: str) -> None:
    task = add.using(backend=alias)
    with transaction.atomic(using=database):
        committed = task.enqueue(3, 4)
        assert committed.enqueued_at is None  # not sent before Django commits
    assert committed.enqueued_at is not None
    assert task.get_result(committed.id).status == TaskResultStatus.READY
    with pytest.raises(Boom), transaction.atomic(using=database):
        rolled_back = task.enqueue(5, 6)
        raise Boom
    assert rolled_back.enqueued_at is None
    with pytest.raises(TaskResultDoesNotExist):
        task.get_result(rolled_back.id)


def test_a_task_on_its_own_sqlite_database_runs_in_its_worker(
    start_worker: Any, finished: Any
) -> None:
    start_worker("sqlite_own")
    result = double.using(backend="sqlite_own").enqueue(4)
    assert finished(result).return_value == 8
    assert finished(triple.enqueue(5)).return_value == 15  # a task of OPTIONS MODULES

    # MAX_ATTEMPTS 2: after the first failure the task is READY again, with its error
    failing = fail.using(backend="sqlite_own").enqueue("once")
    deadline = time.monotonic() + 30
    while not failing.errors:
        assert time.monotonic() < deadline
        time.sleep(0.05)
        failing.refresh()
    if len(failing.errors) == 1:  # not failed for good: READY (RUNNING once retried)
        assert failing.status != TaskResultStatus.FAILED
    finished(failing)  # the retry comes within 10 s (duetime's default backoff)
    assert failing.status == TaskResultStatus.FAILED
    assert [e.exception_class_path for e in failing.errors] == ["builtins.ValueError"] * 2
    assert failing.attempts == 2
    # task_finished once, when it failed for good; task_started at each attempt
    assert [signal for signal, _ in seen(failing)] == ["enqueued", "started", "started", "finished"]

    # duetime's PermanentError fails it for good at once, whatever MAX_ATTEMPTS says
    refused = finished(refuse.using(backend="sqlite_own").enqueue("no"))
    assert (refused.status, refused.attempts) == (TaskResultStatus.FAILED, 1)
    assert refused.errors[0].exception_class is duetime.PermanentError
    assert seen(refused)[-1] == ("finished", "FAILED")


def test_an_exception_reaches_errors_with_its_class_and_traceback(
    worker: Any, finished: Any
) -> None:
    result = finished(fail.enqueue("boom"))
    assert result.status == TaskResultStatus.FAILED
    (error,) = result.errors
    assert error.exception_class_path == "builtins.ValueError"
    assert error.exception_class is ValueError
    assert error.traceback.startswith("Traceback (most recent call last):")
    assert error.traceback.rstrip().endswith("ValueError: boom")
    assert "in fail" in error.traceback
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018 - Django's way to say it failed

    own = finished(fail_report.enqueue("line one\nline two"))
    (error,) = own.errors
    assert error.exception_class_path == "taskapp.tasks.ReportError"
    assert error.exception_class is ReportError
    assert "KeyError" in error.traceback and "line two" in error.traceback
    assert "exception_class_path" not in error.traceback


def test_async_enqueue_async_tasks_and_the_context(worker: Any, finished: Any) -> None:
    async def enqueue() -> Any:
        result = await double.aenqueue(21)
        again = await double.aget_result(result.id)
        assert again.id == result.id
        return result

    result = asyncio.run(enqueue())
    assert finished(result).return_value == 42
    asyncio.run(result.arefresh())
    assert result.status == TaskResultStatus.SUCCESSFUL

    context = finished(attempt_of.enqueue(label="first"))
    assert context.return_value == {"label": "first", "attempt": 1, "id": context.id}


def test_djangos_task_signals_are_sent(worker: Any, finished: Any) -> None:
    ok = finished(add.enqueue(20, 22))
    assert seen(ok) == [("enqueued", "READY"), ("started", "RUNNING"), ("finished", "SUCCESSFUL")]
    bad = finished(fail.enqueue("signal"))  # MAX_ATTEMPTS 1: its failure is for good
    assert seen(bad) == [("enqueued", "READY"), ("started", "RUNNING"), ("finished", "FAILED")]


def test_a_traceback_without_the_workers_note_gives_the_class_python_printed() -> None:
    def attempt(text: str) -> Any:
        return SimpleNamespace(error_traceback=text)

    head = 'Traceback (most recent call last):\n  File "x.py", line 1, in f\n'
    errors = task_errors(
        (
            attempt(f"{head}TimeoutError\n"),
            attempt(f"{head}taskapp.tasks.ReportError: two\nlines\n"),
            attempt(None),  # an attempt lost with its worker: no error to report
        )
    )
    assert [e.exception_class_path for e in errors] == [
        "builtins.TimeoutError",
        "taskapp.tasks.ReportError",
    ]
    assert errors[0].traceback == f"{head}TimeoutError\n"


def test_an_unknown_result_id_does_not_exist() -> None:
    with pytest.raises(TaskResultDoesNotExist):
        add.get_result("0" * 32)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("scheduled", "READY"),
        ("waiting", "READY"),
        ("blocked", "READY"),
        ("running", "RUNNING"),
        ("cancel_requested", "RUNNING"),
        ("parked", "RUNNING"),
        ("succeeded", "SUCCESSFUL"),
        ("dead", "FAILED"),
        ("cancelled", "FAILED"),
        ("expired", "FAILED"),
    ],
)
def test_the_status_mapping(status: str, expected: str) -> None:
    assert task_status(SimpleNamespace(status=status)) == TaskResultStatus[expected]


def test_the_same_database_is_djangos_own() -> None:
    from django.db import connections

    s = connections["pg"].settings_dict
    url = task_backends["default"].app.database_url
    assert url == f"postgresql://{s['USER']}@{s['HOST']}:{s['PORT']}/{s['NAME']}"


def test_django_database_url_carries_the_socket_and_the_libpq_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from django.db import connections

    conn = connections["pg"]
    settings = {
        **conn.settings_dict,
        "USER": "app user",
        "PASSWORD": "p@ss:word",
        "HOST": "/run/postgresql",
        "PORT": "5433",
        "OPTIONS": {"sslmode": "require", "server_side_binding": True, "pool": {"min_size": 2}},
    }
    monkeypatch.setattr(conn, "settings_dict", settings)
    assert django_database_url("default", "pg") == (
        f"postgresql://app%20user:p%40ss%3Aword@/{settings['NAME']}"
        "?sslmode=require&host=%2Frun%2Fpostgresql&port=5433"
    )


def test_sharing_a_database_needs_postgresql() -> None:
    with pytest.raises(ImproperlyConfigured, match="only on PostgreSQL"):
        DuetimeBackend("other", {"OPTIONS": {"DATABASE": "default"}})  # Django's SQLite
    with pytest.raises(ImproperlyConfigured, match="MODULES must be a list"):
        DuetimeBackend("other", {"OPTIONS": {"DATABASE": "pg", "MODULES": "taskapp.jobs"}})
    with pytest.raises(ImproperlyConfigured, match="unknown keys"):
        DuetimeBackend("other", {"OPTIONS": {"DATABSE_URL": "sqlite:///x.db"}})


def test_the_worker_command_needs_a_duetime_backend() -> None:
    with pytest.raises(CommandError, match="no TASKS backend 'nope'"):
        call_command("duetime_worker", backend="nope")


def test_the_worker_command_takes_the_event_loop_and_says_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--loop as `duetime worker` takes it; uvloop asked for where it is not installed is a
    CommandError of one line, before the worker starts."""
    import sys

    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop fails
    with pytest.raises(CommandError, match=r"^the uvloop event loop is not installed here"):
        call_command("duetime_worker", loop="uvloop")


def test_every_job_status_has_its_django_status() -> None:
    """A status added to duetime must be mapped on purpose (blocked came with dependencies)."""
    from duetime.core.states import JobStatus
    from duetime.django.results import STATUS_MAP

    assert set(STATUS_MAP) == {str(s) for s in JobStatus}
