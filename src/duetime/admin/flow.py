"""Flow control of queues and tenants (docs/flow-control.md): their figures and settings."""

from __future__ import annotations

import logging
from typing import Any

from duetime.admin.backend import Backend
from duetime.core.flow.parsers import KEEP, Keep, check_limit, check_weight
from duetime.core.flow.records import FlowCounts, QueueFlow, TenantFlow, TenantSettings
from duetime.core.outbox import QueueSettings
from duetime.core.requests import TENANT_LIMIT, check_url_name
from duetime.logs import log_event

log = logging.getLogger("duetime.operators")  # the name it logged under before the move


Counts = list[tuple[str, str, FlowCounts]]


def queue_flows(app: Backend, tenant: str | None, found: Counts | None = None) -> list[QueueFlow]:
    """Every queue with settings or waiting/running jobs: its settings, backlog, running and
    waiting. With `tenant`, only the queues holding that tenant's waiting or running jobs,
    counting only them: a tenant sees no queue that only other tenants use. By name."""
    store = app.store
    settings = {q.queue: q for q in store.queue_settings()}
    counts: dict[str, FlowCounts] = {}
    for queue, owner, c in store.flow_counts(app.clock.now()) if found is None else found:
        if tenant is None or owner == tenant:
            counts[queue] = counts.get(queue, FlowCounts()) + c
    names = sorted(set(settings) | set(counts)) if tenant is None else sorted(counts)
    return [
        QueueFlow(settings.get(name, QueueSettings(name)), counts.get(name, FlowCounts()))
        for name in names
    ]


def tenant_flows(app: Backend, tenant: str | None, found: Counts | None = None) -> list[TenantFlow]:
    """Every tenant with settings or waiting/running jobs (only `tenant`, when given): its
    settings, backlog, running and waiting. By name."""
    store = app.store
    settings = {t.tenant: t for t in store.tenant_settings()}
    counts: dict[str, FlowCounts] = {}
    for _, owner, c in store.flow_counts(app.clock.now()) if found is None else found:
        counts[owner] = counts.get(owner, FlowCounts()) + c
    names = sorted(set(settings) | set(counts))
    return [
        TenantFlow(settings.get(name, TenantSettings(name)), counts.get(name, FlowCounts()))
        for name in names
        if tenant is None or name == tenant
    ]


def set_queue_flow(
    app: Backend,
    name: str,
    *,
    paused: bool | None = None,
    concurrency: int | Keep | None = KEEP,
    max_backlog: int | Keep | None = KEEP,
    weight: float | None = None,
) -> QueueSettings:
    """Pause or resume a queue, or change its limits (KEEP/None: see Store.set_queue)."""
    queue = check_url_name(name, "queue", 100)
    settings = app.store.set_queue(
        queue,
        app.clock.now(),
        paused=paused,
        concurrency=_limit(concurrency, "concurrency"),
        max_backlog=_limit(max_backlog, "max_backlog"),
        weight=check_weight(weight),
    )
    log_event(log, "queue.set", queue=queue, **_changed(paused, concurrency, max_backlog, weight))
    return settings


def set_tenant_flow(
    app: Backend,
    name: str,
    *,
    concurrency: int | Keep | None = KEEP,
    max_backlog: int | Keep | None = KEEP,
    weight: float | None = None,
) -> TenantSettings:
    """Change a tenant's limits (KEEP/None: see Store.set_tenant)."""
    tenant = check_url_name(name, "tenant", TENANT_LIMIT)
    settings = app.store.set_tenant(
        tenant,
        app.clock.now(),
        concurrency=_limit(concurrency, "concurrency"),
        max_backlog=_limit(max_backlog, "max_backlog"),
        weight=check_weight(weight),
    )
    log_event(log, "tenant.set", tenant=tenant, **_changed(None, concurrency, max_backlog, weight))
    return settings


def _limit(value: int | Keep | None, what: str) -> int | Keep | None:
    return value if isinstance(value, Keep) else check_limit(value, what)


def _changed(
    paused: bool | None,
    concurrency: int | Keep | None,
    max_backlog: int | Keep | None,
    weight: float | None,
) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if paused is not None:
        fields["paused"] = paused
    if not isinstance(concurrency, Keep):
        fields["concurrency"] = concurrency
    if not isinstance(max_backlog, Keep):
        fields["max_backlog"] = max_backlog
    if weight is not None:
        fields["weight"] = weight
    return fields
