"""Durations as users write them: seconds (90, 1.5), text ('30s', '5m', '1h30m', '2d') or a
timedelta. Apart from core/requests.py so that every core module may use it."""

from __future__ import annotations

import math
import re
from datetime import timedelta

from duetime.core.errors import InvalidRequest

MAX_DURATION_SECONDS = 100 * 365 * 86400
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(value: str | float | int | timedelta, what: str = "duration") -> timedelta:
    """Parse 90, 1.5, '30s', '5m', '1h30m', '2d' or a timedelta; refuse negatives."""
    seconds = _seconds(value, what)
    if seconds < 0:  # before timedelta(): -1e300 seconds overflows it
        raise InvalidRequest(f"{what} must not be negative, got {value!r}")
    if not math.isfinite(seconds) or seconds > MAX_DURATION_SECONDS:
        raise InvalidRequest(f"{what} {value!r} is too long; the limit is 100 years")
    return timedelta(seconds=seconds)


def _seconds(value: str | float | int | timedelta, what: str) -> float:
    """The seconds a duration says, unchecked (negative, infinite or NaN as written)."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool):
        raise InvalidRequest(f"{what} must be seconds or a duration like '30s', not a boolean")
    if isinstance(value, int | float):
        # (an int past 1e300 would not convert to float)
        return float(value) if abs(value) < 1e300 else math.inf if value > 0 else -math.inf
    if not isinstance(value, str):
        raise InvalidRequest(f"{what} must be seconds or a duration like '30s'")
    text = value.strip().lower().replace(" ", "")
    try:
        return float(text)
    except ValueError:
        parts = _DURATION.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise InvalidRequest(
                f"{what} {value!r} is not a duration; write it like 30s, 5m, 1h30m or 2d"
            ) from None
        return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


def bounded_duration(
    value: str | float | int | timedelta, what: str, low: float, high: float
) -> float:
    """A duration in seconds (as parse_duration reads it) from `low` to `high` seconds, or
    InvalidRequest naming both bounds: the one check behind every bounded duration field."""
    seconds = _seconds(value, what)
    if not low <= seconds <= high:  # NaN too
        raise InvalidRequest(
            f"{what} must be from {seconds_text(low)} to {seconds_text(high)}, got {value!r}"
        )
    return seconds


def seconds_text(seconds: float) -> str:
    """A bound as people write it: 0s, 1s, 60s, 1d, 366d."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"
