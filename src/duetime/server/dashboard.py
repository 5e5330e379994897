"""The dashboard: server-rendered pages over the same App as the API.

Pages identify the user by the session cookie (the token secret, HTTP-only and SameSite=Strict)
or a bearer token; every form that changes something is a POST carrying the session's CSRF
token. Illegal moves come back as a readable message on the page, never as a 500.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import re
import secrets
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, urlencode
from zoneinfo import ZoneInfo

import jinja2
from fastapi import APIRouter, FastAPI, Form, HTTPException, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape

from duetime import operators
from duetime.client import App
from duetime.core.errors import DuetimeError, InvalidRequest
from duetime.core.models import Attempt, Job, JobFilter, page_of
from duetime.core.schedules import Schedule
from duetime.core.states import TRANSITIONS, Event, JobStatus
from duetime.core.tokens import Role
from duetime.server.auth import SESSION_COOKIE, Principal, current_principal, principal_for
from duetime.server.schemas import MAX_REPLAY_SECONDS, parse_id, sane_instant
from duetime.server.state import ServerState, server_state
from duetime.store import is_unavailable

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

FLASH_COOKIE = "duetime_flash"  # a one-time message for the next page (post/redirect/get)
LOGIN_COOKIE = "duetime_login"  # the login form's CSRF nonce (double submit)
PAGE_SIZE = 50
BULK_LIMIT = 1000  # dead jobs one "replay all matching" submits; run it again for more
MAX_FLASH = 1500

# the order statuses appear in everywhere: live work, then what needs a human, then the end
STATUS_ORDER: tuple[JobStatus, ...] = (
    JobStatus.SCHEDULED,
    JobStatus.WAITING,
    JobStatus.RUNNING,
    JobStatus.CANCEL_REQUESTED,
    JobStatus.PARKED,
    JobStatus.DEAD,
    JobStatus.SUCCEEDED,
    JobStatus.CANCELLED,
    JobStatus.EXPIRED,
)

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
        "object-src 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

router = APIRouter(include_in_schema=False)


def mount_static(api: FastAPI) -> None:
    """Serve the dashboard's static files (one stylesheet, one script) at /static."""
    api.mount("/static", StaticFiles(directory=STATIC), name="static")


# -- formatting (Jinja filters) ---------------------------------------------------------------


def rfc3339(value: datetime | None) -> str:
    """An instant as RFC 3339 UTC to the second: 2026-01-01T09:30:00Z."""
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def time_tag(value: datetime | None) -> Markup:
    """<time> with the UTC instant; dashboard.js puts the browser's local time in its title."""
    if value is None:
        return Markup('<span class="muted">—</span>')
    iso = value.astimezone(UTC).isoformat()
    return Markup('<time datetime="{0}" title="{1}">{1}</time>').format(iso, rfc3339(value))


def input_time(value: datetime | None) -> str:
    """An instant as a datetime-local input value, in UTC (the form says so)."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S") if value is not None else ""


def local_time(value: datetime | None, tz: str) -> str:
    """An instant in an IANA zone: 2026-01-01 10:30:00 CET +01:00."""
    if value is None:
        return "—"
    try:
        local = value.astimezone(ZoneInfo(tz))
    except (KeyError, ValueError):
        return rfc3339(value)
    offset = local.strftime("%z")
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()} {offset[:3]}:{offset[3:]}"


def duration(seconds: float | None) -> str:
    """A human duration; dashboard.js formats refreshed figures the same way."""
    if seconds is None:
        return "—"
    s = max(0.0, float(seconds))
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 60:
        return f"{s:.1f} s"
    whole = int(s)
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h {whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d {whole % 86400 // 3600:02d}h"


def rate(per_second: float) -> str:
    """A throughput: per second when at least one a second, else per minute."""
    if per_second >= 1:
        return f"{per_second:.1f}/s"
    return f"{per_second * 60:.1f}/min"


def every(seconds: float | None) -> str:
    """An interval rule's period: 90 s, 15 min, 2 h, 1 d."""
    if seconds is None:
        return "—"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)} {unit}"
    return f"{seconds:g} s"


