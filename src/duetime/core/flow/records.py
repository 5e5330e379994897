"""Flow control's records: a queue's and a tenant's settings and counts, and the control rows a
claim reads (FlowControls, at most CONTROLS_SECONDS old). Pure: no I/O (docs/flow-control.md).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from duetime.core.outbox import QueueSettings

# how long a store trusts its copy of the control rows: a new cap or weight reaches the claims
# of other processes within this; a process that changes them sees it at once. A pause holds at
# once everywhere: the claims check the queue's row as they start jobs (store/sql/flow.py)
CONTROLS_SECONDS = 1.0
# the Retry-After (seconds) an enqueue refused for backlog suggests
BACKLOG_RETRY_AFTER = 5


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
