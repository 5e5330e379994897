"""Schedules on each store: identities, misfire, overlap, DST, operations, history."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest

import duetime
from duetime.core.clock import ManualClock
from duetime.core.errors import InvalidRequest, ScheduleExists, ScheduleNotFound
from duetime.core.models import Job, JobFilter, Outcome
from duetime.core.states import Event, JobStatus
from duetime.runtime.planner import Planner
from duetime.store.base import Store

START = datetime(2026, 3, 2, 8, 59, 30, tzinfo=UTC)  # a Monday


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def app(
    store_url: str, make_store: Callable[[], Store], clock: ManualClock
) -> Iterator[duetime.App]:
    application = duetime.App(database_url=store_url, clock=clock)

    @application.task(name="report")
    def report(**args: object) -> None:  # takes whatever args the tests give
        pass

    yield application
    application.close()


def plan(app: duetime.App) -> None:
    Planner(app.store, app.clock).run_once()


def occurrences(app: duetime.App, name: str) -> list[Job]:
    schedule = app.get_schedule(name)
    jobs = app.store.list_jobs(JobFilter(schedule_id=schedule.id, limit=10_000))
    return sorted(jobs, key=lambda j: j.nominal_at or START)


def outcomes(app: duetime.App, name: str) -> list[tuple[str, str]]:
    ticks = app.schedule_history(name, limit=1000)
    return [(t.nominal_at.strftime("%d %H:%M"), t.outcome) for t in reversed(ticks)]


def finish(app: duetime.App, job: Job) -> None:
    claims = app.store.claim(worker_id="w", queues=None, limit=100, now=app.clock.now())
    for claim in claims:
        if claim.job.id == job.id:
            assert app.store.finish(claim.lease, Outcome(Event.SUCCEED), app.clock.now())
        else:  # put the others back untouched
            app.store.finish(
                claim.lease, Outcome(Event.RETRY, due_at=claim.job.due_at), app.clock.now()
            )


def start_running(app: duetime.App, job: Job) -> None:
    claims = app.store.claim(worker_id="w", queues=None, limit=100, now=app.clock.now())
    assert job.id in {c.job.id for c in claims}


def test_each_tick_becomes_one_job_with_its_identity(app: duetime.App, clock: ManualClock) -> None:
    schedule = app.add_schedule(
        "hourly", task="report", cron="0 * * * *", timezone="UTC", args={"kind": "sales"}
    )
    assert schedule.next_fire_at == datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    plan(app)
    assert occurrences(app, "hourly") == []  # not due yet
    clock.advance(31)
    plan(app)
    plan(app)  # a second pass (or replica) creates nothing new
    [job] = occurrences(app, "hourly")
    assert job.nominal_at == datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    assert job.due_at == job.nominal_at and job.status is JobStatus.SCHEDULED
    assert job.args == {"kind": "sales"} and job.task == "report"
    assert job.business_key == "schedule:default/hourly@2026-03-02T09:00:00+00:00"
    assert app.get_schedule("hourly").next_fire_at == datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    assert outcomes(app, "hourly") == [("02 09:00", "enqueued")]


def test_concurrent_planners_never_duplicate_a_tick(
    app: duetime.App, make_store: Callable[[], Store], clock: ManualClock
) -> None:
    app.add_schedule("often", task="report", cron="* * * * *", timezone="UTC")
    planners = [Planner(make_store(), clock) for _ in range(3)]
    barrier = threading.Barrier(3)

    def go(p: Planner) -> None:
        barrier.wait()
        p.run_once()

    for _ in range(30):
        clock.advance(60)

        threads = [threading.Thread(target=go, args=(p,)) for p in planners]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    jobs = occurrences(app, "often")
    nominals = [j.nominal_at for j in jobs]
    assert len(nominals) == len(set(nominals)) == 30


@pytest.mark.parametrize(
    ("policy", "expected_runs", "expected_ticks"),
    [
        # 10:00 and 11:00 are late (the next tick came); 12:00 is not until 13:00 comes
        ("skip", ["02 12:00"], ["missed", "missed", "enqueued"]),
        ("catch_up", ["02 10:00", "02 11:00", "02 12:00"], ["enqueued"] * 3),
        ("coalesce", ["02 11:00", "02 12:00"], ["coalesced", "enqueued", "enqueued"]),
    ],
)
def test_misfire_policies_after_downtime(
    app: duetime.App,
    clock: ManualClock,
    policy: str,
    expected_runs: list[str],
    expected_ticks: list[str],
) -> None:
    app.add_schedule("hourly", task="report", cron="0 * * * *", timezone="UTC", misfire=policy)
    clock.advance(31)
    plan(app)  # 09:00 on time
    clock.set(datetime(2026, 3, 2, 12, 30, tzinfo=UTC))  # nothing ran for three and a half hours
    plan(app)
    runs = [j.nominal_at.strftime("%d %H:%M") for j in occurrences(app, "hourly")[1:]]  # type: ignore[union-attr]
    assert runs == expected_runs
    assert [o for _, o in outcomes(app, "hourly")[1:]] == expected_ticks
    if policy == "coalesce":
        stands_for = occurrences(app, "hourly")[1]
        assert [c.strftime("%H:%M") for c in stands_for.covers] == ["10:00", "11:00"]
    if policy == "catch_up":
        dues = [j.due_at for j in occurrences(app, "hourly")[1:]]
        assert dues == sorted(dues) and dues[0] == clock.now()  # oldest first, paced
    assert app.get_schedule("hourly").next_fire_at == datetime(2026, 3, 2, 13, 0, tzinfo=UTC)


def test_catchup_window_bounds_every_policy(app: duetime.App, clock: ManualClock) -> None:
    app.add_schedule(
        "hourly",
        task="report",
        cron="0 * * * *",
        timezone="UTC",
        misfire="catch_up",
        catchup_window="2h",
    )
    clock.set(datetime(2026, 3, 2, 14, 30, tzinfo=UTC))
    plan(app)
    runs = [j.nominal_at.strftime("%H:%M") for j in occurrences(app, "hourly")]  # type: ignore[union-attr]
    assert runs == ["13:00", "14:00"]
    assert [o for _, o in outcomes(app, "hourly")] == ["missed"] * 4 + ["enqueued"] * 2


@pytest.mark.parametrize(
    ("policy", "statuses", "ticks"),
    [
        ("allow", ["running", "scheduled", "scheduled"], ["enqueued"] * 3),
        ("skip", ["running"], ["enqueued", "skipped_overlap", "skipped_overlap"]),
        ("buffer_one", ["running", "waiting"], ["enqueued", "buffered", "skipped_overlap"]),
        ("buffer_all", ["running", "waiting", "waiting"], ["enqueued", "buffered", "buffered"]),
        (
            "cancel_other",
            ["cancel_requested", "cancelled", "waiting"],
            ["enqueued", "buffered", "buffered"],
        ),
    ],
)
def test_overlap_policies_with_a_long_running_occurrence(
    app: duetime.App, clock: ManualClock, policy: str, statuses: list[str], ticks: list[str]
) -> None:
    app.add_schedule("minutely", task="report", cron="* * * * *", timezone="UTC", overlap=policy)
    clock.advance(31)
    plan(app)
    first = occurrences(app, "minutely")[0]
    start_running(app, first)
    for _ in range(2):
        clock.advance(60)
        plan(app)
    assert [str(j.status) for j in occurrences(app, "minutely")] == statuses
    assert [o for _, o in outcomes(app, "minutely")] == ticks


def test_buffered_occurrences_run_in_order_after_the_running_one(
    app: duetime.App, clock: ManualClock
) -> None:
    app.add_schedule(
        "minutely", task="report", cron="* * * * *", timezone="UTC", overlap="buffer_all"
    )
    clock.advance(31)
    plan(app)
    first = occurrences(app, "minutely")[0]
    start_running(app, first)
    clock.advance(120)
    plan(app)
    assert [str(j.status) for j in occurrences(app, "minutely")] == [
        "running",
        "waiting",
        "waiting",
    ]
    running = app.store.get_job(first.id)
    assert running is not None
    lease = running.attempt_history[-1]
    from duetime.core.models import Lease

    app.store.finish(
        Lease(first.id, lease.id, lease.generation, lease.claim_token),
        Outcome(Event.SUCCEED),
        clock.now(),
    )
    plan(app)
    assert [str(j.status) for j in occurrences(app, "minutely")] == [
        "succeeded",
        "scheduled",
        "waiting",
    ]
    plan(app)  # the next stays waiting while the released one has not run
    assert str(occurrences(app, "minutely")[2].status) == "waiting"


def test_dst_gap_skip_is_recorded_in_history(app: duetime.App, clock: ManualClock) -> None:
    clock.set(datetime(2026, 3, 7, 12, tzinfo=UTC))
    app.add_schedule(
        "early", task="report", cron="30 2 * * *", timezone="America/New_York", dst_gap="skip"
    )
    for _ in range(3 * 24):
        clock.advance(3600)
        plan(app)
    runs = [
        j.nominal_at.astimezone(duetime.core.recurrence.zone("America/New_York")).isoformat()  # type: ignore[union-attr]
        for j in occurrences(app, "early")
    ]
    assert runs == ["2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00"]
    assert ("08 07:00", "dst_skipped") in outcomes(app, "early")


def test_pause_and_resume_apply_the_misfire_policy(app: duetime.App, clock: ManualClock) -> None:
    app.add_schedule("hourly", task="report", cron="0 * * * *", timezone="UTC", misfire="skip")
    paused = app.pause_schedule("hourly")
    assert paused.paused and paused.version == 2
    clock.set(datetime(2026, 3, 2, 11, 30, tzinfo=UTC))
    plan(app)
    assert occurrences(app, "hourly") == []
    app.resume_schedule("hourly")
    plan(app)
    # 09:00 and 10:00 are late; 11:00 is on time until 12:00 comes, so it runs
    runs = [j.nominal_at.strftime("%H:%M") for j in occurrences(app, "hourly")]  # type: ignore[union-attr]
    assert runs == ["11:00"]
    assert [o for _, o in outcomes(app, "hourly")] == ["missed", "missed", "enqueued"]
    assert app.get_schedule("hourly").next_fire_at == datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def test_update_changes_future_ticks_and_regenerates_unstarted_ones(
    app: duetime.App, clock: ManualClock
) -> None:
    app.add_schedule("daily", task="report", cron="0 9 * * *", timezone="UTC", jitter="50m")
    clock.advance(31)
    plan(app)
    [pending] = occurrences(app, "daily")
    assert pending.due_at > clock.now()  # jitter holds it back: generated, not started
    app.update_schedule("daily", args={"v": 2}, jitter=0)
    plan(app)
    [regenerated] = occurrences(app, "daily")
    assert regenerated.id != pending.id and regenerated.args == {"v": 2}
    assert regenerated.due_at == regenerated.nominal_at
    assert app.get_schedule("daily").spec.args == {"v": 2}


def test_trigger_backfill_and_delete(app: duetime.App, clock: ManualClock) -> None:
    app.add_schedule("hourly", task="report", cron="0 * * * *", timezone="UTC")
    triggered = app.trigger_schedule("hourly")
    assert triggered.nominal_at == clock.now() and triggered.origin == "trigger"
    clock.set(datetime(2026, 3, 2, 12, 0, 10, tzinfo=UTC))
    plan(app)
    result = app.backfill_schedule("hourly", "2026-03-02T05:00:00Z", "2026-03-02T09:00:00Z")
    assert len(result.created_job_ids) == 5
    again = app.backfill_schedule("hourly", "2026-03-02T05:00:00Z", "2026-03-02T09:00:00Z")
    assert again.created_job_ids == []  # the same identities: no new jobs
    nominals = [j.nominal_at for j in occurrences(app, "hourly")]
    assert len(nominals) == len(set(nominals))
    app.delete_schedule("hourly")
    with pytest.raises(ScheduleNotFound):
        app.get_schedule("hourly")
    unstarted = app.list_jobs(status="cancelled")
    assert len(unstarted) >= 5


def test_interval_schedule_is_anchored(app: duetime.App, clock: ManualClock) -> None:
    app.add_schedule(
        "quarter",
        task="report",
        every="15m",
        timezone="Europe/London",
        start="2026-03-02T09:05:00Z",
    )
    assert app.get_schedule("quarter").next_fire_at == datetime(2026, 3, 2, 9, 5, tzinfo=UTC)
    fires = app.preview_schedule("quarter", count=3)
    assert [f.at.strftime("%H:%M") for f in fires] == ["09:05", "09:20", "09:35"]


def test_end_bound_stops_the_schedule(app: duetime.App, clock: ManualClock) -> None:
    app.add_schedule(
        "brief", task="report", cron="0 * * * *", timezone="UTC", end="2026-03-02T10:30:00Z"
    )
    clock.set(datetime(2026, 3, 2, 11, 0, 20, tzinfo=UTC))
    plan(app)
    assert app.get_schedule("brief").next_fire_at is None
    assert len(occurrences(app, "brief")) == 1  # 10:00 on the coalesced late path, 09:00 too


def test_declared_schedules_sync_without_duplicates(
    store_url: str, clock: ManualClock, make_store: Callable[[], Store]
) -> None:
    def build(hour: int) -> duetime.App:
        app = duetime.App(database_url=store_url, clock=clock)

        @app.schedule("nightly", cron=f"0 {hour} * * *", timezone="Europe/Paris")
        @app.task(name="cleanup")
        def cleanup() -> None:
            pass

        return app

    first, second, changed = build(2), build(2), build(3)
    assert first.sync_schedules() == {"nightly": "created"}
    assert second.sync_schedules() == {"nightly": "unchanged"}
    assert changed.sync_schedules() == {"nightly": "updated"}
    assert len(first.list_schedules()) == 1
    assert first.get_schedule("nightly").spec.cron == "0 3 * * *"
    for a in (first, second, changed):
        a.close()


def test_invalid_schedules_store_nothing(app: duetime.App) -> None:
    bad = [
        dict(cron="61 * * * *", timezone="UTC"),
        dict(cron="0 * * * *", timezone="Mars/Base"),
        dict(cron="0 * * * *", timezone="+02:00"),
        dict(
            cron="0 * * * *",
            timezone="UTC",
            start="2026-05-01T00:00:00Z",
            end="2026-04-01T00:00:00Z",
        ),
        dict(cron="0 * * * *", every="5m", timezone="UTC"),
        dict(timezone="UTC"),
        dict(cron="0 * * * *", timezone="UTC", misfire="sometimes"),
        dict(cron="0 * * * *", timezone="UTC", overlap="queue"),
        dict(cron="0 * * * *", timezone="UTC", args=[1]),
    ]
    for options in bad:
        with pytest.raises(InvalidRequest):
            app.add_schedule("x", task="report", **options)  # type: ignore[arg-type]
    assert app.list_schedules() == []
    app.add_schedule("x", task="report", cron="0 * * * *", timezone="UTC")
    with pytest.raises(ScheduleExists):
        app.add_schedule("x", task="report", cron="0 * * * *", timezone="UTC")


def test_update_keeps_triggered_and_backfilled_runs(app: duetime.App, clock: ManualClock) -> None:
    app.add_schedule("daily", task="report", cron="0 9 * * *", timezone="UTC")
    triggered = app.trigger_schedule("daily")
    clock.set(datetime(2026, 3, 5, 12, tzinfo=UTC))
    backfill = app.backfill_schedule("daily", "2026-03-03T00:00:00Z", "2026-03-04T23:00:00Z")
    app.update_schedule("daily", cron="30 9 * * *")
    kept = {j.id for j in app.list_jobs(schedule="daily")}
    assert {triggered.id, *backfill.created_job_ids} <= kept
    history = app.schedule_history("daily")
    assert all(t.job_id is not None for t in history if t.outcome == "enqueued")


def test_one_broken_schedule_does_not_stop_the_others(app: duetime.App, clock: ManualClock) -> None:
    app.add_schedule("first", task="report", cron="0 * * * *", timezone="UTC")
    app.add_schedule("second", task="report", cron="0 * * * *", timezone="UTC")
    clock.advance(31)

    def decide(schedule, active):  # type: ignore[no-untyped-def]
        if schedule.name == "first":
            raise RuntimeError("boom")
        from duetime.core.schedules import plan_due

        return plan_due(schedule, active, clock.now())

    assert app.store.plan_due_schedules(clock.now(), 10, decide) == 1
    assert len(app.list_jobs(schedule="second")) == 1
    assert app.get_schedule("first").next_fire_at == datetime(2026, 3, 2, 9, tzinfo=UTC)


def test_a_long_pause_is_summarised_not_walked(app: duetime.App, clock: ManualClock) -> None:
    app.add_schedule(
        "secondly",
        task="report",
        cron="* * * * * *",
        timezone="UTC",
        catchup_window="1m",
        misfire="coalesce",
    )
    app.pause_schedule("secondly")
    clock.advance(timedelta(days=30))
    app.resume_schedule("secondly")
    plan(app)
    ticks = app.schedule_history("secondly", limit=1000)
    assert len(ticks) < 200  # one summary for the month, a row per tick of the last minute
    assert ticks[-1].outcome == "missed" and "older than the catch-up window" in ticks[-1].detail
    # the ticks of the last minute are late (their next tick came) and coalesce into one run;
    # only those of the last 2 s (never late) run on their own: four runs, not a burst of 60
    assert len(app.list_jobs(schedule="secondly")) == 4


def test_trigger_and_backfill_report_exactly_what_they_created(
    app: duetime.App, clock: ManualClock
) -> None:
    app.add_schedule(
        "early", task="report", cron="30 2 * * *", timezone="America/New_York", dst_gap="skip"
    )
    clock.set(datetime(2026, 3, 12, tzinfo=UTC))
    result = app.backfill_schedule("early", "2026-03-06T00:00:00Z", "2026-03-10T00:00:00Z")
    nominals = [app.get_job(i).nominal_at for i in result.created_job_ids]
    # 7th, 9th (and the 6th), never the 8th: 02:30 did not exist that night
    assert len(nominals) == 3
    assert ("dst_skipped", "backfill") in {
        (t.outcome, t.origin) for t in app.schedule_history("early")
    }


def test_a_ticks_history_shows_when_its_job_first_started(
    app: duetime.App, clock: ManualClock
) -> None:
    """A tick's started_at is its job's first start: none before a claim, the running
    attempt's start (on its job's row since migration 22), and after a retry the first
    attempt's start (its row), not the running retry's."""
    app.add_schedule("hourly", task="report", cron="0 * * * *", timezone="UTC")
    clock.advance(31)
    plan(app)
    [job] = occurrences(app, "hourly")
    [tick] = app.schedule_history("hourly", limit=10)
    assert tick.started_at is None
    clock.advance(1)
    first = clock.now()
    [claim] = app.store.claim(worker_id="w", queues=None, limit=10, now=clock.now())
    assert claim.job.id == job.id
    [tick] = app.schedule_history("hourly", limit=10)
    assert tick.started_at == first  # the running attempt, on its job's row
    clock.advance(1)
    assert app.store.finish(claim.lease, Outcome(Event.RETRY, due_at=clock.now()), clock.now())
    [tick] = app.schedule_history("hourly", limit=10)
    assert tick.started_at == first  # the ended attempt's row
    clock.advance(1)
    [again] = app.store.claim(worker_id="w", queues=None, limit=10, now=clock.now())
    assert again.job.id == job.id and clock.now() > first
    [tick] = app.schedule_history("hourly", limit=10)
    assert tick.started_at == first  # the first start, not the running retry's


def test_a_ticks_history_shows_when_a_job_that_succeeded_at_once_started(
    app: duetime.App, clock: ManualClock
) -> None:
    """A tick whose job succeeded at its first attempt: its start, kept on the job's row with
    the success (migration 24; an attempt row on MariaDB/MySQL)."""
    app.add_schedule("hourly", task="report", cron="0 * * * *", timezone="UTC")
    clock.advance(31)
    plan(app)
    [job] = occurrences(app, "hourly")
    clock.advance(1)
    first = clock.now()
    [claim] = app.store.claim(worker_id="w", queues=None, limit=10, now=clock.now())
    assert claim.job.id == job.id
    clock.advance(1)
    assert app.store.finish(claim.lease, Outcome(Event.SUCCEED), clock.now())
    [tick] = app.schedule_history("hourly", limit=10)
    assert tick.started_at == first