def breakable(value: str) -> Markup:
    """Escaped text with line-break opportunities after dots, colons and slashes, so long
    dotted task names wrap between their parts rather than mid-word."""
    return Markup(re.sub(r"([./:])", r"\1<wbr>", str(escape(value))))


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        rfc3339=rfc3339,
        ts=time_tag,
        local=local_time,
        inputtime=input_time,
        dur=duration,
        rate=rate,
        wbr=breakable,
        pretty=pretty_json,
    )
    env.globals["STATUSES"] = [str(s) for s in STATUS_ORDER]
    return env


templates = Jinja2Templates(env=_environment())


# -- who is asking, and what they may do -------------------------------------------------------


def _state(request: Request) -> ServerState:
    return server_state(request)


def _user(request: Request) -> Principal | None:
    try:
        return current_principal(request, cookie=True)
    except HTTPException:  # a malformed Authorization header: treat as not logged in
        return None


def _safe_next(value: str | None, default: str = "/") -> str:
    """A local path to go to after a form; anything that could leave the site is refused."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return default
    if any(ord(c) < 32 for c in value):
        return default
    return value


def _to_login(request: Request) -> Response:
    """Send an anonymous (or no longer valid) session to the login page."""
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    target = here if request.method == "GET" else "/"
    response = RedirectResponse(f"/login?next={quote(target, safe='')}", 303)
    if request.cookies.get(SESSION_COOKIE):
        _clear_session(request, response)
        _flash(request, response, "error", "Your session ended: its token is unknown or revoked.")
    return response


def _cookie_args(request: Request) -> dict[str, Any]:
    return {
        "httponly": True,
        "samesite": "strict",
        "secure": _state(request).settings.secure_cookies,
        "path": "/",
    }


def _clear_session(request: Request, response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, **_cookie_args(request))


def _flash(request: Request, response: Response, kind: str, text: str) -> None:
    if len(text) > MAX_FLASH:
        text = text[: MAX_FLASH - 1] + "…"
    raw = json.dumps([kind, text]).encode()
    value = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    response.set_cookie(FLASH_COOKIE, value, max_age=60, **_cookie_args(request))


def _read_flash(request: Request) -> dict[str, str] | None:
    value = request.cookies.get(FLASH_COOKIE)
    if not value:
        return None
    try:
        kind, text = json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
    except (ValueError, TypeError, binascii.Error):
        return None
    if kind not in ("ok", "error") or not isinstance(text, str):
        return None
    return {"kind": kind, "text": text}


def _render(
    request: Request,
    who: Principal | None,
    template: str,
    context: Mapping[str, Any] | None = None,
    *,
    status: int = 200,
    nav: str = "",
) -> Response:
    flash = _read_flash(request)
    settings = _state(request).settings
    full: dict[str, Any] = {
        "who": who,
        "auth": settings.auth,
        "csrf": who.csrf_token() if who else "",
        "can_write": who is not None and who.role.allows(Role.WRITE),
        "can_admin": who is not None and who.role.allows(Role.ADMIN),
        "all_tenants": who is not None and who.sees_all,
        "flash": flash,
        "nav": nav,
        "here": request.url.path + (f"?{request.url.query}" if request.url.query else ""),
        **(context or {}),
    }
    response = templates.TemplateResponse(
        request, template, full, status_code=status, headers=SECURITY_HEADERS
    )
    if flash is not None:
        response.delete_cookie(FLASH_COOKIE, **_cookie_args(request))
    return response


def _error_page(request: Request, who: Principal | None, status: int, message: str) -> Response:
    titles = {403: "Not allowed", 404: "Not found", 400: "Bad request"}
    return _render(
        request,
        who,
        "error.html",
        {"status": status, "title": titles.get(status, "Error"), "message": message},
        status=status,
    )


def _cross_site(request: Request) -> bool:
    """A browser says this form came from another site (or another port of this host)."""
    site = request.headers.get("sec-fetch-site")
    return site is not None and site not in ("same-origin", "none")


def _guard(
    request: Request, who: Principal | None, csrf_token: str | None, role: Role
) -> Response | None:
    """None when a state-changing form may proceed; otherwise the response refusing it."""
    if who is None:
        return _to_login(request)
    if _cross_site(request) or not who.csrf_ok(csrf_token):
        return _error_page(
            request,
            who,
            403,
            "This form's CSRF token is missing or wrong (or it came from another site), so "
            "nothing was changed. Reload the page and try again.",
        )
    if not who.role.allows(role):
        return _error_page(
            request, who, 403, f"This needs a {role} token; your token's role is {who.role}."
        )
    return None


def _back(request: Request, back: str | None, default: str, kind: str, text: str) -> Response:
    response = RedirectResponse(_safe_next(back, default), 303)
    _flash(request, response, kind, text)
    return response


def _opt(value: str | None) -> str | None:
    value = value.strip() if value is not None else None
    return value or None


def parse_when(value: str | None, what: str) -> tuple[datetime, bool]:
    """A time typed in a form, in UTC, and whether it lacked an offset (then it is read as UTC,
    which is what a datetime-local input sends)."""
    text = (value or "").strip()
    if not text:
        raise InvalidRequest(f"{what} is empty; give a time such as 2026-03-01T09:00")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidRequest(
            f"{what} {text!r} is not a time; write it like 2026-03-01T09:00 (UTC) "
            "or 2026-03-01T09:00:00+01:00"
        ) from None
    naive = parsed.tzinfo is None or parsed.utcoffset() is None
    try:
        return sane_instant(parsed.replace(tzinfo=UTC) if naive else parsed), naive
    except ValueError as exc:
        raise InvalidRequest(f"{what} {text!r} {exc}") from None


# -- login and logout --------------------------------------------------------------------------


@router.get("/login")
def login_page(request: Request, next: str | None = None) -> Response:
    target = _safe_next(next)
    if not _state(request).settings.auth or _user(request) is not None:
        return RedirectResponse(target, 303)
    return _login_form(request, target)


def _login_form(request: Request, target: str, error: str = "", status: int = 200) -> Response:
    nonce = secrets.token_urlsafe(24)
    response = _render(
        request,
        None,
        "login.html",
        {"login_csrf": nonce, "next": target, "error": error},
        status=status,
    )
    response.set_cookie(LOGIN_COOKIE, nonce, max_age=3600, **_cookie_args(request))
    return response


@router.post("/login")
def login(
    request: Request,
    token: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "/",
) -> Response:
    target = _safe_next(next)
    state = _state(request)
    if not state.settings.auth:
        return RedirectResponse(target, 303)
    nonce = request.cookies.get(LOGIN_COOKIE, "")
    if _cross_site(request) or not nonce or not hmac.compare_digest(nonce, csrf_token):
        return _login_form(
            request, target, "The login form expired or came from another site; try again.", 403
        )
    who = principal_for(state.app, token.strip()) if token.strip() else None
    if who is None:
        return _login_form(request, target, "Unknown or revoked token.", 401)
    response = RedirectResponse(target, 303)
    response.set_cookie(SESSION_COOKIE, token.strip(), **_cookie_args(request))
    response.delete_cookie(LOGIN_COOKIE, **_cookie_args(request))
    return response


@router.post("/logout")
def logout(request: Request, csrf_token: Annotated[str | None, Form()] = None) -> Response:
    who = _user(request)
    if who is not None and _state(request).settings.auth:
        if _cross_site(request) or not who.csrf_ok(csrf_token):
            return _error_page(request, who, 403, "This logout form's CSRF token is wrong.")
    response = RedirectResponse("/login", 303)
    _clear_session(request, response)
    _flash(request, response, "ok", "Logged out.")
    return response


# -- overview ----------------------------------------------------------------------------------


@router.get("/")
def overview(request: Request) -> Response:
    who = _user(request)
    if who is None:
        return _to_login(request)
    state = _state(request)
    stats = operators.stats(state.app, who.tenant_filter)
    by_status = stats.by_status()
    windows = {w.minutes: w for w in stats.windows}
    queues = sorted(stats.by_queue().items())
    return _render(
        request,
        who,
        "overview.html",
        {
            "stats": stats,
            "stats_json": stats.to_json(),
            "by_status": by_status,
            "queues": queues,
            "w5": windows.get(5),
            "w60": windows.get(60),
            "refresh_seconds": state.settings.refresh_seconds,
        },
        nav="overview",
    )


# -- jobs --------------------------------------------------------------------------------------


@router.get("/jobs")
def jobs_page(
    request: Request,
    id: str | None = None,
    task: str | None = None,
    queue: str | None = None,
    status: str | None = None,
    tenant: str | None = None,
    due_after: str | None = None,
    due_before: str | None = None,
    before: str | None = None,
) -> Response:
    who = _user(request)
    if who is None:
        return _to_login(request)
    form = {
        "id": _opt(id),
        "task": _opt(task),
        "queue": _opt(queue),
        "status": _opt(status),
        "tenant": _opt(tenant) if who.sees_all else None,
        "due_after": _opt(due_after),
        "due_before": _opt(due_before),
    }
    nav = "parked" if form["status"] == "parked" else "jobs"
    errors: list[str] = []
    if form["id"] is not None:
        job_id = parse_id(form["id"])
        if job_id is not None:
            return RedirectResponse(f"/jobs/{job_id}", 303)
        errors.append(f"job id {form['id']!r} is not a number")
    status_value: JobStatus | None = None
    if form["status"] is not None:
        try:
            status_value = JobStatus(form["status"])
        except ValueError:
            errors.append(f"unknown status {form['status']!r}")
    bounds: dict[str, datetime | None] = {"due_after": None, "due_before": None}
    for key in bounds:
        if form[key] is not None:
            try:
                bounds[key], _ = parse_when(form[key], key.replace("_", " "))
            except InvalidRequest as exc:
                errors.append(str(exc))
    cursor = parse_id(before) if before else None
    if before and cursor is None:
        errors.append(f"page cursor {before!r} is not a job id")
    jobs: list[Job] = []
    next_url = None
    if not errors:
        found = _state(request).app.store.list_jobs(
            JobFilter(
                tenant=form["tenant"] if who.sees_all else who.tenant,
                status=status_value,
                task=form["task"],
                queue=form["queue"],
                before_id=cursor,
                due_after=bounds["due_after"],
                due_before=bounds["due_before"],
                limit=PAGE_SIZE + 1,
            )
        )
        jobs, last = page_of(found, PAGE_SIZE)
        if last is not None:
            kept = {k: v for k, v in form.items() if v is not None and k != "id"}
            next_url = "/jobs?" + urlencode({**kept, "before": last})
    first_url = None
    if cursor is not None:
        kept = {k: v for k, v in form.items() if v is not None and k != "id"}
        first_url = "/jobs" + (f"?{urlencode(kept)}" if kept else "")
    return _render(
        request,
        who,
        "jobs.html",
        {
            "jobs": jobs,
            "form": form,
            "errors": errors,
            "next_url": next_url,
            "first_url": first_url,
            "page_size": PAGE_SIZE,
        },
        status=400 if errors else 200,
        nav=nav,
    )


def _actions(job: Job) -> dict[str, bool]:
    """Which buttons the job page offers for the job's current status."""
    status = job.status
    return {
        "cancel": status in TRANSITIONS[Event.CANCEL] and status is not JobStatus.CANCEL_REQUESTED,
        "reschedule": status in TRANSITIONS[Event.RESCHEDULE],
        "replay": status in TRANSITIONS[Event.REPLAY],
        "resolve": status in TRANSITIONS[Event.RESOLVE_DONE],
    }


