"""Clocks: the only place duetime reads the time, so tests can move it by hand; and a clock
corrected by the database's (CorrectedClock), so nodes whose clocks disagree still agree on
when a job is due."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

Instant = datetime | Callable[[], datetime]
"""An instant, or what tells it when asked (a clock's `now`): a claim given the latter reads
it once its connection is held, so a wait for one stamps nothing early (read_instant)."""


def read_instant(at: Instant) -> datetime:
    """The instant `at` is, or tells now when it is a callable."""
    return at if isinstance(at, datetime) else at()


class Clock(Protocol):
    """Something that tells the current instant as an aware UTC datetime."""

    def now(self) -> datetime: ...


class SystemClock:
    """The real wall clock, in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that only moves when told to; safe to share between threads."""

    def __init__(self, start: datetime | None = None) -> None:
        start = start or datetime(2026, 1, 1, tzinfo=UTC)
        if start.tzinfo is None:
            raise ValueError("ManualClock needs an aware datetime, e.g. datetime(..., tzinfo=UTC)")
        self._now = start.astimezone(UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """The time this clock was set or advanced to."""
        with self._lock:
            return self._now

    def advance(self, by: float | timedelta) -> datetime:
        """Move the time forward by `by` (seconds or a timedelta); returns the new time."""
        delta = by if isinstance(by, timedelta) else timedelta(seconds=by)
        with self._lock:
            self._now += delta
            return self._now

    def set(self, to: datetime) -> None:
        """Move the time to `to`, an aware datetime."""
        if to.tzinfo is None:
            raise ValueError("ManualClock.set needs an aware datetime")
        with self._lock:
            self._now = to.astimezone(UTC)


# -- a clock set by the database's ----------------------------------------------------------------

KEEP_READINGS = 12  # about a minute of a node's heartbeats (every 5 s)
READING_MAX_AGE = 60.0  # seconds after which an App reads the database's clock again
CLOCK_OFFSET_WARNING = 1.0  # seconds a node's clock may be off the database's before a warning


@dataclass(frozen=True)
class ClockReading:
    """One reading of a reference clock (the database's), taken between two local instants.

    The reference said `reference` at some instant between `before` and `after` by the local
    clock, so at `after` its time lies in [reference, reference + round_trip]: subtracting
    `ahead` from the local time gives an instant the reference has surely reached.
    """

    before: datetime  # the local clock just before the reference was read
    reference: datetime  # what the reference said
    after: datetime  # the local clock once its answer arrived

    @property
    def round_trip(self) -> float:
        """Seconds between `before` and `after`: how uncertain the reading is."""
        return (self.after - self.before).total_seconds()

    @property
    def ahead(self) -> float:
        """How far the local clock is ahead of the reference, at most, in seconds (negative:
        behind): after - reference. The truth lies in [ahead - round_trip, ahead]."""
        return (self.after - self.reference).total_seconds()

    def agrees(self, other: ClockReading, slack: float = 0.001) -> bool:
        """Whether both readings can be true of one steady local clock: their ranges of
        `ahead` overlap (within `slack` seconds). A local clock that was stepped between two
        readings makes them disagree."""
        return (
            self.ahead - self.round_trip - slack <= other.ahead
            and other.ahead - other.round_trip - slack <= self.ahead
        )


class CorrectedClock:
    """A local clock set by a reference clock (the database's): the local time minus how far
    ahead of the reference it was measured to be (ClockReading.ahead, an upper bound), so an
    instant it tells is one the reference has reached: nothing judged by it happens early by
    the reference's clock, whichever way the local clock is off.

    measure(read) takes a reading (`read` returns the reference's time, or None when the
    reference is this very clock, SQLite's: no correction then). It keeps the last few readings
    that agree with the newest (a stepped local clock drops the older ones) and corrects by
    the one of the smallest round trip. Until the first reading it tells the local time.
    defer(read) instead takes the first reading when the time is first asked (now()): a
    one-shot command that never asks it never reads the reference.
    Readings are replaced whole, so threads may share it without a lock.
    """

    def __init__(self, base: Clock | None = None, *, keep: int = KEEP_READINGS) -> None:
        if keep < 1:
            raise ValueError("CorrectedClock keeps at least one reading")
        self.base: Clock = base or SystemClock()
        self.keep = keep
        self._readings: tuple[ClockReading, ...] = ()
        self._best: ClockReading | None = None
        self._local = False  # the reference is this clock (SQLite): nothing to correct
        self._deferred: Callable[[], datetime | None] | None = None  # see defer()

    def now(self) -> datetime:
        if self._deferred is not None:
            self._measure_deferred()
        local = self.base.now()
        best = self._best
        return local if best is None else local + (best.reference - best.after)

    def measure(self, read: Callable[[], datetime | None]) -> ClockReading | None:
        """Read the reference between two local instants and keep the reading; returns the
        reading now in use (None: the reference is this clock, or none was ever taken)."""
        self._deferred = None  # this reading is the one a defer() waited for
        before = self.base.now()
        reference = read()
        after = self.base.now()
        if reference is None:
            self._local, self._readings, self._best = True, (), None
            return None
        self._local = False
        return self.record(ClockReading(before, reference.astimezone(UTC), after))

    def defer(self, read: Callable[[], datetime | None]) -> None:
        """Measure with `read` (as measure() does) when the time is next asked, not now: the
        first now() takes the reading, then tells the corrected time. Until then offset is
        None and the clock is not stale(). A reading that fails (read raises) is tried again
        at the next now()."""
        self._deferred = read

    @property
    def deferred(self) -> bool:
        """Whether a reading waits for the next now() (see defer())."""
        return self._deferred is not None

    def _measure_deferred(self) -> None:
        read, self._deferred = self._deferred, None
        if read is None:  # another thread took it meanwhile
            return
        try:
            self.measure(read)
        except BaseException:
            self._deferred = read
            raise

    def record(self, reading: ClockReading) -> ClockReading | None:
        """Keep `reading` (with the earlier ones that agree with it) and return the reading
        now in use. A reading whose local clock went backwards while it was taken is dropped."""
        if reading.round_trip < 0:
            return self._best
        kept = [r for r in self._readings if r.agrees(reading)]
        readings = (*kept, reading)[-self.keep :]
        best = min(readings, key=lambda r: r.round_trip)
        self._readings, self._best = readings, best
        return best

    @property
    def reading(self) -> ClockReading | None:
        """The reading the clock corrects by (None: not measured, or the reference is this
        clock)."""
        return self._best

    @property
    def offset(self) -> float | None:
        """How far the local clock is ahead of the reference (seconds; negative: behind), as
        corrected for: 0.0 when the reference is this clock, None before the first reading."""
        if self._local:
            return 0.0
        return None if self._best is None else self._best.ahead

    def stale(self, max_age: float = READING_MAX_AGE) -> bool:
        """Whether the reading in use is older than `max_age` seconds by the local clock (or
        there is none, the reference being another clock)."""
        if self._local or self._deferred is not None:
            return False
        best = self._best
        return best is None or (self.base.now() - best.after).total_seconds() > max_age
