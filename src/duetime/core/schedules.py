"""Stored schedules and the tick policy: which occurrences a schedule's due ticks become.

A schedule (its definition, duetime.core.schedule_spec, plus the planner's state) fires ticks;
every tick is an ordinary job whose identity is (schedule, nominal instant in UTC). The
functions here are pure: given a schedule, the occurrences of it that are still active, and
`now`, they return a Plan (jobs to create, jobs to cancel, tick history to record, where the
cursor goes next) that a store applies in one transaction while it holds the schedule's row
lock. It runs past 400 lines because misfire, overlap and catch-up rules read best side by side.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from duetime.core.errors import InvalidRequest
from duetime.core.models import NewJob
from duetime.core.recurrence import DstGap, Fire, FireKind
from duetime.core.schedule_spec import (
    LATE_AFTER,
    LATE_FLOOR,
    Misfire,
    Overlap,
    ScheduleSpec,
    first_fire,
    iso_or_none,
    spec_fires,
)
from duetime.core.states import ACTIVE, HELD, JobStatus


class TickOutcome(StrEnum):
    ENQUEUED = "enqueued"  # became a job that runs when due
    BUFFERED = "buffered"  # became a job that waits for the running occurrence to end
    SKIPPED_OVERLAP = "skipped_overlap"  # the previous occurrence was still running
    MISSED = "missed"  # late, and the misfire policy or the catch-up window said not to run it
    COALESCED = "coalesced"  # late; covered by the one run that stands for all late ticks
    DST_SKIPPED = "dst_skipped"  # the local time did not exist (spring forward) and dst_gap=skip


class Origin(StrEnum):
    TICK = "tick"
    TRIGGER = "trigger"
    BACKFILL = "backfill"


CATCH_UP_PACE = timedelta(seconds=1)  # spacing between caught-up runs
MISSED_ONE_BY_ONE = 100  # more misses than this in one pass are recorded as one summary row


@dataclass(frozen=True)
class Schedule:
    """A stored schedule: its definition plus the planner's state."""

    id: int
    tenant: str
    spec: ScheduleSpec
    paused: bool
    anchor_at: datetime  # interval rules count from here (start, else creation)
    next_fire_at: datetime | None  # the next nominal tick not yet handled; None: ended
    version: int
    created_at: datetime
    updated_at: datetime

    @property
    def name(self) -> str:
        return self.spec.name

    def fires(self, after: datetime) -> Iterator[Fire]:
        """Ticks strictly after `after` as the planner walks them: a spring-forward gap always
        yields its shifted instant, which plan_due records as dst_skipped under dst_gap=skip."""
        return spec_fires(self.spec, self.anchor_at, after, gap=DstGap.SHIFT)

    @property
    def next_run_at(self) -> datetime | None:
        """The next tick that will run (None when paused or ended); the cursor may sit on a
        spring-forward instant that dst_gap=skip records as skipped instead."""
        if self.paused or self.next_fire_at is None:
            return None
        after = self.next_fire_at - timedelta(microseconds=1)
        return next((f.at for f in spec_fires(self.spec, self.anchor_at, after)), None)

    def to_json(self) -> dict[str, Any]:
        return {
            **self.spec.to_json(),
            "id": self.id,
            "tenant": self.tenant,
            "paused": self.paused,
            "next_fire_at": iso_or_none(self.next_fire_at),
            "next_run_at": iso_or_none(self.next_run_at),
            "version": self.version,
            "created_at": iso_or_none(self.created_at),
            "updated_at": iso_or_none(self.updated_at),
        }


def jitter_for(schedule_id: int, nominal: datetime, jitter_seconds: float) -> timedelta:
    """A deterministic delay in [0, jitter) for one occurrence: never before its nominal time."""
    if jitter_seconds <= 0:
        return timedelta(0)
    digest = hashlib.sha256(f"{schedule_id}:{nominal.isoformat()}".encode()).digest()
    fraction = int.from_bytes(digest[:8], "big") / 2**64
    return timedelta(seconds=round(fraction * jitter_seconds, 3))


def business_key(tenant: str, name: str, nominal: datetime) -> str:
    """Stable across attempts, replicas and failovers: derived from (schedule, nominal)."""
    return f"schedule:{tenant}/{name}@{nominal.astimezone(UTC).isoformat()}"


