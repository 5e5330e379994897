"""Flow control of queues and tenants: pause, cluster-wide concurrency caps, weights, and a
bound on backlog (docs/flow-control.md). Pure: no I/O.

The store reads every control row into FlowControls (at most CONTROLS_SECONDS old); a claim
with no control that restricts it runs the plain claim statement. Otherwise the claim reads
candidates (due jobs, in claim order, of queues and tenants not paused or full) and `choose`
picks the ones to start: never more per queue or tenant than its room (cap minus running),
and, when weights are set, slots split between queues and then between the tenants of a
queue by smooth weighted round robin.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

from duetime.core.errors import InvalidRequest
from duetime.core.outbox import QueueSettings

# how long a store trusts its copy of the control rows: a new cap or weight reaches the claims
# of other processes within this; a process that changes them sees it at once. A pause holds at
# once everywhere: the claims check the queue's row as they start jobs (store/sql/flow.py)
CONTROLS_SECONDS = 1.0
# the Retry-After (seconds) an enqueue refused for backlog suggests
BACKLOG_RETRY_AFTER = 5
# a controlled claim reads up to this many candidates per slot when weights split the slots
WEIGHTED_SCAN = 4
# and takes at most this many rounds of reading (each round excludes what became full)
MAX_ROUNDS = 4
# weighted queues (and tenants) whose jobs the first read did not reach, read one by one
MAX_PROBES = 8


@dataclass(frozen=True)
class TenantSettings:
    """A tenant's flow settings; a tenant never set has every default."""

    tenant: str
    concurrency: int | None = None
    max_backlog: int | None = None
    weight: float = 1.0
    updated_at: datetime | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "tenant": self.tenant,
            "concurrency": self.concurrency,
            "max_backlog": self.max_backlog,
            "weight": self.weight,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
        }


@dataclass(frozen=True)
class FlowCounts:
    """Jobs waiting (backlog: status scheduled or waiting, due or not) and running (status
    running or cancel_requested) of one queue or tenant; of the backlog, `waiting`: the jobs
    due and not started (status scheduled, due_at at or before the time of the read), and
    `waiting_seconds`: how long the oldest of them has been due then (0 when none)."""

    backlog: int = 0
    running: int = 0
    waiting: int = 0
    waiting_seconds: float = 0.0

    def __add__(self, other: FlowCounts) -> FlowCounts:
        """The counts of both (several tenants of a queue, several queues of a tenant): the
        sums, and the longer wait."""
        return FlowCounts(
            self.backlog + other.backlog,
            self.running + other.running,
            self.waiting + other.waiting,
            max(self.waiting_seconds, other.waiting_seconds),
        )


@dataclass(frozen=True)
class QueueFlow:
    """A queue's settings with its counts, for `duetime queues list` and /v1/queues."""

    settings: QueueSettings
    counts: FlowCounts

    def to_json(self) -> dict[str, object]:
        return {**self.settings.to_json(), **_counts_json(self.counts)}


@dataclass(frozen=True)
class TenantFlow:
    """A tenant's settings with its counts, for `duetime tenants list` and /v1/tenants."""

    settings: TenantSettings
    counts: FlowCounts

    def to_json(self) -> dict[str, object]:
        return {**self.settings.to_json(), **_counts_json(self.counts)}


def _counts_json(c: FlowCounts) -> dict[str, object]:
    return {
        "backlog": c.backlog,
        "running": c.running,
        "waiting": c.waiting,
        "waiting_seconds": round(c.waiting_seconds, 3),
    }


@dataclass(frozen=True)
class FlowControls:
    """Every control row, as the claim and the enqueue need them."""

    paused: frozenset[str] = frozenset()
    queue_caps: Mapping[str, int] = field(default_factory=dict)
    tenant_caps: Mapping[str, int] = field(default_factory=dict)
    queue_weights: Mapping[str, float] = field(default_factory=dict)  # only those != 1
    tenant_weights: Mapping[str, float] = field(default_factory=dict)
    queue_backlogs: Mapping[str, int] = field(default_factory=dict)
    tenant_backlogs: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, queues: Iterable[QueueSettings], tenants: Iterable[TenantSettings]) -> FlowControls:
        qs, ts = list(queues), list(tenants)
        return cls(
            paused=frozenset(q.queue for q in qs if q.paused),
            queue_caps={q.queue: q.concurrency for q in qs if q.concurrency is not None},
            tenant_caps={t.tenant: t.concurrency for t in ts if t.concurrency is not None},
            queue_weights={q.queue: q.weight for q in qs if q.weight != 1.0},
            tenant_weights={t.tenant: t.weight for t in ts if t.weight != 1.0},
            queue_backlogs={q.queue: q.max_backlog for q in qs if q.max_backlog is not None},
            tenant_backlogs={t.tenant: t.max_backlog for t in ts if t.max_backlog is not None},
        )

    @property
    def weighted(self) -> bool:
        return bool(self.queue_weights or self.tenant_weights)

    @property
    def capped(self) -> bool:
        return bool(self.queue_caps or self.tenant_caps)

    @property
    def restricts_claim(self) -> bool:
        """False: the claim runs its plain statement, as if flow control did not exist."""
        return bool(self.paused) or self.capped or self.weighted

    def restricts_dispatch(self, outbox_queues: Collection[str]) -> bool:
        """False: the relay's dispatch of these outbox-mode queues runs its single statement
        (which honours pauses itself): no cap or weight of theirs, no tenant cap or weight."""
        return bool(self.tenant_caps or self.tenant_weights) or any(
            q in self.queue_caps or q in self.queue_weights for q in outbox_queues
        )

    @property
    def bounds_backlog(self) -> bool:
        return bool(self.queue_backlogs or self.tenant_backlogs)

    def bounds(self, queue: str, tenant: str) -> bool:
        """True when a job of this queue and tenant is admitted only within a max_backlog."""
        return queue in self.queue_backlogs or tenant in self.tenant_backlogs


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


