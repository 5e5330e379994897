"""The relay: dispatches due jobs of outbox-mode queues and publishes their events.

Two services, both safe to run on any number of nodes at once:
- Dispatcher: every `interval`, Store.dispatch_planned (as its DispatchFairness plans it)
  takes the due jobs of outbox-mode queues, starts their attempts (held for the broker) and
  writes one outbox event each, in one transaction. It needs no broker: while RabbitMQ is
  down the outbox grows.
- Relay: leases a batch of unpublished events (Store.take_events, so two relays never take
  the same one), publishes them with confirms (runtime/outbox/broker.py) and marks those the broker
  confirmed as published. It publishes at most `rate` events per second; a broker that does
  not answer is retried with backoff while the dispatcher goes on. A relay killed between
  publish and mark leaves its events to be taken again once its lease ends: they are
  published twice, and the worker that gets the second copy drops it (docs/outbox.md).
`duetime relay` runs them alone; a node may run them beside its worker (services=...).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

from duetime.core import models
from duetime.core.clock import Clock
from duetime.core.outbox import OutboxEvent
from duetime.logs import error_field, log_event
from duetime.runtime.fairness import DispatchFairness
from duetime.runtime.metrics import WorkerMetrics
from duetime.runtime.service import BlockingCalls, IntervalService, Pulse, Service
from duetime.store.base import Store

log = logging.getLogger("duetime.relay")

DISPATCH_LEASE = 300.0  # how long a published attempt may wait in the broker for a worker
# how long a relay holds the events it took before another may take them: a batch's publish
# gives up well before (PUBLISH_TIMEOUT), so a live relay's events are not taken twice
RELAY_LEASE = 15.0
PUBLISH_TIMEOUT = 10.0
PUBLISHED_KEPT = timedelta(minutes=10)  # published events are deleted after this


class Publisher(Protocol):
    """What the relay publishes through (runtime.outbox.broker.Broker; a fake in tests)."""

    async def publish(self, events: list[OutboxEvent], timeout: float) -> list[int]: ...

    async def close(self) -> None: ...


class Dispatcher(IntervalService):
    """Moves due jobs of outbox-mode queues into the outbox, `batch` at a time, every
    `interval` seconds, or sooner when a job of one of them falls due before that."""

    name = "dispatcher"

    def __init__(
        self,
        store: Store,
        clock: Clock,
        calls: BlockingCalls,
        *,
        interval: float = 0.1,
        batch: int = 500,
        dispatch_lease: float = DISPATCH_LEASE,
        on_dispatched: Callable[[list[OutboxEvent]], None] | None = None,
    ) -> None:
        super().__init__(interval)
        self.store = store
        self.clock = clock
        self.calls = calls
        self.batch = batch
        self.dispatch_lease = dispatch_lease
        self.on_dispatched = on_dispatched
        self.dispatched = 0
        self._delay = interval
        self.fairness = DispatchFairness()  # the dispatches' tenant rotation
        # when a limit per dependency that held back the last dispatch allows a start again
        self.limit_at: datetime | None = None

    async def run_once(self) -> None:
        while not self.stopping:
            dispatched = await self.calls(
                lambda: self.fairness.dispatch(
                    self.store,
                    self.clock.now,  # read once the dispatch's connection is held
                    self.batch,
                    self.dispatch_lease,
                )
            )
            self.limit_at = dispatched.next_start
            events = dispatched.events
            self.dispatched += len(events)
            if events and self.on_dispatched is not None:
                self.on_dispatched(events)
            if len(events) < self.batch:
                break
        self._delay = await self.calls(self._until_next_due)

    def _until_next_due(self) -> float:
        """Seconds to the next instant a job of an outbox-mode queue falls due, or a limit
        per dependency that held back the last dispatch allows a start again, if it comes
        before the interval ends: the next pass then starts on time, not up to an interval
        late (and a rate bounds dispatches at its rate)."""
        queues = self.store.outbox_queues()
        if not queues:
            return self.interval
        now = self.clock.now()
        until = now + timedelta(seconds=self.interval)
        found = self.store.next_due(now, until, queues, 1)
        allowed = self.limit_at
        if allowed is not None and allowed < until:
            found = sorted([*found, allowed])
        if not found:
            return self.interval
        return max(0.0, (found[0] - now).total_seconds())

    def next_delay(self) -> float:
        return self._delay


class Relay(Service):
    """Publishes unpublished outbox events, in order, at most `rate` per second (None: as
    fast as the broker confirms)."""

    name = "relay"

    def __init__(
        self,
        store: Store,
        clock: Clock,
        calls: BlockingCalls,
        publisher: Publisher,
        *,
        relay_id: str,
        rate: float | None = None,
        batch: int = 200,
        poll_interval: float = 0.2,
        dispatch_lease: float = DISPATCH_LEASE,
        relay_lease: float = RELAY_LEASE,
        metrics: WorkerMetrics | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        if rate is not None and rate <= 0:
            raise ValueError("the publish rate must be positive")
        self.store = store
        self.clock = clock
        self.calls = calls
        self.publisher = publisher
        self.relay_id = relay_id
        self.rate = rate
        self.batch = batch
        self.poll_interval = poll_interval
        self.dispatch_lease = dispatch_lease
        self.relay_lease = relay_lease
        self.metrics = metrics
        self.monotonic = monotonic
        self.published = 0
        self.passes = Pulse()  # fires after each publishing pass (tests await it)
        self.failures = Pulse()  # fires when the broker or the store failed a pass
        self._allowance = 0.0  # events the rate allows now (a token bucket of one second)
        self._refilled = monotonic()
        self._pruned = 0.0

    def _refill(self) -> None:
        assert self.rate is not None
        now = self.monotonic()
        cap = max(self.rate, 1.0)  # a bucket of one second, and at least one event
        self._allowance = min(cap, self._allowance + (now - self._refilled) * self.rate)
        self._refilled = now

    def _allowed(self) -> int:
        if self.rate is None:
            return self.batch
        self._refill()
        return min(self.batch, int(self._allowance))

    async def run(self) -> None:
        backoff = 0.0
        try:
            while not self.stopping:
                try:
                    count = await self.publish_once()
                    backoff = 0.0
                except Exception as exc:
                    backoff = min(max(backoff * 2, self.poll_interval), 5.0)
                    log_event(
                        log,
                        "relay.publish_failed",
                        logging.WARNING,
                        error=error_field(exc),
                        retry_in_s=backoff,
                    )
                    self.failures.fire()
                    await self.publisher.close()
                    await self.pause(backoff)
                    continue
                self.passes.fire()
                if count == 0:
                    await self.pause(self._idle_wait())
        finally:
            await self.publisher.close()

    def _idle_wait(self) -> float:
        if self.rate is not None and self._allowance < 1:
            return max(0.001, (1 - self._allowance) / self.rate)
        return self.poll_interval

    async def publish_once(self) -> int:
        """One batch: take, publish, mark what the broker confirmed; how many were marked."""
        limit = self._allowed()
        if limit <= 0:
            return 0
        now = self.clock.now()
        until = now + timedelta(seconds=self.relay_lease)
        events = await self.calls(lambda: self.store.take_events(self.relay_id, now, until, limit))
        if not events:
            await self._prune()
            return 0
        confirmed = await self.publisher.publish(events, PUBLISH_TIMEOUT)
        if self.rate is not None:
            self._refill()  # the events left now: a slow publish (a reconnect) earns nothing
            self._allowance -= len(events)  # while the bucket was full
        if confirmed:
            await self.calls(
                lambda: self.store.mark_published(confirmed, self.clock.now(), self.dispatch_lease)
            )
        self.published += len(confirmed)
        if self.metrics is not None:
            done = set(confirmed)
            for queue in sorted({e.queue for e in events}):
                n = sum(1 for e in events if e.queue == queue and e.id in done)
                self.metrics.outbox_published(queue, n)
        if len(confirmed) < len(events):
            log_event(
                log,
                "relay.refused",
                logging.WARNING,
                refused=len(events) - len(confirmed),
                hint="the broker refused some messages; they are published again once this "
                "relay's lease on them ends",
            )
        return len(confirmed)

    async def _prune(self) -> None:
        """When idle, at most once a minute: delete events published long ago."""
        at = self.monotonic()
        if at - self._pruned < 60.0:
            return
        self._pruned = at
        now = self.clock.now()
        await self.calls(lambda: self.store.prune_outbox(now - PUBLISHED_KEPT, 1000))


def relay_services(
    store: Store,
    clock: Clock,
    calls: BlockingCalls,
    broker_url: str,
    *,
    relay_id: str,
    rate: float | None = None,
    dispatch_lease: float = DISPATCH_LEASE,
    metrics: WorkerMetrics | None = None,
) -> list[Service]:
    """The dispatcher and the relay over RabbitMQ at `broker_url`, for a node's services."""
    from duetime.runtime.outbox.broker import Broker

    relay = Relay(
        store,
        clock,
        calls,
        Broker(broker_url),
        relay_id=relay_id,
        rate=rate,
        dispatch_lease=dispatch_lease,
        metrics=metrics,
    )

    def dispatched(events: list[OutboxEvent]) -> None:
        relay.wake()
        if metrics is not None:
            for queue in sorted({e.queue for e in events}):
                metrics.outbox_dispatched(queue, sum(1 for e in events if e.queue == queue))

    dispatcher = Dispatcher(
        store, clock, calls, dispatch_lease=dispatch_lease, on_dispatched=dispatched
    )
    return [dispatcher, relay]


def relay_node(relay_id: str, clock: Clock) -> models.Node:
    """A relay process as a node of the cluster (`duetime nodes`): it serves no task and holds
    no attempt (its dispatched attempts are held by the outbox), so it never counts as a worker
    of a task (core.models.unserved)."""
    from duetime.version import __version__

    now = clock.now()
    return models.Node(
        id=relay_id,
        hostname=socket.gethostname(),
        pid=os.getpid(),
        queues=None,
        concurrency=0,
        duties=("dispatcher", "relay"),
        version=__version__,
        started_at=now,
        last_seen_at=now,
        tasks=(),
    )
