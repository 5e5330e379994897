"""An async handler without a timeout is awaited in its attempt's own task
(runtime/attempt.py AttemptRunner._inline): a stop cancels that task while it is in the
handler, never after, and the cancellation is taken back once the handler is over, so the
record that follows runs in a task that is not being cancelled."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import duetime
from duetime.runtime.attempt import AttemptRunner, RunningAttempt
from duetime.runtime.context import AttemptContext
from duetime.tasks import Task, TaskDefaults
from jobhelpers import running_claim

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _running() -> RunningAttempt:
    claim = running_claim(NOW, NOW)
    return RunningAttempt(claim, AttemptContext(claim), last_beat=0.0)


def _task(fn: Any) -> Any:
    return Task(None, "t", fn, TaskDefaults())  # type: ignore[arg-type]


def test_a_stop_reaches_the_handler_and_is_taken_back_once_it_is_over() -> None:
    running = _running()
    caught: list[bool] = []

    async def handler() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:  # asked to stop: it finishes anyway
            caught.append(duetime.current() is running.ctx)
            await asyncio.sleep(0)
        return "finished anyway"

    async def attempt() -> tuple[Any, int, bool]:
        value = await AttemptRunner._inline(running, _task(handler))
        current = asyncio.current_task()
        assert current is not None
        return value, current.cancelling(), running.inline

    async def scenario() -> None:
        running.execution = asyncio.create_task(attempt())  # type: ignore[arg-type]
        await asyncio.sleep(0.01)
        assert running.inline
        running.ask_to_stop()
        assert running.cancels == 1 and running.ctx.cancel_requested
        value, cancelling, inline = await running.execution  # type: ignore[misc]
        assert value == "finished anyway" and caught == [True]
        assert cancelling == 0 and not inline and running.cancels == 0

    asyncio.run(scenario())


def test_a_stop_once_the_handler_is_over_cancels_nothing() -> None:
    """The outcome is being recorded: a stop then (a lost lease, a cancel) sets the flag and
    leaves the attempt's task alone."""
    running = _running()
    recorded = asyncio.Event()

    async def handler() -> None:
        return None

    async def attempt() -> str:
        await AttemptRunner._inline(running, _task(handler))
        await recorded.wait()  # as the completer's answer is awaited
        return "recorded"

    async def scenario() -> None:
        running.execution = asyncio.create_task(attempt())  # type: ignore[arg-type]
        await asyncio.sleep(0.01)
        assert not running.inline
        running.ask_to_stop()
        running.interrupt()
        recorded.set()
        assert await running.execution == "recorded"  # type: ignore[comparison-overlap]
        assert running.cancels == 0 and running.ctx.cancel_requested

    asyncio.run(scenario())


def test_an_interrupt_reaches_a_handler_that_runs_in_its_attempts_task() -> None:
    running = _running()

    async def handler() -> None:
        await asyncio.sleep(10)

    async def attempt() -> str:
        try:
            await AttemptRunner._inline(running, _task(handler))
        except asyncio.CancelledError:
            current = asyncio.current_task()
            assert current is not None
            return f"interrupted={running.interrupted} cancelling={current.cancelling()}"
        return "ran to its end"

    async def scenario() -> None:
        running.execution = asyncio.create_task(attempt())  # type: ignore[arg-type]
        await asyncio.sleep(0.01)
        running.interrupt()
        assert await running.execution == "interrupted=True cancelling=0"  # type: ignore[comparison-overlap]

    asyncio.run(scenario())
