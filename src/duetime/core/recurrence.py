"""Recurrence maths: when a cron or interval rule fires, in an IANA zone, under a DST policy.

Cron expressions are parsed and iterated by cronsim over *naive local wall-clock times*, so the
library never applies its own DST rules; each wall time is then resolved into UTC instants here:

- a wall time that exists once becomes that instant;
- a wall time inside a spring-forward gap is skipped (dst_gap="skip") or moved to the first
  valid instant after the gap (dst_gap="shift"); several gap times that shift to one instant
  fire once;
- a wall time inside a fall-back fold fires on its first pass, its second, or both (dst_fold).

Every wall time is resolved with the zone rules in force on its own date, whatever the size
of the jump (Samoa skipped a whole day in 2011), and the instants come out strictly increasing.
Interval rules are plain UTC arithmetic from an anchor instant and ignore DST. Both end,
without an error, at the end of the year 9999 (UTC).

duetime validates expressions itself (one line saying what is wrong) and rewrites what cronsim
reads differently from cron: a range of one value with a step, such as 3-3/3, is that value.
"""

from __future__ import annotations

import functools
import heapq
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cronsim import CronSim, CronSimError

from duetime.core.errors import InvalidRequest


class DstGap(StrEnum):
    SKIP = "skip"
    SHIFT = "shift"


class DstFold(StrEnum):
    FIRST = "first"
    SECOND = "second"
    BOTH = "both"


class FireKind(StrEnum):
    NORMAL = "normal"
    SHIFTED = "dst_shifted"  # moved to the end of a spring-forward gap
    FOLD_FIRST = "dst_fold_first"
    FOLD_SECOND = "dst_fold_second"
    SKIPPED = "dst_skipped"  # not a fire: reported so operators see why nothing ran


MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

# IANA names that are fixed offsets despite looking like zones (EST never observes DST)
_FIXED_ZONES = {"EST", "MST", "HST"}
_FIXED_OFFSET = re.compile(r"^(UTC|GMT)?\s*[+-]\d{1,2}(:?\d{2})?$|^Etc/GMT[+-]\d+$", re.IGNORECASE)


@dataclass(frozen=True, order=True)
class Fire:
    at: datetime  # the nominal fire instant, UTC: the occurrence's identity
    wall: datetime  # the naive local wall time the rule named
    kind: FireKind = FireKind.NORMAL


def zone(name: str) -> ZoneInfo:
    """An IANA zone by name; fixed offsets are refused because they ignore DST rules."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidRequest("time zone must be an IANA name such as Europe/London or UTC")
    if _FIXED_OFFSET.match(name.strip()) or name.strip().upper() in _FIXED_ZONES:
        raise InvalidRequest(
            f"time zone {name!r} is a fixed UTC offset; use an IANA zone name such as "
            "America/New_York so daylight-saving rules apply (or UTC)"
        )
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        hint = ""
        lowered = name.lower()
        last = lowered.split("/")[-1]
        close = sorted(
            z for z in available_timezones() if len(last) >= 3 and z.lower().endswith(last)
        )
        if close:
            hint = f" (did you mean {close[0]}?)"
        raise InvalidRequest(f"unknown time zone {name!r}{hint}; use an IANA name") from None


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    span: int  # how many distinct values the field has: the largest useful step
    hint: str
    names: tuple[str, ...] = ()  # symbolic values, the first one standing for `low`


_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
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
_MONTHS = (
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
        f"cron expression {expr!r} never fires: no {_words([_MONTHS[m - 1] for m in months])} "
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


def resolve(wall: datetime, tz: ZoneInfo, gap: DstGap, fold: DstFold) -> list[Fire]:
    """The instants a naive local wall time stands for under the DST policy (0, 1 or 2)."""
    first = wall.replace(tzinfo=tz, fold=0)
    second = wall.replace(tzinfo=tz, fold=1)
    at_first = first.astimezone(UTC)
    at_second = second.astimezone(UTC)
    if at_first == at_second:
        return [Fire(at_first, wall)]
    if _exists(first, wall):  # a fold: the wall time happens twice
        fires = {
            DstFold.FIRST: [Fire(at_first, wall, FireKind.FOLD_FIRST)],
            DstFold.SECOND: [Fire(at_second, wall, FireKind.FOLD_SECOND)],
            DstFold.BOTH: [
                Fire(at_first, wall, FireKind.FOLD_FIRST),
                Fire(at_second, wall, FireKind.FOLD_SECOND),
            ],
        }
        return fires[fold]
    # a gap: the wall time never happens; the clock jumps from before it to after it
    if gap is DstGap.SKIP:
        return []
    return [
        Fire(
            _transition(min(at_first, at_second), max(at_first, at_second), tz),
            wall,
            FireKind.SHIFTED,
        )
    ]


def _exists(local: datetime, wall: datetime) -> bool:
    back = local.astimezone(UTC).astimezone(local.tzinfo)
    return back.replace(tzinfo=None) == wall


def _transition(low: datetime, high: datetime, tz: ZoneInfo) -> datetime:
    """The first instant in (low, high] whose UTC offset differs from low's (bisection, 1 s)."""
    before = low.astimezone(tz).utcoffset()
    lo, hi = low, high
    while hi - lo > timedelta(seconds=1):
        mid = lo + (hi - lo) / 2
        mid = mid.replace(microsecond=0)
        if mid.astimezone(tz).utcoffset() == before:
            lo = mid
        else:
            hi = mid
    return hi


