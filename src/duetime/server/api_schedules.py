"""/v1/schedules: create, list, read, change, delete, pause, resume, trigger, preview,
backfill. Schedules are named per tenant; admins may name another tenant with ?tenant=."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import AfterValidator

from duetime.core.errors import InvalidRequest
from duetime.core.schedules import Schedule
from duetime.server.auth import Principal, act_as, reader, scope_tenant, writer
from duetime.server.paths import named
from duetime.server.schemas import (
    AUTH,
    BackfillIn,
    BackfillOut,
    JobOut,
    Preview,
    Problem,
    ScheduleFields,
    ScheduleIn,
    ScheduleList,
    ScheduleOut,
    clean_text,
)
from duetime.server.state import duetime_app

router = APIRouter(prefix="/v1", tags=["schedules"])

Name = Annotated[str, Path(min_length=1, max_length=200), AfterValidator(clean_text)]
Tenant = Annotated[
    str | None,
    Query(min_length=1, max_length=200, description="admin tokens only: the schedule's tenant"),
    AfterValidator(lambda v: clean_text(v) if v else v),
]
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": Problem, "description": "no such schedule in this tenant"}
}
# API words -> duetime.App.add_schedule / update_schedule keywords
WORDS = {
    "every_seconds": "every",
    "catchup_window_seconds": "catchup_window",
    "start_at": "start",
    "end_at": "end",
    "jitter_seconds": "jitter",
    "late_after_seconds": "late_after",
}
FIELDS: tuple[str, ...] = ("name", "task", "args", "cron", "every_seconds", "timezone", "misfire")
FIELDS += ("catchup_window_seconds", "overlap", "dst_gap", "dst_fold", "start_at", "end_at")
FIELDS += ("jitter_seconds", "late_after_seconds")


def schedule_out(schedule: Schedule) -> dict[str, Any]:
    return schedule.to_json()


def _literal_suffix(request: Request, suffix: str) -> bool:
    """Whether the path as sent ends with `suffix`, not with a name holding it as %2F...: the
    routes match the decoded path, where /v1/schedules/x%2Fpreview reads as the preview of x."""
    raw: bytes = request.scope.get("raw_path") or request.url.path.encode()
    return raw.endswith(suffix.encode())


def _options(values: dict[str, Any]) -> dict[str, Any]:
    return {WORDS.get(k, k): v for k, v in values.items()}


@router.post(
    "/schedules",
    status_code=201,
    response_model=ScheduleOut,
    responses={**AUTH, 409: {"model": Problem, "description": "the name is taken"}},
)
def create_schedule(
    body: ScheduleIn,
    request: Request,
    who: Annotated[Principal, Depends(writer)],
    tenant: Tenant = None,
) -> dict[str, Any]:
    """Create a recurring schedule (cron or every_seconds, in an IANA time zone)."""
    request.state.fields = FIELDS
    values = body.model_dump(exclude_none=True)
    name = values.pop("name")
    return schedule_out(act_as(request, who, tenant).add_schedule(name, **_options(values)))


@router.get("/schedules", response_model=ScheduleList, responses=AUTH)
def list_schedules(
    request: Request, who: Annotated[Principal, Depends(reader)], tenant: Tenant = None
) -> dict[str, Any]:
    """Every schedule of the tenant (admins: of every tenant unless ?tenant= names one)."""
    schedules = duetime_app(request).store.list_schedules(scope_tenant(who, tenant))
    return {"items": [schedule_out(s) for s in schedules]}


# before GET /schedules/{name}, which would take /v1/schedules/x/preview as a name
@router.get(
    named("/schedules/{name}/preview"), response_model=Preview, responses={**AUTH, **NOT_FOUND}
)
def preview(
    name: Name,
    request: Request,
    who: Annotated[Principal, Depends(reader)],
    count: Annotated[int, Query(ge=1, le=1000)] = 10,
    tenant: Tenant = None,
) -> Any:
    """The next `count` fire times, in UTC and in the schedule's local time."""
    view = act_as(request, who, tenant)
    if not _literal_suffix(request, "/preview"):  # /v1/schedules/x%2Fpreview: the schedule
        found = ScheduleOut.model_validate(schedule_out(view.get_schedule(f"{name}/preview")))
        return JSONResponse(jsonable_encoder(found))
    schedule = view.get_schedule(name)
    from zoneinfo import ZoneInfo

    zone = ZoneInfo(schedule.spec.timezone)
    fires = view.preview_schedule(name, count)
    return {
        "name": name,
        "timezone": schedule.spec.timezone,
        "fires": [
            {"at": f.at, "local": f.at.astimezone(zone).isoformat(), "kind": str(f.kind)}
            for f in fires
        ],
    }


