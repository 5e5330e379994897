"""Clocks: the only place duetime reads the time, so tests can move it by hand."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol


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
