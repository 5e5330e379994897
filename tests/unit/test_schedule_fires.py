"""A schedule's fire times as previews and the planner see them: strictly increasing, never at
or before `after`, for cron rules and intervals, in any zone, up to the end of the year 9999."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.core.schedule_spec import build_spec, preview

ZONES = [
    "UTC",
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "Pacific/Apia",
    "Pacific/Kwajalein",
    "America/Sitka",
    "Pacific/Kiritimati",
]
CRONS = [
    "0 * * * *",
    "*/20 * * * *",
    "30 2 * * *",
    "0 0 * * *",
    "0 12 * * 1-5",
    "15 1,2,3 * * *",
    "0 0 1 * *",
    "@yearly",
    "*/30 * * * * *",
    "0 9 * * 3-3/3",
]
# where clocks jump: whole days forward (Apia, Kwajalein) and back (Sitka), an hour, half an hour
JUMPS = [
    ("Pacific/Apia", datetime(2011, 12, 30, 10, tzinfo=UTC)),
    ("Pacific/Kwajalein", datetime(1993, 8, 21, 12, tzinfo=UTC)),
    ("America/Sitka", datetime(1867, 10, 19, 0, 31, tzinfo=UTC)),
    ("America/New_York", datetime(2026, 3, 8, 7, tzinfo=UTC)),
    ("America/New_York", datetime(2026, 11, 1, 6, tzinfo=UTC)),
    ("Australia/Lord_Howe", datetime(2026, 4, 4, 15, tzinfo=UTC)),
]
anywhere = st.tuples(
    st.sampled_from(ZONES),
    st.one_of(
        st.datetimes(datetime(1850, 1, 1), datetime(2100, 1, 1)),
        st.datetimes(datetime(9999, 1, 1), datetime(9999, 12, 31, 23)),
    ).map(lambda d: d.replace(tzinfo=UTC)),
)
near_a_jump = st.builds(
    lambda jump, minutes: (jump[0], jump[1] - timedelta(minutes=minutes)),
    st.sampled_from(JUMPS),
    st.integers(-600, 3000),
)


@settings(max_examples=300, deadline=None)
@given(
    where=st.one_of(anywhere, near_a_jump),
    rule=st.one_of(st.sampled_from(CRONS), st.integers(1, 400_000)),
    anchor_back=st.integers(0, 10**7),
    gap=st.sampled_from(["shift", "skip"]),
    fold=st.sampled_from(["first", "second", "both"]),
)
def test_previews_are_strictly_increasing_and_strictly_after(
    where: tuple[str, datetime], rule: str | int, anchor_back: int, gap: str, fold: str
) -> None:
    tz, after = where
    if isinstance(rule, str):
        spec = build_spec("s", "t", timezone=tz, cron=rule, dst_gap=gap, dst_fold=fold)
    else:
        spec = build_spec("s", "t", timezone=tz, every=rule)
    anchor = after - timedelta(seconds=anchor_back)
    fires = preview(spec, anchor, after, 40)
    instants = [f.at for f in fires]
    assert all(at > after for at in instants)
    assert all(a < b for a, b in pairwise(instants)), "an instant repeats or goes back"
    if after.year < 9999:
        assert len(instants) == 40  # only the end of time cuts a preview short


def test_a_preview_runs_to_the_last_instant_before_the_year_10000() -> None:
    yearly = build_spec("y", "t", timezone="UTC", cron="@yearly")
    after = datetime(8999, 6, 1, tzinfo=UTC)
    fires = preview(yearly, after, after, 10_000)
    assert len(fires) == 1000  # 9000-01-01 to 9999-01-01
    assert fires[-1].at == datetime(9999, 1, 1, tzinfo=UTC)
    daily = build_spec("d", "t", timezone="UTC", cron="@daily")
    last = preview(daily, after, datetime(9999, 12, 29, 12, tzinfo=UTC), 10)
    assert [f.at.day for f in last] == [30, 31]
