"""A node: one process's services run together, stopped in order, and its signal handling.

Node(services).run(stop) starts the services in list order, runs them concurrently, and when
`stop` is set (or a service's run() ends early: a crash) stops them in reverse order, each
one finished before the next is asked. A worker lists its slots last: they stop claiming and
drain first, while lease heartbeats, the reaper and the registry row still run.

run_until_signalled(main, grace=..., loop=...) runs `main(stop)` in a new event loop (uvloop's
where it is installed, event_loop_factory) under SIGTERM and SIGINT: the first signal sets
`stop` (graceful shutdown), the second exits the process at once with status 1.
NodeHeartbeat is the node's row in the registry `duetime nodes` lists; with each beat it reads
the database's clock again (when the node runs on a CorrectedClock), writes the offset in its
row and warns, through ClockWatch, when it passes a threshold.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from duetime.core import models
from duetime.core.clock import CLOCK_OFFSET_WARNING, Clock, CorrectedClock
from duetime.core.errors import InvalidRequest, StoreUnavailable
from duetime.logs import log_event
from duetime.runtime.metrics import WorkerMetrics
from duetime.runtime.service import BlockingCalls, IntervalService, Service
from duetime.store.base import Store

log = logging.getLogger("duetime.worker")
# signal notices keep the logger they had when the CLI handled signals (docs/workers.md)
signal_log = logging.getLogger("duetime.cli")
NODE_HEARTBEAT_SECONDS = 5.0  # `duetime nodes` calls a node dead after 30 s of silence


# the event loops a node runs in: `auto` is uvloop where it is installed (a dependency of
# duetime on Linux and macOS), else asyncio's own
EVENT_LOOPS = ("auto", "asyncio", "uvloop")

START_RETRY_CAP = 30.0  # seconds between tries of a start that finds the database unreachable


class Node:
    """Services run together in one event loop: started in order, stopped in reverse order."""

    def __init__(self, services: Sequence[Service], *, start_retry: float = 0.5) -> None:
        self.services = list(services)
        self.start_retry = start_retry

    async def run(self, stop: asyncio.Event) -> None:
        """Start every service, run them until `stop` is set or one ends, then stop them."""
        for service in self.services:
            if not await self._start(service, stop):
                return  # stopped while the database was unreachable: nothing runs yet
        tasks = [asyncio.create_task(s.run(), name=f"duetime-{s.name}") for s in self.services]
        stopped = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait([stopped, *tasks], return_when=asyncio.FIRST_COMPLETED)
            for service, task in zip(self.services, tasks, strict=True):
                if task.done():
                    _report_crash(service, task)
            for service, task in reversed(list(zip(self.services, tasks, strict=True))):
                if not task.done():
                    service.stop()
                    await asyncio.wait([task])
                    _report_crash(service, task)
        finally:
            for leftover in [stopped, *tasks]:
                leftover.cancel()

    async def _start(self, service: Service, stop: asyncio.Event) -> bool:
        """Start one service; while the database is unreachable (a dropped connection as the
        worker starts), try again with a backoff up to START_RETRY_CAP seconds. False: `stop`
        was set meanwhile. Any other error ends the start, as before."""
        delay = self.start_retry
        while True:
            try:
                await service.start()
                return True
            except StoreUnavailable as exc:
                log.warning(
                    "database unavailable while starting %s (%s); retrying in %.1fs",
                    service.name,
                    exc,
                    delay,
                )
            try:
                await asyncio.wait_for(stop.wait(), delay)
                return False
            except TimeoutError:
                delay = min(max(delay, 0.1) * 2, START_RETRY_CAP)


def _report_crash(service: Service, task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("worker duty %s crashed", service.name, exc_info=task.exception())


def event_loop_factory(name: str = "auto") -> Callable[[], asyncio.AbstractEventLoop] | None:
    """What makes the event loop a node runs in (asyncio.Runner's loop_factory): uvloop's
    (libuv; its callbacks, tasks and timers cost a worker less CPU per job, docs/workers.md)
    for "uvloop", and for "auto" where uvloop is installed; None (asyncio's own loop) for
    "asyncio", and for "auto" without uvloop."""
    if name not in EVENT_LOOPS:
        raise InvalidRequest(f"event loop must be one of {', '.join(EVENT_LOOPS)}, not {name!r}")
    if name == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if name == "auto":
            return None
        raise InvalidRequest(
            "the uvloop event loop is not installed here: pip install uvloop, or run with "
            "--loop asyncio"
        ) from None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """The event loop a node runs in, as EVENT_LOOPS names it ("uvloop", "asyncio") or, for
    another, its class's module (an application's own loop)."""
    return type(loop).__module__.split(".")[0]


def run_until_signalled(
    main: Callable[[asyncio.Event], Awaitable[None]],
    *,
    grace: float,
    loop: str = "auto",
    exit_now: Callable[[int], None] = os._exit,
) -> None:
    """Run `main(stop)` in a new event loop (event_loop_factory(loop)'s) until it returns.

    The first SIGTERM or SIGINT sets `stop`: `main` then shuts down within `grace` seconds.
    A second one exits the process at once with status 1 (`exit_now`), leaving in-flight leases
    to expire and be reaped.
    """

    async def guarded() -> None:
        stop = asyncio.Event()

        def on_signal(signum: int) -> None:
            if stop.is_set():
                signal_log.warning("second signal: exiting now; in-flight leases will be reaped")
                exit_now(1)
                return
            signal_log.info(
                "received %s: finishing in-flight jobs (grace %ss)",
                signal.Signals(signum).name,
                grace,
            )
            stop.set()

        running = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            running.add_signal_handler(sig, on_signal, sig)
        try:
            await main(stop)
        finally:
            # while the loop still runs: uvloop's loop, once closed, leaves its own handler
            # in place (the signals would then be ignored while the process shuts down)
            for sig in (signal.SIGTERM, signal.SIGINT):
                running.remove_signal_handler(sig)

    with asyncio.Runner(loop_factory=event_loop_factory(loop)) as runner:
        runner.run(guarded())


class ClockWatch:
    """Tells when this node's clock is off the database's by more than `threshold` seconds:
    one warning as it passes the threshold (node.clock_offset), one notice when it is back
    within (node.clock_offset_ok), and the offset of every reading in the metrics. The node's
    times are corrected either way; the warning is for the machine's clock to be fixed."""

    def __init__(
        self,
        node_id: str,
        threshold: float = CLOCK_OFFSET_WARNING,
        metrics: WorkerMetrics | None = None,
    ) -> None:
        if threshold <= 0:
            raise ValueError("the clock offset warning threshold must be above 0 seconds")
        self.node_id = node_id
        self.threshold = threshold
        self.metrics = metrics
        self.warned = False

    def saw(self, offset: float | None) -> None:
        """A reading of the node's clock: `offset` seconds ahead of the database's (None: this
        node runs on an injected clock, nothing was measured)."""
        if offset is None:
            return
        if self.metrics is not None:
            self.metrics.clock_offset_measured(offset)
        if abs(offset) > self.threshold and not self.warned:
            self.warned = True
            log_event(
                log,
                "node.clock_offset",
                logging.WARNING,
                node=self.node_id,
                offset_s=round(offset, 3),
                threshold_s=self.threshold,
                hint="this machine's clock is "
                + ("ahead of" if offset > 0 else "behind")
                + " the database's; duetime corrects its times by the offset, but fix the "
                "clock (NTP: chrony or systemd-timesyncd)",
            )
        elif abs(offset) <= self.threshold and self.warned:
            self.warned = False
            log_event(
                log,
                "node.clock_offset_ok",
                node=self.node_id,
                offset_s=round(offset, 3),
                threshold_s=self.threshold,
            )


class NodeHeartbeat(IntervalService):
    """This node's row in the registry: registered at start, renewed every few seconds, marked
    stopped when the node stops. A node only ever writes its own row.

    On a CorrectedClock (an App's own clock), each beat first reads the database's clock again
    (so a clock that drifts, or a new primary after a failover, is followed within a beat) and
    writes the offset with last_seen_at; `clock_warning` seconds of offset are warned about."""

    name = "node"
    wait_first = True

    def __init__(
        self,
        store: Store,
        clock: Clock,
        calls: BlockingCalls,
        describe: Callable[[], models.Node],
        interval: float = NODE_HEARTBEAT_SECONDS,
        *,
        clock_warning: float = CLOCK_OFFSET_WARNING,
        metrics: WorkerMetrics | None = None,
    ) -> None:
        super().__init__(interval)
        self.store = store
        self.clock = clock
        self.calls = calls
        self.describe = describe
        self.node_id = ""
        self.watch = ClockWatch("", clock_warning, metrics)

    async def start(self) -> None:
        offset = await self.calls(self.read_clock)
        node = replace(self.describe(), clock_offset=offset)
        self.node_id = self.watch.node_id = node.id
        self.watch.saw(offset)
        await self.calls(functools.partial(self.store.register_node, node, self.clock.now()))

    async def run_once(self) -> None:
        offset = await self.calls(self._beat)
        self.watch.saw(offset)

    def _beat(self) -> float | None:
        offset = self.read_clock()
        self.store.touch_node(self.node_id, self.clock.now(), offset)
        return offset

    def read_clock(self) -> float | None:
        """Read the database's clock, when this node's clock is corrected by it; returns how
        far this node's clock is ahead of it (None: an injected clock, nothing to read)."""
        clock = self.clock
        if not isinstance(clock, CorrectedClock):
            return None
        store = self.store
        clock.measure(lambda: None if store.clock_is_local else store.database_now())
        return clock.offset

    def failed(self, exc: Exception) -> None:
        log.warning("node heartbeat failed; trying again", exc_info=exc)

    async def run(self) -> None:
        await super().run()
        try:
            await self.calls(
                functools.partial(self.store.stop_node, self.node_id, self.clock.now())
            )
        except Exception:
            log.warning("could not mark this node stopped", exc_info=True)
