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

Expressions are validated and rewritten for cronsim in duetime.core.cron.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cronsim import CronSim

# MACROS and normalize_cron lived here before duetime.core.cron; they are re-exported
from duetime.core.cron import MACROS as MACROS
from duetime.core.cron import cronsim_text
from duetime.core.cron import normalize_cron as normalize_cron
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


# IANA names that are fixed offsets despite looking like zones (EST never observes DST)
_FIXED_ZONES = {"EST", "MST", "HST"}
_FIXED_OFFSET = re.compile(r"^(UTC|GMT)?\s*[+-]\d{1,2}(:?\d{2})?$|^Etc/GMT[+-]\d+$", re.IGNORECASE)


@dataclass(frozen=True, order=True)
class Fire:
    at: datetime  # the nominal fire instant, UTC: the occurrence's identity
    wall: datetime  # the naive local wall time the rule named
    kind: FireKind = FireKind.NORMAL


MAX_ZONE_NAME = 100  # characters, as the API's timezone field


def zone(name: str) -> ZoneInfo:
    """An IANA zone by name; fixed offsets are refused because they ignore DST rules."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidRequest("time zone must be an IANA name such as Europe/London or UTC")
    if _FIXED_OFFSET.match(name.strip()) or name.strip().upper() in _FIXED_ZONES:
        raise InvalidRequest(
            f"time zone {name!r} is a fixed UTC offset; use an IANA zone name such as "
            "America/New_York so daylight-saving rules apply (or UTC)"
        )
    if len(name) > MAX_ZONE_NAME:  # before ZoneInfo, which opens a file by that name
        raise InvalidRequest(
            f"time zone is {len(name)} characters; the limit is {MAX_ZONE_NAME}: use an IANA "
            "name such as Europe/London or UTC"
        )
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        hint = ""
        lowered = name.lower()
        last = lowered.split("/")[-1]
        close = sorted(
            z for z in available_timezones() if len(last) >= 3 and z.lower().endswith(last)
        )
        if close:
            hint = f" (did you mean {close[0]}?)"
        raise InvalidRequest(f"unknown time zone {name!r}{hint}; use an IANA name") from None


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
