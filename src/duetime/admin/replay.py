"""Bulk replay of dead jobs, paced, stopping at a full backlog (the CLI, the API, the dashboard)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from duetime.admin.backend import Backend
from duetime.core.errors import BacklogFull, DuetimeError, InvalidRequest, JobNotFound
from duetime.core.models import JobFilter
from duetime.core.states import Event, JobStatus
from duetime.logs import log_event

log = logging.getLogger("duetime.operators")  # the name it logged under before the move

MAX_BULK = 100_000


@dataclass
class ReplayReport:
    matched: int = 0
    replayed: list[int] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (job id, why)
    stopped: str | None = None  # why it stopped before the end: a full backlog

    def to_json(self) -> dict[str, object]:
        return {
            "matched": self.matched,
            "replayed": len(self.replayed),
            "replayed_ids": self.replayed,
            "skipped": [{"id": i, "reason": why} for i, why in self.skipped],
            "stopped": self.stopped,
        }


def dead_job_ids(
    app: Backend,
    tenant: str | None,
    *,
    task: str | None = None,
    queue: str | None = None,
    limit: int = MAX_BULK,
) -> list[int]:
    """Ids of dead jobs matching a filter, oldest first."""
    ids: list[int] = []
    before: int | None = None
    while len(ids) < limit:
        page = app.store.list_jobs(
            JobFilter(
                tenant=tenant,
                status=JobStatus.DEAD,
                task=task,
                queue=queue,
                before_id=before,
                limit=min(500, limit - len(ids)),
            )
        )
        if not page:
            break
        ids.extend(j.id for j in page)
        before = page[-1].id
    return sorted(ids)


def replay_many(
    app: Backend,
    ids: Sequence[int],
    *,
    tenant: str | None,
    per_second: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    ignore_backlog: bool = False,
    monotonic: Callable[[], float] = time.monotonic,
) -> ReplayReport:
    """Replay jobs one by one, at most `per_second` a second: each replay starts at least
    1/per_second after the one before (never sooner to catch up on one that was slow, which
    would replay a burst); a job that cannot be replayed (gone, another tenant's, no longer
    dead) is skipped with its reason, never fatal.

    A replay is admitted like an enqueue (Store.transition): at a full backlog the replay
    stops, the jobs not replayed are skipped with the reason, and `stopped` says it; when
    none was replayed it raises BacklogFull, as an enqueue would. `ignore_backlog` replays
    past the max backlogs (an operator's override)."""
    if per_second is not None and per_second <= 0:
        raise InvalidRequest("per_second must be more than 0 (or left out for no pacing)")
    if len(ids) > MAX_BULK:
        raise InvalidRequest(f"at most {MAX_BULK} jobs per bulk replay; narrow the filter")
    report = ReplayReport(matched=len(ids))
    interval = 1.0 / per_second if per_second else 0.0
    last: float | None = None  # when the last replay started (monotonic)
    for n, job_id in enumerate(ids, start=1):
        try:
            current = app.store.get_job(job_id, tenant=tenant)
            if current is None:
                raise JobNotFound(job_id)
            if current.status is not JobStatus.DEAD:
                raise InvalidRequest(f"job {job_id} is {current.status}, not dead")
            if interval and last is not None:  # pace the replays; a skipped job costs no time
                wait = last + interval - monotonic()
                if wait > 0:
                    sleep(wait)
            started = monotonic()
            job = app.store.transition(
                job_id, Event.REPLAY, app.clock.now(), tenant=tenant, ignore_backlog=ignore_backlog
            )
            last = started  # only a replay made paces the next one
            report.replayed.append(job.id)
        except BacklogFull as exc:
            if not report.replayed:
                raise
            report.stopped = str(exc)
            report.skipped.append((job_id, str(exc)))
            why = (
                f"not tried: the replay stopped at job {job_id}, its {exc.kind} {exc.name!r} "
                f"being at its max backlog of {exc.limit}"
            )
            report.skipped.extend((i, why) for i in ids[n:])
            if progress is not None:
                progress(len(ids), len(ids))
            break
        except DuetimeError as exc:
            report.skipped.append((job_id, str(exc)))
        if progress is not None:
            progress(n, len(ids))
    log_event(log, "jobs.bulk_replayed", replayed=len(report.replayed), skipped=len(report.skipped))
    return report
