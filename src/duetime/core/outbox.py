"""Dispatch through a broker: a queue's settings, outbox events, their messages and figures.

Pure: no I/O. A queue of dispatch mode `outbox` is not claimed from the database by workers;
the relay claims its due jobs, starting each attempt held by DISPATCH_HOLDER and writing one
OutboxEvent in the same transaction, publishes the events to the broker, and a broker-fed
worker accepts the attempt (Store.accept_dispatch) before it runs it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from duetime.core.durations import bounded_duration
from duetime.core.errors import InvalidRequest

# the worker_id of an attempt dispatched to the broker that no worker has accepted yet
DISPATCH_HOLDER = "(outbox)"
QUEUE_PREFIX = "duetime."  # the broker queue of duetime queue q is duetime.<q>


class Dispatch(StrEnum):
    DIRECT = "direct"  # workers claim the queue's due jobs from the database (the default)
    OUTBOX = "outbox"  # the relay dispatches them through the broker


def dispatch_mode(text: str) -> Dispatch:
    try:
        return Dispatch(text)
    except ValueError:
        raise InvalidRequest(
            f"dispatch must be one of {', '.join(d.value for d in Dispatch)}, not {text!r}"
        ) from None


@dataclass(frozen=True)
class QueueSettings:
    """A queue's settings; a queue never set has every default (QueueSettings(name))."""

    queue: str
    dispatch: Dispatch = Dispatch.DIRECT
    updated_at: datetime | None = None
    # flow control (core/flow/, docs/flow-control.md): None is "no limit"
    paused: bool = False
    concurrency: int | None = None
    max_backlog: int | None = None
    weight: float = 1.0

    def to_json(self) -> dict[str, object]:
        return {
            "queue": self.queue,
            "dispatch": str(self.dispatch),
            "paused": self.paused,
            "concurrency": self.concurrency,
            "max_backlog": self.max_backlog,
            "weight": self.weight,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
        }


@dataclass(frozen=True)
class OutboxEvent:
    """One dispatched attempt, to be published: its id is the broker message's id."""

    id: int
    job_id: int
    attempt_id: int
    queue: str
    task: str
    generation: int
    version: int
    created_at: datetime
    published_at: datetime | None = None
    claim_token: int | None = None  # the attempt's claim token (None: written before it existed)
    trace_context: str | None = None  # its job's (Job.trace_context): the message's headers

    def body(self) -> bytes:
        """The message body: what a worker needs to find the attempt in the store."""
        return json.dumps(
            {
                "event_id": self.id,
                "job_id": self.job_id,
                "attempt_id": self.attempt_id,
                "queue": self.queue,
                "task": self.task,
                "generation": self.generation,
                "version": self.version,
                "claim_token": self.claim_token,
            },
            separators=(",", ":"),
        ).encode()


@dataclass(frozen=True)
class Dispatched:
    """What a broker message says, as a worker reads it."""

    event_id: int
    job_id: int
    attempt_id: int
    queue: str
    task: str
    generation: int
    version: int
    # the attempt's claim token: the store accepts the attempt only by it (a message of an
    # earlier version carries none, and is refused: its attempt is reaped once its lease ends)
    claim_token: int | None = None

    @classmethod
    def from_body(cls, body: bytes) -> Dispatched:
        """Read a message body; raise InvalidRequest when it is not one of duetime's."""
        try:
            data = json.loads(body)
            return cls(
                event_id=int(data["event_id"]),
                job_id=int(data["job_id"]),
                attempt_id=int(data["attempt_id"]),
                queue=str(data["queue"]),
                task=str(data["task"]),
                generation=int(data["generation"]),
                version=int(data["version"]),
                claim_token=(
                    int(data["claim_token"]) if data.get("claim_token") is not None else None
                ),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidRequest(f"not a duetime outbox message: {exc!r}"[:200]) from None


def broker_queue(queue: str) -> str:
    """The durable broker queue that carries duetime queue `queue`'s messages."""
    return QUEUE_PREFIX + queue


@dataclass(frozen=True)
class QueueBacklog:
    queue: str
    backlog: int  # events not yet published
    oldest_created_at: datetime | None  # the oldest of them
    published: int  # events published within the window
    # attempts dispatched that no worker accepted yet (held by DISPATCH_HOLDER: in the outbox
    # or in the broker), and when the oldest of them was dispatched
    dispatched: int = 0
    oldest_dispatched_at: datetime | None = None


# the bounds of the publish rate's window (`duetime outbox status --window`)
MIN_WINDOW_SECONDS = 1.0
MAX_WINDOW_SECONDS = 86400.0


def check_window(value: str | float | int | timedelta) -> float:
    """The publish rate's window in seconds: a duration from 1s to 1d."""
    return bounded_duration(value, "window", MIN_WINDOW_SECONDS, MAX_WINDOW_SECONDS)


@dataclass(frozen=True)
class OutboxFigures:
    """The outbox at one instant: backlog, the oldest unpublished event, the publish rate."""

    now: datetime
    window_seconds: float
    queues: list[QueueBacklog] = field(default_factory=list)

    @property
    def backlog(self) -> int:
        return sum(q.backlog for q in self.queues)

    @property
    def oldest_unpublished_age_seconds(self) -> float | None:
        oldest = [q.oldest_created_at for q in self.queues if q.oldest_created_at is not None]
        if not oldest:
            return None
        return max(0.0, (self.now - min(oldest)).total_seconds())

    @property
    def dispatched(self) -> int:
        """Attempts dispatched that no worker accepted yet (running jobs not executing)."""
        return sum(q.dispatched for q in self.queues)

    @property
    def oldest_dispatched_age_seconds(self) -> float | None:
        oldest = [q.oldest_dispatched_at for q in self.queues if q.oldest_dispatched_at]
        if not oldest:
            return None
        return max(0.0, (self.now - min(oldest)).total_seconds())

    @property
    def publish_rate(self) -> float:
        """Events published per second over the window."""
        return sum(q.published for q in self.queues) / self.window_seconds

    def to_json(self) -> dict[str, object]:
        return {
            "backlog": self.backlog,
            "oldest_unpublished_age_seconds": self.oldest_unpublished_age_seconds,
            "publish_rate_per_second": round(self.publish_rate, 3),
            "window_seconds": self.window_seconds,
            "dispatched": self.dispatched,
            "oldest_dispatched_age_seconds": self.oldest_dispatched_age_seconds,
            "queues": [
                {
                    "queue": q.queue,
                    "backlog": q.backlog,
                    "oldest_unpublished_age_seconds": (
                        max(0.0, (self.now - q.oldest_created_at).total_seconds())
                        if q.oldest_created_at is not None
                        else None
                    ),
                    "published": q.published,
                    "dispatched": q.dispatched,
                    "oldest_dispatched_age_seconds": (
                        max(0.0, (self.now - q.oldest_dispatched_at).total_seconds())
                        if q.oldest_dispatched_at is not None
                        else None
                    ),
                }
                for q in self.queues
            ],
        }
