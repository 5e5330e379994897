"""API tokens: roles and what each allows, secrets and their hashes (the secret is never kept)."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from duetime.core.errors import InvalidRequest

TOKEN_PREFIX = "dt_"
PREFIX_CHARS = 10  # what a listing shows of a secret: dt_ and 7 characters


class Role(StrEnum):
    READ = "read"  # sees its tenant's jobs, schedules and stats
    WRITE = "write"  # also enqueues, cancels, reschedules, replays single jobs, edits schedules
    ADMIN = "admin"  # also bulk-replays dead letters and sees every tenant

    def allows(self, needed: Role) -> bool:
        order = [Role.READ, Role.WRITE, Role.ADMIN]
        return order.index(self) >= order.index(needed)


def parse_role(value: str) -> Role:
    try:
        return Role(value)
    except ValueError:
        raise InvalidRequest(
            f"unknown role {value!r}; use one of: {', '.join(r.value for r in Role)}"
        ) from None


@dataclass(frozen=True)
class ApiToken:
    """A token as stored: who it speaks for and what it may do; never its secret."""

    id: int
    tenant: str
    role: Role
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None
    expires_at: datetime | None = None  # None: never

    @property
    def active(self) -> bool:
        """Not revoked (it may still have expired: see usable)."""
        return self.revoked_at is None

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def usable(self, now: datetime) -> bool:
        """Neither revoked nor expired."""
        return self.active and not self.expired(now)

    def state(self, now: datetime) -> str:
        """active, revoked or expired."""
        if self.revoked_at is not None:
            return "revoked"
        return "expired" if self.expired(now) else "active"

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "tenant": self.tenant,
            "role": str(self.role),
            "name": self.name,
            "prefix": self.prefix,
            "created_at": self.created_at.isoformat(),
            "last_used_at": self.last_used_at.isoformat() if self.last_used_at else None,
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
        }


def new_secret() -> str:
    """A fresh bearer token: 'dt_' and 43 URL-safe characters (256 random bits)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def new_session_id() -> str:
    """A dashboard session's id (the cookie's value): 'ds_' and 256 random bits."""
    return "ds_" + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    """The stored form of a secret. Secrets carry 256 random bits, so one SHA-256 is enough
    (a slow password hash protects guessable passwords, which these are not)."""
    return hashlib.sha256(secret.encode()).hexdigest()
