"""/v1/stats (figures) and /v1/dead-letters/replay (paced bulk replay, admins only)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import AfterValidator

from duetime.admin import figures as admin_figures
from duetime.admin.replay import dead_job_ids, replay_many
from duetime.core.errors import InvalidRequest
from duetime.server.auth import Principal, admin, reader, scope_tenant
from duetime.server.schemas import (
    AUTH,
    FULL,
    MAX_REPLAY_SECONDS,
    DeadLetterReplayIn,
    DeadLetterReplayOut,
    StatsOut,
    clean_text,
)
from duetime.server.state import duetime_app

router = APIRouter(prefix="/v1")


@router.get("/stats", response_model=StatsOut, responses=AUTH, tags=["stats"])
def stats(
    request: Request,
    who: Annotated[Principal, Depends(reader)],
    tenant: Annotated[
        str | None,
        Query(min_length=1, max_length=200, description="admin tokens only: one tenant"),
        AfterValidator(lambda v: clean_text(v) if v else v),
    ] = None,
) -> dict[str, Any]:
    """Counts by status and queue, oldest overdue age, scheduling lag p50/p95/p99 and
    throughput over the last 5 and 60 minutes, and a per-minute series for the last hour;
    for admin tokens asking for every tenant, each limit key's figures too."""
    app = duetime_app(request)
    scope = scope_tenant(who, tenant)
    body = admin_figures.stats(app, scope).to_json()
    if scope is None and who.sees_all:
        now = app.clock.now()
        body["limits"] = [s.to_json(now) for s in app.limits()]
    return body


@router.post(
    "/dead-letters/replay",
    response_model=DeadLetterReplayOut,
    responses={**AUTH, **FULL},
    tags=["dead letters"],
)
def replay_dead_letters(
    body: DeadLetterReplayIn, request: Request, who: Annotated[Principal, Depends(admin)]
) -> dict[str, Any]:
    """Replay dead jobs, given by ids or by a filter ({} is every dead job), at most
    per_second a second. Jobs that are not dead (or not visible) are skipped with a reason.
    Replays are admitted like enqueues: at a full backlog the replay stops (`stopped` says
    why; the rest are skipped), or answers 429 when it replayed none; ignore_backlog replays
    past the max backlogs."""
    request.state.fields = ("ids", "filter", "per_second", "ignore_backlog")
    app = duetime_app(request)
    tenant = who.tenant_filter
    if body.filter is not None:
        tenant = scope_tenant(who, body.filter.tenant)
        ids = dead_job_ids(app, tenant, task=body.filter.task, queue=body.filter.queue)
    else:
        ids = list(dict.fromkeys(body.ids or []))
    if body.per_second and (len(ids) - 1) / body.per_second > MAX_REPLAY_SECONDS:
        raise InvalidRequest(
            f"per_second {body.per_second} would take over {MAX_REPLAY_SECONDS} s for "
            f"{len(ids)} jobs; raise per_second or use `duetime dlq replay`"
        )
    report = replay_many(
        app, ids, tenant=tenant, per_second=body.per_second, ignore_backlog=body.ignore_backlog
    )
    return report.to_json()
