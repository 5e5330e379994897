"""The claim policy of one claimer (docs/flow-control.md, "Priorities" and "Tenants"): the
fairness memory that carries from one claim to the next, kept here in the runtime, not in the
store. A worker's slots (runtime/slots.py) claim through a ClaimFairness, the relay's
dispatcher (runtime/outbox/relay.py) dispatches through a DispatchFairness; each makes the plan of
its next claim (store/base.py ClaimPlan), passes it into the store's claim, and learns from
what the claim found (Claimed.found) whether it took every due job.

- PriorityShare: under saturation each lower priority class keeps its minimum share of the
  claimer's slots (the share: App.priority_share, `duetime worker --priority-share`).
- TenantRotation: after a saturated claim the next one rotates over the tenants with due work.
- The weighted queues' credit: their turns carried from claim to claim (core/flow/choice.choose).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime

from duetime.core.claim_floor import ClaimFloor
from duetime.core.clock import Instant, read_instant
from duetime.core.flow.rotation import TenantRotation
from duetime.core.flow.share import PRIORITY_SHARE, PriorityShare
from duetime.core.models import Wakeup
from duetime.store.base import Claimed, ClaimPlan, DispatchedEvents, Store


class ClaimFairness:
    """A worker's claims' memory: its priority share, tenant rotation and queue credit, and
    where its claims start their walk of the due jobs (`floor`, core/claim_floor.py; None:
    always from the start)."""

    def __init__(self, share: float = PRIORITY_SHARE, floor: ClaimFloor | None = None) -> None:
        self.priorities = PriorityShare(share)  # each lower priority class's share of slots
        self.rotation = TenantRotation()  # saturated claims rotate over tenants
        self.credit: dict[str, float] = {}  # weighted queues' turns, claim to claim
        self.floor = floor
        self._floor_lock = threading.Lock()  # claims in store threads, wake-ups in the loop

    def set_share(self, share: float) -> None:
        """Another priority share (0: strict priority order); its memory starts afresh."""
        if share != self.priorities.share:
            self.priorities = PriorityShare(share)

    def plan(self, limit: int, now: datetime) -> ClaimPlan:
        """The next claim's plan at `now`: the lower classes' reserved slots now and then, the
        tenants' turns after a saturated claim, the queues' credit."""
        per_class = self.priorities.reserve(limit, now)
        rotate = self.rotation.wanted(now)
        return ClaimPlan(
            per_class=per_class,
            priorities=self.priorities,
            rotation=self.rotation if rotate else None,
            credit=self.credit,
            floor=self._floor_start(now),
        )

    def claimed(self, limit: int, found: int) -> None:
        """After a claim of `limit` slots that found `found` due jobs (not what it started:
        a controlled claim starts fewer than it chose when concurrent claims took some)."""
        self.priorities.claimed(limit, found)
        self.rotation.claimed(limit, found)

    def claim(
        self,
        store: Store,
        *,
        worker_id: str,
        queues: Sequence[str] | None,
        limit: int,
        now: Instant,
        tasks: Sequence[str] | None = None,
    ) -> Claimed:
        """One claim of `store` as this policy plans it (`now`: Store.claim's)."""
        if limit <= 0:
            return Claimed([], 0)
        plan = self.plan(limit, read_instant(now))  # (the claim reads its own instant)
        got = store.claim_planned(
            plan, worker_id=worker_id, queues=queues, limit=limit, now=now, tasks=tasks
        )
        self.claimed(limit, got.found)
        if self.floor is not None:
            with self._floor_lock:
                self.floor.claimed(limit, got.found, got.plain)
        return got

    def _floor_start(self, now: datetime) -> datetime | None:
        if self.floor is None:
            return None
        with self._floor_lock:
            return self.floor.start(now)

    def heard(self, wakeups: Sequence[Wakeup]) -> None:
        """Wake-ups from the store, or what the timer's look below the floor found
        (runtime/timer.py): work due before the floor lowers it."""
        if self.floor is not None:
            with self._floor_lock:
                for wakeup in wakeups:
                    self.floor.heard(wakeup.due_at)

    def floor_now(self) -> datetime | None:
        """Where the next claim starts its walk (None: from the first entry, or no floor)."""
        if self.floor is None:
            return None
        with self._floor_lock:
            return self.floor.floor


class DispatchFairness:
    """The relay's dispatches' memory: its tenant rotation (no priority share: a worker
    process's; no queue credit)."""

    def __init__(self) -> None:
        self.rotation = TenantRotation()

    def dispatch(
        self, store: Store, now: Instant, limit: int, lease_seconds: float
    ) -> DispatchedEvents:
        """One dispatch of `store` as this policy plans it: after a saturated dispatch of
        outbox-mode queues, the next rotates over the tenants with due work."""
        if limit <= 0:
            return DispatchedEvents([])
        dispatching = bool(store.outbox_queues())  # none: nothing to rotate over
        rotate = dispatching and self.rotation.wanted(read_instant(now))
        got = store.dispatch_planned(
            now, limit, lease_seconds, rotation=self.rotation if rotate else None
        )
        if dispatching:
            self.rotation.claimed(limit, len(got.events))
        return got