# the bounds of a queue's or tenant's settings (docs/flow-control.md, "Bounds"), the same on
# the API, the CLI, the dashboard and in every store
MAX_LIMIT = 10**9  # concurrency and max_backlog: whole numbers from 0 to this
MIN_WEIGHT = 0.01
MAX_WEIGHT = 1000.0


def check_limit(value: object, what: str) -> int | None:
    """A concurrency or max backlog: None (no limit) or a whole number from 0 to MAX_LIMIT
    (a boolean or a string is not a number)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_LIMIT:
        raise InvalidRequest(
            f"{what.replace('_', ' ')} must be a whole number from 0 to {MAX_LIMIT} (or none "
            f"for no limit), not {value!r}"
        )
    return value


def check_weight(value: object) -> float | None:
    """A weight: None (left as it is) or a number from MIN_WEIGHT to MAX_WEIGHT."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not MIN_WEIGHT <= value <= MAX_WEIGHT  # NaN too
    ):
        raise InvalidRequest(
            f"weight must be a number from {MIN_WEIGHT:g} to {MAX_WEIGHT:g} (default 1), "
            f"not {value!r}"
        )
    return float(value)


def check_paused(value: object) -> bool | None:
    """A pause: None (left as it is), True or False (not 1, not "true")."""
    if value is not None and not isinstance(value, bool):
        raise InvalidRequest(f"paused must be true or false, not {value!r}")
    return value


class Keep(Enum):
    """A setting left as it is (set_queue/set_tenant); None clears a limit."""

    KEEP = "keep"


KEEP = Keep.KEEP


def parse_limit(text: str, what: str) -> int | None:
    """A limit as typed on the command line or a form: a whole number, or `none` for no
    limit."""
    if text.strip().lower() in ("none", "unlimited", "off"):
        return None
    digits = text.strip()
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 12:
        raise InvalidRequest(
            f"{what.replace('_', ' ')} must be a whole number from 0 to {MAX_LIMIT} or "
            f"`none`, not {text!r}"
        )
    return check_limit(int(digits), what)


def parse_weight(text: str) -> float:
    """A weight as typed on the command line or a form."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    checked = check_weight(value)
    assert checked is not None
    return checked


# -- priorities without starvation ----------------------------------------------------------

# the minimum share of a saturated worker's claimed slots each lower priority class keeps
PRIORITY_SHARE = 0.1
# lower classes served by one claim at most (the others get their turn in the next claims)
PRIORITY_CLASSES = 8
# after a claim found no lower class due, the next claims that do not look for one
PRIORITY_IDLE = 8
# a priority above every job's (priority is a 32-bit integer): "below" it is every class
PRIORITY_TOP = 2**31


@dataclass(frozen=True)
class Ranked:
    """A due job of a priority class, as a reservation reads it (claim order)."""

    id: int
    priority: int
    queue: str = ""
    tenant: str = ""


def check_share(value: float) -> float:
    """A priority share: a fraction from 0 (strict priority order) below 1."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
        raise InvalidRequest(
            f"priority share must be a fraction from 0 up to (not including) 1, not {value!r}"
        )
    return float(value)


