"""/metrics: cluster-wide figures in the Prometheus text format, read from the store per scrape.

Every scrape reads the store once (duetime.admin.figures.stats: counts by status and queue, the
oldest overdue job, and the attempts of the last hour) through a custom collector in a
registry of this app's own, next to the server process's standard collectors. What a single
worker did (its lag histogram, attempts by outcome...) is on that worker's --metrics-port.

It needs an admin token (the figures cover every tenant). A store that cannot answer raises,
and the app's error handler turns that into 503, so Prometheus records the scrape as failed
(`up == 0`) instead of stale figures.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from duetime.admin import figures as admin_figures
from duetime.client import App
from duetime.core.limits import LimitStatus
from duetime.core.outbox import OutboxFigures
from duetime.core.states import JobStatus
from duetime.core.stats import Stats
from duetime.server import auth
from duetime.server.state import duetime_app

router = APIRouter(tags=["metrics"])

QUANTILES = (("0.5", "lag_p50"), ("0.95", "lag_p95"), ("0.99", "lag_p99"))
_registry_lock = threading.Lock()


class StoreCollector(Collector):
    """Gauges computed from the store each time the registry is collected."""

    def __init__(self, app: App) -> None:
        self.app = app

    def describe(self) -> Iterator[Metric]:
        """The names this collector yields, without reading the store (for registration)."""
        yield from families(None)
        yield from flow_families(None)
        yield from outbox_families(None)
        yield from limit_families(None, self.app.clock.now())

    def collect(self) -> Iterator[Metric]:
        stats = admin_figures.stats(self.app, None)
        yield from families(stats)
        yield from flow_families(stats)
        yield from outbox_families(self.app.outbox_status())
        yield from limit_families(self.app.limits(), self.app.clock.now())


def limit_families(limits: list[LimitStatus] | None, now: datetime) -> Iterator[Metric]:
    """Each limit key's figures (docs/flow-control.md)."""

    def gauge(name: str, text: str) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, text, labels=["key"])

    running = gauge("duetime_limit_running", "Attempts of jobs carrying the key holding a lease.")
    waiting = gauge("duetime_limit_waiting", "Due scheduled jobs carrying the key.")
    waited = gauge(
        "duetime_limit_waiting_seconds", "How long the oldest due job carrying the key waited."
    )
    tokens = gauge("duetime_limit_tokens", "Tokens in the key's bucket now (keys with a rate).")
    paused = gauge("duetime_limit_paused", "1 while the key is paused (Retry(dependency=True)).")
    breaker = gauge(
        "duetime_limit_breaker_open",
        "1 while the key's breaker is open or half-open, 0 closed (keys with a breaker).",
    )
    for status in limits or []:
        key = [status.settings.key]
        figures = status.to_json(now)
        running.add_metric(key, status.running)
        waiting.add_metric(key, status.waiting)
        waited.add_metric(key, float(figures["waiting_seconds"]))  # type: ignore[arg-type]
        if status.tokens is not None:
            tokens.add_metric(key, status.tokens)
        paused.add_metric(key, 1.0 if figures["paused_until"] is not None else 0.0)
        state = status.breaker(now)
        if state is not None:
            breaker.add_metric(key, 0.0 if state == "closed" else 1.0)
    yield from (running, waiting, waited, tokens, paused, breaker)


