"""When a tick is late: by default once the next tick is due (proportional to the schedule's
period), or after a fixed `late_after` the schedule sets. Pure planning, no store."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.core.errors import InvalidRequest
from duetime.core.schedule_spec import build_spec, spec_from_json
from duetime.core.schedules import Plan, Schedule, TickOutcome, plan_due

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def schedule(cursor: datetime = T0, **options: Any) -> Schedule:
    options.setdefault("timezone", "UTC")
    spec = build_spec("s", "t", **options)
    return Schedule(
        id=1,
        tenant="default",
        spec=spec,
        paused=False,
        anchor_at=T0,
        next_fire_at=cursor,
        version=1,
        created_at=T0,
        updated_at=T0,
    )


def outcomes(plan: Plan) -> dict[TickOutcome, list[datetime]]:
    found: dict[TickOutcome, list[datetime]] = {}
    for tick in plan.ticks:
        found.setdefault(tick.outcome, []).append(tick.nominal_at)
    return found


def test_after_a_70s_outage_an_every_2s_schedule_under_skip_runs_one_tick_not_a_burst() -> None:
    now = T0 + timedelta(seconds=70.5)
    plan = plan_due(schedule(every=2, misfire="skip"), [], now)
    current = T0 + timedelta(seconds=70)
    assert [(j.nominal_at, j.due_at) for j in plan.new_jobs] == [(current, current)]
    missed = outcomes(plan)[TickOutcome.MISSED]
    assert missed == [T0 + timedelta(seconds=2 * k) for k in range(35)]  # 09:00:00 .. 09:01:08
    assert plan.next_fire_at == current + timedelta(seconds=2)


def test_a_tick_is_on_time_until_the_next_one_is_due() -> None:
    hourly = schedule(cron="0 * * * *", misfire="skip")
    at_1230 = plan_due(hourly, [], T0 + timedelta(hours=3, minutes=30))
    # 09:00, 10:00 and 11:00 are late (their next tick has come); 12:00 is not: it runs
    assert outcomes(at_1230)[TickOutcome.MISSED] == [T0 + timedelta(hours=h) for h in range(3)]
    assert [j.nominal_at for j in at_1230.new_jobs] == [T0 + timedelta(hours=3)]
    daily = schedule(cron="0 9 * * *", misfire="skip")
    assert [j.nominal_at for j in plan_due(daily, [], T0 + timedelta(hours=23)).new_jobs] == [T0]
    assert plan_due(daily, [], T0 + timedelta(hours=24, seconds=1)).new_jobs[0].nominal_at == (
        T0 + timedelta(days=1)
    )


def test_coalesce_and_catch_up_see_the_same_late_ticks() -> None:
    now = T0 + timedelta(seconds=9)
    coalesce = plan_due(schedule(every=2, misfire="coalesce"), [], now)
    assert [(j.nominal_at, j.covers, j.due_at) for j in coalesce.new_jobs] == [
        (T0 + timedelta(seconds=6), tuple(T0 + timedelta(seconds=s) for s in (0, 2, 4, 6)), now),
        (T0 + timedelta(seconds=8), (), now),  # on time, but not before the late run
    ]
    catch_up = plan_due(schedule(every=2, misfire="catch_up"), [], now)
    seconds = [
        ((j.nominal_at - T0).total_seconds(), (j.due_at - now).total_seconds())
        for j in catch_up.new_jobs
    ]
    # the late ones paced from now; 09:00:08, on time, not before them: oldest first
    assert seconds == [(0, 0), (2, 1), (4, 2), (6, 3), (8, 3)]


def test_a_planner_a_moment_behind_does_not_make_a_fast_schedule_late() -> None:
    # every second, handled 1.5 s after its tick: the next tick is due, but within 2 s
    plan = plan_due(schedule(cron="* * * * * *", misfire="skip"), [], T0 + timedelta(seconds=1.5))
    assert [j.nominal_at for j in plan.new_jobs] == [T0, T0 + timedelta(seconds=1)]
    assert TickOutcome.MISSED not in outcomes(plan)


def test_late_after_sets_a_fixed_tolerance() -> None:
    now = T0 + timedelta(seconds=70)
    plan = plan_due(schedule(every=2, misfire="skip", late_after="60s"), [], now)
    assert len(outcomes(plan)[TickOutcome.MISSED]) == 5  # 09:00:00 .. 09:00:08
    assert len(plan.new_jobs) == 31  # 09:00:10 .. 09:01:10, each within 60 s
    hourly = schedule(cron="0 * * * *", misfire="skip", late_after=300)
    plan = plan_due(hourly, [], T0 + timedelta(minutes=6))
    assert plan.new_jobs == [] and outcomes(plan)[TickOutcome.MISSED] == [T0]


def test_the_last_tick_before_the_end_is_late_after_60_seconds() -> None:
    ending = schedule(cron="0 * * * *", misfire="skip", end=T0 + timedelta(minutes=30))
    assert len(plan_due(ending, [], T0 + timedelta(seconds=60)).new_jobs) == 1
    late = plan_due(ending, [], T0 + timedelta(seconds=61))
    assert late.new_jobs == [] and outcomes(late)[TickOutcome.MISSED] == [T0]


@pytest.mark.parametrize(
    ("value", "message"),
    [("0s", "at least 2s"), (1, "at least 2s"), ("soon", "late_after")],
)
def test_a_bad_late_after_is_refused(value: object, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        build_spec("s", "t", timezone="UTC", every=2, late_after=value)  # type: ignore[arg-type]


def test_late_after_is_stored_with_the_definition() -> None:
    spec = build_spec("s", "t", timezone="UTC", every=2, late_after="90s")
    data = json.loads(json.dumps(spec.to_json()))
    assert data["late_after_seconds"] == 90
    assert spec_from_json(data) == spec
    default = build_spec("s", "t", timezone="UTC", every=2)
    data = default.to_json()
    assert data["late_after_seconds"] is None
    # a definition stored before late_after existed reads back as the default, with its hash
    del data["late_after_seconds"]
    assert spec_from_json(data) == default
    old_hash = spec_from_json(data).definition_hash
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    assert old_hash == hashlib.sha256(text.encode()).hexdigest()
    assert spec.definition_hash != default.definition_hash


@settings(max_examples=200, deadline=None)
@given(
    every=st.integers(1, 10_000),
    periods=st.integers(0, 300),  # ticks due: at most 301, as a planner pass walks them
    fraction=st.floats(0, 0.999),
    misfire=st.sampled_from(["skip", "catch_up", "coalesce"]),
)
def test_after_any_outage_only_ticks_whose_next_has_not_come_run_as_on_time(
    every: int, periods: int, fraction: float, misfire: str
) -> None:
    now = T0 + timedelta(seconds=every * (periods + fraction))
    plan = plan_due(schedule(every=every, misfire=misfire), [], now)
    nominals = [j.nominal_at for j in plan.new_jobs]
    assert all(a < b for a, b in pairwise(nominals)) and all(at <= now for at in nominals)
    assert plan.next_fire_at is not None and plan.next_fire_at > now
    tolerance = timedelta(seconds=max(every, 2))
    on_time = [j for j in plan.new_jobs if now - j.nominal_at <= tolerance and not j.covers]
    if misfire == "skip":  # nothing late runs: one tick, or two when a period is under 2 s
        assert plan.new_jobs == on_time and len(on_time) <= 1 + int(2 / every)
    dues = [j.due_at for j in plan.new_jobs]
    assert dues == sorted(dues) or misfire == "skip"  # oldest first
