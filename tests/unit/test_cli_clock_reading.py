"""When the CLI reads the database's clock: only when a command asks the time (one-shot
commands read it on demand), never for a plain read like `jobs list` or `jobs show`; a
long-running command reads it when it opens the database. On a fake store (no I/O) whose
database clock is an hour ahead of this machine's, so an instant computed on this machine's
clock would show."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from duetime.cli import main
from duetime.cli.support import make_app
from duetime.core.clock import CorrectedClock
from duetime.core.models import Job, NewJob
from duetime.core.states import JobStatus

URL = "postgresql://nobody@127.0.0.1:1/never_opened"
AHEAD = timedelta(hours=1)  # the database's clock, ahead of this machine's


class FakeStore:
    """What the commands below use of a store; counts the readings of its clock."""

    dialect = "postgres"
    clock_is_local = False

    def __init__(self, jobs: list[Job]) -> None:
        self.jobs = jobs
        self.clock_reads = 0
        self.enqueued: list[NewJob] = []

    def check_schema(self) -> None:
        pass

    def database_now(self) -> datetime:
        self.clock_reads += 1
        return datetime.now(UTC) + AHEAD

    def list_jobs(self, _filter: Any) -> list[Job]:
        return self.jobs

    def get_job(self, job_id: int, tenant: str | None = None) -> Job | None:
        return next((j for j in self.jobs if j.id == job_id), None)

    def enqueue(self, new: list[NewJob], now: datetime, connection: Any = None) -> list[Any]:
        self.enqueued.extend(new)
        return [
            SimpleNamespace(job=SimpleNamespace(id=7, due_at=n.due_at), created=True) for n in new
        ]

    def close(self) -> None:
        pass


def a_job(**fields: Any) -> Job:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    job = Job(
        id=1, tenant="default", queue="default", task="send", args={}, priority=0, due_at=now,
        deadline_at=None, status=JobStatus.SUCCEEDED, version=1, attempts=1, max_attempts=3,
        generation=1, retry_base=1, retry_cap=60, lease_seconds=30, timeout_seconds=None,
        idempotency_key=None, business_key="k", created_at=now, updated_at=now,
    )  # fmt: skip
    return replace(job, **fields)


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeStore]:
    fake = FakeStore([a_job()])
    monkeypatch.setattr("duetime.client.app.open_store", lambda *_a, **_k: fake)
    monkeypatch.delenv("DUETIME_DATABASE_URL", raising=False)
    yield fake


@pytest.mark.parametrize(
    "argv",
    [
        ["jobs", "list"],
        ["jobs", "list", "--json"],
        ["jobs", "show", "1"],
        ["jobs", "show", "1", "--json"],
    ],
)
def test_a_read_only_command_does_not_read_the_databases_clock(
    store: FakeStore, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--database-url", URL]) == 0, capsys.readouterr().err
    assert store.clock_reads == 0


def test_a_dispatched_jobs_age_is_on_the_databases_clock(
    store: FakeStore, capsys: pytest.CaptureFixture[str]
) -> None:
    sent = datetime.now(UTC) + AHEAD - timedelta(seconds=90)  # by the database's clock
    store.jobs = [a_job(status=JobStatus.SCHEDULED, dispatched_at=sent)]
    assert main(["jobs", "list", "--database-url", URL]) == 0
    assert store.clock_reads == 1
    assert "(dispatched 1m3" in capsys.readouterr().out  # 90 s; by this machine's: never


def test_enqueue_with_a_delay_reads_the_databases_clock_once(
    store: FakeStore, capsys: pytest.CaptureFixture[str]
) -> None:
    before = datetime.now(UTC)
    assert main(["enqueue", "send", "--in", "10m", "--database-url", URL]) == 0
    assert capsys.readouterr().out == "7\n"
    assert store.clock_reads == 1
    [new] = store.enqueued
    due = new.due_at - before
    assert AHEAD + timedelta(minutes=10) <= due < AHEAD + timedelta(minutes=10, seconds=5), due


def test_a_long_running_command_reads_the_clock_when_it_opens_the_database(
    store: FakeStore,
) -> None:
    args = argparse.Namespace(database_url=URL, tenant="default", app=None)
    app = make_app(args, create=True, long_running=True)
    app.store  # noqa: B018 - opens it
    assert store.clock_reads == 1
    assert isinstance(app.clock, CorrectedClock) and not app.clock.deferred
    assert app.clock.offset is not None and app.clock.offset < -3590
