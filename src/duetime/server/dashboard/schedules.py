"""/schedules: the schedule list, one schedule's page (next fires, ticks), pause and resume."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from duetime.core.errors import DuetimeError
from duetime.core.schedules import Schedule
from duetime.core.tokens import Role
from duetime.server.auth import Principal
from duetime.server.dashboard.filters import every
from duetime.server.dashboard.forms import guard
from duetime.server.dashboard.render import error_page, render
from duetime.server.dashboard.session import go_back, to_login, user
from duetime.server.schemas import parse_id
from duetime.server.state import duetime_app
from duetime.store import is_unavailable

router = APIRouter(include_in_schema=False)


def _schedule_rows(request: Request, schedules: list[Schedule]) -> list[dict[str, Any]]:
    store = duetime_app(request).store
    rows = []
    for s in schedules:
        rows.append(
            {
                "s": s,
                "ticks": list(reversed(store.schedule_ticks(s.id, 5, None))),
                "last_run": store.latest_run(s.id),
            }
        )
    return rows


def _rule(s: Schedule) -> str:
    if s.spec.cron is not None:
        return f"cron {s.spec.cron}"
    return f"every {every(s.spec.every_seconds)}"


def _find_schedule(request: Request, who: Principal, schedule_id: str) -> Schedule | None:
    number = parse_id(schedule_id)
    if number is None:
        return None
    schedules = duetime_app(request).store.list_schedules(who.tenant_filter)
    return next((s for s in schedules if s.id == number), None)


@router.get("/schedules")
def schedules_page(request: Request) -> Response:
    who = user(request)
    if who is None:
        return to_login(request)
    schedules = duetime_app(request).store.list_schedules(who.tenant_filter)
    schedules.sort(key=lambda s: (s.tenant, s.name))
    return render(
        request,
        who,
        "schedules.html",
        {"rows": _schedule_rows(request, schedules), "rule": _rule},
        nav="schedules",
    )


@router.get("/schedules/{schedule_id}")
def schedule_page(request: Request, schedule_id: str) -> Response:
    who = user(request)
    if who is None:
        return to_login(request)
    s = _find_schedule(request, who, schedule_id)
    if s is None:
        return error_page(request, who, 404, f"There is no schedule {schedule_id} you can see.")
    app = duetime_app(request).scoped(s.tenant)
    return render(
        request,
        who,
        "schedule.html",
        {
            "s": s,
            "rule": _rule,
            "spec": s.spec.to_json(),
            "fires": app.preview_schedule(s.name, 10),
            "ticks": app.store.schedule_ticks(s.id, 20, None),
            "last_run": app.store.latest_run(s.id),
        },
        nav="schedules",
    )


def _schedule_action(
    request: Request, schedule_id: str, csrf_token: str | None, back: str | None, pause: bool
) -> Response:
    who = user(request)
    refused = guard(request, who, csrf_token, Role.WRITE)
    if refused is not None or who is None:
        return refused or to_login(request)
    s = _find_schedule(request, who, schedule_id)
    if s is None:
        return error_page(request, who, 404, f"There is no schedule {schedule_id} you can see.")
    app = duetime_app(request).scoped(s.tenant)
    default = f"/schedules/{s.id}"
    try:
        if pause:
            app.pause_schedule(s.name)
        else:
            app.resume_schedule(s.name)
    except DuetimeError as exc:
        if is_unavailable(exc):
            raise
        return go_back(request, back, default, "error", str(exc))
    done = "paused" if pause else "resumed"
    return go_back(request, back, default, "ok", f"Schedule {s.name!r} {done}.")


@router.post("/schedules/{schedule_id}/pause")
def pause_schedule(
    request: Request,
    schedule_id: str,
    csrf_token: Annotated[str | None, Form()] = None,
    back: Annotated[str | None, Form()] = None,
) -> Response:
    return _schedule_action(request, schedule_id, csrf_token, back, pause=True)


@router.post("/schedules/{schedule_id}/resume")
def resume_schedule(
    request: Request,
    schedule_id: str,
    csrf_token: Annotated[str | None, Form()] = None,
    back: Annotated[str | None, Form()] = None,
) -> Response:
    return _schedule_action(request, schedule_id, csrf_token, back, pause=False)