def _find_job(request: Request, who: Principal, job_id: str) -> Job | None:
    number = parse_id(job_id)
    if number is None:
        return None
    return _state(request).app.store.get_job(number, tenant=who.tenant_filter)


def _schedule_link(job: Job) -> str | None:
    return f"/schedules/{job.schedule_id}" if job.schedule_id is not None else None


@router.get("/jobs/{job_id}")
def job_page(request: Request, job_id: str) -> Response:
    who = _user(request)
    if who is None:
        return _to_login(request)
    job = _find_job(request, who, job_id)
    if job is None:
        return _error_page(request, who, 404, f"There is no job {job_id} that you can see.")
    return _render(
        request,
        who,
        "job.html",
        {
            "job": job,
            "attempts": list(job.attempt_history),
            "actions": _actions(job),
            "schedule_url": _schedule_link(job),
        },
        nav="jobs",
    )


def _job_action(
    request: Request,
    job_id: str,
    csrf_token: str | None,
    back: str | None,
    act: Callable[[App, int], tuple[Job, str]],
) -> Response:
    who = _user(request)
    refused = _guard(request, who, csrf_token, Role.WRITE)
    if refused is not None or who is None:
        return refused or _to_login(request)
    job = _find_job(request, who, job_id)
    if job is None:
        return _error_page(request, who, 404, f"There is no job {job_id} that you can see.")
    default = f"/jobs/{job.id}"
    try:
        # an admin acts in the job's own tenant; anyone else only ever finds their own jobs
        _, message = act(_state(request).app.scoped(job.tenant), job.id)
    except DuetimeError as exc:
        if is_unavailable(exc):
            raise
        return _back(request, back, default, "error", str(exc))
    return _back(request, back, default, "ok", message)


