"""Recurrence maths: explicit DST nights, and a property test against a brute-force oracle."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import islice, pairwise
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.core.cron import normalize_cron
from duetime.core.errors import InvalidRequest
from duetime.core.recurrence import (
    DstFold,
    DstGap,
    FireKind,
    cron_fires,
    interval_fires,
    zone,
)

NY = ZoneInfo("America/New_York")


def local(expr: str, tz: str, after: datetime, n: int, **policy: object) -> list[str]:
    z = ZoneInfo(tz)
    return [f.at.astimezone(z).isoformat() for f in islice(cron_fires(expr, z, after, **policy), n)]  # type: ignore[arg-type]


def test_new_york_0230_across_spring_forward() -> None:
    after = datetime(2026, 3, 6, 12, tzinfo=UTC)
    shifted = local("30 2 * * *", "America/New_York", after, 3, gap=DstGap.SHIFT)
    assert shifted == [
        "2026-03-07T02:30:00-05:00",
        "2026-03-08T03:00:00-04:00",  # 02:30 does not exist: first valid instant after the gap
        "2026-03-09T02:30:00-04:00",
    ]
    skipped = local("30 2 * * *", "America/New_York", after, 3, gap=DstGap.SKIP)
    assert skipped == [
        "2026-03-07T02:30:00-05:00",
        "2026-03-09T02:30:00-04:00",
        "2026-03-10T02:30:00-04:00",
    ]


@pytest.mark.parametrize(
    ("fold", "expected"),
    [
        (DstFold.FIRST, ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"]),
        (DstFold.SECOND, ["2026-11-01T01:30:00-05:00", "2026-11-02T01:30:00-05:00"]),
        (
            DstFold.BOTH,
            ["2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00", "2026-11-02T01:30:00-05:00"],
        ),
    ],
)
def test_new_york_0130_across_fall_back(fold: DstFold, expected: list[str]) -> None:
    after = datetime(2026, 10, 31, 12, tzinfo=UTC)
    assert local("30 1 * * *", "America/New_York", after, len(expected), fold=fold) == expected


def test_fold_kinds_are_reported() -> None:
    after = datetime(2026, 10, 31, 12, tzinfo=UTC)
    kinds = [f.kind for f in islice(cron_fires("30 1 * * *", NY, after, fold=DstFold.BOTH), 3)]
    assert kinds == [FireKind.FOLD_FIRST, FireKind.FOLD_SECOND, FireKind.NORMAL]


def test_europe_london_both_changes() -> None:
    spring = local("30 1 * * *", "Europe/London", datetime(2026, 3, 28, tzinfo=UTC), 3)
    assert spring == [
        "2026-03-28T01:30:00+00:00",
        "2026-03-29T02:00:00+01:00",  # 01:30 GMT does not exist on 29 March
        "2026-03-30T01:30:00+01:00",
    ]
    autumn = local(
        "30 1 * * *", "Europe/London", datetime(2026, 10, 24, tzinfo=UTC), 3, fold=DstFold.BOTH
    )
    assert autumn == [
        "2026-10-24T01:30:00+01:00",
        "2026-10-25T01:30:00+01:00",
        "2026-10-25T01:30:00+00:00",
    ]


def test_asia_kolkata_has_no_dst_and_a_half_hour_offset() -> None:
    fires = list(
        islice(
            cron_fires("0 9 * * *", ZoneInfo("Asia/Kolkata"), datetime(2026, 3, 1, tzinfo=UTC)), 400
        )
    )
    assert {f.at.time().isoformat() for f in fires} == {"03:30:00"}
    assert all(b.at - a.at == timedelta(days=1) for a, b in pairwise(fires))


def test_february_29_fires_in_leap_years_only() -> None:
    got = local("0 0 29 2 *", "UTC", datetime(2026, 1, 1, tzinfo=UTC), 3)
    assert got == [
        "2028-02-29T00:00:00+00:00",
        "2032-02-29T00:00:00+00:00",
        "2036-02-29T00:00:00+00:00",
    ]


def test_every_15_minutes_across_both_hour_changes() -> None:
    spring = local("*/15 * * * *", "America/New_York", datetime(2026, 3, 8, 6, 30, tzinfo=UTC), 4)
    assert spring == [
        "2026-03-08T01:45:00-05:00",
        "2026-03-08T03:00:00-04:00",  # 02:00..02:45 shift to 03:00 and fire once
        "2026-03-08T03:15:00-04:00",
        "2026-03-08T03:30:00-04:00",
    ]
    fall = [
        f.at
        for f in islice(
            cron_fires(
                "*/15 * * * *", NY, datetime(2026, 11, 1, 5, 0, tzinfo=UTC), fold=DstFold.BOTH
            ),
            8,
        )
    ]
    assert all(b - a == timedelta(minutes=15) for a, b in pairwise(fall))


def test_weekdays_at_nine() -> None:
    got = local("0 9 * * 1-5", "Europe/Berlin", datetime(2026, 3, 27, 12, tzinfo=UTC), 3)
    # Friday 27th has passed 09:00; the weekend is skipped; DST starts on Sunday the 29th
    assert got == [
        "2026-03-30T09:00:00+02:00",
        "2026-03-31T09:00:00+02:00",
        "2026-04-01T09:00:00+02:00",
    ]


def test_interval_ignores_dst() -> None:
    anchor = datetime(2026, 3, 8, 5, 0, tzinfo=UTC)
    fires = list(islice(interval_fires(timedelta(minutes=15), anchor, anchor), 12))
    assert fires[0].at == anchor + timedelta(minutes=15)
    assert all(b.at - a.at == timedelta(minutes=15) for a, b in pairwise(fires))
    walls = [f.at.astimezone(NY).strftime("%H:%M") for f in fires]
    assert "01:45" in walls and "03:00" in walls and "02:00" not in walls


def test_macros_and_seconds_field() -> None:
    assert normalize_cron("@daily") == "0 0 * * *"
    assert normalize_cron("@hourly") == "0 * * * *"
    assert normalize_cron("  0  9 * *   MON-FRI ") == "0 9 * * MON-FRI"
    got = local("*/20 * * * * *", "UTC", datetime(2026, 1, 1, tzinfo=UTC), 3)
    assert got == [
        "2026-01-01T00:00:20+00:00",
        "2026-01-01T00:00:40+00:00",
        "2026-01-01T00:01:00+00:00",
    ]


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("", "empty"),
        ("61 * * * *", "invalid cron"),
        ("* * *", "3 fields"),
        ("@fortnightly", "unknown cron macro"),
        ("0 0 31 2 *", "never fires: no February has a 31st"),
    ],
)
def test_invalid_cron(expr: str, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        normalize_cron(expr)


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("0 0 30 2 *", "'0 0 30 2 \\*' never fires: no February has a 30th$"),
        ("0 0 30,31 2 *", "never fires: no February has a 30th or 31st$"),
        ("0 0 31 4,6,9 *", "never fires: no April, June or September has a 31st$"),
        ("0 0 31 apr *", "never fires: no April has a 31st$"),
        ("61 * * * *", "'61' is not a valid minute; use 0-59"),
        ("0 24 * * *", "'24' is not a valid hour; use 0-23"),
        ("0 0 0 * *", "'0' is not a valid day-of-month; use 1-31"),
        ("0 0 * 13 *", "'13' is not a valid month; use 1-12 or JAN-DEC"),
        (
            "0 0 * * 8",
            "'8' is not a valid day-of-week; use 0-7 \\(0 and 7 are Sunday\\) or SUN-SAT",
        ),
        ("0 0 * * 5-3", "'5-3' is not a valid day-of-week"),
        ("61 0 0 * * *", "'61' is not a valid second; use 0-59"),
        (
            "*/99999999999999999999 * * * *",
            "step 99999999999999999999 in the minute field is "
            "larger than the field; use a step from 1 to 60$",
        ),
        (
            "0 */25 * * *",
            "step 25 in the hour field is larger than the field; use a step from 1 to 24$",
        ),
        ("0 0 1-31/40 * *", "step 40 in the day-of-month field is larger than the field"),
        ("0 0 * * */8", "step 8 in the day-of-week field is larger than the field"),
        ("*/0 * * * *", "step 0 in the minute field must be at least 1$"),
    ],
)
def test_cron_errors_say_what_is_wrong(expr: str, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message) as caught:
        normalize_cron(expr)
    text = str(caught.value)
    assert "\n" not in text and "Bad " not in text, text


@pytest.mark.parametrize("expr", ["*/60 * * * *", "0 */24 * * *", "0 0 * * */7", "0 0 1 */12 *"])
def test_a_step_as_large_as_its_field_is_allowed(expr: str) -> None:
    assert normalize_cron(expr) == expr


def _fires(expr: str, n: int) -> list[datetime]:
    after = datetime(2026, 1, 1, tzinfo=UTC)
    return [f.at for f in islice(cron_fires(normalize_cron(expr), ZoneInfo("UTC"), after), n)]


def test_a_one_value_range_with_a_step_is_that_one_value() -> None:
    wednesdays = _fires("0 9 * * 3-3/3", 6)
    assert {at.weekday() for at in wednesdays} == {2}  # only Wednesdays, never Saturdays
    assert all(b - a == timedelta(days=7) for a, b in pairwise(wednesdays))
    at_52 = _fires("52-52/3 9 * * *", 4)
    assert {(at.hour, at.minute) for at in at_52} == {(9, 52)}  # not 09:55, 09:58
    assert _fires("0 9 * * WED-wed/2", 3) == _fires("0 9 * * 3", 3)
    assert _fires("0 0 1 MAR-3/4 *", 3) == _fires("0 0 1 3 *", 3)
    assert _fires("0 9 * * 1,3-3/3", 6) == _fires("0 9 * * 1,3", 6)


def test_the_stored_expression_keeps_what_the_user_wrote() -> None:
    assert normalize_cron("0  9 * * 3-3/3") == "0 9 * * 3-3/3"


def test_a_single_value_with_a_step_is_still_an_open_range() -> None:
    # 5/15 is the common extension for 5-59/15; only a range a-a with a step is one value
    assert [at.minute for at in _fires("5/15 * * * *", 4)] == [5, 20, 35, 50]


@settings(max_examples=50, deadline=None)
@given(
    value=st.integers(0, 59),
    step=st.integers(1, 60),
    field=st.integers(0, 1),
)
def test_a_range_of_one_value_with_any_step_fires_like_the_value(
    value: int, step: int, field: int
) -> None:
    hour = value % 24
    one = f"{value}-{value}/{step}"
    if field == 0:
        expr, plain = f"{one} * * * *", f"{value} * * * *"
    else:
        expr, plain = f"0 {hour}-{hour}/{min(step, 24)} * * *", f"0 {hour} * * *"
    assert _fires(expr, 5) == _fires(plain, 5)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("Mars/Olympus", "unknown time zone"),
        ("+05:30", "fixed UTC offset"),
        ("UTC+2", "fixed UTC offset"),
        ("Etc/GMT-3", "fixed UTC offset"),
        ("", "IANA"),
    ],
)
def test_bad_zones(name: str, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        zone(name)


def test_utc_is_allowed() -> None:
    assert zone("UTC").key == "UTC"


# -- property: agree with an independent oracle, except exactly at gaps and folds ---------------

# zones whose offsets and DST shifts are whole hours, so a local minute is the UTC minute
ZONES = [
    "America/New_York",
    "Europe/London",
    "Europe/Berlin",
    "Australia/Sydney",
    "America/Santiago",
    "Pacific/Auckland",
    "Asia/Tokyo",
    "America/Los_Angeles",
]
YEAR_START = datetime(2026, 1, 1, tzinfo=UTC)
YEAR_END = datetime(2027, 1, 1, tzinfo=UTC)


def _subset(lo: int, hi: int, max_size: int) -> st.SearchStrategy[frozenset[int]]:
    return st.frozensets(st.integers(lo, hi), min_size=1, max_size=max_size)


cron_parts = st.fixed_dictionaries(
    {
        "minutes": _subset(0, 59, 3),
        "hours": _subset(0, 23, 4),
        "doms": st.none() | _subset(1, 28, 6),
        "months": st.none() | _subset(1, 12, 6),
        "dows": st.none() | _subset(0, 6, 4),
    }
)


def _field(values: frozenset[int] | None) -> str:
    return "*" if values is None else ",".join(str(v) for v in sorted(values))


def oracle(parts: dict[str, frozenset[int] | None], tz: ZoneInfo) -> list[datetime]:
    """Every UTC minute of 2026 whose local wall time matches: a fold's wall time twice, a
    gap's never. Day-of-month and day-of-week combine with OR when both are restricted."""
    minutes, hours = parts["minutes"], parts["hours"]
    doms, months, dows = parts["doms"], parts["months"], parts["dows"]
    assert minutes is not None and hours is not None
    found = []
    hour = YEAR_START
    while hour < YEAR_END:
        for m in sorted(minutes):
            u = hour + timedelta(minutes=m)
            w = u.astimezone(tz)
            if w.hour not in hours or (months is not None and w.month not in months):
                continue
            dom_ok = doms is None or w.day in doms
            dow_ok = dows is None or (w.weekday() + 1) % 7 in dows
            day_ok = (
                (dom_ok or dow_ok)
                if (doms is not None and dows is not None)
                else (dom_ok and dow_ok)
            )
            if day_ok and u > YEAR_START:
                found.append(u)
        hour += timedelta(hours=1)
    return found


