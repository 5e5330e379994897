"""A schedule's definition: what a user sets (ScheduleSpec), how it is validated (build_spec)
and stored (to_json, spec_from_json), and the nominal instants it fires at (spec_fires,
first_fire, preview).

Nothing here moves with time: the planner's state and the tick policy are in
duetime.core.schedules.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from itertools import islice
from typing import Any, TypeVar

from duetime.core.cron import normalize_cron
from duetime.core.durations import parse_duration, seconds_text
from duetime.core.errors import InvalidRequest
from duetime.core.recurrence import (
    DstFold,
    DstGap,
    Fire,
    cron_fires,
    interval_fires,
    zone,
)
from duetime.core.requests import (
    TaskDefaults,
    check_name,
    check_url_name,
    dump_args,
    parse_instant,
)


class Misfire(StrEnum):
    SKIP = "skip"  # late ticks are recorded as missed; only future ticks run
    CATCH_UP = "catch_up"  # every late tick within the window runs, oldest first, paced
    COALESCE = "coalesce"  # one run stands for all late ticks


class Overlap(StrEnum):
    ALLOW = "allow"
    SKIP = "skip"
    BUFFER_ONE = "buffer_one"
    BUFFER_ALL = "buffer_all"
    CANCEL_OTHER = "cancel_other"


DEFAULT_MISFIRE = Misfire.COALESCE
DEFAULT_OVERLAP = Overlap.ALLOW
DEFAULT_CATCHUP_WINDOW = 86400.0  # one day
DEFAULT_DST_GAP = DstGap.SHIFT
DEFAULT_DST_FOLD = DstFold.FIRST
# By default a tick is late once the next tick is due (and it is more than LATE_FLOOR old, so
# a planner pass a moment behind does not make a fast schedule's ticks late); a tick that has
# no next one (the last before `end`) is late after LATE_AFTER. `late_after` fixes it instead.
LATE_AFTER = timedelta(seconds=60)
LATE_FLOOR = timedelta(seconds=2)
# the upper bounds of a definition's durations (docs/schedules.md, the API's fields alike)
MAX_EVERY_SECONDS = 366 * 86400.0
MAX_WINDOW_SECONDS = 366 * 86400.0
MAX_LATE_AFTER_SECONDS = 366 * 86400.0
MAX_JITTER_SECONDS = 86400.0


@dataclass(frozen=True)
class ScheduleSpec:
    """A validated schedule definition (everything a user sets; nothing the planner moves)."""

    name: str
    task: str
    args: dict[str, Any]
    cron: str | None
    every_seconds: float | None
    timezone: str
    misfire: Misfire = DEFAULT_MISFIRE
    catchup_window_seconds: float = DEFAULT_CATCHUP_WINDOW
    overlap: Overlap = DEFAULT_OVERLAP
    dst_gap: DstGap = DEFAULT_DST_GAP
    dst_fold: DstFold = DEFAULT_DST_FOLD
    start_at: datetime | None = None
    end_at: datetime | None = None
    jitter_seconds: float = 0.0
    queue: str = "default"
    priority: int = 0
    max_attempts: int = 10
    retry_base: float = 10.0
    retry_cap: float = 3600.0
    lease_seconds: float = 30.0
    timeout_seconds: float | None = None
    late_after_seconds: float | None = None  # None: late once the next tick is due
    limits: tuple[str, ...] = ()  # the task's limit keys, carried by every occurrence

    def to_json(self) -> dict[str, Any]:
        data = self._json()
        if self.limits:  # left out when none: definitions (and hashes) of before are unchanged
            data["limits"] = list(self.limits)
        return data

    def _json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "task": self.task,
            "args": self.args,
            "cron": self.cron,
            "every_seconds": self.every_seconds,
            "timezone": self.timezone,
            "misfire": str(self.misfire),
            "catchup_window_seconds": self.catchup_window_seconds,
            "overlap": str(self.overlap),
            "dst_gap": str(self.dst_gap),
            "dst_fold": str(self.dst_fold),
            "start_at": iso_or_none(self.start_at),
            "end_at": iso_or_none(self.end_at),
            "jitter_seconds": self.jitter_seconds,
            "queue": self.queue,
            "priority": self.priority,
            "max_attempts": self.max_attempts,
            "retry": {"base_seconds": self.retry_base, "cap_seconds": self.retry_cap},
            "lease_seconds": self.lease_seconds,
            "timeout_seconds": self.timeout_seconds,
            "late_after_seconds": self.late_after_seconds,
        }

    @property
    def definition_hash(self) -> str:
        data = self.to_json()
        if data["late_after_seconds"] is None:  # the hash of a definition stored before it existed
            del data["late_after_seconds"]
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


def build_spec(
    name: str,
    task: str,
    *,
    timezone: str,
    cron: str | None = None,
    every: str | float | timedelta | None = None,
    args: Any = None,
    misfire: str = DEFAULT_MISFIRE,
    catchup_window: str | float | timedelta = DEFAULT_CATCHUP_WINDOW,
    overlap: str = DEFAULT_OVERLAP,
    dst_gap: str = DEFAULT_DST_GAP,
    dst_fold: str = DEFAULT_DST_FOLD,
    start: datetime | str | None = None,
    end: datetime | str | None = None,
    jitter: str | float | timedelta = 0,
    late_after: str | float | timedelta | None = None,
    defaults: TaskDefaults | None = None,
    max_payload_bytes: int = 1024 * 1024,
) -> ScheduleSpec:
    """Validate a schedule definition, or raise InvalidRequest with one clear line."""
    check_url_name(name, "schedule name", 200)
    check_name(task, "schedule task", 200)
    if (cron is None) == (every is None):
        raise InvalidRequest("give a schedule exactly one trigger: cron=... or every=...")
    zone(timezone)  # validates
    normalized = normalize_cron(cron) if cron is not None else None
    every_s = None
    if every is not None:
        every_s = _at_most(every, "interval", MAX_EVERY_SECONDS)
        if every_s < 1:
            raise InvalidRequest("an interval schedule must fire at most once a second")
    start_at = parse_instant(start, "start") if start is not None else None
    end_at = parse_instant(end, "end") if end is not None else None
    if start_at and end_at and end_at <= start_at:
        raise InvalidRequest(
            f"end {end_at.isoformat()} is not after start {start_at.isoformat()}; "
            "a schedule must be able to fire"
        )
    args_obj, _ = dump_args(args, max_payload_bytes)
    d = defaults or TaskDefaults()
    return ScheduleSpec(
        name=name,
        task=task,
        args=args_obj,
        cron=normalized,
        every_seconds=every_s,
        timezone=timezone,
        misfire=_choice(Misfire, misfire, "misfire"),
        catchup_window_seconds=_window(catchup_window),
        overlap=_choice(Overlap, overlap, "overlap"),
        dst_gap=_choice(DstGap, dst_gap, "dst_gap"),
        dst_fold=_choice(DstFold, dst_fold, "dst_fold"),
        start_at=start_at,
        end_at=end_at,
        jitter_seconds=_at_most(jitter, "jitter", MAX_JITTER_SECONDS),
        late_after_seconds=_late_after(late_after),
        queue=d.queue,
        priority=d.priority,
        max_attempts=d.max_attempts,
        retry_base=d.retry.base,
        retry_cap=d.retry.cap,
        lease_seconds=d.lease_seconds,
        timeout_seconds=d.timeout_seconds,
        limits=d.limits,
    )


def _at_most(value: str | float | timedelta, what: str, high: float) -> float:
    """A duration in seconds, at most `high` (the API's bound of the field)."""
    seconds = parse_duration(value, what).total_seconds()
    if seconds > high:
        raise InvalidRequest(f"{what} must be at most {seconds_text(high)}, got {value!r}")
    return seconds


def _window(value: str | float | timedelta) -> float:
    seconds = _at_most(value, "catch-up window", MAX_WINDOW_SECONDS)
    if seconds < LATE_AFTER.total_seconds():
        raise InvalidRequest(
            f"catch-up window must be at least {LATE_AFTER.total_seconds():g}s: a planner a "
            "little behind would miss ticks that are not late"
        )
    return seconds


def _late_after(value: str | float | timedelta | None) -> float | None:
    if value is None:
        return None
    seconds = _at_most(value, "late_after", MAX_LATE_AFTER_SECONDS)
    if seconds < LATE_FLOOR.total_seconds():
        raise InvalidRequest(
            f"late_after must be at least {LATE_FLOOR.total_seconds():g}s: the planner handles "
            "a tick up to a second or so after its time; leave it out to be late once the next "
            "tick is due"
        )
    return seconds


E = TypeVar("E", bound=StrEnum)


def _choice(kind: type[E], value: str, what: str) -> E:
    try:
        return kind(value)
    except ValueError:
        options = "|".join(str(v) for v in kind)
        raise InvalidRequest(f"{what} must be one of {options}, got {value!r}") from None


def spec_fires(
    spec: ScheduleSpec, anchor: datetime, after: datetime, gap: DstGap | None = None
) -> Iterator[Fire]:
    """Nominal fires strictly after `after`, within the start and end bounds."""
    start = spec.start_at
    if start is not None and after < start:
        after = start - timedelta(microseconds=1)
    if spec.cron is not None:
        fires = cron_fires(
            spec.cron, zone(spec.timezone), after, gap=gap or spec.dst_gap, fold=spec.dst_fold
        )
    else:
        assert spec.every_seconds is not None
        fires = interval_fires(timedelta(seconds=spec.every_seconds), anchor, after)
    for fire in fires:
        if spec.end_at is not None and fire.at > spec.end_at:
            return
        yield fire


def first_fire(spec: ScheduleSpec, anchor: datetime, at_or_after: datetime) -> datetime | None:
    """The planner's first tick at or after an instant, or None when the schedule has ended."""
    after = at_or_after - timedelta(microseconds=1)
    return next((f.at for f in spec_fires(spec, anchor, after, gap=DstGap.SHIFT)), None)


def preview(spec: ScheduleSpec, anchor: datetime, after: datetime, count: int) -> list[Fire]:
    """The next `count` nominal fires strictly after `after`."""
    if not 1 <= count <= 10_000:
        raise InvalidRequest("preview count must be between 1 and 10000")
    return list(islice(spec_fires(spec, anchor, after), count))  # fewer at the end of time


def spec_options(spec: ScheduleSpec) -> dict[str, Any]:
    """build_spec keyword arguments that rebuild `spec` (the base for an update)."""
    return {
        "timezone": spec.timezone,
        "cron": spec.cron,
        "every": spec.every_seconds,
        "args": spec.args,
        "misfire": spec.misfire,
        "catchup_window": spec.catchup_window_seconds,
        "overlap": spec.overlap,
        "dst_gap": spec.dst_gap,
        "dst_fold": spec.dst_fold,
        "start": spec.start_at,
        "end": spec.end_at,
        "jitter": spec.jitter_seconds,
        "late_after": spec.late_after_seconds,
    }


def spec_defaults(spec: ScheduleSpec) -> TaskDefaults:
    """The job options a spec carries, as TaskDefaults."""
    from duetime.core.retry import RetryPolicy

    return TaskDefaults(
        queue=spec.queue,
        priority=spec.priority,
        max_attempts=spec.max_attempts,
        retry=RetryPolicy(spec.retry_base, spec.retry_cap),
        lease_seconds=spec.lease_seconds,
        timeout_seconds=spec.timeout_seconds,
        limits=spec.limits,
    )


def spec_from_json(data: dict[str, Any]) -> ScheduleSpec:
    """The inverse of ScheduleSpec.to_json (a stored definition)."""
    return ScheduleSpec(
        name=data["name"],
        task=data["task"],
        args=data["args"],
        cron=data["cron"],
        every_seconds=data["every_seconds"],
        timezone=data["timezone"],
        misfire=Misfire(data["misfire"]),
        catchup_window_seconds=data["catchup_window_seconds"],
        overlap=Overlap(data["overlap"]),
        dst_gap=DstGap(data["dst_gap"]),
        dst_fold=DstFold(data["dst_fold"]),
        start_at=_parse(data["start_at"]),
        end_at=_parse(data["end_at"]),
        jitter_seconds=data["jitter_seconds"],
        queue=data["queue"],
        priority=data["priority"],
        max_attempts=data["max_attempts"],
        retry_base=data["retry"]["base_seconds"],
        retry_cap=data["retry"]["cap_seconds"],
        lease_seconds=data["lease_seconds"],
        timeout_seconds=data["timeout_seconds"],
        late_after_seconds=data.get("late_after_seconds"),  # absent: stored before it existed
        limits=tuple(data.get("limits", ())),
    )


def _parse(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def iso_or_none(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


__all__ = [
    "Misfire",
    "Overlap",
    "ScheduleSpec",
    "build_spec",
    "first_fire",
    "preview",
    "spec_fires",
    "spec_from_json",
]