@router.post("/jobs/{job_id}/cancel")
def cancel_job(
    request: Request,
    job_id: str,
    csrf_token: Annotated[str | None, Form()] = None,
    back: Annotated[str | None, Form()] = None,
) -> Response:
    def act(app: App, number: int) -> tuple[Job, str]:
        job = app.cancel(number)
        if job.status is JobStatus.CANCEL_REQUESTED:
            return job, f"Job {number} is running; its handler has been asked to stop."
        return job, f"Job {number} cancelled."

    return _job_action(request, job_id, csrf_token, back, act)


@router.post("/jobs/{job_id}/replay")
def replay_job(
    request: Request,
    job_id: str,
    csrf_token: Annotated[str | None, Form()] = None,
    back: Annotated[str | None, Form()] = None,
) -> Response:
    def act(app: App, number: int) -> tuple[Job, str]:
        job = app.replay(number)
        return job, f"Job {number} replayed: it is scheduled again, due {rfc3339(job.due_at)}."

    return _job_action(request, job_id, csrf_token, back, act)


@router.post("/jobs/{job_id}/reschedule")
def reschedule_job(
    request: Request,
    job_id: str,
    csrf_token: Annotated[str | None, Form()] = None,
    due_at: Annotated[str | None, Form()] = None,
    back: Annotated[str | None, Form()] = None,
) -> Response:
    def act(app: App, number: int) -> tuple[Job, str]:
        when, naive = parse_when(due_at, "new due time")
        job = app.reschedule(number, when)
        note = " (the time had no UTC offset, so it was read as UTC)" if naive else ""
        return job, f"Job {number} rescheduled to {rfc3339(job.due_at)}{note}."

    return _job_action(request, job_id, csrf_token, back, act)


