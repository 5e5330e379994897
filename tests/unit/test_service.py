"""Services, pulses and interval loops, on a bare event loop (no store, no sleeping)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from duetime.runtime.service import IntervalService, Pulse, Service


def test_a_pulse_wakes_its_waiters_at_their_count() -> None:
    async def scenario() -> None:
        pulse = Pulse()
        next_one = asyncio.ensure_future(pulse.wait())
        third = asyncio.ensure_future(pulse.wait(3))
        await asyncio.sleep(0)  # let both start waiting
        pulse.fire()
        assert await next_one == 1
        assert not third.done()
        pulse.fire()
        pulse.fire()
        assert await third == 3
        assert await pulse.wait(2) == 3  # already reached: returns at once

    asyncio.run(scenario())


class Flaky(IntervalService):
    """Fails its first pass, then succeeds."""

    name = "flaky"

    def __init__(self) -> None:
        super().__init__(interval=0)
        self.calls = 0

    async def run_once(self) -> None:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("database unreachable")


def test_a_failed_pass_is_logged_and_the_loop_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> Flaky:
        service = Flaky()
        running = asyncio.create_task(service.run())
        await service.passes.wait(2)
        service.stop()
        await asyncio.wait_for(running, 5)
        return service

    with caplog.at_level(logging.ERROR, logger="duetime.worker"):
        service = asyncio.run(scenario())
    assert service.failures.count == 1 and service.passes.count >= 2
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.getMessage() == "flaky run failed; trying again next interval"
    assert record.exc_info is not None and "database unreachable" in str(record.exc_info[1])


def test_failures_back_off_up_to_the_cap() -> None:
    service = Flaky()
    service.interval = 1.0
    assert [service.delay_after(n) for n in range(5)] == [1.0] * 5  # no cap: the interval
    service.backoff_cap = 5.0
    assert [service.delay_after(n) for n in range(6)] == [1.0, 1.0, 2.0, 4.0, 5.0, 5.0]


class Sleeper(IntervalService):
    name = "sleeper"
    wait_first = True

    async def run_once(self) -> None:
        raise AssertionError("never reached: stopped during the first wait")


def test_stop_cuts_a_long_pause_short() -> None:
    async def scenario() -> None:
        service = Sleeper(interval=3600)
        running = asyncio.create_task(service.run())
        await asyncio.sleep(0)  # it is now in its first hour-long pause
        service.stop()
        await asyncio.wait_for(running, 5)
        assert service.passes.count == service.failures.count == 0

    asyncio.run(scenario())


def test_a_wake_before_the_pause_is_kept() -> None:
    async def scenario() -> None:
        service = Service()
        service.wake()  # e.g. an attempt ended while the claim loop was claiming
        await asyncio.wait_for(service.pause(3600), 5)  # returns at once
        paused = asyncio.ensure_future(service.pause(3600))
        await asyncio.sleep(0)
        assert not paused.done()  # the wake was used up
        service.wake()
        await asyncio.wait_for(paused, 5)

    asyncio.run(scenario())
