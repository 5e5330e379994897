"""Which candidates a controlled claim starts: `choose` picks due jobs in claim order, never
more per queue or tenant than its room (cap minus running), and, when weights are set, splits
the slots between queues and then between the tenants of a queue by smooth weighted round
robin. Pure: no I/O (docs/flow-control.md).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# a controlled claim reads up to this many candidates per slot when weights split the slots
WEIGHTED_SCAN = 4
# and takes at most this many rounds of reading (each round excludes what became full)
MAX_ROUNDS = 4
# weighted queues (and tenants) whose jobs the first read did not reach, read one by one
MAX_PROBES = 8


@dataclass(frozen=True)
class Candidate:
    """A due job a controlled claim may start, in claim order (with its limit keys' text and
    attempts so far, for the limits per dependency)."""

    id: int
    queue: str
    tenant: str
    limits: str | None = None
    attempts: int = 0


def room(caps: Mapping[str, int], running: Mapping[str, int]) -> dict[str, int]:
    """How many more attempts each capped queue or tenant may start now (never below 0)."""
    return {name: max(0, cap - running.get(name, 0)) for name, cap in caps.items()}


def choose(
    candidates: Iterable[Candidate],
    limit: int,
    queue_room: dict[str, int],
    tenant_room: dict[str, int],
    queue_weights: Mapping[str, float] | None = None,
    tenant_weights: Mapping[str, float] | None = None,
    queue_credit: dict[str, float] | None = None,
) -> list[int]:
    """The ids to start, at most `limit`: a candidate is taken only while its queue and its
    tenant have room (uncapped ones always have), and each taken one uses a slot of both
    (queue_room and tenant_room are updated in place). Without weights, candidates go in
    their order; with weights (either mapping non-empty; a name not in it weighs 1), slots
    go to queues by smooth weighted round robin, and within a queue to its tenants likewise,
    each queue and tenant taking its own candidates in their order. `queue_credit` carries
    the queues' round robin credit from one call to the next (updated in place): a process's
    claims of one or two slots then split as the weights say, not each as a claim's first
    slots (a weight-3 queue would take every 1-slot claim)."""
    if limit <= 0:
        return []
    if not queue_weights and not tenant_weights:
        taken: list[int] = []
        for c in candidates:
            if len(taken) >= limit:
                break
            if _fits(c, queue_room, tenant_room):
                _use(c, queue_room, tenant_room)
                taken.append(c.id)
        return taken
    return _weighted(
        list(candidates),
        limit,
        queue_room,
        tenant_room,
        queue_weights or {},
        tenant_weights or {},
        queue_credit,
    )


def _fits(c: Candidate, queue_room: Mapping[str, int], tenant_room: Mapping[str, int]) -> bool:
    return queue_room.get(c.queue, 1) > 0 and tenant_room.get(c.tenant, 1) > 0


def _use(c: Candidate, queue_room: dict[str, int], tenant_room: dict[str, int]) -> None:
    if c.queue in queue_room:
        queue_room[c.queue] -= 1
    if c.tenant in tenant_room:
        tenant_room[c.tenant] -= 1


class RoundRobin:
    """Smooth weighted round robin: each turn every member gains its weight, the richest
    (the first of equals, in order of joining) is chosen and pays the total. Over any run of
    turns each member's count stays within one of its weighted share."""

    def __init__(self) -> None:
        self.credit: dict[str, float] = {}
        self.weight: dict[str, float] = {}

    def add(self, name: str, weight: float, credit: float = 0.0) -> None:
        if name not in self.weight:
            self.weight[name] = weight
            self.credit[name] = credit

    def drop(self, name: str) -> None:
        self.weight.pop(name, None)
        self.credit.pop(name, None)

    def __bool__(self) -> bool:
        return bool(self.weight)

    def next(self) -> str:
        total = 0.0
        best: str | None = None
        for name, w in self.weight.items():
            self.credit[name] += w
            total += w
            if best is None or self.credit[name] > self.credit[best]:
                best = name
        assert best is not None, "next() of an empty round robin"
        self.credit[best] -= total
        return best


def _weighted(
    candidates: list[Candidate],
    limit: int,
    queue_room: dict[str, int],
    tenant_room: dict[str, int],
    queue_weights: Mapping[str, float],
    tenant_weights: Mapping[str, float],
    queue_credit: dict[str, float] | None = None,
) -> list[int]:
    carried = queue_credit if queue_credit is not None else {}
    lines: dict[str, dict[str, deque[Candidate]]] = {}
    for c in candidates:
        lines.setdefault(c.queue, {}).setdefault(c.tenant, deque()).append(c)
    queues = RoundRobin()
    tenants: dict[str, RoundRobin] = {}
    for q, by_tenant in lines.items():
        if queue_room.get(q, 1) <= 0:
            continue
        queues.add(q, queue_weights.get(q, 1.0), carried.get(q, 0.0))
        rr = tenants[q] = RoundRobin()
        for t in by_tenant:
            if tenant_room.get(t, 1) > 0:
                rr.add(t, tenant_weights.get(t, 1.0))
    taken: list[int] = []
    left: dict[str, float] = {}  # the credit of each queue that took part, as it left
    while len(taken) < limit and queues:
        q = queues.next()
        rr = tenants[q]
        if not rr:
            left[q] = queues.credit[q]
            queues.drop(q)
            continue
        t = rr.next()
        line = lines[q][t]
        c = line.popleft()
        _use(c, queue_room, tenant_room)
        taken.append(c.id)
        if not line:
            rr.drop(t)
        if tenant_room.get(t, 1) <= 0:  # the tenant is full in every queue
            for other in tenants.values():
                other.drop(t)
        if queue_room.get(q, 1) <= 0 or not rr:
            left[q] = queues.credit[q]
            queues.drop(q)
    if queue_credit is not None:
        # kept for the queues that took part (a queue without candidates banks nothing),
        # centred on 0 so that a queue joining later at 0 neither waits nor bursts
        left.update(queues.credit)
        mean = sum(left.values()) / len(left) if left else 0.0
        queue_credit.clear()
        queue_credit.update({q: credit - mean for q, credit in left.items()})
    return taken


def full(rooms: Mapping[str, int]) -> list[str]:
    """The names with no room left, sorted."""
    return sorted(name for name, n in rooms.items() if n <= 0)
