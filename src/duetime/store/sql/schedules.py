"""The SQL store's schedules part: schedules, their planning and their occurrences' runs."""

from __future__ import annotations

import json
import logging
from datetime import datetime

from duetime.core.errors import ScheduleNotFound, StoreUnavailable
from duetime.core.models import Job, Tick
from duetime.core.schedule_spec import ScheduleSpec, spec_from_json
from duetime.core.schedules import Occurrence, Plan, Schedule, occurrence_job
from duetime.core.states import Event, JobStatus
from duetime.store.base import Decide
from duetime.store.driver import Connection, Driver, Row
from duetime.store.rows import (
    moves_json,
)
from duetime.store.sql.dependencies import Dependencies
from duetime.store.sql.shared import (
    Part,
    conflicts_retried,
    earliest_of,
    job_params,
    load_job,
    move,
    reserve_ids,
)

log = logging.getLogger("duetime.store")


class Schedules(Part):
    def __init__(self, driver: Driver, dependencies: Dependencies) -> None:
        super().__init__(driver)
        self.dependencies = dependencies

    # -- schedules --------------------------------------------------------------------------

    @conflicts_retried
    def create_schedule(
        self,
        tenant: str,
        spec: ScheduleSpec,
        *,
        anchor_at: datetime,
        next_fire_at: datetime | None,
        now: datetime,
    ) -> tuple[Schedule, bool]:
        with self.driver.transaction() as c:
            while True:
                inserted = c.run(
                    "insert_schedule",
                    tenant=tenant,
                    name=spec.name,
                    spec=json.dumps(spec.to_json()),
                    definition_hash=spec.definition_hash,
                    anchor_at=anchor_at,
                    next_fire_at=next_fire_at,
                    now=now,
                )
                row = c.one("select_schedule", tenant=tenant, name=spec.name)
                if row is not None:
                    return self._schedule(row), inserted > 0
                # the holder of the name was deleted meanwhile: the name is free again

    def get_schedule(self, tenant: str, name: str) -> Schedule | None:
        with self.driver.transaction(write=False) as c:
            row = c.one("select_schedule", tenant=tenant, name=name)
        return self._schedule(row) if row is not None else None

    def list_schedules(self, tenant: str | None) -> list[Schedule]:
        with self.driver.transaction(write=False) as c:
            rows = c.rows("list_schedules", tenant=tenant)
        return [self._schedule(r) for r in rows]

    @conflicts_retried
    def apply_schedule(self, tenant: str, name: str, now: datetime, decide: Decide) -> Plan:
        # the schedule's row lock: a planner (which locks a schedule before its jobs) and this
        # take their turns
        with self.driver.transaction() as c:
            row = c.one("lock_schedule", tenant=tenant, name=name)
            if row is None:
                raise ScheduleNotFound(name)
            return self._decide_and_apply(c, self._schedule(row), now, decide)

    @conflicts_retried
    def plan_due_schedules(self, now: datetime, limit: int, decide: Decide) -> int:
        with self.driver.transaction(write=False) as c:
            ids = [r["id"] for r in c.rows("due_schedules", now=now, limit=limit)]
        handled = 0
        for schedule_id in ids:
            try:
                with self.driver.transaction() as c:
                    row = c.one("lock_due_schedule", id=schedule_id, now=now)
                    if row is None:
                        continue  # another planner holds it, or handled it meanwhile
                    self._decide_and_apply(c, self._schedule(row), now, decide)
                    handled += 1
            except StoreUnavailable:
                raise  # the database is gone: the caller backs off
            except Exception:  # one broken schedule must not stop the others
                log.exception("planning schedule %s failed; it is retried next pass", schedule_id)
        return handled

    def _decide_and_apply(
        self, c: Connection, schedule: Schedule, now: datetime, decide: Decide
    ) -> Plan:
        """Apply decide's plan; the caller holds the schedule's row lock in this transaction."""
        active = [
            Occurrence(
                job_id=r["id"],
                nominal_at=self._t(r["nominal_at"]),
                status=JobStatus(r["status"]),
                started=r["generation"] > 0,
                origin=r["origin"] or "tick",
            )
            for r in c.rows("active_occurrences", schedule_id=schedule.id)
        ]
        plan = decide(schedule, active)
        if plan.delete_unstarted:
            # a parent deleted unstarted counts as cancelled for its children
            self._tell_unstarted(c, schedule.id, now, origin="tick")
            c.run("delete_unstarted", schedule_id=schedule.id)
        for job_id in plan.cancel_job_ids:
            move(c, job_id, Event.CANCEL, now)
        self.dependencies.settle_ids(c, plan.cancel_job_ids, now)
        job_ids: dict[datetime, int] = {}
        due: list[tuple[str, datetime]] = []
        ids = reserve_ids(c, len(plan.new_jobs)) if plan.new_jobs else []
        for reserved, occ in zip(ids, plan.new_jobs, strict=True):
            new = occurrence_job(schedule, occ)
            c.run("insert_job", **job_params(reserved, new, now))
            # this tick may have become a job already: the unique identity holds
            row = c.one("occurrence_id", schedule_id=schedule.id, nominal_at=new.nominal_at)
            if row is None:  # pragma: no cover - the schedule's row lock keeps them in place
                raise ScheduleNotFound(schedule.spec.name)
            if row["id"] == reserved:
                plan.created_job_ids.append(reserved)
            job_ids[occ.nominal_at] = row["id"]
            plan.job_ids.append(row["id"])
            if row["id"] == reserved and new.status is JobStatus.SCHEDULED:
                due.append((new.queue, new.due_at))
        for tick in plan.ticks:
            c.run(
                "insert_tick",
                schedule_id=schedule.id,
                nominal_at=tick.nominal_at,
                outcome=str(tick.outcome),
                origin=str(tick.origin),
                job_id=job_ids.get(tick.nominal_at) if tick.creates_job else None,
                detail=tick.detail,
                now=now,
            )
        if due:
            self.driver.notify(c, earliest_of(due))
        spec = plan.spec
        c.run(
            "update_schedule",
            spec=json.dumps(spec.to_json()) if spec else None,
            definition_hash=spec.definition_hash if spec else None,
            paused=plan.paused,
            anchor_at=plan.anchor_at,
            move_cursor=plan.moves_cursor,
            next_fire_at=plan.next_fire_at if plan.moves_cursor else None,
            bump=int(spec is not None or plan.paused is not None),
            now=now,
            id=schedule.id,
        )
        return plan

    @conflicts_retried
    def release_waiting(self, now: datetime, limit: int) -> int:
        with self.driver.transaction() as c:
            moved = c.run("release_waiting", moves=moves_json(Event.RELEASE), now=now, limit=limit)
            if moved:  # due now; "" (every queue): the rows' queues are not read back
                self.driver.notify(c, {"": now})
            return moved

    @conflicts_retried
    def delete_schedule(self, tenant: str, name: str, now: datetime) -> None:
        with self.driver.transaction() as c:
            row = c.one("lock_schedule", tenant=tenant, name=name)
            if row is None:
                raise ScheduleNotFound(name)
            c.run(
                "cancel_unstarted",
                moves=moves_json(Event.CANCEL),
                now=now,
                schedule_id=row["id"],
            )
            self._tell_unstarted(c, row["id"], now)
            c.run("delete_schedule", id=row["id"])

    def _tell_unstarted(
        self, c: Connection, schedule_id: int, now: datetime, origin: str | None = None
    ) -> None:
        """The children of the schedule's occurrences that never started (of `origin`, when
        given), cancelled or about to be deleted: told their parent ended cancelled."""
        found = c.rows("unstarted_parents", schedule_id=schedule_id, origin=origin)
        if found:
            self.dependencies.settle(c, [(r["id"], JobStatus.CANCELLED) for r in found], now)

    def schedule_ticks(self, schedule_id: int, limit: int, before_id: int | None) -> list[Tick]:
        with self.driver.transaction(write=False) as c:
            rows = c.rows("list_ticks", schedule_id=schedule_id, limit=limit, before_id=before_id)
        t = self._t
        return [
            Tick(
                id=r["id"],
                schedule_id=r["schedule_id"],
                nominal_at=t(r["nominal_at"]),
                outcome=r["outcome"],
                origin=r["origin"],
                detail=r["detail"],
                recorded_at=t(r["recorded_at"]),
                job_id=r["job_id"],
                job_status=JobStatus(r["job_status"]) if r["job_status"] else None,
                started_at=t(r["started_at"]) if r["started_at"] is not None else None,
            )
            for r in rows
        ]

    def latest_run(self, schedule_id: int) -> Job | None:
        with self.driver.transaction(snapshot=True) as c:
            row = c.one("latest_run", schedule_id=schedule_id)
            return load_job(c, self._t, row["id"], None, True) if row is not None else None

    def _schedule(self, row: Row) -> Schedule:
        spec = row["spec"]
        t = self._t
        return Schedule(
            id=row["id"],
            tenant=row["tenant"],
            spec=spec_from_json(json.loads(spec) if isinstance(spec, str) else spec),
            paused=bool(row["paused"]),
            anchor_at=t(row["anchor_at"]),
            next_fire_at=t(row["next_fire_at"]) if row["next_fire_at"] is not None else None,
            version=row["version"],
            created_at=t(row["created_at"]),
            updated_at=t(row["updated_at"]),
        )
