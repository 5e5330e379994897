"""A node: one process's services run together, stopped in order, and its signal handling.

Node(services).run(stop) starts the services in list order, runs them concurrently, and when
`stop` is set (or a service's run() ends early: a crash) stops them in reverse order, each
one finished before the next is asked. A worker lists its slots last: they stop claiming and
drain first, while lease heartbeats, the reaper and the registry row still run.

run_until_signalled(main, grace=...) runs `main(stop)` under SIGTERM and SIGINT: the first
signal sets `stop` (graceful shutdown), the second exits the process at once with status 1.
NodeHeartbeat is the node's row in the registry `duetime nodes` lists.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Sequence

from duetime.core import models
from duetime.core.clock import Clock
from duetime.runtime.service import BlockingCalls, IntervalService, Service
from duetime.store.base import Store

log = logging.getLogger("duetime.worker")
# signal notices keep the logger they had when the CLI handled signals (docs/workers.md)
signal_log = logging.getLogger("duetime.cli")
NODE_HEARTBEAT_SECONDS = 5.0  # `duetime nodes` calls a node dead after 30 s of silence


class Node:
    """Services run together in one event loop: started in order, stopped in reverse order."""

    def __init__(self, services: Sequence[Service]) -> None:
        self.services = list(services)

    async def run(self, stop: asyncio.Event) -> None:
        """Start every service, run them until `stop` is set or one ends, then stop them."""
        for service in self.services:
            await service.start()
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


def _report_crash(service: Service, task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("worker duty %s crashed", service.name, exc_info=task.exception())


def run_until_signalled(
    main: Callable[[asyncio.Event], Awaitable[None]],
    *,
    grace: float,
    exit_now: Callable[[int], None] = os._exit,
) -> None:
    """Run `main(stop)` in a new event loop until it returns.

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

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal, sig)
        await main(stop)

    asyncio.run(guarded())


class NodeHeartbeat(IntervalService):
    """This node's row in the registry: registered at start, renewed every few seconds, marked
    stopped when the node stops. A node only ever writes its own row."""

    name = "node"
    wait_first = True

    def __init__(
        self,
        store: Store,
        clock: Clock,
        calls: BlockingCalls,
        describe: Callable[[], models.Node],
        interval: float = NODE_HEARTBEAT_SECONDS,
    ) -> None:
        super().__init__(interval)
        self.store = store
        self.clock = clock
        self.calls = calls
        self.describe = describe
        self.node_id = ""

    async def start(self) -> None:
        node = self.describe()
        self.node_id = node.id
        await self.calls(functools.partial(self.store.register_node, node, self.clock.now()))

    async def run_once(self) -> None:
        await self.calls(functools.partial(self.store.touch_node, self.node_id, self.clock.now()))

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
