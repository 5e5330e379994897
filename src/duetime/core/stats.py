"""Operational figures from raw samples: counts, lag percentiles, throughput, minute series."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from duetime.core.flow.records import QueueFlow, TenantFlow
from duetime.core.states import AttemptStatus

WINDOWS = (5, 60)  # minutes
FAILED = frozenset({AttemptStatus.FAILED, AttemptStatus.LOST})


@dataclass(frozen=True)
class AttemptSample:
    """One recent attempt, as much as the figures need."""

    task: str
    queue: str
    status: AttemptStatus
    started_at: datetime
    due_at: datetime | None = None
    finished_at: datetime | None = None
    error_category: str | None = None

    @property
    def lag(self) -> float | None:
        if self.due_at is None:
            return None
        return max(0.0, (self.started_at - self.due_at).total_seconds())


@dataclass(frozen=True)
class JobCount:
    status: str
    queue: str
    count: int


@dataclass(frozen=True)
class WindowFigures:
    minutes: int
    started: int
    succeeded: int
    failed: int
    throughput_per_second: float  # succeeded attempts per second over the window
    lag_p50: float | None
    lag_p95: float | None
    lag_p99: float | None

    def to_json(self) -> dict[str, object]:
        return {
            "minutes": self.minutes,
            "started": self.started,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "throughput_per_second": round(self.throughput_per_second, 4),
            "lag_seconds": {"p50": self.lag_p50, "p95": self.lag_p95, "p99": self.lag_p99},
        }


@dataclass(frozen=True)
class MinutePoint:
    at: datetime  # the start of the minute (UTC)
    succeeded: int
    failed: int
    lag_p95: float | None


@dataclass(frozen=True)
class Stats:
    now: datetime
    counts: tuple[JobCount, ...]
    oldest_overdue_seconds: float | None
    windows: tuple[WindowFigures, ...]
    series: tuple[MinutePoint, ...] = field(default=())
    sampled: int = 0
    sample_limit_hit: bool = False
    # flow control (docs/flow-control.md): settings, backlog and running per queue and tenant
    queues: tuple[QueueFlow, ...] = ()
    tenants: tuple[TenantFlow, ...] = ()

    def by_status(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.counts:
            out[c.status] = out.get(c.status, 0) + c.count
        return out

    def by_queue(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for c in self.counts:
            out.setdefault(c.queue, {})[c.status] = c.count
        return out

    def to_json(self) -> dict[str, object]:
        return {
            "now": self.now.isoformat(),
            "by_status": self.by_status(),
            "by_queue": self.by_queue(),
            "oldest_overdue_seconds": self.oldest_overdue_seconds,
            "windows": {f"{w.minutes}m": w.to_json() for w in self.windows},
            "series": [
                {
                    "at": p.at.isoformat(),
                    "succeeded": p.succeeded,
                    "failed": p.failed,
                    "lag_p95_seconds": p.lag_p95,
                }
                for p in self.series
            ],
            "sampled_attempts": self.sampled,
            "sample_limit_hit": self.sample_limit_hit,
            "flow": {
                "queues": [q.to_json() for q in self.queues],
                "tenants": [t.to_json() for t in self.tenants],
            },
        }


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) by nearest rank; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return round(ordered[rank - 1], 6)


def summarize(
    now: datetime,
    counts: Sequence[JobCount],
    oldest_overdue: datetime | None,
    samples: Sequence[AttemptSample],
    *,
    sample_limit: int | None = None,
) -> Stats:
    """Figures over the last 5 and 60 minutes, and a per-minute series over the last hour.

    Samples are attempts started in the last hour. Throughput counts attempts that succeeded
    inside the window; lag is start minus due of the attempts started inside it.
    """
    windows = []
    for minutes in WINDOWS:
        since = now - timedelta(minutes=minutes)
        started = [s for s in samples if s.started_at >= since]
        lags = [lag for s in started if (lag := s.lag) is not None]
        succeeded = sum(
            1
            for s in samples
            if s.status is AttemptStatus.SUCCEEDED and s.finished_at and s.finished_at >= since
        )
        failed = sum(
            1 for s in samples if s.status in FAILED and s.finished_at and s.finished_at >= since
        )
        windows.append(
            WindowFigures(
                minutes=minutes,
                started=len(started),
                succeeded=succeeded,
                failed=failed,
                throughput_per_second=succeeded / (minutes * 60),
                lag_p50=percentile(lags, 50),
                lag_p95=percentile(lags, 95),
                lag_p99=percentile(lags, 99),
            )
        )
    return Stats(
        now=now,
        counts=tuple(counts),
        oldest_overdue_seconds=(
            max(0.0, (now - oldest_overdue).total_seconds()) if oldest_overdue else None
        ),
        windows=tuple(windows),
        series=minute_series(now, samples),
        sampled=len(samples),
        sample_limit_hit=sample_limit is not None and len(samples) >= sample_limit,
    )


def minute_series(now: datetime, samples: Sequence[AttemptSample]) -> tuple[MinutePoint, ...]:
    """60 points, oldest first: successes and failures by finish minute, p95 lag by start."""
    end = now.replace(second=0, microsecond=0)
    starts = [end - timedelta(minutes=i) for i in range(59, -1, -1)]
    first = starts[0]
    ok = [0] * 60
    bad = [0] * 60
    lags: list[list[float]] = [[] for _ in range(60)]

    def index(at: datetime) -> int | None:
        i = int((at - first).total_seconds() // 60)
        return i if 0 <= i < 60 else None

    for s in samples:
        if s.finished_at is not None and (i := index(s.finished_at)) is not None:
            if s.status is AttemptStatus.SUCCEEDED:
                ok[i] += 1
            elif s.status in FAILED:
                bad[i] += 1
        lag = s.lag
        if lag is not None and (i := index(s.started_at)) is not None:
            lags[i].append(lag)
    return tuple(
        MinutePoint(at, ok[i], bad[i], percentile(lags[i], 95)) for i, at in enumerate(starts)
    )
