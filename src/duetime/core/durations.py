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
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool):
        raise InvalidRequest(f"{what} must be seconds or a duration like '30s', not a boolean")
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        try:
            seconds = float(text)
        except ValueError:
            parts = _DURATION.findall(text)
            if not parts or "".join(n + u for n, u in parts) != text:
                raise InvalidRequest(
                    f"{what} {value!r} is not a duration; write it like 30s, 5m, 1h30m or 2d"
                ) from None
            seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    else:
        raise InvalidRequest(f"{what} must be seconds or a duration like '30s'")
    if not math.isfinite(seconds) or seconds > MAX_DURATION_SECONDS:
        raise InvalidRequest(f"{what} {value!r} is too long; the limit is 100 years")
    result = timedelta(seconds=seconds)
    if result < timedelta(0):
        raise InvalidRequest(f"{what} must not be negative, got {value!r}")
    return result
