"""The slots' wait for the next due instant (runtime/slots.py _pause_for_work): they look
again at that instant, not before it, even where the event loop's timer fires a little early
(uvloop's count whole milliseconds), and at once when woken. Real time, a few tens of ms."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from types import SimpleNamespace
from typing import Any, cast

from duetime.core.clock import SystemClock
from duetime.runtime.slots import Slots
from duetime.runtime.timer import DueTimes

AHEAD = 0.03  # seconds from now to the due instant


def slots_due_soon() -> tuple[Slots, Any]:
    clock = SystemClock()
    runner = cast(Any, SimpleNamespace(clock=clock))  # all the wait reads
    due = DueTimes()
    s = Slots(
        runner,
        registry={},
        worker_id="w",
        queues=None,
        concurrency=1,
        poll_interval=5.0,
        grace=1.0,
        due=due,
    )
    at = clock.now() + timedelta(seconds=AHEAD)
    due.add(at)
    return s, at


def early_timers(s: Slots, early: float) -> list[float]:
    """Make the slots' pauses end `early` seconds before their time, as a timer that fires
    early does (never cut short); the pauses asked, in seconds."""
    asked: list[float] = []
    real = s.pause

    async def pause(seconds: float) -> bool:
        asked.append(seconds)
        return await real(max(0.0, seconds - early))

    s.pause = pause  # type: ignore[method-assign]
    return asked


def test_a_timer_that_fires_early_does_not_make_the_slots_look_before_the_instant() -> None:
    s, at = slots_due_soon()
    asked = early_timers(s, early=0.0015)  # what uvloop's timers do at worst

    async def wait() -> None:
        await s._pause_for_work()

    asyncio.run(wait())
    assert SystemClock().now() >= at, "the slots looked again before the due instant"
    assert len(asked) == 1, asked  # the rest after the early timer was watched, not paused
    assert s.due is not None and s.due.next() is None  # the instant was reached: popped


def test_a_wake_still_ends_the_wait_at_once() -> None:
    s, at = slots_due_soon()

    async def wait() -> None:
        asyncio.get_running_loop().call_later(0.005, s.wake)
        await s._pause_for_work()

    asyncio.run(wait())
    assert SystemClock().now() < at - timedelta(seconds=AHEAD / 2), "the wake was not heard"
    assert s.due is not None and s.due.next() == at  # not reached: still known