def ours(expr: str, tz: ZoneInfo, gap: DstGap, fold: DstFold) -> list[tuple[datetime, FireKind]]:
    out = []
    for fire in cron_fires(expr, tz, YEAR_START, gap=gap, fold=fold):
        if fire.at >= YEAR_END:
            break
        out.append((fire.at, fire.kind))
    return out


@settings(max_examples=25, deadline=None)
@given(parts=cron_parts, tz_name=st.sampled_from(ZONES))
def test_fire_times_agree_with_the_oracle_except_at_gaps_and_folds(
    parts: dict[str, frozenset[int] | None], tz_name: str
) -> None:
    tz = ZoneInfo(tz_name)
    expr = " ".join(_field(parts[k]) for k in ("minutes", "hours", "doms", "months", "dows"))
    truth = oracle(parts, tz)
    # skip + both is exactly "every instant whose local time matches"
    assert [at for at, _ in ours(expr, tz, DstGap.SKIP, DstFold.BOTH)] == truth
    # the default policy differs only at DST instants, and only in the documented way
    default = ours(expr, tz, DstGap.SHIFT, DstFold.FIRST)
    got = {at for at, _ in default}
    extra = got - set(truth)
    missing = set(truth) - got
    assert all(kind is FireKind.SHIFTED for at, kind in default if at in extra)
    for at in missing:
        wall = at.astimezone(tz)
        assert wall.fold == 1, f"{at} missing but it is not a fold's second pass"
    assert sorted(got) == [at for at, _ in default], "fires are not in order or not unique"


