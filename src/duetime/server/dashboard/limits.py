"""/limits: limits per dependency (what `duetime limits list` shows), with forms to create,
change and delete them; admins only (a limit holds every tenant's jobs)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from duetime.core.errors import DuetimeError, StoreUnavailable
from duetime.core.tokens import Role
from duetime.server.dashboard.forms import guard, opt
from duetime.server.dashboard.render import error_page, render
from duetime.server.dashboard.session import go_back, to_login, user
from duetime.server.state import duetime_app

router = APIRouter(include_in_schema=False)

ONLY_ADMINS = "Limits hold every tenant's jobs: only admin tokens may see or change them."


@router.get("/limits")
def limits_page(request: Request) -> Response:
    who = user(request)
    if who is None:
        return to_login(request)
    if not who.role.allows(Role.ADMIN):
        return error_page(request, who, 403, ONLY_ADMINS)
    app = duetime_app(request)
    now = app.clock.now()
    rows = [{"s": s, "breaker": s.breaker(now), "figures": s.to_json(now)} for s in app.limits()]
    return render(request, who, "limits.html", {"rows": rows}, nav="limits")


@router.post("/limits/set")
def set_limit(
    request: Request,
    csrf_token: Annotated[str | None, Form()] = None,
    key: Annotated[str | None, Form()] = None,
    rate: Annotated[str | None, Form()] = None,
    burst: Annotated[str | None, Form()] = None,
    concurrency: Annotated[str | None, Form()] = None,
    retry_budget: Annotated[str | None, Form()] = None,
    breaker_threshold: Annotated[str | None, Form()] = None,
    breaker_cooldown: Annotated[str | None, Form()] = None,
) -> Response:
    """Create a key's limits or change them (as `duetime limits set`): an empty field keeps
    its setting, "off" switches it off."""
    who = user(request)
    refused = guard(request, who, csrf_token, Role.ADMIN)
    if refused is not None:
        return refused
    name = opt(key) or ""
    try:
        duetime_app(request).set_limit(
            name,
            rate=opt(rate),
            burst=opt(burst),
            concurrency=opt(concurrency),
            retry_budget=opt(retry_budget),
            breaker_threshold=opt(breaker_threshold),
            breaker_cooldown=opt(breaker_cooldown),
        )
    except DuetimeError as exc:
        if isinstance(exc, StoreUnavailable):
            raise
        return go_back(request, None, "/limits", "error", str(exc))
    return go_back(request, None, "/limits", "ok", f"Limit {name!r} saved.")


@router.post("/limits/delete")
def delete_limit(
    request: Request,
    csrf_token: Annotated[str | None, Form()] = None,
    key: Annotated[str | None, Form()] = None,
) -> Response:
    who = user(request)
    refused = guard(request, who, csrf_token, Role.ADMIN)
    if refused is not None:
        return refused
    name = opt(key) or ""
    try:
        duetime_app(request).delete_limit(name)
    except DuetimeError as exc:
        if isinstance(exc, StoreUnavailable):
            raise
        return go_back(request, None, "/limits", "error", str(exc))
    return go_back(request, None, "/limits", "ok", f"Limit {name!r} deleted.")
