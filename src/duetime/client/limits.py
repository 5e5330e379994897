"""App's limits per dependency (docs/flow-control.md): read, set, delete."""

from __future__ import annotations

from datetime import timedelta

from duetime.client.part import AppPart
from duetime.core.errors import InvalidRequest
from duetime.core.limits import LimitStatus, Rate, check_limit_key, updated_settings


class Limits(AppPart):
    """Limits per dependency key: rate, burst, concurrency, retry budget, breaker."""

    def limits(self) -> list[LimitStatus]:
        """Every limit key with its settings, running and waiting jobs, tokens and pause."""
        return self.store.limits(self.clock.now())

    def limit(self, key: str) -> LimitStatus:
        """One key's limit; InvalidRequest when it has none."""
        for found in self.limits():
            if found.settings.key == key:
                return found
        raise InvalidRequest(f"no limit {key!r}; set one with `duetime limits set {key} ...`")

    def set_limit(
        self,
        key: str,
        *,
        rate: str | Rate | None = None,
        burst: int | str | None = None,
        concurrency: int | str | None = None,
        retry_budget: float | str | None = None,
        breaker_threshold: float | str | None = None,
        breaker_cooldown: float | str | timedelta | None = None,
    ) -> LimitStatus:
        """Create or change the limit of `key`: each option given replaces that setting
        ("off" switches it off; an option left None stays as it was). `rate` is "N/s", "N/m"
        or "N/h"; `breaker_cooldown` is seconds or a duration ("30s", "2m"), 1 s to 1 day
        ("off": the default of 30 s)."""
        check_limit_key(key)
        current = next((s.settings for s in self.limits() if s.settings.key == key), None)
        settings = updated_settings(
            current,
            key,
            rate=rate,
            burst=burst,
            concurrency=concurrency,
            retry_budget=retry_budget,
            breaker_threshold=breaker_threshold,
            breaker_cooldown=breaker_cooldown,
        )
        self.store.set_limit(settings, self.clock.now())
        return self.limit(key)

    def delete_limit(self, key: str) -> None:
        """Delete the limit of `key` (its jobs then start unlimited); InvalidRequest when it
        has none."""
        if not self.store.delete_limit(check_limit_key(key)):
            raise InvalidRequest(f"no limit {key!r}; `duetime limits list` shows the limits")
