"""/v1/queues and /v1/tenants: flow control of queues and tenants (docs/flow-control.md).

Anyone with a read token lists them (a tenant's token sees its own tenant, and queue counts
of its own jobs); pausing, resuming and changing limits is an operator's action: admin only.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from pydantic import AfterValidator

from duetime.admin.flow import queue_flows, set_queue_flow, set_tenant_flow, tenant_flows
from duetime.core.flow.parsers import KEEP, Keep
from duetime.core.flow.records import FlowCounts, QueueFlow
from duetime.server.auth import Principal, admin, reader
from duetime.server.paths import named
from duetime.server.schemas import AUTH, LimitsIn, QueueIn, QueueOut, TenantOut, clean_text
from duetime.server.state import duetime_app

router = APIRouter(prefix="/v1")

# queue and tenant names: up to 100 characters, as everywhere
Name = Annotated[str, Path(min_length=1, max_length=100), AfterValidator(clean_text)]


@router.get("/queues", response_model=list[QueueOut], responses=AUTH, tags=["queues"])
def list_queues(request: Request, who: Annotated[Principal, Depends(reader)]) -> list[Any]:
    """Every queue with settings or waiting/running jobs: settings, backlog, running, and the
    due jobs not started (waiting, waiting_seconds)."""
    flows = queue_flows(duetime_app(request), who.tenant_filter)
    return [f.to_json() for f in flows]


@router.get(named("/queues/{name}"), response_model=QueueOut, responses=AUTH, tags=["queues"])
def get_queue(name: Name, request: Request, who: Annotated[Principal, Depends(reader)]) -> Any:
    """One queue: its settings (the defaults if never set), backlog, running and waiting."""
    return _queue(request, name, who)


@router.patch(named("/queues/{name}"), response_model=QueueOut, responses=AUTH, tags=["queues"])
def set_queue(
    name: Name, body: QueueIn, request: Request, who: Annotated[Principal, Depends(admin)]
) -> Any:
    """Change a queue's settings: only the fields sent change; null removes a limit."""
    request.state.fields = ("concurrency", "max_backlog", "weight", "paused")
    sent = body.model_fields_set
    set_queue_flow(
        duetime_app(request),
        name,
        paused=body.paused,
        concurrency=_given(sent, "concurrency", body.concurrency),
        max_backlog=_given(sent, "max_backlog", body.max_backlog),
        weight=body.weight,
    )
    return _queue(request, name, who)


@router.post(
    named("/queues/{name}/pause"), response_model=QueueOut, responses=AUTH, tags=["queues"]
)
def pause_queue(name: Name, request: Request, who: Annotated[Principal, Depends(admin)]) -> Any:
    """Start no more jobs of the queue; it still accepts jobs, running ones finish."""
    set_queue_flow(duetime_app(request), name, paused=True)
    return _queue(request, name, who)


@router.post(
    named("/queues/{name}/resume"), response_model=QueueOut, responses=AUTH, tags=["queues"]
)
def resume_queue(name: Name, request: Request, who: Annotated[Principal, Depends(admin)]) -> Any:
    """Start the queue's jobs again."""
    set_queue_flow(duetime_app(request), name, paused=False)
    return _queue(request, name, who)


@router.get("/tenants", response_model=list[TenantOut], responses=AUTH, tags=["tenants"])
def list_tenants(request: Request, who: Annotated[Principal, Depends(reader)]) -> list[Any]:
    """Every tenant with settings or waiting/running jobs (a tenant's token: its own)."""
    flows = tenant_flows(duetime_app(request), who.tenant_filter)
    return [f.to_json() for f in flows]


@router.patch(named("/tenants/{name}"), response_model=TenantOut, responses=AUTH, tags=["tenants"])
def set_tenant(
    name: Name, body: LimitsIn, request: Request, who: Annotated[Principal, Depends(admin)]
) -> Any:
    """Change a tenant's limits: only the fields sent change; null removes a limit."""
    request.state.fields = ("concurrency", "max_backlog", "weight")
    sent = body.model_fields_set
    app = duetime_app(request)
    set_tenant_flow(
        app,
        name,
        concurrency=_given(sent, "concurrency", body.concurrency),
        max_backlog=_given(sent, "max_backlog", body.max_backlog),
        weight=body.weight,
    )
    [flow] = tenant_flows(app, name)
    return flow.to_json()


def _given(sent: set[str], field: str, value: int | None) -> int | Keep | None:
    return value if field in sent else KEEP


def _queue(request: Request, name: str, who: Principal) -> Any:
    flows = queue_flows(duetime_app(request), who.tenant_filter)
    found = [f for f in flows if f.settings.queue == name]
    if found:
        return found[0].to_json()
    return QueueFlow(duetime_app(request).queue(name), FlowCounts()).to_json()