@pytest.mark.parametrize("name", ["EST", "MST", "HST"])
def test_iana_fixed_offset_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidRequest, match="fixed UTC offset"):
        zone(name)


# -- the end of time ------------------------------------------------------------------------------


def _utc(expr: str, tz: str, after: datetime, n: int = 10) -> list[str]:
    fires = islice(cron_fires(normalize_cron(expr), ZoneInfo(tz), after), n)
    return [f.at.isoformat() for f in fires]


def test_the_last_fires_before_the_year_10000_are_kept() -> None:
    assert _utc("@yearly", "UTC", datetime(9997, 6, 1, tzinfo=UTC)) == [
        "9998-01-01T00:00:00+00:00",
        "9999-01-01T00:00:00+00:00",
    ]
    assert _utc("@daily", "UTC", datetime(9999, 12, 29, tzinfo=UTC)) == [
        "9999-12-30T00:00:00+00:00",
        "9999-12-31T00:00:00+00:00",
    ]
    # New York's midnight of the 31st is 05:00 UTC; its 20:00 would be in the year 10000
    assert _utc("0 0,20 * * *", "America/New_York", datetime(9999, 12, 30, 6, tzinfo=UTC)) == [
        "9999-12-31T01:00:00+00:00",
        "9999-12-31T05:00:00+00:00",
    ]
    assert _utc("*/20 59 23 31 12 *", "UTC", datetime(9999, 12, 31, tzinfo=UTC)) == [
        "9999-12-31T23:59:00+00:00",
        "9999-12-31T23:59:20+00:00",
        "9999-12-31T23:59:40+00:00",
    ]
    assert _utc("@daily", "Pacific/Kiritimati", datetime(9999, 12, 31, 12, tzinfo=UTC)) == []


