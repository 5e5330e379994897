"""Ambiguous outcomes: a task's reconcile hook decides what a lost attempt did."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

import duetime
from duetime.core.clock import SystemClock
from duetime.core.retry import ErrorCategory
from duetime.core.states import AttemptStatus, JobStatus
from duetime.runtime.worker import Worker
from duetime.store.base import Store
from jobhelpers import run_until

FAST = duetime.RetryPolicy(base=0.05, cap=0.1)


@pytest.fixture
def app(store_url: str, make_store: Callable[[], Store]) -> Iterator[duetime.App]:
    application = duetime.App(database_url=store_url)
    yield application
    application.close()


def with_lost_attempt(app: duetime.App, task: str) -> int:
    """A job whose first attempt started 5 minutes ago on a worker that then vanished."""
    past = SystemClock().now() - timedelta(minutes=5)
    job = app.enqueue(task, {"order": 42}, at=past)
    [claim] = app.store.claim(worker_id="crashed", queues=None, limit=1, now=past)
    assert claim.job.id == job.id
    return job.id


def run(app: duetime.App, job_id: int, until: Callable[[duetime.Job], bool]) -> Worker:
    worker = Worker(app, poll_interval=0.02, reap_interval=0.05)
    asyncio.run(run_until(worker, lambda: until(app.get_job(job_id))))
    return worker


def register(app: duetime.App, answer: Any, calls: list[str]) -> None:
    def reconcile(job: duetime.Job, lost: duetime.Attempt) -> Any:
        calls.append(f"reconcile job {job.id} lost {lost.generation} {lost.status}")
        if isinstance(answer, Exception):
            raise answer
        return answer

    @app.task(name="charge", retry=FAST, lease=1, reconcile=reconcile)
    def charge(order: int) -> None:
        calls.append(f"charge {order} attempt {duetime.current().attempt}")


def test_done_records_success_without_running_again(app: duetime.App) -> None:
    calls: list[str] = []
    register(app, duetime.Reconcile.DONE, calls)
    job_id = with_lost_attempt(app, "charge")
    run(app, job_id, lambda j: j.terminal)
    job = app.get_job(job_id)
    assert job.status is JobStatus.SUCCEEDED
    assert calls == [f"reconcile job {job_id} lost 1 lost"]  # the handler never ran again
    lost, settled = job.attempt_history
    assert lost.status is AttemptStatus.LOST and lost.error_category is ErrorCategory.LEASE_EXPIRED
    assert settled.status is AttemptStatus.SUCCEEDED
    assert settled.error_category is ErrorCategory.RECONCILED


def test_not_done_runs_the_handler(app: duetime.App) -> None:
    calls: list[str] = []
    register(app, "not_done", calls)
    job_id = with_lost_attempt(app, "charge")
    run(app, job_id, lambda j: j.terminal)
    assert app.get_job(job_id).status is JobStatus.SUCCEEDED
    assert calls == [f"reconcile job {job_id} lost 1 lost", "charge 42 attempt 2"]


@pytest.mark.parametrize("done", [True, False])
def test_unknown_parks_the_job_until_an_operator_resolves_it(app: duetime.App, done: bool) -> None:
    calls: list[str] = []
    register(app, duetime.Reconcile.UNKNOWN, calls)
    job_id = with_lost_attempt(app, "charge")
    run(app, job_id, lambda j: j.status is JobStatus.PARKED)
    parked = app.get_job(job_id)
    assert parked.attempt_history[-1].status is AttemptStatus.PARKED
    assert parked.attempt_history[-1].error_category is ErrorCategory.UNKNOWN_OUTCOME
    assert parked in app.list_jobs(status="parked")
    resolved = app.resolve(job_id, done=done)
    if done:
        assert resolved.status is JobStatus.SUCCEEDED
        assert not any(c.startswith("charge") for c in calls)
    else:
        assert resolved.status is JobStatus.SCHEDULED
        calls.clear()
        # the next attempt follows the parked one, not a lost one: no reconcile, it runs
        run(app, job_id, lambda j: j.terminal)
        assert calls == ["charge 42 attempt 1"]  # run again is a replay: a new attempt budget
    with pytest.raises(duetime.IllegalTransition, match="resolve"):
        app.resolve(job_id, done=True)


def test_a_failing_hook_is_asked_again_next_attempt(app: duetime.App) -> None:
    calls: list[str] = []
    register(app, RuntimeError("provider lookup timed out"), calls)
    job_id = with_lost_attempt(app, "charge")
    run(app, job_id, lambda j: len(j.attempt_history) >= 3)
    job = app.get_job(job_id)
    failed = [a for a in job.attempt_history if a.error_category is ErrorCategory.RECONCILE_FAILED]
    assert len(failed) >= 2
    assert "provider lookup timed out" in (failed[0].error_message or "")
    assert all(c.startswith("reconcile job") for c in calls)  # never ran blindly


def test_without_a_hook_the_handler_simply_runs_again(app: duetime.App) -> None:
    calls: list[str] = []

    @app.task(name="plain", retry=FAST, lease=1)
    def plain(order: int) -> None:
        calls.append(f"plain {order}")

    job_id = with_lost_attempt(app, "plain")
    run(app, job_id, lambda j: j.terminal)
    assert calls == ["plain 42"]
    assert app.get_job(job_id).status is JobStatus.SUCCEEDED


def test_a_job_settled_by_its_hook_gives_its_slot_back(app: duetime.App) -> None:
    calls: list[str] = []
    register(app, duetime.Reconcile.DONE, calls)

    @app.task(name="after")
    def after() -> None:
        calls.append("after")

    job_id = with_lost_attempt(app, "charge")
    worker = Worker(app, concurrency=1, poll_interval=0.02, reap_interval=0.05)
    follow: list[int] = []

    def done() -> bool:
        if not follow and app.get_job(job_id).terminal:
            follow.append(after.enqueue().id)
        return bool(follow) and app.get_job(follow[0]).terminal

    # the sync handler never ran, so no thread of it can be left holding the only slot
    asyncio.run(run_until(worker, done))
    assert app.get_job(follow[0]).status is JobStatus.SUCCEEDED
    assert calls[-1] == "after"