@router.get(named("/schedules/{name}"), response_model=ScheduleOut, responses={**AUTH, **NOT_FOUND})
def get_schedule(
    name: Name, request: Request, who: Annotated[Principal, Depends(reader)], tenant: Tenant = None
) -> dict[str, Any]:
    return schedule_out(act_as(request, who, tenant).get_schedule(name))


@router.patch(
    named("/schedules/{name}"), response_model=ScheduleOut, responses={**AUTH, **NOT_FOUND}
)
def update_schedule(
    name: Name,
    body: ScheduleFields,
    request: Request,
    who: Annotated[Principal, Depends(writer)],
    tenant: Tenant = None,
) -> dict[str, Any]:
    """Change some fields; future ticks follow the new definition and occurrences generated
    but not started are regenerated. Send null to clear start_at or end_at, or to make
    late_after_seconds the default again."""
    request.state.fields = FIELDS
    values = body.model_dump(exclude_unset=True)
    for field, value in values.items():
        if value is None and field not in ("start_at", "end_at", "late_after_seconds"):
            raise InvalidRequest(f"{field} cannot be null; leave it out to keep it")
    changes = _options(values)
    return schedule_out(act_as(request, who, tenant).update_schedule(name, **changes))


@router.delete(
    named("/schedules/{name}"),
    status_code=204,
    response_class=Response,
    responses={**AUTH, **NOT_FOUND},
)
def delete_schedule(
    name: Name, request: Request, who: Annotated[Principal, Depends(writer)], tenant: Tenant = None
) -> Response:
    """Delete the schedule and its history; occurrences that never started are cancelled."""
    act_as(request, who, tenant).delete_schedule(name)
    return Response(status_code=204)


@router.post(
    named("/schedules/{name}/pause"), response_model=ScheduleOut, responses={**AUTH, **NOT_FOUND}
)
def pause(
    name: Name, request: Request, who: Annotated[Principal, Depends(writer)], tenant: Tenant = None
) -> dict[str, Any]:
    """Stop generating ticks; ticks due while paused meet the misfire policy on resume."""
    return schedule_out(act_as(request, who, tenant).pause_schedule(name))


@router.post(
    named("/schedules/{name}/resume"), response_model=ScheduleOut, responses={**AUTH, **NOT_FOUND}
)
def resume(
    name: Name, request: Request, who: Annotated[Principal, Depends(writer)], tenant: Tenant = None
) -> dict[str, Any]:
    return schedule_out(act_as(request, who, tenant).resume_schedule(name))


@router.post(
    named("/schedules/{name}/trigger"), response_model=JobOut, responses={**AUTH, **NOT_FOUND}
)
def trigger(
    name: Name, request: Request, who: Annotated[Principal, Depends(writer)], tenant: Tenant = None
) -> dict[str, Any]:
    """Run one occurrence now (its nominal time is now); returns the job."""
    return act_as(request, who, tenant).trigger_schedule(name).to_json()


@router.post(
    named("/schedules/{name}/backfill"), response_model=BackfillOut, responses={**AUTH, **NOT_FOUND}
)
def backfill(
    name: Name,
    body: BackfillIn,
    request: Request,
    who: Annotated[Principal, Depends(writer)],
    tenant: Tenant = None,
) -> dict[str, Any]:
    """Create the occurrences of every tick in [from, to] that has none yet (idempotent)."""
    request.state.fields = ("from", "to")
    plan = act_as(request, who, tenant).backfill_schedule(name, body.from_, body.to)
    return {"jobs": plan.job_ids, "ticks": len(plan.ticks)}
