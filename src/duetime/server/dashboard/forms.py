"""What a dashboard form goes through: the CSRF and role guard of every form that changes
something, and reading the fields people type."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import Request
from fastapi.responses import Response

from duetime.core.errors import InvalidRequest
from duetime.core.tokens import Role
from duetime.server.auth import Principal
from duetime.server.dashboard.render import error_page
from duetime.server.dashboard.session import cross_site, to_login
from duetime.server.schemas import sane_instant


def guard(
    request: Request, who: Principal | None, csrf_token: str | None, role: Role
) -> Response | None:
    """None when a state-changing form may proceed; otherwise the response refusing it."""
    if who is None:
        return to_login(request)
    if cross_site(request) or not who.csrf_ok(csrf_token):
        return error_page(
            request,
            who,
            403,
            "This form's CSRF token is missing or wrong (or it came from another site), so "
            "nothing was changed. Reload the page and try again.",
        )
    if not who.role.allows(role):
        return error_page(
            request, who, 403, f"This needs a {role} token; your token's role is {who.role}."
        )
    return None


def opt(value: str | None) -> str | None:
    value = value.strip() if value is not None else None
    return value or None


def parse_when(value: str | None, what: str) -> tuple[datetime, bool]:
    """A time typed in a form, in UTC, and whether it lacked an offset (then it is read as UTC,
    which is what a datetime-local input sends)."""
    text = (value or "").strip()
    if not text:
        raise InvalidRequest(f"{what} is empty; give a time such as 2026-03-01T09:00")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidRequest(
            f"{what} {text!r} is not a time; write it like 2026-03-01T09:00 (UTC) "
            "or 2026-03-01T09:00:00+01:00"
        ) from None
    naive = parsed.tzinfo is None or parsed.utcoffset() is None
    try:
        return sane_instant(parsed.replace(tzinfo=UTC) if naive else parsed), naive
    except ValueError as exc:
        raise InvalidRequest(f"{what} {text!r} {exc}") from None
