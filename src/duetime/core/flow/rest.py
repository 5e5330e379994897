"""The rest between a claimer's fairness looks (docs/flow-control.md): after a look that
found nothing to share out (one priority class due, one tenant), the next claims do not look
again for a count of claims and, on a clock that moves on, for a time. PriorityShare and
TenantRotation each keep one. Pure policy: no I/O.
"""

from __future__ import annotations

from datetime import datetime, timedelta


class Rest:
    """After `found_nothing`, the next `claims` claims rest, and so does every claim within
    `time` of the look (a drain claims every few milliseconds: a count of claims alone would
    be no rest at all). The time counts only on a clock that moved on since the look: one
    standing still (a test's) or set back leaves the count alone."""

    def __init__(self, claims: int, time: timedelta) -> None:
        self.claims, self.time = claims, time
        self.left = 0  # claims still to rest
        self.looked_at: datetime | None = None  # the last look's instant
        self.until: datetime | None = None  # no look before it, after one that found nothing

    def resting(self, now: datetime) -> bool:
        """Whether the claim at `now` rests (counted if so); if not, it looks at `now`."""
        timed = (
            self.looked_at is not None
            and self.until is not None
            and self.looked_at < now < self.until
        )
        if self.left > 0 or timed:
            self.left = max(0, self.left - 1)
            return True
        self.looked_at = now
        return False

    def found_nothing(self) -> None:
        """The look found nothing to share out: rest from it."""
        self.left = self.claims
        if self.looked_at is not None:
            self.until = self.looked_at + self.time

    def found_some(self) -> None:
        """The look found something to share out: the next claim looks again."""
        self.until = None
