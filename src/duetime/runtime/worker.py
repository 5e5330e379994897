"""The worker: a node whose slots claim due jobs and run them, beside its maintenance duties.

Worker(app, ...) builds one worker process's services and runs them as a Node
(runtime/node.py), in this order: the node's registry row, the planner, the reaper, the
pruner, any extra services given, the lease heartbeats (runtime/leases.py), the wake-ups
(runtime/wakeups.py), the timer (runtime/timer.py), the progress writer
(runtime/progress.py), the completer (runtime/completer.py),
the Slots (runtime/slots.py): the claim loop that fills free slots with due jobs and runs one
attempt (runtime/attempt.py) per claim, and last, with a broker URL, the BrokerFeed
(runtime/outbox/feed.py) that fills them from the broker queues of outbox-mode queues. The node
stops them in reverse order: taking work stops and in-flight attempts drain first (their
outcomes written by the completer), while leases are still renewed. Store calls run in a
small thread pool so a slow database never blocks async handlers.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import uuid
from collections.abc import Sequence
from datetime import timedelta

from duetime.core import models
from duetime.core.claim_floor import ClaimFloor
from duetime.core.clock import CLOCK_OFFSET_WARNING, Clock
from duetime.logs import log_event
from duetime.runtime.attempt import AttemptRunner, WorkerStats
from duetime.runtime.completer import Completer
from duetime.runtime.handlers import HandlerThreads
from duetime.runtime.host import Host
from duetime.runtime.leases import LeaseHeartbeats
from duetime.runtime.metrics import WorkerMetrics
from duetime.runtime.node import Node, NodeHeartbeat, event_loop_factory, run_until_signalled
from duetime.runtime.outbox.feed import BrokerFeed
from duetime.runtime.planner import Planner, PlannerService
from duetime.runtime.progress import ProgressWriter
from duetime.runtime.pruner import Pruner
from duetime.runtime.reaper import Reaper, ReaperService, ReapResult
from duetime.runtime.service import BlockingCalls, Service
from duetime.runtime.slots import Slots
from duetime.runtime.timer import DueTimes, Timer
from duetime.runtime.wakeups import Wakeups
from duetime.store.base import Store
from duetime.version import __version__

log = logging.getLogger("duetime.worker")
DEFAULT_RETENTION = timedelta(days=7)  # finished jobs are pruned after this (None: kept)


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def concurrent_finishes(store: Store) -> int:
    """Finish batches a worker writes at once: two on PostgreSQL, whose row locks let two
    transactions on disjoint jobs commit side by side (one batch is written while the next
    fills); one elsewhere (SQLite takes one writer at a time)."""
    return 2 if store.dialect == "postgres" else 1


def claim_floor(store: Store) -> ClaimFloor | None:
    """Where the slots' claims start their walk of the due jobs (core/claim_floor.py): on
    PostgreSQL, whose walks step over the entries of the jobs claimed since the last vacuum
    and whose wake-ups name the instant of every job that falls due before the floor; None
    elsewhere (the claim statements of SQLite and MariaDB/MySQL take no floor)."""
    return ClaimFloor() if store.dialect == "postgres" else None


class Worker:
    """One worker process: `run(stop)` in an event loop, or `serve()` until SIGTERM/SIGINT.

    Extra `services` (a relay, an exporter...) run on the same node: started after the
    pruner, stopped once the slots have drained. `prefetch` jobs at most are claimed ahead of
    the free slots while more work is due, as many as the slots run during four claims' round
    trips (default cap: 10 x `concurrency`; 0: none). A node whose clock is off the
    database's by more than `clock_warning` seconds is warned about (its times are corrected
    either way when the app runs on its own clock, see duetime.App). `serve()` runs in the
    event loop `loop` names (runtime/node.py EVENT_LOOPS: uvloop's where installed by default).
    """

    def __init__(
        self,
        app: Host,
        *,
        queues: Sequence[str] | None = None,
        concurrency: int = 10,
        prefetch: int | None = None,
        poll_interval: float = 0.5,
        reap_interval: float = 5.0,
        plan_interval: float = 1.0,
        planner: bool = True,
        grace: float = 30.0,
        worker_id: str | None = None,
        rng: random.Random | None = None,
        metrics: WorkerMetrics | None = None,
        services: Sequence[Service] = (),
        retention: timedelta | None = DEFAULT_RETENTION,
        broker_url: str | None = None,
        clock_warning: float = CLOCK_OFFSET_WARNING,
        loop: str = "auto",
    ) -> None:
        event_loop_factory(loop)  # an unknown or missing loop fails here, not at serve()
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if prefetch is not None and prefetch < 0:
            raise ValueError("prefetch must be 0 or more")
        self.app = app
        self.store: Store = app.store
        self.clock: Clock = app.clock
        self.queues = list(queues) if queues else None
        self.concurrency = concurrency
        self.poll_interval = poll_interval
        self.reap_interval = reap_interval
        self.plan_interval = plan_interval
        self.grace = grace
        self.loop = loop  # the event loop serve() runs in (runtime/node.py EVENT_LOOPS)
        self.worker_id = worker_id or default_worker_id()
        self.rng = rng or random.Random()
        self.stats = WorkerStats()
        self.metrics = metrics or WorkerMetrics()  # Prometheus figures of this process
        # the node's services (see services()), each built with what it needs, in that order:
        # the planner wakes the slots, the leases renew theirs, the timer keeps the near future
        # of due instants the slots read (told of new work by the wake-ups)
        self.reaper = Reaper(self.store, self.clock, rng=self.rng)
        self.planner = Planner(self.store, self.clock) if planner else None
        self._calls = BlockingCalls(4)
        self._threads = HandlerThreads(concurrency)
        self.completer = Completer(
            self.store, self.clock, self._calls, max_writes=concurrent_finishes(self.store)
        )
        # handlers' progress reports, written coalesced (runtime/progress.py)
        self.progress = ProgressWriter(self.store, self.clock, self._calls)
        runner = AttemptRunner(
            app,
            self._calls,
            self._threads,
            rng=self.rng,
            stats=self.stats,
            metrics=self.metrics,
            completer=self.completer,
            progress=self.progress,
        )
        due = DueTimes()  # kept by the timer, read by the slots
        self.slots = Slots(
            runner,
            registry=app.tasks,
            worker_id=self.worker_id,
            queues=self.queues,
            concurrency=concurrency,
            prefetch=10 * concurrency if prefetch is None else prefetch,
            poll_interval=poll_interval,
            grace=grace,
            due=due,
            share=lambda: app.priority_share,
            # a full batch of outcomes may wait (one finish writes up to max_batch), no more
            max_unrecorded=max(concurrency, self.completer.max_batch),
            floor=claim_floor(self.store),
        )
        self.timer = Timer(
            self.store,
            self.clock,
            self._calls,
            queues=self.queues,
            wake=self.slots.wake,
            due=due,
            fairness=self.slots.fairness,  # its floor: the timer reads from it, looks below it
            tasks=lambda: self.slots.tasks,
        )
        self.wakeups = Wakeups(self.store, self._heard)
        self.retention = retention
        self.pruner = (
            Pruner(self.store, self.clock, self._calls, retention=retention)
            if retention is not None
            else None
        )
        # the node's row; each beat also reads the database's clock (docs/workers.md, "Clocks")
        self.registry = NodeHeartbeat(
            self.store,
            self.clock,
            self._calls,
            self.node,
            clock_warning=clock_warning,
            metrics=self.metrics,
        )
        self.planning = (
            PlannerService(
                self.planner,
                self._calls,
                plan_interval,
                sync=app.sync_schedules,
                on_new_work=self.slots.wake,
            )
            if self.planner
            else None
        )
        self.reaping = ReaperService(
            self.reaper, self._calls, reap_interval, self._reaped, holder=self.worker_id
        )
        self.extra = list(services)
        self.leases = LeaseHeartbeats(
            self.slots.running,
            self.store,
            self.clock,
            self._calls,
            stats=self.stats,
            metrics=self.metrics,
        )
        self.metrics.watch_busy(lambda: self.slots.busy)  # the metrics may be the caller's
        # outbox-mode queues come from the broker (runtime/outbox/feed.py), the others by claims
        self.feed = self._broker_feed(broker_url) if broker_url is not None else None

    def _heard(self, wakeups: Sequence[models.Wakeup]) -> None:
        """Wake-ups from the store: to the slots' claim floor, then to the timer."""
        self.slots.heard(wakeups)
        self.timer.heard(wakeups)

    def _broker_feed(self, broker_url: str) -> BrokerFeed:
        """The feed of this worker's slots from the broker queues of its outbox-mode queues
        (aio-pika is imported only then)."""
        from duetime.runtime.outbox.broker import Broker

        return BrokerFeed(
            Broker(broker_url),
            self.slots,
            self.store,
            self.clock,
            self._calls,
            metrics=self.metrics,
            queues=self.queues,
            prefetch=self.concurrency,
        )

    # -- public -----------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return len(self.slots.running)

    @property
    def abandoned_threads(self) -> int:
        """Sync handler threads still running (after shutdown: they outlived the grace period)."""
        return self._threads.busy

    def services(self) -> list[Service]:
        """The node's services in start order; they stop in reverse order."""
        planning = [self.planning] if self.planning else []
        pruning = [self.pruner] if self.pruner else []
        return [
            self.registry,
            *planning,
            self.reaping,
            *pruning,
            *self.extra,
            self.leases,
            self.wakeups,
            self.timer,
            self.progress,
            self.completer,
            self.slots,
            *([self.feed] if self.feed else []),  # stops first: no message taken while draining
        ]

    def short_leases(self) -> dict[str, float]:
        """The tasks this worker runs whose lease is shorter than a write may wait for the
        database's lock (SQLite's busy timeout): under heavy write contention their
        heartbeats and outcomes can wait past the lease, and the job is retried."""
        wait = self.store.lock_wait
        if wait is None:
            return {}
        return {
            name: task.defaults.lease_seconds
            for name, task in sorted(self.app.tasks.items())
            if task.defaults.lease_seconds < wait
            and (self.queues is None or task.defaults.queue in self.queues)
        }

    async def run(self, stop: asyncio.Event) -> None:
        """Work until `stop` is set, then shut down gracefully within the grace period."""
        short = self.short_leases()
        if short:
            named = ", ".join(f"{name} ({lease:g}s)" for name, lease in list(short.items())[:5])
            log_event(
                log,
                "worker.lease_shorter_than_busy_timeout",
                logging.WARNING,
                busy_timeout_s=self.store.lock_wait,
                tasks=named + (f" and {len(short) - 5} more" if len(short) > 5 else ""),
                hint="under heavy SQLite write contention an outcome or heartbeat can wait "
                "past the lease and the job runs again; give these tasks a lease above the "
                "busy timeout, or use PostgreSQL (docs/stores.md)",
            )
        try:
            await Node(self.services()).run(stop)
        finally:
            self._calls.close()
            self._threads.shutdown()
        log_event(log, "worker.stopped", worker=self.worker_id, **vars(self.stats))

    def serve(self) -> None:
        """Run until SIGTERM or SIGINT, then shut down gracefully; a second signal exits at
        once with status 1 (see runtime.node.run_until_signalled)."""
        run_until_signalled(self.run, grace=self.grace, loop=self.loop)

    async def heartbeat_once(self) -> None:
        """Renew every lease due for renewal, in one batch."""
        await self.leases.heartbeat_once()

    def node(self) -> models.Node:
        """This worker as a node of the cluster (see `duetime nodes`)."""
        now = self.clock.now()
        duties = ("worker", "reaper", *(["planner"] if self.planner else []))
        duties = (*duties, *(["pruner"] if self.pruner else []))
        duties = (*duties, *(["broker"] if self.feed else []))
        duties = (*duties, *(["relay"] if any(s.name == "relay" for s in self.extra) else []))
        return models.Node(
            id=self.worker_id,
            hostname=socket.gethostname(),
            pid=os.getpid(),
            queues=tuple(self.queues) if self.queues else None,
            concurrency=self.concurrency,
            duties=duties,
            version=__version__,
            started_at=now,
            last_seen_at=now,
            tasks=tuple(sorted(self.app.tasks)),
        )

    def _reaped(self, result: ReapResult) -> None:
        self.stats.reaped += result.reaped
        self.metrics.leases_reaped(result.reaped)
        self.stats.expired += result.expired
