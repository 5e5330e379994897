"""App's schedules in the store: add, read, change, pause, trigger, backfill, preview, history,
each async twin beside its method; spec_for, create_schedule and apply_schedule are the steps
App's schedules declared in code (App.declare_schedule, sync_schedules) share with them."""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from duetime.client.lookup import job_of, schedule_of
from duetime.client.part import AppLike, AppPart
from duetime.core.errors import ScheduleExists
from duetime.core.models import Job, Tick
from duetime.core.recurrence import Fire
from duetime.core.requests import TaskDefaults, parse_instant
from duetime.core.schedule_spec import (
    DEFAULT_CATCHUP_WINDOW,
    DEFAULT_DST_FOLD,
    DEFAULT_DST_GAP,
    DEFAULT_MISFIRE,
    DEFAULT_OVERLAP,
    ScheduleSpec,
    build_spec,
    first_fire,
    preview,
    spec_defaults,
    spec_options,
)
from duetime.core.schedules import (
    Occurrence,
    Plan,
    Schedule,
    plan_backfill,
    plan_pause,
    plan_trigger,
    plan_update,
)
from duetime.logs import log_event
from duetime.store.base import Decide
from duetime.tasks import known_task
from duetime.twins import async_twin

log = logging.getLogger("duetime.app")


def update_plan(
    schedule: Schedule, active: list[Occurrence], *, spec: ScheduleSpec, now: datetime
) -> Plan:
    """plan_update with keyword arguments, for functools.partial."""
    return plan_update(schedule, active, spec, now)


def spec_for(app: AppLike, name: str, task: str, options: dict[str, Any]) -> ScheduleSpec:
    """The spec of a schedule from add_schedule's options, with the task's defaults; refused
    at once when the registered handler cannot take its args."""
    registered = app.tasks.get(task)
    defaults = options.pop("defaults", None) or (
        registered.defaults if registered else TaskDefaults()
    )
    spec = build_spec(
        name, task, defaults=defaults, max_payload_bytes=app.max_payload_bytes, **options
    )
    if registered is not None:  # its occurrences would be dead at once: refuse them now
        registered.check_args(spec.args)
    return spec


def create_schedule(app: AppLike, spec: ScheduleSpec) -> tuple[Schedule, bool]:
    """Create the schedule unless its name is taken: (the schedule, whether it was created)."""
    store = app.store  # first: opening it reads the database's clock, which `now` is then on
    now = app.clock.now()
    anchor = spec.start_at or now
    schedule, created = store.create_schedule(
        app.tenant,
        spec,
        anchor_at=anchor,
        next_fire_at=first_fire(spec, anchor, now),
        now=now,
    )
    if created:
        log_event(log, "schedule.added", schedule=spec.name, next=schedule.next_fire_at)
    return schedule, created


def apply_schedule(app: AppLike, name: str, decide: Decide) -> Plan:
    """Change a schedule in one transaction, as `decide` plans from it and its occurrences."""
    return app.store.apply_schedule(app.tenant, name, app.clock.now(), decide)


