"""The SQL store's dependencies part (docs/workflows.md, "Dependencies"): a new job's links to
its parents, and what a parent's end does to its blocked children, in the transaction that
records that end.

A link (duetime_job_parents: child, parent, outcome) holds the status its parent ended in once
its child has been told (NULL before); a child counts the parents that have not told it
(parents_left). A parent with links not yet told has has_children set; the statements that
end a job read it (lock_jobs, expire_overdue, transition's row), so only a job with children
pays for any of this. Telling children reads the untold links of the ending parents (whose
rows the caller holds: no other transaction can tell those links), takes the children's row
locks in id order, marks the links told, and decides each blocked child from what it was just
told and its count: released, cancelled, or still blocked with a smaller count. Of two parents
of one child ending at once in two transactions, the second to take the child's lock reads the
count the first left: the child is released once, by whichever is last. A link is told once
(only where its outcome is NULL) and a child moves only from blocked, so a second telling
changes nothing; a parent's end costs its own children's rows, never all the links of a child
(a callback of 10,000 parents is told by each in constant work).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from duetime.core.dependencies import (
    MAX_RELATIVES_SHOWN,
    OnParentFailure,
    ended_status,
    released_due,
    verdict,
)
from duetime.core.errors import InvalidRequest
from duetime.core.models import NewJob, Relative
from duetime.core.states import TRANSITIONS, Event, JobStatus
from duetime.store.driver import Connection, Row, Rows
from duetime.store.rows import moves_json
from duetime.store.sql.shared import Part, earliest_of, lock_either

# a parent's failure cancels a blocked child, and only a blocked one
_CANCEL_BLOCKED = json.dumps(
    {str(JobStatus.BLOCKED): str(TRANSITIONS[Event.CANCEL][JobStatus.BLOCKED])}
)


@dataclass(frozen=True)
class Start:
    """How a new job with parents starts: its status, due instant, cancel reason, and how many
    of its parents have not ended."""

    status: JobStatus
    due_at: datetime
    cancel_reason: str | None
    parents_left: int


class Dependencies(Part):
    def starts(
        self, c: Connection, jobs: Sequence[NewJob]
    ) -> tuple[list[Start | None], dict[int, JobStatus]]:
        """Lock the parents of `jobs` (in id order) and say how each job starts (None: it has
        no parents), with the parents' statuses. Refuses a parent that does not exist or is of
        another tenant."""
        wanted = sorted({p for job in jobs for p in job.parents})
        if not wanted:
            return [None] * len(jobs), {}
        found = {r["id"]: r for r in lock_either(c, wanted)}
        statuses = {pid: JobStatus(r["status"]) for pid, r in found.items()}
        return [self._start(job, found, statuses) for job in jobs], statuses

    def _start(
        self, job: NewJob, found: dict[int, Row], statuses: dict[int, JobStatus]
    ) -> Start | None:
        if not job.parents:
            return None
        for pid in job.parents:
            row = found.get(pid)
            if row is None:
                raise InvalidRequest(
                    f"parent job {pid} does not exist; depends_on takes ids of existing jobs"
                )
            if row["tenant"] != job.tenant:
                raise InvalidRequest(
                    f"parent job {pid} is not a job of tenant {job.tenant!r}; a job can "
                    "depend only on jobs of its own tenant"
                )
        told = {pid: s for pid in job.parents if (s := ended_status(statuses[pid])) is not None}
        left = len(job.parents) - len(told)
        v = verdict(_policy(job.on_parent_failure), told, left)
        if v.release:  # every parent ended as it needs: due as it says (its delay from now)
            return Start(JobStatus.SCHEDULED, job.due_at, None, 0)
        if v.cancel:
            return Start(JobStatus.CANCELLED, job.due_at, v.reason(), left)
        return Start(JobStatus.BLOCKED, job.due_at, None, left)

    def apply_starts(
        self,
        c: Connection,
        ids: Sequence[int],
        jobs: Sequence[NewJob],
        starts: Sequence[Start | None],
    ) -> None:
        """Give the jobs just inserted with `ids` their start (a job not inserted, its
        idempotency key taken, is not changed: no row has its id)."""
        batch = Rows(
            {
                "id": job_id,
                "status": str(start.status),
                "due_at": self.driver.json_time(start.due_at),
                "on_parent_failure": job.on_parent_failure,
                "release_delay": job.release_delay,
                "cancel_reason": start.cancel_reason,
                "parents_left": start.parents_left,
            }
            for job_id, job, start in zip(ids, jobs, starts, strict=True)
            if start is not None
        )
        if batch:
            c.run("set_dependency", batch=batch)

    def link(
        self,
        c: Connection,
        created: Sequence[tuple[int, NewJob]],
        statuses: dict[int, JobStatus],
    ) -> None:
        """The links of the jobs created (id, request) to their parents, each parent's outcome
        on it if it has ended; the parents that have not ended then have children to tell."""
        links = Rows(
            {"child_id": job_id, "parent_id": pid, "outcome": _text(ended_status(statuses[pid]))}
            for job_id, job in created
            for pid in job.parents
        )
        if not links:
            return
        c.run("insert_links", batch=links)
        waiting = sorted({r["parent_id"] for r in links if r["outcome"] is None})
        if waiting:
            c.run("mark_parents", ids=waiting)

    def settle_ids(self, c: Connection, ids: Sequence[int], now: datetime) -> None:
        """Tell the children of those of `ids` that have ended and have children to tell (their
        rows locked here, in id order)."""
        if ids:
            found = c.rows("ended_parents", ids=sorted(set(ids)))
            if found:
                self.settle(c, [(r["id"], JobStatus(r["status"])) for r in found], now)

    def settle(self, c: Connection, ended: Sequence[tuple[int, JobStatus]], now: datetime) -> None:
        """Tell the children of `ended` (parent id, the status it ended in; the parents' rows
        locked by the caller) and apply each blocked child's verdict: released (due by
        core.dependencies.released_due), or cancelled with the reason naming the parent, which
        then tells its own children in turn."""
        told = dict(ended)
        while told:
            links = c.rows("untold_children", ids=sorted(told))
            news: dict[int, dict[int, JobStatus]] = {}
            for r in links:
                news.setdefault(r["child_id"], {})[r["parent_id"]] = told[r["parent_id"]]
            locked = c.rows("lock_children", ids=sorted(news)) if news else []
            outcomes = Rows({"parent_id": pid, "outcome": str(s)} for pid, s in told.items())
            c.run("tell_children", batch=outcomes)
            blocked = [r for r in locked if r["status"] == JobStatus.BLOCKED]
            told = self._apply(c, blocked, news, now) if blocked else {}

    def _apply(
        self,
        c: Connection,
        blocked: Sequence[Row],
        news: dict[int, dict[int, JobStatus]],
        now: datetime,
    ) -> dict[int, JobStatus]:
        """Release, cancel or recount the blocked children as what they were told says; the
        cancelled ones that have children of their own, to tell next."""
        released, cancelled, counted = Rows(), Rows(), Rows()
        due: list[tuple[str, datetime]] = []
        told: dict[int, JobStatus] = {}
        for row in blocked:
            cid = row["id"]
            left = max(0, int(row["parents_left"] or 0) - len(news[cid]))
            v = verdict(_policy(row["on_parent_failure"]), news[cid], left)
            if v.release:
                at = released_due(self._t(row["due_at"]), _float(row["release_delay"]), now)
                released.append({"id": cid, "due_at": self.driver.json_time(at)})
                due.append((row["queue"], at))
            elif v.cancel:
                cancelled.append({"id": cid, "reason": v.reason()})
                if row["has_children"]:
                    told[cid] = JobStatus.CANCELLED
            else:
                counted.append({"id": cid, "parents_left": left})
        if released:
            c.run("unblock_jobs", batch=released, moves=moves_json(Event.UNBLOCK), now=now)
            self.driver.notify(c, earliest_of(due))
        if cancelled:
            c.run("cancel_blocked", batch=cancelled, moves=_CANCEL_BLOCKED, now=now)
        if counted:
            c.run("count_parents_left", batch=counted)
        return told

    def parents_of(self, c: Connection, job_id: int) -> tuple[Relative, ...]:
        """Job `job_id`'s parents (the first MAX_RELATIVES_SHOWN, by id), with their statuses."""
        return self._relatives(c, "job_parents", job_id)

    def children_of(self, c: Connection, job_id: int) -> tuple[Relative, ...]:
        """Job `job_id`'s children (the first MAX_RELATIVES_SHOWN, by id), with their statuses."""
        return self._relatives(c, "job_children", job_id)

    def parent_results(self, job_id: int) -> dict[int, Any]:
        """The results of job `job_id`'s parents that succeeded (id -> result, None when the
        parent returned nothing), in one read."""
        with self.driver.transaction(snapshot=True) as c:
            rows = c.rows("parent_results", id=job_id)
        return {r["id"]: json.loads(r["result"]) if r["result"] is not None else None for r in rows}

    def _relatives(self, c: Connection, statement: str, job_id: int) -> tuple[Relative, ...]:
        rows = c.rows(statement, id=job_id, limit=MAX_RELATIVES_SHOWN)
        return tuple(Relative(r["id"], JobStatus(r["status"])) for r in rows)


def _policy(value: str | None) -> OnParentFailure:
    return OnParentFailure(value) if value else OnParentFailure.CANCEL


def _text(value: JobStatus | None) -> str | None:
    return str(value) if value is not None else None


def _float(value: object) -> float | None:
    return float(value) if value is not None else None  # type: ignore[arg-type]
