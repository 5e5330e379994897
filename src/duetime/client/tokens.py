"""App's API tokens of its tenant: create, list, revoke (duetime.admin.tokens does the work)."""

from __future__ import annotations

from datetime import timedelta

from duetime.admin import tokens
from duetime.client.part import AppPart
from duetime.core.durations import parse_duration
from duetime.core.tokens import ApiToken


class Tokens(AppPart):
    """API tokens of the app's tenant."""

    def create_token(
        self,
        role: str = "read",
        *,
        name: str = "",
        expires_in: float | timedelta | str | None = None,
    ) -> tuple[ApiToken, str]:
        """A new API token for this app's tenant and its secret (shown once, stored hashed).
        With `expires_in` (seconds, a timedelta or '30d') it is refused from then on."""
        expiry = parse_duration(expires_in, "expires_in") if expires_in is not None else None
        return tokens.create_token(self, self.tenant, role, name, expires_in=expiry)

    def list_tokens(self) -> list[ApiToken]:
        """This tenant's tokens, revoked ones included."""
        return self.store.list_tokens(self.tenant)

    def revoke_token(self, token_id: int) -> ApiToken:
        """Revoke an API token of the tenant by id: it is refused from then on."""
        return tokens.revoke_token(self, token_id)