def test_an_interval_ends_at_the_end_of_time() -> None:
    anchor = datetime(9999, 12, 29, tzinfo=UTC)
    fires = list(interval_fires(timedelta(days=1), anchor, anchor))
    assert [f.at.day for f in fires] == [30, 31]


# -- zones whose clocks jump by a whole day --------------------------------------------------------


def test_apia_skipping_30_december_2011_fires_each_instant_once() -> None:
    # Samoa went from UTC-10 to UTC+14 at 2011-12-30 10:00 UTC: 29 December 23:59:59 was
    # followed by 31 December 00:00, so every wall time of the 30th is in the gap
    after = datetime(2011, 12, 30, 6, tzinfo=UTC)
    expected = [
        "2011-12-30T07:00:00+00:00",
        "2011-12-30T08:00:00+00:00",
        "2011-12-30T09:00:00+00:00",
        "2011-12-30T10:00:00+00:00",  # 31 December 00:00, and the 30th's hours shifted onto it
        "2011-12-30T11:00:00+00:00",
        "2011-12-30T12:00:00+00:00",
    ]
    for gap in DstGap:
        got = [f.at.isoformat() for f in islice(cron_fires("0 * * * *", APIA, after, gap=gap), 6)]
        assert got == expected, gap
    daily = list(islice(cron_fires("0 12 * * *", APIA, after, gap=DstGap.SHIFT), 3))
    assert [(f.at.isoformat(), f.kind) for f in daily] == [
        ("2011-12-30T10:00:00+00:00", FireKind.SHIFTED),  # the 30th's noon did not exist
        ("2011-12-30T22:00:00+00:00", FireKind.NORMAL),  # noon of the 31st, UTC+14
        ("2011-12-31T22:00:00+00:00", FireKind.NORMAL),
    ]


