"""The SQL store's schedules, nodes, API tokens and figures (mixed into store/sql/front.py)."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from datetime import datetime, timedelta

from duetime.core.errors import ScheduleNotFound, StoreUnavailable
from duetime.core.models import Job, Node, Tick
from duetime.core.schedule_spec import ScheduleSpec, spec_from_json
from duetime.core.schedules import Occurrence, Plan, Schedule, occurrence_job
from duetime.core.states import Event, JobStatus
from duetime.core.stats import AttemptSample, JobCount
from duetime.core.tokens import ApiToken, Role
from duetime.store.base import Decide
from duetime.store.driver import Connection, Driver, Row
from duetime.store.rows import (
    ToTime,
    json_list,
    moves_json,
    sample_from_row,
    token_from_row,
)
from duetime.store.sql.shared import (
    conflicts_retried,
    earliest_of,
    job_params,
    load_job,
    move,
    reserve_ids,
)

log = logging.getLogger("duetime.store")


class SchedulesNodesTokens:
    driver: Driver
    _t: ToTime

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
            c.run("delete_unstarted", schedule_id=schedule.id)
        for job_id in plan.cancel_job_ids:
            move(c, job_id, Event.CANCEL, now)
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
            c.run("delete_schedule", id=row["id"])

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

    # -- nodes ------------------------------------------------------------------------------

    @conflicts_retried
    def register_node(self, node: Node, now: datetime) -> None:
        with self.driver.transaction() as c:
            c.run(
                "upsert_node",
                id=node.id,
                hostname=node.hostname,
                pid=node.pid,
                queues=json.dumps(list(node.queues)) if node.queues is not None else None,
                concurrency=node.concurrency,
                duties=json.dumps(list(node.duties)),
                version=node.version,
                now=now,
                tasks=json.dumps(list(node.tasks)) if node.tasks is not None else None,
            )

    @conflicts_retried
    def touch_node(self, node_id: str, now: datetime) -> None:
        with self.driver.transaction() as c:
            c.run("touch_node", id=node_id, now=now)

    @conflicts_retried
    def stop_node(self, node_id: str, now: datetime) -> None:
        with self.driver.transaction() as c:
            c.run("stop_node", id=node_id, now=now)

    def list_nodes(self, limit: int = 200) -> list[Node]:
        with self.driver.transaction(write=False) as c:
            rows = c.rows("list_nodes", limit=limit)
        t = self._t
        return [
            Node(
                id=r["id"],
                hostname=r["hostname"],
                pid=r["pid"],
                queues=tuple(json_list(r["queues"])) if r["queues"] is not None else None,
                concurrency=r["concurrency"],
                duties=tuple(json_list(r["duties"])),
                version=r["version"],
                started_at=t(r["started_at"]),
                last_seen_at=t(r["last_seen_at"]),
                stopped_at=t(r["stopped_at"]) if r["stopped_at"] is not None else None,
                holding=tuple(sorted(int(i) for i in json_list(r["holding"]))),
                tasks=tuple(json_list(r["tasks"])) if r["tasks"] is not None else None,
            )
            for r in rows
        ]

    # -- API tokens -------------------------------------------------------------------------

    @conflicts_retried
    def create_token(
        self,
        *,
        tenant: str,
        role: Role,
        name: str,
        prefix: str,
        secret_hash: str,
        now: datetime,
        expires_at: datetime | None = None,
    ) -> ApiToken:
        with self.driver.transaction() as c:
            c.run(
                "insert_token",
                tenant=tenant,
                role=str(role),
                name=name,
                prefix=prefix,
                secret_hash=secret_hash,
                now=now,
                expires_at=expires_at,
            )
            row = c.one("token_by_hash_read", secret_hash=secret_hash)
        assert row is not None  # inserted in this transaction
        return token_from_row(row, self._t)

    def list_tokens(self, tenant: str | None) -> list[ApiToken]:
        with self.driver.transaction(write=False) as c:
            rows = c.rows("list_tokens", tenant=tenant)
        return [token_from_row(r, self._t) for r in rows]

    @conflicts_retried
    def revoke_token(self, token_id: int, now: datetime) -> ApiToken | None:
        with self.driver.transaction() as c:
            c.run("revoke_token", id=token_id, now=now)
            row = c.one("select_token", id=token_id)
        return token_from_row(row, self._t) if row is not None else None

    @conflicts_retried
    def find_token(self, secret_hash: str, now: datetime) -> ApiToken | None:
        with self.driver.transaction(write=False) as c:  # most requests only read
            row = c.one("token_by_hash_read", secret_hash=secret_hash)
        if row is None:
            return None
        return self._used(token_from_row(row, self._t), row["secret_hash"], now)

    def _used(self, token: ApiToken, secret_hash: str, now: datetime) -> ApiToken:
        """Notes a token's use, to the minute: a busy token rarely writes."""
        if token.last_used_at is None or now - token.last_used_at >= timedelta(minutes=1):
            with self.driver.transaction() as c:
                c.run(
                    "token_used",
                    secret_hash=secret_hash,
                    now=now,
                    before=now - timedelta(minutes=1),
                )
            token = replace(token, last_used_at=now)
        return token

    @conflicts_retried
    def create_session(
        self, *, secret_hash: str, token_id: int, now: datetime, expires_at: datetime
    ) -> None:
        with self.driver.transaction() as c:
            c.run("delete_expired_sessions", now=now)
            c.run(
                "insert_session",
                secret_hash=secret_hash,
                token_id=token_id,
                now=now,
                expires_at=expires_at,
            )

    @conflicts_retried
    def find_session(self, secret_hash: str, now: datetime) -> ApiToken | None:
        with self.driver.transaction(write=False) as c:
            row = c.one("session_token", secret_hash=secret_hash, now=now)
        if row is None:
            return None
        return self._used(token_from_row(row, self._t), row["secret_hash"], now)

    @conflicts_retried
    def end_session(self, secret_hash: str) -> None:
        with self.driver.transaction() as c:
            c.run("delete_session", secret_hash=secret_hash)

    # -- figures ----------------------------------------------------------------------------

    def job_counts(self, tenant: str | None) -> list[JobCount]:
        with self.driver.transaction(snapshot=True) as c:
            rows = c.rows("job_counts", tenant=tenant)
        return [JobCount(r["status"], r["queue"], int(r["n"])) for r in rows]

    def oldest_overdue(self, tenant: str | None, now: datetime) -> datetime | None:
        with self.driver.transaction(snapshot=True) as c:
            row = c.one("oldest_overdue", tenant=tenant, now=now)
        if row is None or row["due_at"] is None:
            return None
        return self._t(row["due_at"])

    def attempt_samples(
        self, tenant: str | None, since: datetime, limit: int
    ) -> list[AttemptSample]:
        with self.driver.transaction(snapshot=True) as c:
            rows = c.rows("attempt_samples", tenant=tenant, since=since, limit=limit)
        return [sample_from_row(r, self._t) for r in rows]
