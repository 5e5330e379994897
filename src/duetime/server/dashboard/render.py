"""Rendering a dashboard page: the Jinja environment, the headers every page carries, the
context every template sees, and error pages."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2
from fastapi import Request
from fastapi.responses import Response
from fastapi.templating import Jinja2Templates

from duetime.core.states import JobStatus
from duetime.core.tokens import Role
from duetime.server.auth import Principal
from duetime.server.dashboard.filters import FILTERS
from duetime.server.dashboard.session import FLASH_COOKIE, cookie_args, read_flash
from duetime.server.state import server_state

TEMPLATES = Path(__file__).parent.parent / "templates"
PAGE_SIZE = 50  # rows of one listing page

# the order statuses appear in everywhere: live work, then what needs a human, then the end
STATUS_ORDER: tuple[JobStatus, ...] = (
    JobStatus.SCHEDULED,
    JobStatus.WAITING,
    JobStatus.RUNNING,
    JobStatus.CANCEL_REQUESTED,
    JobStatus.PARKED,
    JobStatus.DEAD,
    JobStatus.SUCCEEDED,
    JobStatus.CANCELLED,
    JobStatus.EXPIRED,
)

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
        "object-src 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(FILTERS)
    env.globals["STATUSES"] = [str(s) for s in STATUS_ORDER]
    return env


templates = Jinja2Templates(env=_environment())


def render(
    request: Request,
    who: Principal | None,
    template: str,
    context: Mapping[str, Any] | None = None,
    *,
    status: int = 200,
    nav: str = "",
) -> Response:
    flash = read_flash(request)
    settings = server_state(request).settings
    full: dict[str, Any] = {
        "who": who,
        "auth": settings.auth,
        "csrf": who.csrf_token() if who else "",
        "can_write": who is not None and who.role.allows(Role.WRITE),
        "can_admin": who is not None and who.role.allows(Role.ADMIN),
        "all_tenants": who is not None and who.sees_all,
        "flash": flash,
        "nav": nav,
        "here": request.url.path + (f"?{request.url.query}" if request.url.query else ""),
        **(context or {}),
    }
    response = templates.TemplateResponse(
        request, template, full, status_code=status, headers=SECURITY_HEADERS
    )
    if flash is not None:
        response.delete_cookie(FLASH_COOKIE, **cookie_args(request))
    return response


def error_page(request: Request, who: Principal | None, status: int, message: str) -> Response:
    titles = {403: "Not allowed", 404: "Not found", 400: "Bad request"}
    return render(
        request,
        who,
        "error.html",
        {"status": status, "title": titles.get(status, "Error"), "message": message},
        status=status,
    )
