"""Cron expressions as duetime reads them: validation with one-line errors that say what is
wrong, and the text handed to cronsim, rewritten where cronsim reads an expression differently
from cron (a range of one value with a step, such as 3-3/3, is that one value).

When a rule fires, in which zone and under which DST policy, is in duetime.core.recurrence.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime

from cronsim import CronSim, CronSimError

from duetime.core.errors import InvalidRequest

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    span: int  # how many distinct values the field has: the largest useful step
    hint: str
    names: tuple[str, ...] = ()  # symbolic values, the first one standing for `low`


DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_MONTH_NAMES = tuple(name[:3].upper() for name in MONTHS)  # JAN..DEC
_DAY_NAMES = tuple(name[:3].upper() for name in DAYS)  # SUN..SAT
_FORMS = "a range 1-5, a list 1,15 or a step */10"
_SECOND = _Field("second", 0, 60, f"0-59, {_FORMS}")
_CRON_FIELDS = (
    _Field("minute", 0, 60, f"0-59, {_FORMS}"),
    _Field("hour", 0, 24, f"0-23, {_FORMS}"),
    _Field("day-of-month", 1, 31, f"1-31, L (the last day), LW (the last weekday), {_FORMS}"),
    _Field("month", 1, 12, f"1-12 or JAN-DEC, {_FORMS}", _MONTH_NAMES),
    _Field(
        "day-of-week",
        0,
        7,
        "0-7 (0 and 7 are Sunday) or SUN-SAT, 5L (the last Friday), 5#2 (the second Friday), "
        + _FORMS,
        _DAY_NAMES,
    ),
)


def _fields(parts: list[str]) -> tuple[_Field, ...]:
    return (_SECOND, *_CRON_FIELDS) if len(parts) == 6 else _CRON_FIELDS


def normalize_cron(expr: str) -> str:
    """Validate a 5-field cron expression (or 6 with seconds first, or a @macro); the result
    is the expression as written, with single spaces and macros expanded."""
    if not isinstance(expr, str) or not expr.strip():
        raise InvalidRequest("cron expression is empty; write it like '0 9 * * 1-5'")
    text = " ".join(expr.split())
    text = MACROS.get(text.lower(), text)
    if text.startswith("@"):
        raise InvalidRequest(f"unknown cron macro {expr!r}; use one of {', '.join(MACROS)}")
    parts = text.split()
    if len(parts) not in (5, 6):
        raise InvalidRequest(
            f"cron expression {expr!r} has {len(parts)} fields; use 5 "
            "(minute hour day-of-month month day-of-week) or 6 with seconds first"
        )
    for field, part in zip(_fields(parts), parts, strict=True):
        for term in part.split(","):
            _check_step(expr, field, term)
    try:
        next(iter(CronSim(cronsim_text(text), datetime(2000, 1, 1))))
    except CronSimError:
        raise InvalidRequest(_explain(expr, parts)) from None
    except StopIteration:
        raise InvalidRequest(f"cron expression {expr!r} never fires") from None
    return text


def _check_step(expr: str, field: _Field, term: str) -> None:
    _, slash, step = term.partition("/")
    if not slash or not step.isdigit():
        return  # no step, or one the parser refuses with the field's hint
    if int(step) < 1:
        raise InvalidRequest(
            f"invalid cron expression {expr!r}: the step {step} in the {field.name} field must "
            "be at least 1"
        )
    if int(step) > field.span:
        raise InvalidRequest(
            f"invalid cron expression {expr!r}: the step {step} in the {field.name} field is "
            f"larger than the field; use a step from 1 to {field.span}"
        )


def _explain(expr: str, parts: list[str]) -> str:
    """One line saying what the parser refused: which field, or that the rule never fires."""
    for i, (field, part) in enumerate(zip(_fields(parts), parts, strict=True)):
        if not _parses(" ".join(part if j == i else "*" for j in range(len(parts)))):
            return (
                f"invalid cron expression {expr!r}: {part!r} is not a valid {field.name}; "
                f"use {field.hint}"
            )
    # each field is valid alone: the days of the month named exist in none of the months named
    dom, month = len(parts) - 3, len(parts) - 2
    start = datetime(2000, 1, 1)
    days = sorted(CronSim(cronsim_text(_with(parts, month, "*")), start).days)
    months = sorted(CronSim(cronsim_text(_with(parts, dom, "*")), start).months)
    if not days or days[0] < 1 or not months:  # pragma: no cover - cronsim refuses nothing else
        return f"invalid cron expression {expr!r}"
    return (
        f"cron expression {expr!r} never fires: no {_words([MONTHS[m - 1] for m in months])} "
        f"has a {_words([_ordinal(d) for d in days])}"
    )


def _parses(text: str) -> bool:
    try:
        CronSim(cronsim_text(text), datetime(2000, 1, 1))
    except CronSimError:
        return False
    return True


def _with(parts: list[str], index: int, value: str) -> str:
    return " ".join(value if i == index else p for i, p in enumerate(parts))


def _words(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@functools.lru_cache(maxsize=256)
def cronsim_text(expr: str) -> str:
    """The expression as cronsim must read it to mean what cron means: a range of one value
    with a step (3-3/3) is that value, where cronsim would read an open range (3-7/3)."""
    parts = expr.split()
    if len(parts) not in (5, 6):
        return expr  # cronsim refuses it
    return " ".join(
        ",".join(_one_value_range(field, term) for term in part.split(","))
        for field, part in zip(_fields(parts), parts, strict=True)
    )


def _one_value_range(field: _Field, term: str) -> str:
    span, slash, _ = term.partition("/")
    low, dash, high = span.partition("-")
    if not (slash and dash):
        return term
    value = _value(field, low)
    return low if value is not None and value == _value(field, high) else term


def _value(field: _Field, token: str) -> int | None:
    if token.isdigit():
        return int(token)
    upper = token.upper()
    return field.low + field.names.index(upper) if upper in field.names else None


__all__ = ["MACROS", "cronsim_text", "normalize_cron"]