@router.post("/jobs/{job_id}/resolve")
def resolve_job(
    request: Request,
    job_id: str,
    csrf_token: Annotated[str | None, Form()] = None,
    outcome: Annotated[str | None, Form()] = None,
    back: Annotated[str | None, Form()] = None,
) -> Response:
    def act(app: App, number: int) -> tuple[Job, str]:
        if outcome == "done":
            return app.resolve(number, done=True), f"Job {number} recorded as succeeded."
        if outcome == "retry":
            return app.resolve(number, done=False), f"Job {number} will run again now."
        raise InvalidRequest("resolve needs outcome 'done' or 'retry'")

    return _job_action(request, job_id, csrf_token, back, act)


# -- schedules ---------------------------------------------------------------------------------


def _schedule_rows(request: Request, schedules: list[Schedule]) -> list[dict[str, Any]]:
    store = _state(request).app.store
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
    schedules = _state(request).app.store.list_schedules(who.tenant_filter)
    return next((s for s in schedules if s.id == number), None)


@router.get("/schedules")
def schedules_page(request: Request) -> Response:
    who = _user(request)
    if who is None:
        return _to_login(request)
    schedules = _state(request).app.store.list_schedules(who.tenant_filter)
    schedules.sort(key=lambda s: (s.tenant, s.name))
    return _render(
        request,
        who,
        "schedules.html",
        {"rows": _schedule_rows(request, schedules), "rule": _rule},
        nav="schedules",
    )


