"""/schedules: the schedule list, one schedule's page (next fires, ticks, the rule in plain
words), and its actions: pause, resume, trigger now, edit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from duetime.client import App
from duetime.core.cron import cronsim_text
from duetime.core.cron_words import describe_cron
from duetime.core.errors import DuetimeError, InvalidRequest, StoreUnavailable
from duetime.core.requests import load_args
from duetime.core.schedule_spec import Misfire, Overlap
from duetime.core.schedules import Schedule
from duetime.core.tokens import Role
from duetime.server.auth import Principal
from duetime.server.dashboard.filters import every, rfc3339
from duetime.server.dashboard.forms import guard, opt
from duetime.server.dashboard.render import error_page, render
from duetime.server.dashboard.session import go_back, to_login, user
from duetime.server.schemas import parse_id
from duetime.server.state import duetime_app

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


def _words(s: Schedule) -> str | None:
    """The cron rule in plain words, when it has a common shape."""
    return describe_cron(cronsim_text(s.spec.cron)) if s.spec.cron is not None else None


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
        {"rows": _schedule_rows(request, schedules), "rule": _rule, "words": _words},
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
            "words": _words,
            "misfires": [str(m) for m in Misfire],
            "overlaps": [str(o) for o in Overlap],
            "spec": s.spec.to_json(),
            "fires": app.preview_schedule(s.name, 10),
            "ticks": app.store.schedule_ticks(s.id, 20, None),
            "last_run": app.store.latest_run(s.id),
        },
        nav="schedules",
    )


def _schedule_action(
    request: Request,
    schedule_id: str,
    csrf_token: str | None,
    back: str | None,
    act: Callable[[App, Schedule], str],
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
        message = act(app, s)
    except DuetimeError as exc:
        if isinstance(exc, StoreUnavailable):
            raise
        return go_back(request, back, default, "error", str(exc))
    return go_back(request, back, default, "ok", message)


@router.post("/schedules/{schedule_id}/pause")
def pause_schedule(
    request: Request,
    schedule_id: str,
    csrf_token: Annotated[str | None, Form()] = None,
    back: Annotated[str | None, Form()] = None,
) -> Response:
    def act(app: App, s: Schedule) -> str:
        app.pause_schedule(s.name)
        return f"Schedule {s.name!r} paused."

    return _schedule_action(request, schedule_id, csrf_token, back, act)


@router.post("/schedules/{schedule_id}/resume")
def resume_schedule(
    request: Request,
    schedule_id: str,
    csrf_token: Annotated[str | None, Form()] = None,
    back: Annotated[str | None, Form()] = None,
) -> Response:
    def act(app: App, s: Schedule) -> str:
        app.resume_schedule(s.name)
        return f"Schedule {s.name!r} resumed."

    return _schedule_action(request, schedule_id, csrf_token, back, act)


@router.post("/schedules/{schedule_id}/trigger")
def trigger_schedule(
    request: Request,
    schedule_id: str,
    csrf_token: Annotated[str | None, Form()] = None,
    back: Annotated[str | None, Form()] = None,
) -> Response:
    """Run one occurrence now (as `duetime schedules trigger`)."""

    def act(app: App, s: Schedule) -> str:
        job = app.trigger_schedule(s.name)
        return f"Schedule {s.name!r} triggered: job {job.id}, due {rfc3339(job.due_at)}."

    return _schedule_action(request, schedule_id, csrf_token, back, act)


@router.post("/schedules/{schedule_id}/edit")
def edit_schedule(
    request: Request,
    schedule_id: str,
    csrf_token: Annotated[str | None, Form()] = None,
    cron: Annotated[str | None, Form()] = None,
    every: Annotated[str | None, Form()] = None,
    timezone: Annotated[str | None, Form()] = None,
    args: Annotated[str | None, Form()] = None,
    misfire: Annotated[str | None, Form()] = None,
    overlap: Annotated[str | None, Form()] = None,
    back: Annotated[str | None, Form()] = None,
) -> Response:
    """Change the rule, zone, args and policies (as `duetime schedules update`)."""

    def act(app: App, s: Schedule) -> str:
        changes = _changes(cron, every, timezone, args, misfire, overlap)
        changed = app.update_schedule(s.name, **changes)
        return f"Schedule {s.name!r} changed: {_rule(changed)} in {changed.spec.timezone}."

    return _schedule_action(request, schedule_id, csrf_token, back, act)


def _changes(
    cron: str | None,
    every: str | None,
    timezone: str | None,
    args: str | None,
    misfire: str | None,
    overlap: str | None,
) -> dict[str, Any]:
    """The edit form's fields as update_schedule keywords; an empty field keeps its value."""
    changes: dict[str, Any] = {}
    cron, every = opt(cron), opt(every)
    if cron is not None and every is not None:
        raise InvalidRequest("give either a cron expression or an interval, not both")
    if cron is not None:
        changes["cron"] = cron
    if every is not None:
        changes["every"] = every
    for name, value in (("timezone", timezone), ("misfire", misfire), ("overlap", overlap)):
        if opt(value) is not None:
            changes[name] = opt(value)
    text = opt(args)
    if text is not None:
        changes["args"] = load_args(text)
        if not isinstance(changes["args"], dict):
            raise InvalidRequest('args must be a JSON object, such as {"region": "eu"}')
    return changes