# -- planning -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Occurrence:
    """An occurrence of the schedule that has not ended, as the planner sees it."""

    job_id: int
    nominal_at: datetime
    status: JobStatus
    started: bool  # an attempt was ever made
    origin: str = "tick"  # tick, trigger or backfill


@dataclass(frozen=True)
class NewOccurrence:
    nominal_at: datetime
    due_at: datetime
    status: JobStatus  # scheduled or waiting
    origin: Origin
    covers: tuple[datetime, ...] = ()  # for a coalesced run: every nominal tick it stands for


@dataclass(frozen=True)
class TickRecord:
    nominal_at: datetime
    outcome: TickOutcome
    detail: str = ""
    origin: Origin = Origin.TICK

    @property
    def creates_job(self) -> bool:
        return self.outcome in (TickOutcome.ENQUEUED, TickOutcome.BUFFERED)


_UNSET: Any = object()


@dataclass
class Plan:
    """What a store applies, atomically, to one schedule."""

    new_jobs: list[NewOccurrence] = field(default_factory=list)
    cancel_job_ids: list[int] = field(default_factory=list)
    ticks: list[TickRecord] = field(default_factory=list)
    next_fire_at: Any = _UNSET  # datetime | None when it moves
    spec: ScheduleSpec | None = None  # a new definition (update)
    paused: bool | None = None
    anchor_at: datetime | None = None
    delete_unstarted: bool = False  # remove tick occurrences that never started (update)
    created_job_ids: list[int] = field(default_factory=list)  # filled in by the store
    job_ids: list[int] = field(default_factory=list)  # every new_jobs item's job, new or not

    @property
    def moves_cursor(self) -> bool:
        return self.next_fire_at is not _UNSET


def plan_due(schedule: Schedule, active: list[Occurrence], now: datetime) -> Plan:
    """Handle every tick of `schedule` whose nominal time has come (nominal <= now)."""
    plan = Plan()
    cursor = schedule.next_fire_at
    if schedule.paused or cursor is None or cursor > now:
        return plan
    spec = schedule.spec
    window = timedelta(seconds=spec.catchup_window_seconds)
    due: list[Fire] = []
    next_at: datetime | None = None
    too_old: list[datetime] = []
    start = cursor - timedelta(microseconds=1)
    for fire in schedule.fires(start):  # ticks older than the window: recorded, never run
        if now - fire.at <= window:
            break
        too_old.append(fire.at)
        if len(too_old) > MISSED_ONE_BY_ONE:  # a long outage or pause: summarise, jump ahead
            edge = now - window
            plan.ticks.append(
                TickRecord(
                    too_old[0],
                    TickOutcome.MISSED,
                    f"every tick from {too_old[0].isoformat()} to {edge.isoformat()} was older "
                    "than the catch-up window",
                )
            )
            too_old, start = [], edge
            break
    if too_old:
        start = too_old[-1]
    for fire in schedule.fires(start):
        if fire.at > now:
            next_at = fire.at
            break
        due.append(fire)
    plan.next_fire_at = next_at
    _record_missed(plan, too_old, "older than the catch-up window")  # at most 100 here
    following = dict(zip((f.at for f in due), [*(f.at for f in due[1:]), next_at], strict=True))
    if spec.dst_gap is DstGap.SKIP:
        for fire in [f for f in due if f.kind is FireKind.SHIFTED]:
            plan.ticks.append(
                TickRecord(
                    fire.at,
                    TickOutcome.DST_SKIPPED,
                    f"{fire.wall:%Y-%m-%d %H:%M} does not exist in {spec.timezone} (clocks "
                    "moved forward); dst_gap=skip",
                )
            )
        due = [f for f in due if f.kind is not FireKind.SHIFTED]
    late = [f for f in due if is_late(spec, f.at, following[f.at], now)]
    on_time = [f for f in due if not is_late(spec, f.at, following[f.at], now)]
    runs: list[NewOccurrence] = []
    if late:
        if spec.misfire is Misfire.SKIP:
            _record_missed(plan, [f.at for f in late], "late; misfire=skip runs only future ticks")
        elif spec.misfire is Misfire.CATCH_UP:
            for i, fire in enumerate(late):
                runs.append(
                    NewOccurrence(
                        fire.at, now + i * CATCH_UP_PACE, JobStatus.SCHEDULED, Origin.TICK
                    )
                )
        else:
            last = late[-1]
            why = f"late; covered by the run for {last.at.isoformat()} (misfire=coalesce)"
            _record_many(plan, [f.at for f in late[:-1]], TickOutcome.COALESCED, why)
            covers = tuple(f.at for f in late)
            runs.append(NewOccurrence(last.at, now, JobStatus.SCHEDULED, Origin.TICK, covers))
    not_before = runs[-1].due_at if runs else None  # older late ticks run first
    for fire in on_time:
        due_at = fire.at + jitter_for(schedule.id, fire.at, spec.jitter_seconds)
        if not_before is not None:
            due_at = max(due_at, not_before)
        runs.append(NewOccurrence(fire.at, due_at, JobStatus.SCHEDULED, Origin.TICK))
    apply_overlap(plan, schedule, active, runs)
    return plan


