"""The Django project the backend's tests run in (project/): fresh databases for this run, Django
set up in this process, and worker processes started with `manage.py duetime_worker`."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg.conninfo import conninfo_to_dict

import pgserver

PROJECT = Path(__file__).parent / "project"
_made: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    folder = Path(tempfile.mkdtemp(prefix="duetime-django-"))
    django_pg = pgserver.create_database("duetime_django")
    duetime_pg = pgserver.create_database("duetime_django_own")
    _made.extend([django_pg, duetime_pg])
    info = conninfo_to_dict(django_pg)
    os.environ.update(
        DJANGO_SETTINGS_MODULE="testsite.settings",
        DJANGO_TEST_SQLITE=str(folder / "django.sqlite3"),
        DJANGO_TEST_PG_NAME=str(info["dbname"]),
        DJANGO_TEST_PG_USER=str(info.get("user") or "postgres"),
        DJANGO_TEST_PG_PASSWORD=str(info.get("password") or ""),
        DJANGO_TEST_PG_HOST=str(info.get("host") or "127.0.0.1"),
        DJANGO_TEST_PG_PORT=str(info.get("port") or "5432"),
        DJANGO_TEST_DUETIME_SQLITE_URL=f"sqlite:///{folder / 'duetime.db'}",
        DJANGO_TEST_DUETIME_PG_URL=duetime_pg,
    )
    sys.path.insert(0, str(PROJECT))
    import django
    from django.core.management import call_command

    django.setup()
    for database in ("default", "pg"):  # the Order table (taskapp has no migrations)
        call_command("migrate", run_syncdb=True, database=database, verbosity=0)
    for backend in ("default", "pg_own"):  # duetime's tables; SQLite makes its own
        call_command("duetime_migrate", backend=backend, verbosity=0)


def pytest_unconfigure(config: pytest.Config) -> None:
    if not _made:
        return
    from django.db import connections

    from duetime.django.compat import task_backends

    connections.close_all()
    for backend in task_backends.all():
        backend.app.close()
    for url in _made:
        pgserver.drop_database(url)


class WorkerProcess:
    """`python manage.py duetime_worker --backend ALIAS`, in the test project."""

    def __init__(self, alias: str, *flags: str) -> None:
        # its log in a file: a pipe nobody reads until the end could fill and block it
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "duetime_worker",
                "--backend",
                alias,
                "--poll-interval",
                "0.1s",
                "--grace",
                "5s",
                *flags,
            ],
            cwd=PROJECT,
            env=os.environ.copy(),
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> str:
        """SIGTERM, and what the worker logged; it must have exited cleanly."""
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.seek(0)
        output = self.log.read()
        self.log.close()
        assert self.proc.returncode == 0, output
        return output


@pytest.fixture(scope="session")
def worker() -> Iterator[WorkerProcess]:
    """A worker process of the "default" backend (Django's PostgreSQL database)."""
    process = WorkerProcess("default", "--concurrency", "4")
    yield process
    process.stop()


@pytest.fixture
def finished() -> Any:
    """finished(result): the TaskResult refreshed until it has finished."""
    return _finished


@pytest.fixture
def start_worker() -> Iterator[Any]:
    """start_worker(alias, *flags): a worker process, stopped when the test ends."""
    started: list[WorkerProcess] = []

    def start(alias: str, *flags: str) -> WorkerProcess:
        started.append(WorkerProcess(alias, *flags))
        return started[-1]

    yield start
    for process in started:
        if process.proc.returncode is None:
            process.stop()


def _finished(result: Any, timeout: float = 30.0) -> Any:
    """Refresh the TaskResult until it has finished (or fail after `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while not result.is_finished:
        assert time.monotonic() < deadline, f"task {result.id} is still {result.status}"
        time.sleep(0.05)
        result.refresh()
    return result
