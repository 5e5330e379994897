"""/login and /logout: a token typed into the login form starts a server-side session, whose
random id is the cookie; logout ends that session in the database."""

from __future__ import annotations

import hmac
import secrets
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from duetime.admin.sessions import end_session, start_session
from duetime.admin.tokens import check_token
from duetime.server.auth import SESSION_COOKIE
from duetime.server.dashboard.render import error_page, render
from duetime.server.dashboard.session import (
    clear_session,
    cookie_args,
    cross_site,
    safe_next,
    set_flash,
    user,
)
from duetime.server.state import server_state

LOGIN_COOKIE = "duetime_login"  # the login form's CSRF nonce (double submit)

router = APIRouter(include_in_schema=False)


@router.get("/login")
def login_page(request: Request, next: str | None = None) -> Response:
    target = safe_next(next)
    if not server_state(request).settings.auth or user(request) is not None:
        return RedirectResponse(target, 303)
    return _login_form(request, target)


def _login_form(request: Request, target: str, error: str = "", status: int = 200) -> Response:
    nonce = secrets.token_urlsafe(24)
    response = render(
        request,
        None,
        "login.html",
        {"login_csrf": nonce, "next": target, "error": error},
        status=status,
    )
    response.set_cookie(LOGIN_COOKIE, nonce, max_age=3600, **cookie_args(request))
    return response


@router.post("/login")
def login(
    request: Request,
    token: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "/",
) -> Response:
    target = safe_next(next)
    state = server_state(request)
    if not state.settings.auth:
        return RedirectResponse(target, 303)
    nonce = request.cookies.get(LOGIN_COOKIE, "")
    if cross_site(request) or not nonce or not hmac.compare_digest(nonce, csrf_token):
        return _login_form(
            request, target, "The login form expired or came from another site; try again.", 403
        )
    verdict = check_token(state.app, token.strip()) if token.strip() else None
    if verdict is None or verdict.token is None:
        message = "Unknown or revoked token."
        if verdict is not None and verdict.refused == "expired":
            message = f"This {verdict.reason}."
        return _login_form(request, target, message, 401)
    session_id = start_session(state.app, verdict.token)
    response = RedirectResponse(target, 303)
    response.set_cookie(SESSION_COOKIE, session_id, **cookie_args(request))
    response.delete_cookie(LOGIN_COOKIE, **cookie_args(request))
    return response


@router.post("/logout")
def logout(request: Request, csrf_token: Annotated[str | None, Form()] = None) -> Response:
    who = user(request)
    if who is not None and server_state(request).settings.auth:
        if cross_site(request) or not who.csrf_ok(csrf_token):
            return error_page(request, who, 403, "This logout form's CSRF token is wrong.")
    session_id = request.cookies.get(SESSION_COOKIE)
    if session_id and server_state(request).settings.auth:
        end_session(server_state(request).app, session_id)
    response = RedirectResponse("/login", 303)
    clear_session(request, response)
    set_flash(request, response, "ok", "Logged out.")
    return response