def is_late(
    spec: ScheduleSpec, nominal: datetime, following: datetime | None, now: datetime
) -> bool:
    """Whether a tick handled at `now` is late: after the schedule's late_after, or by default
    once the tick after it (`following`) is due, so the tolerance grows with the period."""
    if spec.late_after_seconds is not None:
        return now - nominal > timedelta(seconds=spec.late_after_seconds)
    if following is None:  # the last tick before the end bound: no next tick to wait for
        return now - nominal > LATE_AFTER
    return following <= now and now - nominal > LATE_FLOOR


def _record_missed(plan: Plan, missed: list[datetime], why: str) -> None:
    _record_many(plan, missed, TickOutcome.MISSED, why)


def _record_many(plan: Plan, ticks: list[datetime], outcome: TickOutcome, why: str) -> None:
    """One history row per tick, or one summary row when there are very many."""
    if len(ticks) <= MISSED_ONE_BY_ONE:
        plan.ticks.extend(TickRecord(at, outcome, why) for at in ticks)
        return
    first, last = ticks[0].isoformat(), ticks[-1].isoformat()
    plan.ticks.append(TickRecord(ticks[0], outcome, f"{len(ticks)} ticks {first}..{last}: {why}"))


def apply_overlap(
    plan: Plan, schedule: Schedule, active: list[Occurrence], runs: list[NewOccurrence]
) -> None:
    """Turn candidate runs into jobs (or skipped ticks) under the schedule's overlap policy."""
    policy = schedule.spec.overlap
    live = list(active)
    for run in runs:
        busy = [o for o in live if o.status in ACTIVE]
        waiting = [o for o in live if o.status is JobStatus.WAITING]
        status: JobStatus | None = JobStatus.SCHEDULED
        detail = ""
        if policy is Overlap.SKIP and (busy or waiting):
            status, detail = None, "the previous occurrence was still running (overlap=skip)"
        elif policy is Overlap.BUFFER_ONE and (busy or waiting):
            if waiting:
                status, detail = None, "one run is already waiting (overlap=buffer_one)"
            else:
                status = JobStatus.WAITING
        elif policy is Overlap.BUFFER_ALL and (busy or waiting):
            status = JobStatus.WAITING
        elif policy is Overlap.CANCEL_OTHER and (busy or waiting):
            # not yet running: cancelled at once; running: asked to stop, the new run waits
            for other in busy + waiting:
                if other.job_id > 0:
                    plan.cancel_job_ids.append(other.job_id)
                else:
                    _supersede(plan, other.nominal_at)
            live = [replace(o, status=JobStatus.CANCEL_REQUESTED) for o in busy if o.status in HELD]
            status = JobStatus.WAITING if live else JobStatus.SCHEDULED
            detail = "cancelled the previous occurrence (overlap=cancel_other)"
        if status is None:
            plan.ticks.append(
                TickRecord(run.nominal_at, TickOutcome.SKIPPED_OVERLAP, detail, run.origin)
            )
            continue
        plan.new_jobs.append(replace(run, status=status))
        outcome = TickOutcome.BUFFERED if status is JobStatus.WAITING else TickOutcome.ENQUEUED
        if run.covers:
            detail = f"stands for {len(run.covers)} late ticks (misfire=coalesce)"
        plan.ticks.append(TickRecord(run.nominal_at, outcome, detail, run.origin))
        live.append(Occurrence(-1, run.nominal_at, status, started=False))


def _supersede(plan: Plan, nominal: datetime) -> None:
    """Drop a run this plan was about to create: a later tick cancelled it (cancel_other)."""
    plan.new_jobs = [j for j in plan.new_jobs if j.nominal_at != nominal]
    plan.ticks = [
        TickRecord(
            t.nominal_at,
            TickOutcome.SKIPPED_OVERLAP,
            "superseded by a later tick (overlap=cancel_other)",
            t.origin,
        )
        if t.nominal_at == nominal and t.outcome is not TickOutcome.MISSED
        else t
        for t in plan.ticks
    ]


