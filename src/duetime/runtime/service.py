"""The shape of a node's services, and the pulses tests await instead of sleeping.

A Service is one duty of a node (runtime/node.py): `start()` does what must succeed before
the node runs, `run()` is the duty until `stop()` is called, then it finishes up and returns.
An IntervalService calls `run_once()` every `interval` seconds, logging a failed pass and
trying again. A Pulse counts what a service did (a pass, a claim loop gone idle, an attempt
finished); `await pulse.wait()` returns when it next happens. BlockingCalls runs the store's
blocking calls in a small thread pool, so a slow database never blocks the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

log = logging.getLogger("duetime.worker")  # a service's failures are the worker process's
T = TypeVar("T")


class Pulse:
    """A counter a service bumps each time something happens; await it to learn when it did.

    fire() and wait() belong to the event loop's thread.
    """

    def __init__(self) -> None:
        self.count = 0
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    def fire(self) -> None:
        self.count += 1
        if not self._waiters:  # the usual case: fired for every job, awaited by few
            return
        waiting = []
        for target, waiter in self._waiters:
            if waiter.done():
                continue
            if self.count >= target:
                waiter.set_result(None)
            else:
                waiting.append((target, waiter))
        self._waiters = waiting

    async def wait(self, count: int | None = None) -> int:
        """Wait until the pulse has fired `count` times in all (default: once more from now);
        return the count then."""
        target = self.count + 1 if count is None else count
        if self.count < target:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append((target, waiter))
            await waiter
        return self.count


class Service:
    """One duty of a node. Set `name`, write `run()` (or subclass IntervalService).

    run() loops until `self.stopping`, pausing with `await self.pause(seconds)`, which stop()
    and wake() cut short; then it finishes its work (drains, deregisters) and returns. A run()
    that returns or raises before stop() was called stops the whole node.
    """

    name: str = "service"

    def __init__(self) -> None:
        self.stopping = False
        self._woken = False
        self._waiter: asyncio.Future[None] | None = None

    async def start(self) -> None:
        """What must succeed before the node runs (services start in order); a failure here
        stops the start. Default: nothing."""

    async def run(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        """Ask run() to finish; the node then awaits it."""
        self.stopping = True
        self.wake()

    def wake(self) -> None:
        """End the current pause() now, or the next one at once if none is under way."""
        self._woken = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def pause(self, seconds: float) -> bool:
        """Wait up to `seconds`; less once stop() or wake() is called. For run()'s own loop.
        True when cut short by either (or called after them), False when the time ran out."""
        if not self._woken and not self.stopping:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await asyncio.wait([self._waiter], timeout=seconds)
            finally:
                self._waiter = None
        cut_short = self._woken or self.stopping
        self._woken = False
        return cut_short


class IntervalService(Service):
    """A service that calls `run_once()` every `interval` seconds until stopped.

    A pass that raises is logged (see failed()) and the loop goes on: the next pass comes after
    the interval, or after a backoff doubling up to `backoff_cap` when one is set. `passes`
    fires after each pass that succeeded, `failures` after each that raised.
    """

    wait_first: bool = False  # wait one interval before the first pass
    backoff_cap: float | None = None  # after failures, wait up to this long instead

    def __init__(self, interval: float) -> None:
        super().__init__()
        self.interval = interval
        self.passes = Pulse()
        self.failures = Pulse()

    async def run_once(self) -> None:
        raise NotImplementedError

    def next_delay(self) -> float:
        """How long to wait before the next pass (override for a delay that varies)."""
        return self.interval

    def delay_after(self, failures: int) -> float:
        """The wait after `failures` passes in a row failed (0: the last pass succeeded)."""
        delay = self.next_delay()
        if failures and self.backoff_cap is not None:
            return max(delay, min(delay * 2.0 ** (failures - 1), self.backoff_cap))
        return delay

    def failed(self, exc: Exception) -> None:
        log.error("%s run failed; trying again next interval", self.name, exc_info=exc)

    async def run(self) -> None:
        failures = 0
        if self.wait_first:
            await self.pause(self.next_delay())
        while not self.stopping:
            try:
                await self.run_once()
            except Exception as exc:
                failures += 1
                self.failed(exc)
                self.failures.fire()
            else:
                failures = 0
                self.passes.fire()
            await self.pause(self.delay_after(failures))


class BlockingCalls:
    """Runs blocking calls (the store's) in a small thread pool shared by a node's services."""

    def __init__(self, threads: int = 4, name: str = "duetime-store") -> None:
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix=name)

    async def __call__(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    def close(self) -> None:
        """Wait for calls under way, then free the threads."""
        self._pool.shutdown(wait=True)
