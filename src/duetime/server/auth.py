"""Who is asking: bearer tokens for the API, a session cookie for the dashboard (a random
session id stored hashed in the database, never the token), roles, and the tenant a caller
may act in."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from fastapi import HTTPException, Request

from duetime.admin.sessions import check_session
from duetime.admin.tokens import Verdict, check_token
from duetime.client import App
from duetime.core.tokens import Role
from duetime.server.state import duetime_app, server_state

SESSION_COOKIE = "duetime_session"
_NO_AUTH_KEY = secrets.token_bytes(32)  # keys CSRF tokens when there is no token secret
CSRF_FIELD = "csrf_token"


@dataclass(frozen=True)
class Principal:
    """The caller: a tenant, a role, and (with auth on) the token that proved it."""

    tenant: str
    role: Role
    token_id: int | None = None
    secret: str | None = None  # the token secret or session id, kept to derive the CSRF token

    @property
    def sees_all(self) -> bool:
        """Admins see and steer every tenant's jobs and schedules."""
        return self.role is Role.ADMIN

    @property
    def tenant_filter(self) -> str | None:
        return None if self.sees_all else self.tenant

    def csrf_token(self) -> str:
        """A per-session CSRF token, derived from the session's secret (nothing stored)."""
        key = self.secret.encode() if self.secret else _NO_AUTH_KEY + self.tenant.encode()
        return hmac.new(key, b"duetime-csrf", hashlib.sha256).hexdigest()

    def csrf_ok(self, value: str | None) -> bool:
        return value is not None and hmac.compare_digest(value, self.csrf_token())


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _local_only(request: Request) -> None:
    """Without tokens, anything that reaches a loopback port is admin: refuse requests that
    name another host (DNS rebinding) and writes another site's page makes (cross-site forms
    and fetches), which a browser on the same machine would otherwise carry."""
    host = urlsplit(f"//{request.headers.get('host', '')}").hostname or ""
    if not is_loopback(host):
        raise HTTPException(
            403, "with --no-auth the server answers only requests addressed to a loopback host"
        )
    if request.method in SAFE_METHODS:
        return
    origin = request.headers.get("origin")
    origin_host = urlsplit(origin).hostname or "" if origin and origin != "null" else ""
    if request.headers.get("sec-fetch-site") in ("cross-site", "same-site") or (
        origin is not None and not is_loopback(origin_host)
    ):
        raise HTTPException(403, "with --no-auth, requests from other sites' pages are refused")


def _unauthorized(message: str) -> HTTPException:
    return HTTPException(401, message, headers={"WWW-Authenticate": "Bearer"})


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise _unauthorized("the Authorization header must be 'Bearer <token>'")
    return value.strip()


def _principal(verdict: Verdict, secret: str) -> Principal | None:
    token = verdict.token
    return Principal(token.tenant, token.role, token.id, secret) if token is not None else None


def identify(request: Request, *, cookie: bool) -> tuple[Principal | None, str]:
    """The caller, from the bearer token (or, when `cookie`, the dashboard session), or None
    and why, when a known token was refused (revoked or expired); otherwise ""."""
    state = server_state(request)
    if not state.settings.auth:
        _local_only(request)
        return Principal(state.settings.tenant, Role.ADMIN), ""
    secret = _bearer(request)
    if secret is not None:
        verdict = check_token(state.app, secret)
        return _principal(verdict, secret), verdict.reason if verdict.refused != "unknown" else ""
    session_id = request.cookies.get(SESSION_COOKIE) if cookie else None
    if session_id is None:
        return None, ""
    verdict = check_session(state.app, session_id)
    return _principal(verdict, session_id), ""  # the login page says why a session ended


def current_principal(request: Request, *, cookie: bool) -> Principal | None:
    """The caller, from the bearer token (or, when `cookie`, the dashboard session)."""
    return identify(request, cookie=cookie)[0]


def needs(role: Role) -> Callable[[Request], Principal]:
    """A FastAPI dependency: the caller, who must hold at least `role`.

    GET requests may use the dashboard's session cookie (its pages refresh figures with
    fetch); anything that changes state needs the Authorization header, so a cross-site
    form cannot ride on the cookie.
    """

    def dependency(request: Request) -> Principal:
        who, reason = identify(request, cookie=request.method == "GET")
        if who is None:
            if reason:
                raise _unauthorized(reason)
            raise _unauthorized(
                "missing or unknown bearer token; send 'Authorization: Bearer <token>' "
                "(create one with `duetime tokens create`)"
            )
        if not who.role.allows(role):
            raise HTTPException(403, f"this needs a {role} token; this token's role is {who.role}")
        return who

    return dependency


reader = needs(Role.READ)
writer = needs(Role.WRITE)
admin = needs(Role.ADMIN)


def scope_tenant(who: Principal, tenant: str | None) -> str | None:
    """The tenant a listing covers: the caller's own, or for admins every tenant or the one
    they name with ?tenant=."""
    if tenant is None:
        return who.tenant_filter
    if who.sees_all or tenant == who.tenant:
        return tenant
    raise HTTPException(403, "only admin tokens may choose a tenant; leave tenant out")


def act_as(request: Request, who: Principal, tenant: str | None) -> App:
    """The App view a request acts through: the caller's tenant, or (admins) the named one."""
    chosen = scope_tenant(who, tenant) or who.tenant
    return duetime_app(request).scoped(chosen)
