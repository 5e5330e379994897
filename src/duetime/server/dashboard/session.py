"""Who is logged in to the dashboard, and the cookies that carry it: the session (a random id
of a session stored in the database, HTTP-only and SameSite=Strict), the one-time flash
message, the login redirect, the cross-site check on forms, and safe redirects back."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any
from urllib.parse import quote

from fastapi import HTTPException, Request
from fastapi.responses import RedirectResponse, Response

from duetime.server.auth import SESSION_COOKIE, Principal, current_principal
from duetime.server.state import server_state

FLASH_COOKIE = "duetime_flash"  # a one-time message for the next page (post/redirect/get)
MAX_FLASH = 1500


def user(request: Request) -> Principal | None:
    try:
        return current_principal(request, cookie=True)
    except HTTPException:  # a malformed Authorization header: treat as not logged in
        return None


def safe_next(value: str | None, default: str = "/") -> str:
    """A local path to go to after a form; anything that could leave the site is refused."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return default
    if any(ord(c) < 32 for c in value):
        return default
    return value


def to_login(request: Request) -> Response:
    """Send an anonymous (or no longer valid) session to the login page."""
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    target = here if request.method == "GET" else "/"
    response = RedirectResponse(f"/login?next={quote(target, safe='')}", 303)
    if request.cookies.get(SESSION_COOKIE):
        clear_session(request, response)
        set_flash(
            request,
            response,
            "error",
            "Your session ended (logged out, past its 12 hours, or its token was revoked or "
            "expired); log in again.",
        )
    return response


def cookie_args(request: Request) -> dict[str, Any]:
    return {
        "httponly": True,
        "samesite": "strict",
        "secure": server_state(request).settings.secure_cookies,
        "path": "/",
    }


def clear_session(request: Request, response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, **cookie_args(request))


def set_flash(request: Request, response: Response, kind: str, text: str) -> None:
    if len(text) > MAX_FLASH:
        text = text[: MAX_FLASH - 1] + "…"
    raw = json.dumps([kind, text]).encode()
    value = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    response.set_cookie(FLASH_COOKIE, value, max_age=60, **cookie_args(request))


def read_flash(request: Request) -> dict[str, str] | None:
    value = request.cookies.get(FLASH_COOKIE)
    if not value:
        return None
    try:
        kind, text = json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
    except (ValueError, TypeError, binascii.Error):
        return None
    if kind not in ("ok", "error") or not isinstance(text, str):
        return None
    return {"kind": kind, "text": text}


def cross_site(request: Request) -> bool:
    """A browser says this form came from another site (or another port of this host)."""
    site = request.headers.get("sec-fetch-site")
    return site is not None and site not in ("same-origin", "none")


def go_back(request: Request, back: str | None, default: str, kind: str, text: str) -> Response:
    response = RedirectResponse(safe_next(back, default), 303)
    set_flash(request, response, kind, text)
    return response