def flow_families(stats: Stats | None) -> Iterator[Metric]:
    """Flow control (docs/flow-control.md): per queue and tenant, backlog, running, the due
    jobs not started (waiting) and how long the oldest has waited, limits."""
    q_backlog = GaugeMetricFamily(
        "duetime_queue_backlog",
        "Jobs waiting (scheduled, due or not, or waiting) by queue, every tenant.",
        labels=["queue"],
    )
    q_running = GaugeMetricFamily(
        "duetime_queue_running", "Jobs running by queue, every tenant.", labels=["queue"]
    )
    q_waiting = GaugeMetricFamily(
        "duetime_queue_waiting",
        "Jobs due and not started (scheduled, due_at passed) by queue, every tenant.",
        labels=["queue"],
    )
    q_waited = GaugeMetricFamily(
        "duetime_queue_waiting_seconds",
        "How long the queue's oldest due job not started has been due; 0: none.",
        labels=["queue"],
    )
    q_paused = GaugeMetricFamily(
        "duetime_queue_paused",
        "1 when the queue is paused (starts no jobs), else 0.",
        labels=["queue"],
    )
    q_cap = GaugeMetricFamily(
        "duetime_queue_concurrency_limit",
        "The queue's cluster-wide concurrency limit (queues with one only).",
        labels=["queue"],
    )
    t_backlog = GaugeMetricFamily(
        "duetime_tenant_backlog",
        "Jobs waiting (scheduled, due or not, or waiting) by tenant.",
        labels=["tenant"],
    )
    t_running = GaugeMetricFamily(
        "duetime_tenant_running", "Jobs running by tenant.", labels=["tenant"]
    )
    t_waiting = GaugeMetricFamily(
        "duetime_tenant_waiting",
        "Jobs due and not started (scheduled, due_at passed) by tenant.",
        labels=["tenant"],
    )
    t_waited = GaugeMetricFamily(
        "duetime_tenant_waiting_seconds",
        "How long the tenant's oldest due job not started has been due; 0: none.",
        labels=["tenant"],
    )
    t_cap = GaugeMetricFamily(
        "duetime_tenant_concurrency_limit",
        "The tenant's cluster-wide concurrency limit (tenants with one only).",
        labels=["tenant"],
    )
    if stats is not None:
        for q in stats.queues:
            name = q.settings.queue
            q_backlog.add_metric([name], q.counts.backlog)
            q_running.add_metric([name], q.counts.running)
            q_waiting.add_metric([name], q.counts.waiting)
            q_waited.add_metric([name], q.counts.waiting_seconds)
            q_paused.add_metric([name], 1 if q.settings.paused else 0)
            if q.settings.concurrency is not None:
                q_cap.add_metric([name], q.settings.concurrency)
        for t in stats.tenants:
            name = t.settings.tenant
            t_backlog.add_metric([name], t.counts.backlog)
            t_running.add_metric([name], t.counts.running)
            t_waiting.add_metric([name], t.counts.waiting)
            t_waited.add_metric([name], t.counts.waiting_seconds)
            if t.settings.concurrency is not None:
                t_cap.add_metric([name], t.settings.concurrency)
    yield from (q_backlog, q_running, q_waiting, q_waited, q_paused, q_cap)
    yield from (t_backlog, t_running, t_waiting, t_waited, t_cap)


def outbox_families(figures: OutboxFigures | None) -> Iterator[Metric]:
    """The transactional outbox's figures (docs/outbox.md), every queue's."""
    backlog = GaugeMetricFamily(
        "duetime_outbox_backlog",
        "Outbox events not yet published to the broker, by queue.",
        labels=["queue"],
    )
    oldest = GaugeMetricFamily(
        "duetime_outbox_oldest_unpublished_age_seconds",
        "How long the oldest unpublished outbox event has waited; 0: none.",
    )
    rate = GaugeMetricFamily(
        "duetime_outbox_publish_rate_per_second",
        "Outbox events published per second over the last minute, every relay's.",
    )
    dispatched = GaugeMetricFamily(
        "duetime_outbox_dispatched",
        "Jobs running but not executing: their attempt is dispatched (in the outbox or the "
        "broker) and no worker accepted it yet, by queue.",
        labels=["queue"],
    )
    oldest_dispatched = GaugeMetricFamily(
        "duetime_outbox_oldest_dispatched_age_seconds",
        "How long the oldest dispatched attempt no worker accepted has waited; 0: none.",
    )
    if figures is not None:
        for q in figures.queues:
            backlog.add_metric([q.queue], q.backlog)
            dispatched.add_metric([q.queue], q.dispatched)
        oldest.add_metric([], figures.oldest_unpublished_age_seconds or 0.0)
        rate.add_metric([], figures.publish_rate)
        oldest_dispatched.add_metric([], figures.oldest_dispatched_age_seconds or 0.0)
    yield from (backlog, oldest, rate, dispatched, oldest_dispatched)


