"""Tenant fairness: TenantRotation rotates one process's saturated claims across the tenants
with due work (docs/flow-control.md). Pure policy: no I/O; its state is the runtime's
(runtime/fairness.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta

from duetime.core.flow.choice import Candidate
from duetime.core.flow.rest import Rest

# tenants with due work a claim rotates over at most (the next claims go on after the last)
TENANT_PROBES = 8
# after a saturated claim found at most one tenant with due work, the next claims that do
# not look for others, and the time in which none looks (a drain claims every few
# milliseconds: eight of its claims would be no rest at all)
TENANT_IDLE = 8
TENANT_IDLE_TIME = timedelta(seconds=0.25)


class TenantRotation:
    """Rotates one process's saturated claims across the tenants with due work, weighted fair
    queueing (deterministic): each tenant has a tag, the virtual time its slots so far take; a
    slot goes to the tenant whose next slot would end first (tag + 1 / weight; ties by name),
    whose tag grows by 1 / its weight.
    A tenant joining starts at the lowest tag of the others, so it neither waits for the
    others' past nor takes a burst. Only a claim that follows a saturated one looks (a claim
    that took fewer than its slots took every due job); after finding one tenant alone, the
    next TENANT_IDLE claims do not look, nor any within TENANT_IDLE_TIME of that look (on a
    clock that moves on)."""

    def __init__(self) -> None:
        self.tags: dict[str, float] = {}
        self.after = ""  # where the last look stopped, with more tenants than TENANT_PROBES
        self.rest = Rest(TENANT_IDLE, TENANT_IDLE_TIME)  # after a look found one tenant
        self.saturated = True

    def wanted(self, now: datetime) -> bool:
        """Whether this claim, at `now`, looks for the tenants with due work."""
        if not self.saturated:
            return False
        return not self.rest.resting(now)

    def due(self, next_after: Callable[[str], str | None]) -> list[str]:
        """The tenants with due work to rotate over (none when fewer than two): up to
        TENANT_PROBES, from `next_after(name)` (the first tenant after name with due work,
        or None), starting after where the last look stopped and wrapping around once."""
        found: list[str] = []
        after, wrapped = self.after, self.after == ""
        while len(found) < TENANT_PROBES:
            tenant = next_after(after)
            if tenant is None:
                if wrapped:
                    break
                after, wrapped = "", True
                continue
            if tenant in found:
                break
            found.append(tenant)
            after = tenant
        self.after = found[-1] if len(found) >= TENANT_PROBES else ""
        if len(found) < 2:
            self.rest.found_nothing()
            self.tags.clear()
            return []
        self.rest.found_some()
        return found

    def order(
        self, lines: Mapping[str, Sequence[Candidate]], weights: Mapping[str, float], limit: int
    ) -> list[Candidate]:
        """Up to `limit` candidates of `lines` (each tenant's, in claim order) in the order
        their tenants' tags give, the tags charged as if each were started."""
        floor = min((self.tags[t] for t in lines if t in self.tags), default=0.0)
        self.tags = {t: self.tags.get(t, floor) - floor for t in lines}
        at = dict.fromkeys(lines, 0)
        out: list[Candidate] = []
        while len(out) < limit:
            ready = [t for t in lines if at[t] < len(lines[t])]
            if not ready:
                break
            # the earliest end of a next slot: a heavier tenant's slots are shorter
            t = min(ready, key=lambda name: (self.tags[name] + 1.0 / weights.get(name, 1.0), name))
            out.append(lines[t][at[t]])
            at[t] += 1
            self.tags[t] += 1.0 / weights.get(t, 1.0)
        return out

    def claimed(self, limit: int, found: int) -> None:
        self.saturated = found >= limit
