"""/v1/jobs: enqueue (idempotent), read with attempts, list with cursors, cancel, reschedule,
replay, resolve."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, HTTPException, Path, Query, Request, Response
from pydantic import AfterValidator

from duetime.core.errors import InvalidRequest, JobNotFound
from duetime.core.models import Job, JobFilter, page_of
from duetime.core.states import Event, JobStatus
from duetime.core.tokens import Role
from duetime.logs import log_event
from duetime.server.auth import Principal, reader, scope_tenant, writer
from duetime.server.schemas import (
    AUTH,
    FULL,
    Instant,
    JobDetail,
    JobIn,
    JobOut,
    JobPage,
    Problem,
    RescheduleIn,
    ResolveIn,
    Status,
    clean_text,
    parse_id,
)
from duetime.server.state import duetime_app

log = logging.getLogger("duetime.server")
router = APIRouter(prefix="/v1", tags=["jobs"])

JobId = Annotated[int, Path(ge=1, le=2**63 - 1, description="the job's id")]
OptionalText = Annotated[str | None, AfterValidator(lambda v: clean_text(v) if v else v)]

NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": Problem, "description": "no such job in this tenant"}
}
CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {"model": Problem, "description": "the job's status forbids this action"}
}
ENQUEUE_FIELDS: tuple[str, ...] = ("task", "args", "queue", "priority", "due_at")
ENQUEUE_FIELDS += ("delay_seconds", "deadline_at", "max_attempts", "business_key")
ENQUEUE_FIELDS += ("depends_on", "on_parent_failure")
ENQUEUE_FIELDS += ("sequence", "unique_for", "unique_key")


def job_out(job: Job) -> dict[str, Any]:
    return job.to_json()


@router.post(
    "/jobs",
    status_code=201,
    response_model=JobOut,
    responses={
        **AUTH,
        200: {
            "model": JobOut,
            "description": "the same Idempotency-Key and body, or a job within the unique "
            "window (unique_for): the original",
        },
        409: {"model": Problem, "description": "the Idempotency-Key was used with another body"},
        413: {"model": Problem, "description": "the body or the args are over the limit"},
        429: {
            "model": Problem,
            "description": "the queue's or tenant's max backlog is reached: nothing stored; "
            "retry after Retry-After seconds",
        },
    },
)
def enqueue(
    body: JobIn,
    request: Request,
    response: Response,
    who: Annotated[Principal, Depends(writer)],
    idempotency_key: Annotated[
        str | None,
        Header(alias="Idempotency-Key", min_length=1, max_length=200),
        AfterValidator(lambda v: clean_text(v) if v else v),
    ] = None,
) -> dict[str, Any]:
    """Create a job. With an Idempotency-Key, a retry with the same body returns the original
    job (200) and a different body is refused (409). Nothing is stored on any error."""
    request.state.fields = ENQUEUE_FIELDS
    result = (
        duetime_app(request)
        .scoped(who.tenant)
        .submit(
            body.task,
            body.args,
            at=body.due_at,
            delay=body.delay_seconds,
            key=idempotency_key,
            queue=body.queue,
            priority=body.priority,
            max_attempts=body.max_attempts,
            deadline=body.deadline_at,
            business_key=body.business_key,
            depends_on=body.depends_on,
            on_parent_failure=body.on_parent_failure,
            sequence=body.sequence,
            unique_for=body.unique_for,
            unique_key=body.unique_key,
        )
    )
    if not result.created:
        response.status_code = 200
    return job_out(result.job)


@router.get("/jobs", response_model=JobPage, responses=AUTH)
def list_jobs(
    request: Request,
    who: Annotated[Principal, Depends(reader)],
    status: Status | None = None,
    task: Annotated[OptionalText, Query(max_length=200)] = None,
    queue: Annotated[OptionalText, Query(max_length=200)] = None,
    due_after: Instant | None = None,
    due_before: Instant | None = None,
    tenant: Annotated[
        OptionalText, Query(max_length=200, description="admin tokens only: one tenant")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=40)] = None,
) -> dict[str, Any]:
    """Jobs newest first, `limit` at a time; follow `next_cursor` for the next page.
    Dead letters are `?status=dead`."""
    before_id = _cursor(cursor)
    found = duetime_app(request).store.list_jobs(
        JobFilter(
            tenant=scope_tenant(who, tenant),
            status=JobStatus(status) if status else None,
            task=task,
            queue=queue,
            before_id=before_id,
            due_after=due_after,
            due_before=due_before,
            limit=limit + 1,  # one more than shown: whether a next page exists
        )
    )
    jobs, last = page_of(found, limit)
    next_cursor = str(last) if last is not None else None
    return {"items": [job_out(j) for j in jobs], "next_cursor": next_cursor}


def _cursor(cursor: str | None) -> int | None:
    if cursor is None or cursor == "":
        return None
    before_id = parse_id(cursor)
    if before_id is None:
        raise InvalidRequest("cursor is not one this API gave out; start again without cursor")
    return before_id


@router.get("/jobs/{job_id}", response_model=JobDetail, responses={**AUTH, **NOT_FOUND})
def get_job(
    job_id: JobId, request: Request, who: Annotated[Principal, Depends(reader)]
) -> dict[str, Any]:
    """One job with every attempt: generation, status, worker, times, lease, error; and
    `unserved` when it waits because no live worker serves its task."""
    app = duetime_app(request)
    job = app.store.get_job(job_id, tenant=who.tenant_filter)
    if job is None:
        raise JobNotFound(job_id)
    return {**job_out(job), "unserved": app.unserved(job)}


def _move(request: Request, who: Principal, job_id: int, event: Event, **kw: Any) -> Job:
    app = duetime_app(request)
    job = app.store.transition(job_id, event, app.clock.now(), tenant=who.tenant_filter, **kw)
    log_event(log, f"job.{event}", job_id=job.id, status=str(job.status), token_id=who.token_id)
    return job


ACTION = {**AUTH, **NOT_FOUND, **CONFLICT}


@router.post("/jobs/{job_id}/cancel", response_model=JobOut, responses=ACTION)
def cancel(
    job_id: JobId, request: Request, who: Annotated[Principal, Depends(writer)]
) -> dict[str, Any]:
    """Cancel a job that has not started (cancelled), or ask a running one to stop
    (cancel_requested: the handler is told and the attempt ends cancelled)."""
    return job_out(_move(request, who, job_id, Event.CANCEL))


@router.post("/jobs/{job_id}/reschedule", response_model=JobOut, responses=ACTION)
def reschedule(
    job_id: JobId,
    body: RescheduleIn,
    request: Request,
    who: Annotated[Principal, Depends(writer)],
) -> dict[str, Any]:
    """Move a scheduled job's due time (before its deadline, if it has one)."""
    request.state.fields = ("due_at",)
    return job_out(_move(request, who, job_id, Event.RESCHEDULE, due_at=body.due_at))


