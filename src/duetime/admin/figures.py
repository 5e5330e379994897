"""The figures of `duetime stats`, the API's /stats and the dashboard's overview."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from duetime.admin.backend import Backend
from duetime.admin.flow import queue_flows, tenant_flows
from duetime.core.stats import Stats, summarize

SAMPLE_LIMIT = 100_000  # attempts read for one stats call (the newest in the last hour)


def stats(app: Backend, tenant: str | None) -> Stats:
    """Counts by status and queue, oldest overdue age, lag and throughput (5 and 60 min)."""
    now = app.clock.now()
    store = app.store
    samples = store.attempt_samples(tenant, now - timedelta(hours=1), SAMPLE_LIMIT)
    summary = summarize(
        now,
        store.job_counts(tenant),
        store.oldest_overdue(tenant, now),
        samples,
        sample_limit=SAMPLE_LIMIT,
    )
    found = store.flow_counts(now)  # backlog, running and waiting per queue and tenant
    return replace(
        summary,
        queues=tuple(queue_flows(app, tenant, found)),
        tenants=tuple(tenant_flows(app, tenant, found)),
    )