def _walls(expr: str, tz: ZoneInfo, after: datetime) -> Iterator[datetime]:
    """Matching wall times, in increasing order, from one no later than any instant after
    `after` shows on the zone's clock, until the year 9999 ends."""
    try:
        yield from CronSim(cronsim_text(expr), _earliest_wall(tz, after))
    except OverflowError:  # cronsim cannot step past 9999-12-31
        return


# Clocks go back by less than a day, so the next two days hold the earliest wall time of
# everything after an instant; zones change their offset at most once an hour.
_HORIZON = timedelta(days=2)
_STEP = timedelta(hours=1)


def _earliest_wall(tz: ZoneInfo, after: datetime) -> datetime:
    """A naive wall time no later than the wall time of any instant after `after`.

    Local time runs forward except where the offset changes: between two samples an hour
    apart with different offsets, no wall time is before the earlier sample plus the smaller
    offset. With no change in the next two days this is the wall time of `after` itself.
    """
    naive = after.astimezone(UTC).replace(tzinfo=None)
    try:
        offset = _offset(after, tz)
        lowest = naive + offset
    except OverflowError:  # the wall time of `after` is beyond one end of time
        return datetime.max if after.year > 5000 else datetime.min
    for k in range(1, _HORIZON // _STEP + 1):
        try:
            later = _offset(after + k * _STEP, tz)
        except OverflowError:  # the year 9999 ends within the horizon
            break
        if later != offset:
            lowest = min(lowest, naive + (k - 1) * _STEP + min(offset, later))
        offset = later
    return lowest


def _offset(at: datetime, tz: ZoneInfo) -> timedelta:
    offset = at.astimezone(tz).utcoffset()
    assert offset is not None
    return offset


def _earliest_instant(wall: datetime, tz: ZoneInfo) -> datetime:
    """No wall time from `wall` on happens before this instant (in a gap, the earlier reading
    is before the gap)."""
    return min(wall.replace(tzinfo=tz, fold=f).astimezone(UTC) for f in (0, 1))


def cron_fires(
    expr: str,
    tz: ZoneInfo,
    after: datetime,
    *,
    gap: DstGap = DstGap.SHIFT,
    fold: DstFold = DstFold.FIRST,
) -> Iterator[Fire]:
    """Fires strictly after `after` (UTC), each instant once, strictly increasing.

    Wall times come in increasing order but their instants need not (a fold repeats wall
    times; a gap shifts many onto one instant), so fires wait in a heap until no later wall
    time can resolve to an instant before them.
    """
    pending: list[Fire] = []
    last = after
    for wall in _walls(expr, tz, after):
        try:
            fires = resolve(wall, tz, gap, fold)
            floor = _earliest_instant(wall, tz)
        except OverflowError:  # this wall time, and every later one, is after 9999 in UTC
            break
        for fire in fires:
            if fire.at > last:
                heapq.heappush(pending, fire)
        while pending and pending[0].at < floor:
            fire = _pop_instant(pending)
            if fire.at > last:
                last = fire.at
                yield fire
    while pending:
        fire = _pop_instant(pending)
        if fire.at > last:
            last = fire.at
            yield fire


def _pop_instant(pending: list[Fire]) -> Fire:
    """The earliest instant once, preferring a real fire over a gap shifted onto it."""
    fire = heapq.heappop(pending)
    while pending and pending[0].at == fire.at:
        other = heapq.heappop(pending)
        if fire.kind is FireKind.SHIFTED:
            fire = other
    return fire


def interval_fires(every: timedelta, anchor: datetime, after: datetime) -> Iterator[Fire]:
    """anchor + k * every for k >= 0, strictly after `after`; absolute time, DST ignored."""
    if every <= timedelta(0):
        raise InvalidRequest("an interval must be positive")
    k = 0 if after < anchor else (after - anchor) // every + 1
    while True:
        try:
            at = anchor + k * every
        except OverflowError:  # past the year 9999
            return
        yield Fire(at, at.replace(tzinfo=None))
        k += 1
