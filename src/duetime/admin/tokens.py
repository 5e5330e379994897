"""API tokens: create one (its secret shown once), judge a presented secret, revoke one."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from duetime.admin.backend import Backend
from duetime.core.durations import parse_duration
from duetime.core.errors import InvalidRequest
from duetime.core.requests import TENANT_LIMIT, check_url_name
from duetime.core.tokens import (
    PREFIX_CHARS,
    ApiToken,
    Role,
    hash_secret,
    new_secret,
    parse_role,
)
from duetime.logs import log_event

log = logging.getLogger("duetime.operators")  # the name it logged under before the move


def create_token(
    app: Backend,
    tenant: str,
    role: Role | str,
    name: str = "",
    *,
    expires_in: timedelta | None = None,
) -> tuple[ApiToken, str]:
    """A new token and its secret; the secret is shown once and only its hash is kept.
    With `expires_in` the token is refused from that long after now."""
    check_url_name(tenant, "tenant", TENANT_LIMIT)  # the same rule as the jobs the token creates
    if expires_in is not None:  # at most 100 years, as every duration
        expires_in = parse_duration(expires_in, "a token's expiry")
    if expires_in is not None and expires_in <= timedelta(0):
        raise InvalidRequest("a token's expiry must be in the future, such as 30d or 12h")
    secret = new_secret()
    now = app.clock.now()
    token = app.store.create_token(
        tenant=tenant,
        role=parse_role(str(role)),
        name=name,
        prefix=secret[:PREFIX_CHARS],
        secret_hash=hash_secret(secret),
        now=now,
        expires_at=now + expires_in if expires_in is not None else None,
    )
    log_event(log, "token.created", token_id=token.id, tenant=tenant, role=str(token.role))
    return token, secret


@dataclass(frozen=True)
class Verdict:
    """What a presented secret (a token or a dashboard session) is worth: the token it
    proves, or None and why not, in words a caller can show."""

    token: ApiToken | None
    refused: str = ""  # "", "unknown", "revoked" or "expired"
    reason: str = ""


def _judge(token: ApiToken | None, now: datetime, unknown: str) -> Verdict:
    if token is None:
        return Verdict(None, "unknown", unknown)
    if token.revoked_at is not None:
        revoked = f"token {token.prefix}... was revoked at {_iso(token.revoked_at)}"
        return Verdict(None, "revoked", revoked)
    if token.expires_at is not None and token.expired(now):
        expired = (
            f"token {token.prefix}... expired at {_iso(token.expires_at)}; "
            "create a new one with `duetime tokens create`"
        )
        return Verdict(None, "expired", expired)
    return Verdict(token)


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_token(app: Backend, secret: str) -> Verdict:
    """The token with this secret if it may be used now (not revoked, not expired)."""
    now = app.clock.now()
    return _judge(app.store.find_token(hash_secret(secret), now), now, "unknown token")


def authenticate(app: Backend, secret: str) -> ApiToken | None:
    """The usable token with this secret, or None (unknown, revoked or expired)."""
    return check_token(app, secret).token


def revoke_token(app: Backend, token_id: int) -> ApiToken:
    token = app.store.revoke_token(token_id, app.clock.now())
    if token is None:
        raise InvalidRequest(f"token {token_id} does not exist; `duetime tokens list` shows ids")
    log_event(log, "token.revoked", token_id=token.id, tenant=token.tenant)
    return token