@router.get("/schedules/{schedule_id}")
def schedule_page(request: Request, schedule_id: str) -> Response:
    who = _user(request)
    if who is None:
        return _to_login(request)
    s = _find_schedule(request, who, schedule_id)
    if s is None:
        return _error_page(request, who, 404, f"There is no schedule {schedule_id} you can see.")
    app = _state(request).app.scoped(s.tenant)
    return _render(
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
    who = _user(request)
    refused = _guard(request, who, csrf_token, Role.WRITE)
    if refused is not None or who is None:
        return refused or _to_login(request)
    s = _find_schedule(request, who, schedule_id)
    if s is None:
        return _error_page(request, who, 404, f"There is no schedule {schedule_id} you can see.")
    app = _state(request).app.scoped(s.tenant)
    default = f"/schedules/{s.id}"
    try:
        if pause:
            app.pause_schedule(s.name)
        else:
            app.resume_schedule(s.name)
    except DuetimeError as exc:
        if is_unavailable(exc):
            raise
        return _back(request, back, default, "error", str(exc))
    done = "paused" if pause else "resumed"
    return _back(request, back, default, "ok", f"Schedule {s.name!r} {done}.")


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


# -- dead letters ------------------------------------------------------------------------------


def _last_error(job: Job) -> Attempt | None:
    failed = [a for a in job.attempt_history if a.error_category or a.error_message]
    return failed[-1] if failed else (job.attempt_history[-1] if job.attempt_history else None)


@router.get("/dead-letters")
def dead_letters_page(
    request: Request,
    task: str | None = None,
    queue: str | None = None,
    tenant: str | None = None,
    before: str | None = None,
) -> Response:
    who = _user(request)
    if who is None:
        return _to_login(request)
    store = _state(request).app.store
    form = {
        "task": _opt(task),
        "queue": _opt(queue),
        "tenant": _opt(tenant) if who.sees_all else None,
    }
    cursor = parse_id(before)
    found = store.list_jobs(
        JobFilter(
            tenant=form["tenant"] if who.sees_all else who.tenant,
            status=JobStatus.DEAD,
            task=form["task"],
            queue=form["queue"],
            before_id=cursor,
            limit=PAGE_SIZE + 1,
            with_attempts=True,
        )
    )
    jobs, last = page_of(found, PAGE_SIZE)
    rows = [{"job": job, "error": _last_error(job)} for job in jobs]
    kept = {k: v for k, v in form.items() if v is not None}
    next_url = None
    if last is not None:
        next_url = "/dead-letters?" + urlencode({**kept, "before": last})
    first_url = None
    if cursor is not None:
        first_url = "/dead-letters" + (f"?{urlencode(kept)}" if kept else "")
    return _render(
        request,
        who,
        "dead_letters.html",
        {
            "rows": rows,
            "form": form,
            "next_url": next_url,
            "first_url": first_url,
            "bulk_limit": BULK_LIMIT,
        },
        nav="dead",
    )


@router.post("/dead-letters/replay")
def bulk_replay(
    request: Request,
    csrf_token: Annotated[str | None, Form()] = None,
    scope: Annotated[str, Form()] = "selected",
    ids: Annotated[list[str] | None, Form()] = None,
    task: Annotated[str | None, Form()] = None,
    queue: Annotated[str | None, Form()] = None,
    tenant: Annotated[str | None, Form()] = None,
    per_second: Annotated[str | None, Form()] = None,
) -> Response:
    who = _user(request)
    refused = _guard(request, who, csrf_token, Role.ADMIN)
    if refused is not None or who is None:
        return refused or _to_login(request)
    app = _state(request).app
    back = "/dead-letters"
    try:
        rate = _rate(per_second)
        if scope == "matching":
            chosen = operators.dead_job_ids(
                app,
                _opt(tenant) if who.sees_all else who.tenant,
                task=_opt(task),
                queue=_opt(queue),
                limit=BULK_LIMIT,
            )
            if not chosen:
                raise InvalidRequest("no dead job matches that filter; nothing was replayed")
        else:
            chosen = [n for n in (parse_id(i) for i in ids or []) if n is not None]
            if not chosen:
                raise InvalidRequest("select at least one dead job to replay")
        if rate and (len(chosen) - 1) / rate > MAX_REPLAY_SECONDS:
            raise InvalidRequest(
                f"at {rate:g} a second, {len(chosen)} jobs would take over "
                f"{MAX_REPLAY_SECONDS} s; raise the pace or use `duetime dlq replay`"
            )
        report = operators.replay_many(app, chosen, tenant=who.tenant_filter, per_second=rate)
    except DuetimeError as exc:
        if is_unavailable(exc):
            raise
        return _back(request, back, back, "error", str(exc))
    return _render(
        request,
        who,
        "replay_report.html",
        {"report": report, "scope": scope, "per_second": rate, "bulk_limit": BULK_LIMIT},
        nav="dead",
    )


def _rate(value: str | None) -> float | None:
    text = _opt(value)
    if text is None:
        return None
    try:
        rate = float(text)
    except ValueError:
        raise InvalidRequest(f"pace {text!r} is not a number of jobs per second") from None
    if not rate > 0 or rate == float("inf"):
        raise InvalidRequest("pace must be more than 0 jobs per second (or left empty)")
    return rate