@router.post("/jobs/{job_id}/replay", response_model=JobOut, responses={**ACTION, **FULL})
def replay(
    job_id: JobId,
    request: Request,
    who: Annotated[Principal, Depends(writer)],
    ignore_backlog: Annotated[
        bool, Query(description="admin tokens only: replay past the max backlogs")
    ] = False,
) -> dict[str, Any]:
    """Run a dead, cancelled or expired job again now: a new attempt budget, the same
    business key, a higher generation. Admitted like an enqueue: 429 with Retry-After past
    its queue's or tenant's max backlog, unless an admin sends ignore_backlog=true."""
    if ignore_backlog and not who.role.allows(Role.ADMIN):
        raise HTTPException(403, "only admin tokens may ignore a max backlog (ignore_backlog)")
    return job_out(_move(request, who, job_id, Event.REPLAY, ignore_backlog=ignore_backlog))


@router.post("/jobs/{job_id}/resolve", response_model=JobOut, responses=ACTION)
def resolve(
    job_id: JobId,
    body: ResolveIn,
    request: Request,
    who: Annotated[Principal, Depends(writer)],
) -> dict[str, Any]:
    """Settle a parked job (its outcome was unknown): done=true records it succeeded,
    done=false runs it again now."""
    event = Event.RESOLVE_DONE if body.done else Event.RESOLVE_RETRY
    return job_out(_move(request, who, job_id, event))