def test_kwajalein_skipping_a_day_in_1993_fires_each_instant_once() -> None:
    kwajalein = ZoneInfo("Pacific/Kwajalein")  # UTC-12 to UTC+12 on 1993-08-21 12:00 UTC
    after = datetime(1993, 8, 21, 8, tzinfo=UTC)
    fires = [f.at for f in islice(cron_fires("*/30 * * * *", kwajalein, after), 10)]
    assert fires == [after + timedelta(minutes=30 * k) for k in range(1, 11)]


APIA = ZoneInfo("Pacific/Apia")

# (zone, an instant near one of its transitions): whole-day jumps forward (Apia, Kwajalein,
# Manila) and back (Sitka, at the purchase of Alaska), and ordinary ones for contrast
TRANSITIONS = [
    ("Pacific/Apia", datetime(2011, 12, 30, 10, tzinfo=UTC)),
    ("Pacific/Kwajalein", datetime(1993, 8, 21, 12, tzinfo=UTC)),
    ("Asia/Manila", datetime(1844, 12, 31, 16, tzinfo=UTC)),
    ("America/Sitka", datetime(1867, 10, 19, 0, 31, tzinfo=UTC)),
    ("America/New_York", datetime(2026, 3, 8, 7, tzinfo=UTC)),
    ("America/New_York", datetime(2026, 11, 1, 6, tzinfo=UTC)),
    ("Australia/Lord_Howe", datetime(2026, 4, 4, 15, tzinfo=UTC)),
    ("Antarctica/Troll", datetime(2026, 3, 29, 1, tzinfo=UTC)),
]

