"""Dashboard sessions: a login's cookie id, stored hashed, ended by logout, age or its token."""

from __future__ import annotations

import logging
from datetime import timedelta

from duetime.admin.backend import Backend
from duetime.admin.tokens import Verdict, _judge
from duetime.core.tokens import ApiToken, hash_secret, new_session_id
from duetime.logs import log_event

log = logging.getLogger("duetime.operators")  # the name it logged under before the move

SESSION_LIFETIME = timedelta(hours=12)  # a dashboard login lasts at most this long


def start_session(app: Backend, token: ApiToken) -> str:
    """A new dashboard session for a token: the id for the cookie (only its hash is stored).
    It ends at logout, after SESSION_LIFETIME, or when the token is revoked or expires."""
    now = app.clock.now()
    expires = now + SESSION_LIFETIME
    if token.expires_at is not None:
        expires = min(expires, token.expires_at)
    session_id = new_session_id()
    app.store.create_session(
        secret_hash=hash_secret(session_id), token_id=token.id, now=now, expires_at=expires
    )
    log_event(log, "session.started", token_id=token.id, tenant=token.tenant)
    return session_id


def check_session(app: Backend, session_id: str) -> Verdict:
    """The token behind a dashboard session, if the session and the token are both usable."""
    now = app.clock.now()
    token = app.store.find_session(hash_secret(session_id), now)
    return _judge(token, now, "the session ended (logged out or expired)")


def end_session(app: Backend, session_id: str) -> None:
    """Log a dashboard session out: its id stops working at once, wherever it was copied."""
    app.store.end_session(hash_secret(session_id))
