"""The SQL store's dependencies part (docs/workflows.md, "Dependencies"): a new job's links to
its parents, and what a parent's end does to its blocked children, in the transaction that
records that end.

A link (duetime_job_parents: child, parent, outcome) holds the status its parent ended in once
its children have been told (NULL before). A parent with links not yet told has has_children
set; the statements that end a job read it (lock_jobs, expire_overdue, transition's row), so
only a job with children pays for any of this. Telling children takes their rows' locks in id
order, then decides each blocked child from all its links (read after its lock, so of two
parents ending at once in two transactions, the second to take the child's lock sees the
first's outcome): a child is released, cancelled, or stays blocked. Every step is conditional
(a link is told once, a child moves only from blocked), so telling twice changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from duetime.core.dependencies import (
    MAX_CHILDREN_SHOWN,
    OnParentFailure,
    Verdict,
    ended_status,
    released_due,
    verdict,
)
from duetime.core.errors import InvalidRequest
from duetime.core.models import NewJob, Relative
from duetime.core.states import TRANSITIONS, Event, JobStatus
from duetime.store.driver import Connection, Row, Rows
from duetime.store.rows import moves_json
from duetime.store.sql.shared import Part, earliest_of

# a parent's failure cancels a blocked child, and only a blocked one
_CANCEL_BLOCKED = json.dumps(
    {str(JobStatus.BLOCKED): str(TRANSITIONS[Event.CANCEL][JobStatus.BLOCKED])}
)


class Start:
    """How a new job with parents starts: its status, due instant and cancel reason."""

    __slots__ = ("cancel_reason", "due_at", "status")

    def __init__(self, status: JobStatus, due_at: datetime, cancel_reason: str | None) -> None:
        self.status = status
        self.due_at = due_at
        self.cancel_reason = cancel_reason


class Dependencies(Part):
    def starts(
        self, c: Connection, jobs: Sequence[NewJob], now: datetime
    ) -> tuple[list[Start | None], dict[int, JobStatus]]:
        """Lock the parents of `jobs` (in id order) and say how each job starts (None: it has
        no parents), with the parents' statuses. Refuses a parent that does not exist or is of
        another tenant."""
        wanted = sorted({p for job in jobs for p in job.parents})
        if not wanted:
            return [None] * len(jobs), {}
        found = {r["id"]: r for r in c.rows("lock_parents", ids=wanted)}
        statuses = {pid: JobStatus(r["status"]) for pid, r in found.items()}
        starts: list[Start | None] = []
        for job in jobs:
            if not job.parents:
                starts.append(None)
                continue
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
            outcome = {pid: ended_status(statuses[pid]) for pid in job.parents}
            starts.append(self._start(job, verdict(_policy(job.on_parent_failure), outcome)))
        return starts, statuses

    def _start(self, job: NewJob, v: Verdict) -> Start:
        if v.release:  # every parent ended as it needs: due as it says (its delay from now)
            return Start(JobStatus.SCHEDULED, job.due_at, None)
        if v.cancel:
            return Start(JobStatus.CANCELLED, job.due_at, v.reason())
        return Start(JobStatus.BLOCKED, job.due_at, None)

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
        told = list(ended)
        while told:
            parents = sorted({pid for pid, _ in told})
            children = [r["child_id"] for r in c.rows("untold_children", ids=parents)]
            locked = c.rows("lock_children", ids=children) if children else []
            outcomes = Rows({"parent_id": pid, "outcome": str(status)} for pid, status in told)
            c.run("tell_children", batch=outcomes)
            blocked = {r["id"]: r for r in locked if r["status"] == JobStatus.BLOCKED}
            if not blocked:
                return
            links: dict[int, dict[int, JobStatus | None]] = {cid: {} for cid in blocked}
            for r in c.rows("links_of_children", ids=sorted(blocked)):
                links[r["child_id"]][r["parent_id"]] = _status(r["outcome"])
            told = self._apply(c, blocked, links, now)

    def _apply(
        self,
        c: Connection,
        blocked: dict[int, Row],
        links: dict[int, dict[int, JobStatus | None]],
        now: datetime,
    ) -> list[tuple[int, JobStatus]]:
        """Release or cancel the blocked children as their links say; the cancelled ones that
        have children of their own, to tell next."""
        released, cancelled = Rows(), Rows()
        due: list[tuple[str, datetime]] = []
        told: list[tuple[int, JobStatus]] = []
        for cid, row in blocked.items():
            v = verdict(_policy(row["on_parent_failure"]), links[cid])
            if v.release:
                at = released_due(self._t(row["due_at"]), _float(row["release_delay"]), now)
                released.append({"id": cid, "due_at": self.driver.json_time(at)})
                due.append((row["queue"], at))
            elif v.cancel:
                cancelled.append({"id": cid, "reason": v.reason()})
                if row["has_children"]:
                    told.append((cid, JobStatus.CANCELLED))
        if released:
            c.run("unblock_jobs", batch=released, moves=moves_json(Event.UNBLOCK), now=now)
            self.driver.notify(c, earliest_of(due))
        if cancelled:
            c.run("cancel_blocked", batch=cancelled, moves=_CANCEL_BLOCKED, now=now)
        return told

    def relatives(
        self, c: Connection, job_id: int
    ) -> tuple[tuple[Relative, ...], tuple[Relative, ...]]:
        """Job `job_id`'s parents and (up to MAX_CHILDREN_SHOWN) children, with their statuses."""
        parents = tuple(
            Relative(r["id"], JobStatus(r["status"])) for r in c.rows("job_parents", id=job_id)
        )
        children = tuple(
            Relative(r["id"], JobStatus(r["status"]))
            for r in c.rows("job_children", id=job_id, limit=MAX_CHILDREN_SHOWN)
        )
        return parents, children


def _policy(value: str | None) -> OnParentFailure:
    return OnParentFailure(value) if value else OnParentFailure.CANCEL


def _status(value: str | None) -> JobStatus | None:
    return JobStatus(value) if value is not None else None


def _text(value: JobStatus | None) -> str | None:
    return str(value) if value is not None else None


def _float(value: object) -> float | None:
    return float(value) if value is not None else None  # type: ignore[arg-type]
