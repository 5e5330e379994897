"""The bounds of a queue's or tenant's settings, checked and parsed the same on the API, the
CLI, the dashboard and in every store (docs/flow-control.md, "Bounds"). Pure: no I/O.
"""

from __future__ import annotations

import math
from enum import Enum

from duetime.core.errors import InvalidRequest

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