def plan_trigger(schedule: Schedule, now: datetime) -> Plan:
    """Run one occurrence now, with its own identity (nominal = now), whatever is running."""
    plan = Plan()
    plan.new_jobs.append(NewOccurrence(now, now, JobStatus.SCHEDULED, Origin.TRIGGER))
    plan.ticks.append(TickRecord(now, TickOutcome.ENQUEUED, "triggered by hand", Origin.TRIGGER))
    return plan


def plan_backfill(
    schedule: Schedule, active: list[Occurrence], start: datetime, end: datetime, now: datetime
) -> Plan:
    """Run the ticks of a past range [start, end], oldest first, under the overlap policy."""
    if end <= start:
        raise InvalidRequest("backfill range is empty: 'to' must be after 'from'")
    if end > now:
        raise InvalidRequest("backfill covers past ticks only: 'to' must not be in the future")
    runs: list[NewOccurrence] = []
    plan = Plan()
    for fire in schedule.fires(start - timedelta(microseconds=1)):
        if fire.at > end:
            break
        if len(runs) >= 10_000:
            raise InvalidRequest("backfill range holds more than 10000 ticks; split it")
        if fire.kind is FireKind.SHIFTED and schedule.spec.dst_gap is DstGap.SKIP:
            why = "the local time did not exist; dst_gap=skip"
            plan.ticks.append(TickRecord(fire.at, TickOutcome.DST_SKIPPED, why, Origin.BACKFILL))
            continue
        due = now + len(runs) * CATCH_UP_PACE
        runs.append(NewOccurrence(fire.at, due, JobStatus.SCHEDULED, Origin.BACKFILL))
    apply_overlap(plan, schedule, active, runs)
    return plan


def plan_update(
    schedule: Schedule, active: list[Occurrence], spec: ScheduleSpec, now: datetime
) -> Plan:
    """Replace the definition: future ticks follow it; unstarted occurrences are regenerated."""
    # occurrences of ticks that never started are regenerated under the new rule; triggered
    # and backfilled runs were asked for explicitly and stay
    pending = (JobStatus.SCHEDULED, JobStatus.WAITING)
    unstarted = [
        o for o in active if not o.started and o.origin == Origin.TICK and o.status in pending
    ]
    restart = min([now] + [o.nominal_at for o in unstarted])
    anchor = spec.start_at or schedule.anchor_at
    plan = Plan(spec=spec, anchor_at=anchor, delete_unstarted=True)
    plan.next_fire_at = first_fire(spec, anchor, restart)
    return plan


def plan_pause(schedule: Schedule, paused: bool) -> Plan:
    """Pause or resume. Ticks missed while paused meet the misfire policy on the next pass."""
    return Plan(paused=paused)


def occurrence_job(schedule: Schedule, occ: NewOccurrence) -> NewJob:
    """The job one occurrence becomes: an ordinary job that knows its schedule and tick."""
    spec = schedule.spec
    identity = f"{schedule.id}:{occ.nominal_at.isoformat()}"
    return NewJob(
        tenant=schedule.tenant,
        task=spec.task,
        args=spec.args,
        args_json=json.dumps(spec.args, separators=(",", ":"), sort_keys=True),
        queue=spec.queue,
        priority=spec.priority,
        due_at=occ.due_at,
        deadline_at=None,
        max_attempts=spec.max_attempts,
        retry_base=spec.retry_base,
        retry_cap=spec.retry_cap,
        lease_seconds=spec.lease_seconds,
        timeout_seconds=spec.timeout_seconds,
        idempotency_key=None,
        request_hash=hashlib.sha256(identity.encode()).hexdigest(),
        business_key=business_key(schedule.tenant, spec.name, occ.nominal_at),
        status=occ.status,
        schedule_id=schedule.id,
        schedule_name=spec.name,
        nominal_at=occ.nominal_at,
        covers=occ.covers,
        origin=str(occ.origin),
        limits=spec.limits,
    )


__all__ = [
    "FireKind",
    "Occurrence",
    "Plan",
    "Schedule",
    "TickOutcome",
    "plan_backfill",
    "plan_due",
    "plan_pause",
    "plan_trigger",
    "plan_update",
]
