"""Results and progress (docs/workflows.md), on every dialect: a handler's return value is
kept with its fenced success (never a stale attempt's), a value that cannot be stored fails
the attempt for good, App.result() waits and says how a job ended, and progress is written
fenced and coalesced."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

import duetime
from duetime.core.clock import ManualClock, SystemClock
from duetime.core.errors import JobFailed, ResultTimeout
from duetime.core.models import Outcome
from duetime.core.retry import ErrorCategory
from duetime.core.states import AttemptStatus, Event, JobStatus
from duetime.runtime.reaper import Reaper
from duetime.runtime.worker import Worker
from duetime.store.base import Store
from jobhelpers import claim_one, enqueue, run_until


@pytest.fixture
def app(store_url: str, make_store: Callable[[], Store]) -> Iterator[duetime.App]:
    application = duetime.App(database_url=store_url)
    yield application
    application.close()


def reload(store: Store, job_id: int) -> Any:
    job = store.get_job(job_id)
    assert job is not None
    return job


# -- the store: kept with the fenced finish


def test_a_success_keeps_its_result_and_a_plain_one_keeps_none(
    store: Store, clock: ManualClock
) -> None:
    enqueue(store, clock)
    enqueue(store, clock)
    (job, lease), (plain, plain_lease) = claim_one(store, clock), claim_one(store, clock)
    text = '{"total":12.5,"ids":[1,2],"name":"é"}'
    applied = store.finish_many(
        [(lease, Outcome(Event.SUCCEED, result=text)), (plain_lease, Outcome(Event.SUCCEED))],
        clock.now(),
    )
    assert applied == [True, True]
    assert reload(store, job.id).result == {"total": 12.5, "ids": [1, 2], "name": "é"}
    assert reload(store, job.id).to_json()["result"] == {"total": 12.5, "ids": [1, 2], "name": "é"}
    assert reload(store, plain.id).result is None


def test_a_stale_attempts_result_is_never_stored(store: Store, clock: ManualClock) -> None:
    enqueue(store, clock, defaults=duetime.core.requests.TaskDefaults(lease_seconds=1))
    _, stale = claim_one(store, clock, "w1")
    clock.advance(5)
    assert Reaper(store, clock).run_once().reaped == 1  # retried after its backoff
    clock.advance(3600)
    job, fresh = claim_one(store, clock, "w2")
    # the stale attempt reports a success with a result: refused, nothing kept
    assert store.finish(stale, Outcome(Event.SUCCEED, result='"stale"'), clock.now()) is False
    assert reload(store, job.id).result is None
    assert store.finish(fresh, Outcome(Event.SUCCEED, result='"fresh"'), clock.now())
    assert reload(store, job.id).result == "fresh"
    # and a late report of the stale one after that changes nothing
    assert store.finish(stale, Outcome(Event.SUCCEED, result='"stale"'), clock.now()) is False
    assert reload(store, job.id).result == "fresh"


def test_a_stale_attempts_completion_transaction_keeps_no_result(
    store: Store, clock: ManualClock
) -> None:
    enqueue(store, clock, defaults=duetime.core.requests.TaskDefaults(lease_seconds=1))
    _, stale = claim_one(store, clock, "w1")
    clock.advance(5)
    assert Reaper(store, clock).run_once().reaped == 1
    with (
        pytest.raises(duetime.StaleAttempt),
        store.completion(stale, Outcome(Event.SUCCEED, result="[1]"), clock.now),
    ):
        pass
    job = reload(store, stale.job_id)
    assert job.result is None and job.status is JobStatus.SCHEDULED


def test_a_retry_keeps_no_result_but_its_last_progress(store: Store, clock: ManualClock) -> None:
    enqueue(store, clock)
    job, lease = claim_one(store, clock)
    outcome = Outcome(
        Event.RETRY,
        due_at=clock.now(),
        error_category=ErrorCategory.RETRYABLE,
        result="1",  # not a success: never kept
        progress=0.25,
        progress_message="a quarter",
    )
    assert store.finish(lease, outcome, clock.now())
    again = reload(store, job.id)
    assert again.result is None
    assert (again.progress, again.progress_message) == (0.25, "a quarter")


def test_progress_is_written_fenced_by_the_attempt(store: Store, clock: ManualClock) -> None:
    enqueue(store, clock, defaults=duetime.core.requests.TaskDefaults(lease_seconds=1))
    job, stale = claim_one(store, clock, "w1")
    assert store.record_progress([(stale, 0.5, "half")], clock.now()) == [True]
    seen = reload(store, job.id)
    assert (seen.progress, seen.progress_message, seen.progress_at) == (0.5, "half", clock.now())
    clock.advance(5)
    assert Reaper(store, clock).run_once().reaped == 1
    clock.advance(3600)
    _, fresh = claim_one(store, clock, "w2")
    # the stale attempt's report is not written; the current one's is
    assert store.record_progress([(stale, 0.9, "stale"), (fresh, 0.1, None)], clock.now()) == [
        False,
        True,
    ]
    seen = reload(store, job.id)
    assert (seen.progress, seen.progress_message) == (0.1, None)
    # the final value travels with the outcome; a report after the finish is refused
    assert store.finish(
        fresh, Outcome(Event.SUCCEED, progress=1.0, progress_message="done"), clock.now()
    )
    assert store.record_progress([(fresh, 0.2, "late")], clock.now()) == [False]
    seen = reload(store, job.id)
    assert (seen.progress, seen.progress_message, seen.result) == (1.0, "done", None)


def test_pruning_removes_results_with_their_jobs(store: Store, clock: ManualClock) -> None:
    enqueue(store, clock)
    job, lease = claim_one(store, clock)
    assert store.finish(lease, Outcome(Event.SUCCEED, result='{"a":1}'), clock.now())
    clock.advance(60)
    assert store.prune(clock.now(), 100) == 1
    assert store.get_job(job.id) is None


# -- the worker: a handler's return value


def run_jobs(app: duetime.App, *job_ids: int) -> Worker:
    worker = Worker(app, poll_interval=0.02)

    def done() -> bool:
        return all(app.get_job(i).terminal for i in job_ids)

    asyncio.run(run_until(worker, done))
    return worker


def test_a_handlers_return_value_is_its_result(app: duetime.App) -> None:
    @app.task(name="total")
    def total(n: int) -> dict[str, Any]:
        return {"n": n, "squares": [i * i for i in range(n)]}

    @app.task(name="quiet")
    async def quiet() -> None:
        return None

    @app.task(name="text")
    async def text() -> str:
        return "ok"

    jobs = [total.enqueue({"n": 3}), quiet.enqueue(), text.enqueue()]
    run_jobs(app, *(j.id for j in jobs))
    assert app.result(jobs[0].id) == {"n": 3, "squares": [0, 1, 4]}
    assert app.result(jobs[1].id) is None
    assert app.result(jobs[2].id) == "ok"
    assert app.get_job(jobs[1].id).status is JobStatus.SUCCEEDED


def test_a_result_that_cannot_be_stored_fails_the_attempt_for_good(store_url: str) -> None:
    app = duetime.App(database_url=store_url, result_max_bytes=100)

    @app.task(name="big", max_attempts=3)
    def big() -> str:
        return "x" * 200

    @app.task(name="odd", max_attempts=3)
    def odd() -> Any:
        return {"when": object()}

    @app.task(name="roomy", result_max_bytes=1000)
    def roomy() -> str:
        return "y" * 200

    jobs = [big.enqueue(), odd.enqueue(), roomy.enqueue()]
    run_jobs(app, *(j.id for j in jobs))
    too_big, not_json = app.get_job(jobs[0].id), app.get_job(jobs[1].id)
    for job in (too_big, not_json):
        assert job.status is JobStatus.DEAD and len(job.attempt_history) == 1
        assert job.attempt_history[0].error_category is ErrorCategory.PERMANENT
        assert job.result is None
    assert "202 bytes of JSON, over the result limit of 100 bytes" in str(
        too_big.attempt_history[0].error_message
    )
    assert "returned a dict that is not JSON-serialisable" in str(
        not_json.attempt_history[0].error_message
    )
    assert app.result(jobs[2].id) == "y" * 200
    with pytest.raises(JobFailed, match=f"job {jobs[0].id} ended dead") as failed:
        app.result(jobs[0].id)
    assert failed.value.job.id == jobs[0].id and failed.value.status == "dead"
    app.close()


def test_a_result_in_the_handlers_transaction(app: duetime.App) -> None:
    @app.task(name="tx")
    def tx() -> None:
        with duetime.current().transaction(result={"kept": True}):
            pass

    @app.task(name="tx_bad", max_attempts=3)
    def tx_bad() -> None:
        with duetime.current().transaction(result={1, 2}):
            raise AssertionError("not reached: the result is checked before the block")

    @app.task(name="tx_late")
    def tx_late() -> int:
        with duetime.current().transaction():
            pass
        return 7  # after the success was recorded: not stored

    job, bad, late = tx.enqueue(), tx_bad.enqueue(), tx_late.enqueue()
    run_jobs(app, job.id, bad.id, late.id)
    assert app.result(job.id) == {"kept": True}
    refused = app.get_job(bad.id)
    assert refused.status is JobStatus.DEAD and len(refused.attempt_history) == 1
    assert "returned a set that is not JSON-serialisable" in str(
        refused.attempt_history[0].error_message
    )
    assert app.get_job(late.id).status is JobStatus.SUCCEEDED and app.result(late.id) is None


def test_an_async_handlers_progress_goes_with_its_outcome(app: duetime.App) -> None:
    @app.task(name="steps_async", max_attempts=1)
    async def steps_async() -> None:
        duetime.current().progress(0.3, "then it failed")
        raise duetime.PermanentError("stop here")

    job = steps_async.enqueue()
    run_jobs(app, job.id)
    failed = app.get_job(job.id)
    assert failed.status is JobStatus.DEAD and failed.result is None
    assert (failed.progress, failed.progress_message) == (0.3, "then it failed")


def test_a_stale_attempt_of_a_worker_stores_no_result(app: duetime.App, store: Store) -> None:
    started = threading.Event()
    release = threading.Event()
    calls: list[int] = []

    # a lease long enough that the second attempt keeps it on a loaded machine: the first
    # one is taken by a reaper whose clock runs a minute ahead
    @app.task(name="slow", lease=10, max_attempts=3)
    def slow() -> int:
        calls.append(1)
        if len(calls) == 1:
            started.set()
            assert release.wait(20)
            return 1  # the stale attempt's value
        return 2

    job = slow.enqueue()
    ahead = ManualClock(SystemClock().now())
    worker = Worker(app, poll_interval=0.02, reap_interval=3600)

    def done() -> bool:
        if started.is_set() and not release.is_set():
            ahead.set(SystemClock().now() + timedelta(minutes=1))
            if Reaper(store, ahead).run_once().reaped == 1:
                app.reschedule(job.id, SystemClock().now())
                release.set()
        # the stale attempt's outcome is refused at its finish, or, when a heartbeat learns
        # first that its lease is gone (a loaded machine), never reported: both store nothing
        stale = worker.stats.stale_rejected + worker.stats.leases_lost
        return stale >= 1 and len(calls) == 2 and app.get_job(job.id).terminal

    asyncio.run(run_until(worker, done))
    final = app.get_job(job.id)
    assert final.attempt_history[0].status is AttemptStatus.LOST
    assert final.status is JobStatus.SUCCEEDED and final.result == 2


# -- App.result(): waiting, timing out, failed for good


def test_result_waits_for_the_job_to_finish(app: duetime.App) -> None:
    @app.task(name="later")
    def later() -> list[int]:
        return [1, 2, 3]

    job = later.enqueue()
    with pytest.raises(ResultTimeout, match=f"job {job.id} is still scheduled") as waited:
        app.result(job.id, timeout=0.05)
    assert waited.value.status == "scheduled"
    worker = Worker(app, poll_interval=0.02)
    answer: list[Any] = []

    async def wait_and_work() -> None:
        stop = asyncio.Event()
        running = asyncio.create_task(worker.run(stop))
        answer.append(await app.aresult(job.id, timeout=20))
        stop.set()
        await running

    asyncio.run(wait_and_work())
    assert answer == [[1, 2, 3]]
    assert app.result(job.id, timeout=0) == [1, 2, 3]


def test_aresult_does_not_block_the_loop(app: duetime.App) -> None:
    job = app.enqueue("never")
    ticks: list[float] = []

    async def main() -> None:
        async def tick() -> None:
            for _ in range(5):
                ticks.append(time.monotonic())
                await asyncio.sleep(0.02)

        ticking = asyncio.create_task(tick())
        with pytest.raises(ResultTimeout):
            await app.aresult(job.id, timeout=0.3)
        await ticking

    asyncio.run(main())
    assert len(ticks) == 5


@pytest.mark.parametrize("end", ["cancelled", "expired"])
def test_result_names_how_a_job_ended_without_one(
    app: duetime.App, store: Store, clock: ManualClock, end: str
) -> None:
    if end == "cancelled":
        job = app.enqueue("t")
        app.cancel(job.id)
    else:
        job = app.enqueue("t", deadline=app.clock.now() + timedelta(seconds=0.2))
        assert store.expire_overdue(app.clock.now() + timedelta(seconds=1), 10) == 1
    with pytest.raises(JobFailed, match=f"ended {end}") as failed:
        app.result(job.id, timeout=5)
    assert failed.value.status == end
    with pytest.raises(duetime.JobNotFound):
        app.result(10**12)


# -- progress from a handler


def test_progress_is_written_coalesced_and_its_final_value_kept(app: duetime.App) -> None:
    seen: list[tuple[float | None, str | None]] = []
    reported = threading.Event()
    look = threading.Event()

    @app.task(name="steps")
    def steps() -> str:
        ctx = duetime.current()
        for i in range(1, 5001):  # many reports: a few writes
            ctx.progress(i / 10000, f"step {i}")
        reported.set()
        assert look.wait(20)
        ctx.progress(1.0, "done")
        with pytest.raises(duetime.InvalidRequest, match="from 0 to 1"):
            ctx.progress(1.5)
        with pytest.raises(duetime.InvalidRequest, match="at most 200 characters"):
            ctx.progress(0.5, "x" * 201)
        return "fine"

    job = steps.enqueue()
    worker = Worker(app, poll_interval=0.02)

    def done() -> bool:
        if reported.is_set() and not look.is_set():
            current = app.get_job(job.id)
            if current.progress is not None:
                seen.append((current.progress, current.progress_message))
                if current.progress == 0.5:
                    look.set()
        return app.get_job(job.id).terminal

    asyncio.run(run_until(worker, done))
    final = app.get_job(job.id)
    assert (final.progress, final.progress_message, final.result) == (1.0, "done", "fine")
    assert seen[-1] == (0.5, "step 5000")  # the latest report reached the row while running
    assert worker.progress.writes <= 4  # 5,000 reports: a handful of writes