def families(stats: Stats | None) -> Iterator[Metric]:
    """The store's figures as metric families (empty families when `stats` is None)."""
    jobs = GaugeMetricFamily(
        "duetime_jobs",
        "Jobs by status and queue, every tenant (statuses a queue has none of read 0).",
        labels=["status", "queue"],
    )
    overdue = GaugeMetricFamily(
        "duetime_oldest_overdue_seconds",
        "How long the longest-waiting due job (scheduled, due_at passed) has waited; 0: none.",
    )
    dead = GaugeMetricFamily(
        "duetime_dead_letters", "Dead jobs (failed for good), kept for inspection and replay."
    )
    parked = GaugeMetricFamily(
        "duetime_parked_jobs", "Parked jobs: a lost attempt's effect is unknown; resolve them."
    )
    lag = GaugeMetricFamily(
        "duetime_recent_scheduling_lag_seconds",
        "Start minus due of the attempts started in the window, by quantile (NaN: none).",
        labels=["window", "quantile"],
    )
    attempts = GaugeMetricFamily(
        "duetime_recent_attempts",
        "Attempts in the window: started, succeeded, failed (failed or lost).",
        labels=["window", "outcome"],
    )
    throughput = GaugeMetricFamily(
        "duetime_recent_throughput_per_second",
        "Attempts that succeeded in the window, per second.",
        labels=["window"],
    )
    if stats is not None:
        by_queue = stats.by_queue()
        for queue in sorted(by_queue):
            for status in JobStatus:
                jobs.add_metric([str(status), queue], by_queue[queue].get(str(status), 0))
        by_status = stats.by_status()
        overdue.add_metric([], stats.oldest_overdue_seconds or 0.0)
        dead.add_metric([], by_status.get(str(JobStatus.DEAD), 0))
        parked.add_metric([], by_status.get(str(JobStatus.PARKED), 0))
        for w in stats.windows:
            window = f"{w.minutes}m"
            for quantile, field in QUANTILES:
                value: float | None = getattr(w, field)
                lag.add_metric([window, quantile], math.nan if value is None else value)
            attempts.add_metric([window, "started"], w.started)
            attempts.add_metric([window, "succeeded"], w.succeeded)
            attempts.add_metric([window, "failed"], w.failed)
            throughput.add_metric([window], w.throughput_per_second)
    yield from (jobs, overdue, dead, parked, lag, attempts, throughput)


def build_registry(app: App, *, process: bool = True) -> CollectorRegistry:
    """A registry with the store's figures and (process=True) this process's own."""
    registry = CollectorRegistry()
    registry.register(StoreCollector(app))
    if process:
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
    return registry


def registry_for(request: Request) -> CollectorRegistry:
    """The registry of the FastAPI app serving `request`, built on first use."""
    state = request.app.state
    with _registry_lock:
        registry: CollectorRegistry | None = getattr(state, "duetime_metrics", None)
        if registry is None:
            registry = build_registry(duetime_app(request))
            state.duetime_metrics = registry
    return registry


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {
            "content": {CONTENT_TYPE_LATEST.split(";")[0]: {}},
            "description": "Prometheus text format",
        },
        401: {"description": "missing or unknown bearer token"},
        403: {"description": "the token is not an admin token"},
        503: {"description": "the store is unavailable"},
    },
)
def metrics(request: Request, _: Annotated[auth.Principal, Depends(auth.admin)]) -> Response:
    """Cluster-wide figures from the store, and this server process's own, for Prometheus."""
    body = generate_latest(registry_for(request))
    return Response(content=body, media_type=CONTENT_TYPE_LATEST)
