"""A worker's own Prometheus metrics: what this process claimed, ran, recorded and lost.

Each WorkerMetrics keeps its figures in a dedicated CollectorRegistry (never the global one),
so several workers in one process, and tests, never collide. The worker calls its plain
methods (claimed, finished, lease_lost...); only this module knows about prometheus_client.
`duetime worker --metrics-port` serves the registry over HTTP (see serve()). The figures the
whole cluster shares (jobs by status, dead letters...) come from the server's /metrics.
"""

from __future__ import annotations

import errno
import logging
import threading
from bisect import bisect_left
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
    start_http_server,
)

from duetime.core.errors import ConfigurationError
from duetime.core.models import Claim
from duetime.logs import log_event

log = logging.getLogger("duetime.metrics")

# scheduling lag: from 1 ms (a hot queue) to 10 min (a backlog)
LAG_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
)
# handler run time: from 5 ms to an hour
DURATION_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    1800.0,
    3600.0,
)
STALE = "rejected_stale"  # the attempts_total outcome of a completion fenced out by the store
FOLD_EVERY = 200  # attempts' ends noted before they are counted (any read counts them first)


class WorkerMetrics:
    """Counters and histograms for one worker (give each Worker its own), in a registry of
    their own.

    process=True also registers the standard process, platform and GC collectors
    (process_cpu_seconds_total, process_resident_memory_bytes, python_info...).

    What runs per job costs little: an attempt's end (finished) is noted in a list and
    counted with up to FOLD_EVERY others at once, and the registry counts what is noted before
    anything reads it (a scrape, render, value), so every read sees every end noted before it;
    a claim's lags go into their histogram together (observe_all).
    """

    def __init__(self, *, process: bool = True) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self._ended: list[tuple[str, str, float]] = []  # (task, outcome, seconds) not counted
        self._ended_lock = threading.Lock()  # noted on the loop, counted by any reader too
        r.register(_CountFirst(self._fold))  # first: what is noted is counted before a read
        self.lag = Histogram(
            "duetime_scheduling_lag_seconds",
            "How long after its due time an attempt started (start minus due), at claim time.",
            ["queue"],
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.claims = Counter(
            "duetime_jobs_claimed",
            "Jobs this worker claimed (one per attempt started).",
            ["queue"],
            registry=r,
        )
        self.attempts = Counter(
            "duetime_attempts",
            "Attempts this worker ran to an end, by task and recorded outcome "
            f"(succeeded, retried, dead, cancelled, parked, or {STALE} when fenced out).",
            ["task", "outcome"],
            registry=r,
        )
        self.duration = Histogram(
            "duetime_attempt_duration_seconds",
            "How long an attempt's handler ran, from start to outcome, by task.",
            ["task"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.late_starts = Counter(
            "duetime_jobs_started_late",
            "Attempts this worker started later than their task's max_lateness after their "
            "due time (tasks with on_late='run'), by task.",
            ["task"],
            registry=r,
        )
        self.lease_expiries = Counter(
            "duetime_lease_expiries",
            "Expired leases: attempts this process's reaper recorded as lost, plus leases this "
            "worker learned it had lost (a heartbeat answered not held).",
            registry=r,
        )
        self.stale = Counter(
            "duetime_stale_completions_rejected",
            "Outcomes this worker tried to record that the store refused: another attempt "
            "(a newer generation) held the job by then.",
            registry=r,
        )
        self.published = Counter(
            "duetime_outbox_published",
            "Outbox events this process's relay published to the broker (confirmed), by queue.",
            ["queue"],
            registry=r,
        )
        self.dispatched = Counter(
            "duetime_outbox_dispatched",
            "Attempts this process's relay started and wrote an outbox event for, by queue.",
            ["queue"],
            registry=r,
        )
        self.dropped = Counter(
            "duetime_outbox_messages_dropped",
            "Broker messages this worker acknowledged without running them: stale (the job "
            "moved on), duplicated, or not duetime's.",
            ["reason"],
            registry=r,
        )
        self.busy = Gauge(
            "duetime_worker_busy",
            "Attempts running in this worker now.",
            registry=r,
        )
        self.clock_offset = Gauge(
            "duetime_clock_offset_seconds",
            "How far this process's clock is ahead of the database's, in seconds (negative: "
            "behind), as last measured; the process corrects its times by it. NaN until "
            "measured (SQLite, the same machine: 0).",
            registry=r,
        )
        self.clock_offset.set(float("nan"))
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}  # label sets seen
        if process:
            ProcessCollector(registry=r)
            PlatformCollector(registry=r)
            GCCollector(registry=r)

    # -- what the worker tells ------------------------------------------------------------------

    def watch_busy(self, running: Callable[[], int]) -> None:
        """Read the busy gauge from `running()` at scrape time (it cannot drift)."""
        self.busy.set_function(lambda: float(running()))

    def _child(self, metric: Any, *labels: str) -> Any:
        """metric.labels(*labels), looked up once per label set (this runs for every job)."""
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def claimed(self, claims: Sequence[Claim]) -> None:
        """Attempts this worker claimed (one claim's, or a broker message's): counted once
        per queue, each one's start lag observed."""
        per_queue: dict[str, list[float]] = {}
        for claim in claims:
            lag = claim.attempt.lag_seconds
            if lag is None:
                lag = (claim.attempt.started_at - claim.job.due_at).total_seconds()
            per_queue.setdefault(claim.job.queue, []).append(lag)
        for queue, lags in per_queue.items():
            self._child(self.claims, queue).inc(len(lags))
            observe_all(self._child(self.lag, queue), [max(0.0, lag) for lag in lags])

    def finished(self, task: str, outcome: str, seconds: float) -> None:
        """An attempt whose outcome was recorded (`outcome`: see runtime.attempt.RECORDED):
        noted, and counted with others (see the class)."""
        with self._ended_lock:
            self._ended.append((task, outcome, seconds))
            full = len(self._ended) >= FOLD_EVERY
        if full:
            self._fold()

    def _fold(self) -> None:
        """Count the attempts' ends noted so far: each (task, outcome) once, each task's
        durations together."""
        with self._ended_lock:
            ended, self._ended = self._ended, []
        durations: dict[tuple[str, str], list[float]] = {}
        for task, outcome, seconds in ended:
            durations.setdefault((task, outcome), []).append(max(0.0, seconds))
        for (task, outcome), values in durations.items():
            self._child(self.attempts, task, outcome).inc(len(values))
            observe_all(self._child(self.duration, task), values)

    def late(self, task: str) -> None:
        """An attempt started later than its task's max_lateness (and runs anyway)."""
        self._child(self.late_starts, task).inc()

    def stale_rejected(self, task: str, seconds: float) -> None:
        """An attempt whose outcome the store refused (fenced out by a newer generation)."""
        self.stale.inc()
        self.finished(task, STALE, seconds)

    def outbox_dispatched(self, queue: str, count: int = 1) -> None:
        self._child(self.dispatched, queue).inc(count)

    def outbox_published(self, queue: str, count: int = 1) -> None:
        self._child(self.published, queue).inc(count)

    def message_dropped(self, reason: str) -> None:
        """A broker message acknowledged and not run (reason: stale, malformed)."""
        self._child(self.dropped, reason).inc()

    def clock_offset_measured(self, offset: float) -> None:
        """This process's clock was measured `offset` seconds ahead of the database's."""
        self.clock_offset.set(offset)

    def lease_lost(self) -> None:
        """A heartbeat said this worker no longer holds an attempt's lease."""
        self.lease_expiries.inc()

    def leases_reaped(self, count: int) -> None:
        """This process's reaper recorded `count` attempts with expired leases as lost."""
        if count > 0:
            self.lease_expiries.inc(count)

    # -- reading ------------------------------------------------------------------------------

    def value(self, name: str, **labels: str) -> float:
        """One sample's value (0 when it has none yet), e.g. value("duetime_attempts_total",
        task="t", outcome="succeeded")."""
        found = self.registry.get_sample_value(name, labels)
        return found if found is not None else 0.0

    def render(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)


def observe_all(histogram: Any, values: Sequence[float]) -> None:
    """histogram.observe(v) for each of `values` (a labelled child of a Histogram), with its
    sum and each bucket added to once: observe() takes two locks and walks the buckets in
    Python per value, and this runs for every job. It reads prometheus_client's Histogram
    internals (_upper_bounds, _buckets, _sum, as in 0.26); without them, it observes one value
    at a time (tests/unit/test_worker_metrics.py compares the two)."""
    bounds = getattr(histogram, "_upper_bounds", None)
    buckets = getattr(histogram, "_buckets", None)
    total = getattr(histogram, "_sum", None)
    if bounds is None or buckets is None or total is None or len(bounds) != len(buckets):
        for value in values:
            histogram.observe(value)
        return
    if not values:
        return
    total.inc(sum(values))
    # observe() counts a value in the first bucket whose bound is at least the value
    for index, count in Tally(bisect_left(bounds, value) for value in values).items():
        buckets[index].inc(count)


class _CountFirst:
    """A collector of no metric, registered first in a registry: each collection (a scrape,
    render, value) calls `fold` before the registry's metrics are read."""

    def __init__(self, fold: Callable[[], None]) -> None:
        self._fold = fold

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterable[Any]:
        self._fold()
        return []


@dataclass
class MetricsServer:
    """The HTTP endpoint serving one registry; stop() closes it."""

    host: str
    port: int  # the bound port (the one asked for, or the one picked for port 0)
    _shutdown: Callable[[], None]
    _thread: threading.Thread

    def stop(self) -> None:
        self._shutdown()
        self._thread.join(5)


def serve(metrics: WorkerMetrics, port: int, host: str = "127.0.0.1") -> MetricsServer:
    """Serve `metrics` at http://host:port/ (any path) from a daemon thread.

    A port in use or an address that cannot be bound is a ConfigurationError with one line
    saying what to do.
    """
    if not 0 <= port <= 65535:
        raise ConfigurationError(f"--metrics-port must be 0 to 65535, got {port}")
    try:
        httpd, thread = start_http_server(port, host, registry=metrics.registry)
    except OSError as exc:
        where = f"{host}:{port}"
        if exc.errno == errno.EADDRINUSE:
            raise ConfigurationError(
                f"cannot serve metrics on {where}: the port is already in use; pick another "
                "--metrics-port (each worker on a host needs its own) or stop what listens there"
            ) from None
        raise ConfigurationError(
            f"cannot serve metrics on {where}: {exc.strerror or exc}; check --metrics-host "
            "(an address of this machine, e.g. 127.0.0.1 or 0.0.0.0) and --metrics-port"
        ) from None
    bound = int(httpd.server_address[1])

    def shutdown() -> None:
        httpd.shutdown()
        httpd.server_close()

    log_event(log, "metrics.serving", host=host, port=bound, path="/metrics")
    return MetricsServer(host, bound, shutdown, thread)
