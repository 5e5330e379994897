"""/queues: every queue's flow settings with its backlog, running and waiting counts (what
`duetime queues list` shows), and for admins the controls: pause, resume, concurrency, max backlog,
weight (docs/flow-control.md). Tenants' settings are listed below. A tenant's token sees the
counts of its own jobs; only admins change anything (queues are shared by every tenant)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from duetime.admin.flow import queue_flows, set_queue_flow, set_tenant_flow, tenant_flows
from duetime.core.errors import DuetimeError, StoreUnavailable
from duetime.core.flow.parsers import KEEP, Keep, parse_limit, parse_weight
from duetime.core.tokens import Role
from duetime.server.dashboard.forms import guard, opt
from duetime.server.dashboard.render import render
from duetime.server.dashboard.session import go_back, to_login, user
from duetime.server.paths import named
from duetime.server.state import duetime_app

router = APIRouter(include_in_schema=False)


@router.get("/queues")
def queues_page(request: Request) -> Response:
    who = user(request)
    if who is None:
        return to_login(request)
    app = duetime_app(request)
    found = app.store.flow_counts(app.clock.now())
    return render(
        request,
        who,
        "queues.html",
        {
            "queues": queue_flows(app, who.tenant_filter, found),
            "tenants": tenant_flows(app, who.tenant_filter, found),
            "can_steer": who.role.allows(Role.ADMIN),
        },
        nav="queues",
    )


@router.post(named("/queues/{name}/pause"))
def pause_queue(
    request: Request, name: str, csrf_token: Annotated[str | None, Form()] = None
) -> Response:
    return _act(
        request,
        csrf_token,
        f"Queue {name!r} paused: it starts no jobs until resumed.",
        lambda: set_queue_flow(duetime_app(request), name, paused=True),
    )


@router.post(named("/queues/{name}/resume"))
def resume_queue(
    request: Request, name: str, csrf_token: Annotated[str | None, Form()] = None
) -> Response:
    return _act(
        request,
        csrf_token,
        f"Queue {name!r} resumed.",
        lambda: set_queue_flow(duetime_app(request), name, paused=False),
    )


@router.post(named("/queues/{name}/limits"))
def set_queue_limits(
    request: Request,
    name: str,
    csrf_token: Annotated[str | None, Form()] = None,
    concurrency: Annotated[str | None, Form()] = None,
    max_backlog: Annotated[str | None, Form()] = None,
    weight: Annotated[str | None, Form()] = None,
) -> Response:
    """An empty field keeps its value; `none` removes a limit."""

    def act() -> object:
        return set_queue_flow(
            duetime_app(request),
            name,
            concurrency=_limit(concurrency, "concurrency"),
            max_backlog=_limit(max_backlog, "max backlog"),
            weight=_weight(weight),
        )

    return _act(request, csrf_token, f"Queue {name!r} changed.", act)


@router.post(named("/tenants/{name}/limits"))
def set_tenant_limits(
    request: Request,
    name: str,
    csrf_token: Annotated[str | None, Form()] = None,
    concurrency: Annotated[str | None, Form()] = None,
    max_backlog: Annotated[str | None, Form()] = None,
    weight: Annotated[str | None, Form()] = None,
) -> Response:
    def act() -> object:
        return set_tenant_flow(
            duetime_app(request),
            name,
            concurrency=_limit(concurrency, "concurrency"),
            max_backlog=_limit(max_backlog, "max backlog"),
            weight=_weight(weight),
        )

    return _act(request, csrf_token, f"Tenant {name!r} changed.", act)


def _limit(value: str | None, what: str) -> int | Keep | None:
    text = opt(value)
    return KEEP if text is None else parse_limit(text, what)


def _weight(value: str | None) -> float | None:
    text = opt(value)
    return None if text is None else parse_weight(text)


def _act(
    request: Request, csrf_token: str | None, message: str, act: Callable[[], object]
) -> Response:
    who = user(request)
    refused = guard(request, who, csrf_token, Role.ADMIN)
    if refused is not None or who is None:
        return refused or to_login(request)
    try:
        act()
    except DuetimeError as exc:
        if isinstance(exc, StoreUnavailable):
            raise
        return go_back(request, None, "/queues", "error", str(exc))
    return go_back(request, None, "/queues", "ok", message)