class Schedules(AppPart):
    """The recurring schedules of the app's tenant (docs/schedules.md)."""

    def add_schedule(
        self,
        name: str,
        *,
        task: str,
        timezone: str,
        cron: str | None = None,
        every: float | timedelta | str | None = None,
        args: Mapping[str, Any] | None = None,
        misfire: str = DEFAULT_MISFIRE,
        catchup_window: float | timedelta | str = DEFAULT_CATCHUP_WINDOW,
        overlap: str = DEFAULT_OVERLAP,
        dst_gap: str = DEFAULT_DST_GAP,
        dst_fold: str = DEFAULT_DST_FOLD,
        start: datetime | str | None = None,
        end: datetime | str | None = None,
        jitter: float | timedelta | str = 0,
        late_after: float | timedelta | str | None = None,
    ) -> Schedule:
        """Create a recurring schedule; its first tick is the first fire at or after now.

        A tick handled more than `late_after` after its time is late (its misfire policy
        applies); by default a tick is late once the next tick is due.

        Raises ScheduleExists when the name is taken in this tenant (use update_schedule);
        UnknownTask or ArgsMismatch when this app registers tasks and the task is not one of
        them or its handler cannot take `args`.
        """
        known_task(self.tasks, task)
        spec = spec_for(
            self,
            name,
            task,
            dict(
                timezone=timezone,
                cron=cron,
                every=every,
                args=args,
                misfire=misfire,
                catchup_window=catchup_window,
                overlap=overlap,
                dst_gap=dst_gap,
                dst_fold=dst_fold,
                start=start,
                end=end,
                jitter=jitter,
                late_after=late_after,
            ),
        )
        schedule, created = create_schedule(self, spec)
        if not created:
            raise ScheduleExists(
                f"schedule {name!r} exists already; change it with update_schedule "
                "(duetime schedules update) or delete it first"
            )
        return schedule

    aadd_schedule = async_twin(add_schedule)

    def get_schedule(self, name: str) -> Schedule:
        """The schedule of this name in the tenant; raises ScheduleNotFound."""
        return schedule_of(self, name)

    aget_schedule = async_twin(get_schedule)

    def list_schedules(self) -> list[Schedule]:
        """Every schedule of the tenant."""
        return self.store.list_schedules(self.tenant)

    alist_schedules = async_twin(list_schedules)

    def update_schedule(self, name: str, **changes: Any) -> Schedule:
        """Change a schedule. Future ticks follow the new definition; occurrences generated but
        not started are regenerated. Options are those of add_schedule (task included)."""
        current = self.get_schedule(name)
        if "cron" in changes and changes["cron"] is not None:
            changes.setdefault("every", None)
        if "every" in changes and changes["every"] is not None:
            changes.setdefault("cron", None)
        task = changes.pop("task", current.spec.task)
        options = {**spec_options(current.spec), **changes}
        if task not in self.tasks:  # keep the stored job options unless this app knows the task
            options["defaults"] = spec_defaults(current.spec)
        spec = spec_for(self, name, task, options)
        apply_schedule(self, name, functools.partial(update_plan, spec=spec, now=self.clock.now()))
        log_event(log, "schedule.updated", schedule=name, source="api")
        return self.get_schedule(name)

    aupdate_schedule = async_twin(update_schedule)

    def pause_schedule(self, name: str) -> Schedule:
        """Stop generating ticks until resume; ticks due meanwhile meet the misfire policy."""
        apply_schedule(self, name, lambda s, active: plan_pause(s, True))
        log_event(log, "schedule.paused", schedule=name)
        return self.get_schedule(name)

    apause_schedule = async_twin(pause_schedule)

    def resume_schedule(self, name: str) -> Schedule:
        """Generate ticks again; the ticks missed while paused meet the misfire policy."""
        apply_schedule(self, name, lambda s, active: plan_pause(s, False))
        log_event(log, "schedule.resumed", schedule=name)
        return self.get_schedule(name)

    aresume_schedule = async_twin(resume_schedule)

    def delete_schedule(self, name: str) -> None:
        """Delete a schedule and its tick history; occurrences that never started are cancelled."""
        self.store.delete_schedule(self.tenant, name, self.clock.now())
        log_event(log, "schedule.deleted", schedule=name)

    adelete_schedule = async_twin(delete_schedule)

    def preview_schedule(
        self, name: str, count: int = 10, after: datetime | str | None = None
    ) -> list[Fire]:
        """The next `count` nominal fire times (after now, or after `after`)."""
        schedule = self.get_schedule(name)
        start = parse_instant(after, "after") if after is not None else self.clock.now()
        return preview(schedule.spec, schedule.anchor_at, start, count)

    apreview_schedule = async_twin(preview_schedule)

    def trigger_schedule(self, name: str) -> Job:
        """Run one occurrence now, with its own identity (nominal time = now)."""
        now = self.clock.now()
        plan = apply_schedule(self, name, lambda s, active: plan_trigger(s, now))
        job_id = plan.job_ids[0]  # a second trigger in the same instant returns the first
        log_event(log, "schedule.triggered", schedule=name, job_id=job_id)
        return job_of(self, job_id)

    atrigger_schedule = async_twin(trigger_schedule)

    def backfill_schedule(self, name: str, start: datetime | str, end: datetime | str) -> Plan:
        """Run the ticks of a past range [start, end], honouring the overlap policy."""
        first = parse_instant(start, "backfill start")
        last = parse_instant(end, "backfill end")
        now = self.clock.now()
        plan = apply_schedule(
            self, name, lambda s, active: plan_backfill(s, active, first, last, now)
        )
        log_event(
            log,
            "schedule.backfilled",
            schedule=name,
            jobs=len(plan.new_jobs),
            ticks=len(plan.ticks),
        )
        return plan

    abackfill_schedule = async_twin(backfill_schedule)

    def schedule_history(
        self, name: str, limit: int = 50, before_id: int | None = None
    ) -> list[Tick]:
        """What became of each tick, newest first (enqueued, missed, skipped, ... and why)."""
        return self.store.schedule_ticks(self.get_schedule(name).id, limit, before_id)

    aschedule_history = async_twin(schedule_history)

    def last_run(self, name: str) -> Job | None:
        """The newest occurrence that started, with its attempts."""
        return self.store.latest_run(self.get_schedule(name).id)

    alast_run = async_twin(last_run)