class PriorityShare:
    """Keeps each lower priority class's minimum share of one process's claims, deterministic.

    Each claim of `limit` slots earns share * limit slots of credit for every lower class;
    when the credit reaches a whole slot, the claim reserves that many slots (`per_class`)
    for each priority class below the highest due one, walking them downwards (`walk`): the
    oldest due jobs of each, read from the claim-order index. The rest of the claim's slots
    go to claim order as before, so no slot is left unused. When a claim found no lower class
    due (the common case: one class), the next PRIORITY_IDLE claims do not look; a claim that
    did not fill its slots (nothing more due) drops the credit: it took every due job, so the
    claims after it earn and reserve nothing until one fills its slots again."""

    def __init__(self, share: float = PRIORITY_SHARE) -> None:
        self.share = check_share(share)
        self.credit = 0.0
        self.idle = 0
        self.saturated = True  # the last claim filled its slots (or none was made yet)
        # slots owed to a lower class (by priority) that a walk cut short for lack of slots
        self.owed: dict[int, int] = {}

    def reserve(self, limit: int) -> int:
        """The slots this claim reserves for each lower class; 0 with nothing `owed`: the
        plain claim."""
        if self.share <= 0 or limit <= 0 or not self.saturated:
            return 0
        if self.idle > 0:
            self.idle -= 1
            return 0
        self.credit = min(self.credit + self.share * limit, 2.0 * limit)  # with a debt
        whole = int(self.credit + 1e-9)  # ten times 0.1 is a whole slot, whatever the float sum
        if whole <= 0:
            return 0
        self.credit -= whole
        return whole

    def walk(
        self, read: Callable[[int, int], Sequence[Ranked]], per_class: int, limit: int
    ) -> list[Ranked]:
        """The lower classes' jobs this claim takes first: `read(below, n)` returns up to n
        due jobs of priority below `below`, in claim order. Reads the highest due class, then
        walks down the classes below it (at most PRIORITY_CLASSES), taking up to per_class
        jobs of each plus what it is owed. When the claim's `limit` slots run out, each class
        below that got less than its due is owed the rest, paid first in the next walks."""
        top = read(PRIORITY_TOP, 1)
        if not top:
            return []
        highest = top[0].priority
        cursor = highest
        taken: list[Ranked] = []
        for cls in sorted(self.owed, reverse=True):  # first what earlier walks owe
            room_left = limit - len(taken)
            if room_left <= 0:
                break
            owed = self.owed.pop(cls)
            if cls >= highest:
                continue
            got = [r for r in read(cls + 1, min(owed, room_left)) if r.priority == cls]
            taken += got
            if got and len(got) < owed:
                self.owed[cls] = owed - len(got)
        for _ in range(PRIORITY_CLASSES if per_class > 0 else 0):
            room_left = limit - len(taken)
            # (the jobs already taken from what was owed are still due: read past them)
            rows = read(cursor, max(1, min(per_class, room_left)) + len(taken))
            rows = [r for r in rows if r.priority < highest and r.id not in {t.id for t in taken}]
            if not rows:
                break
            cls = rows[0].priority
            got = [r for r in rows if r.priority == cls][: max(0, min(per_class, room_left))]
            taken += got
            if len(got) < per_class and len(got) == max(0, room_left):  # cut short: owed
                self.owed[cls] = min(self.owed.get(cls, 0) + per_class - len(got), limit)
            cursor = cls
        if not taken and not self.owed:
            self.idle = PRIORITY_IDLE
            self.credit = 0.0
        return taken

    def claimed(self, limit: int, found: int) -> None:
        """After the claim: one that found fewer due jobs than its slots took every due job
        (`found`: the jobs it chose, some of which concurrent claims may have started first)."""
        self.saturated = found >= limit
        if not self.saturated:
            self.credit = 0.0
            self.owed.clear()


# -- tenant fairness --------------------------------------------------------------------------

# tenants with due work a claim rotates over at most (the next claims go on after the last)
TENANT_PROBES = 8
# after a saturated claim found at most one tenant with due work, the next claims that do
# not look for others
TENANT_IDLE = 8


class TenantRotation:
    """Rotates one process's saturated claims across the tenants with due work, weighted fair
    queueing (deterministic): each tenant has a tag, the virtual time its slots so far take; a
    slot goes to the tenant whose next slot would end first (tag + 1 / weight; ties by name),
    whose tag grows by 1 / its weight.
    A tenant joining starts at the lowest tag of the others, so it neither waits for the
    others' past nor takes a burst. Only a claim that follows a saturated one looks (a claim
    that took fewer than its slots took every due job); after finding one tenant alone, the
    next TENANT_IDLE claims do not look."""

    def __init__(self) -> None:
        self.tags: dict[str, float] = {}
        self.after = ""  # where the last look stopped, with more tenants than TENANT_PROBES
        self.idle = 0
        self.saturated = True

    def wanted(self) -> bool:
        """Whether this claim looks for the tenants with due work."""
        if not self.saturated:
            return False
        if self.idle > 0:
            self.idle -= 1
            return False
        return True

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
            self.idle = TENANT_IDLE
            self.tags.clear()
            return []
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