jump_parts = st.fixed_dictionaries(
    {
        "minutes": _subset(0, 59, 3),
        "hours": st.none() | _subset(0, 23, 6),
        "doms": st.none() | _subset(1, 31, 6),
        "months": st.none(),
        "dows": st.none() | _subset(0, 6, 3),
    }
)


def _matches(parts: dict[str, frozenset[int] | None], wall: datetime) -> bool:
    doms, dows, hours = parts["doms"], parts["dows"], parts["hours"]
    if hours is not None and wall.hour not in hours:
        return False
    dom_ok = doms is None or wall.day in doms
    dow_ok = dows is None or (wall.weekday() + 1) % 7 in dows
    return (dom_ok or dow_ok) if (doms is not None and dows is not None) else (dom_ok and dow_ok)


def wall_oracle(
    parts: dict[str, frozenset[int] | None], tz: ZoneInfo, after: datetime, end: datetime
) -> list[datetime]:
    """Every instant in (after, end) whose local wall time matches, found from the wall side:
    each matching wall time minus each offset the zone had nearby, kept if the clock showed it."""
    offsets = set()
    probe = after - timedelta(days=2)
    while probe < end + timedelta(days=2):
        offsets.add(probe.astimezone(tz).utcoffset())
        probe += timedelta(minutes=10)
    minutes = parts["minutes"]
    assert minutes is not None
    found = set()
    day = (after - timedelta(days=2)).replace(tzinfo=None, hour=0, minute=0, second=0)
    while day < (end + timedelta(days=2)).replace(tzinfo=None):
        for hour in range(24):
            for minute in sorted(minutes):
                wall = day.replace(hour=hour, minute=minute)
                if not _matches(parts, wall):
                    continue
                for offset in offsets:
                    assert offset is not None
                    at = (wall - offset).replace(tzinfo=UTC)
                    if after < at < end and at.astimezone(tz).replace(tzinfo=None) == wall:
                        found.add(at)
        day += timedelta(days=1)
    return sorted(found)


@settings(max_examples=60, deadline=None)
@given(
    parts=jump_parts,
    where=st.sampled_from(TRANSITIONS),
    hours_before=st.integers(-12, 40),
    gap=st.sampled_from(DstGap),
    fold=st.sampled_from(DstFold),
)
def test_around_any_transition_fires_are_strictly_increasing_and_match_the_wall_clock(
    parts: dict[str, frozenset[int] | None],
    where: tuple[str, datetime],
    hours_before: int,
    gap: DstGap,
    fold: DstFold,
) -> None:
    tz = ZoneInfo(where[0])
    after = where[1] - timedelta(hours=hours_before)
    end = after + timedelta(days=3)
    expr = " ".join(_field(parts[k]) for k in ("minutes", "hours", "doms", "months", "dows"))
    fires = []
    for fire in cron_fires(expr, tz, after, gap=gap, fold=fold):
        if fire.at >= end:
            break
        fires.append(fire)
    instants = [f.at for f in fires]
    assert all(at > after for at in instants)
    assert all(a < b for a, b in pairwise(instants)), "an instant repeats or goes back"
    truth = wall_oracle(parts, tz, after, end)
    if (gap, fold) == (DstGap.SKIP, DstFold.BOTH):
        assert instants == truth
    for fire in fires:
        if fire.kind is FireKind.SHIFTED:  # the first instant after the gap the wall fell in
            before = (fire.at - timedelta(seconds=1)).astimezone(tz).utcoffset()
            assert before != fire.at.astimezone(tz).utcoffset()
            assert fire.at.astimezone(tz).replace(tzinfo=None) > fire.wall
        else:
            assert fire.at in truth
            assert fire.at.astimezone(tz).replace(tzinfo=None) == fire.wall
    # every matching instant runs unless it is a second pass the fold policy leaves out
    for at in set(truth) - set(instants):
        assert fold is not DstFold.BOTH and at.astimezone(tz).fold == int(fold is DstFold.FIRST)
