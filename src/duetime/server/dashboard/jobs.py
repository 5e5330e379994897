"""/jobs: the job list (and the parked jobs), one job's page, and its actions (cancel, replay,
reschedule, resolve). Past 400 lines by a few: one page's routes and their forms."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from duetime.client import App
from duetime.core.dependencies import MAX_RELATIVES_SHOWN
from duetime.core.errors import DuetimeError, InvalidRequest, StoreUnavailable
from duetime.core.models import Job, JobFilter, page_of
from duetime.core.states import TRANSITIONS, Event, JobStatus
from duetime.core.tokens import Role
from duetime.server.auth import Principal
from duetime.server.dashboard.filters import last_error, rfc3339
from duetime.server.dashboard.forms import guard, opt, parse_when
from duetime.server.dashboard.render import PAGE_SIZE, error_page, render
from duetime.server.dashboard.session import go_back, to_login, user
from duetime.server.schemas import parse_id
from duetime.server.state import duetime_app

router = APIRouter(include_in_schema=False)


BULK_LIMIT = 1000  # jobs one "cancel all matching" covers; run it again for more

# the search form's fields: the URL parameter, and what the page shows
SEARCH_FIELDS = (
    "id",
    "task",
    "queue",
    "status",
    "tenant",
    "due_after",
    "due_before",
    "business_key",
    "key",
    "args",
)


def _search_form(who: Principal, values: dict[str, str | None]) -> dict[str, str | None]:
    form = {name: opt(values.get(name)) for name in SEARCH_FIELDS}
    if not who.sees_all:
        form["tenant"] = None
    return form


def _job_filter(who: Principal, form: dict[str, str | None], errors: list[str]) -> JobFilter:
    """The store filter a search form asks for; what cannot be read goes to `errors`."""
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
    return JobFilter(
        tenant=form["tenant"] if who.sees_all else who.tenant,
        status=status_value,
        task=form["task"],
        queue=form["queue"],
        due_after=bounds["due_after"],
        due_before=bounds["due_before"],
        business_key=form["business_key"],
        idempotency_key=form["key"],
        args_text=form["args"],
    )


def job_row(job: Job, now: datetime) -> dict[str, object]:
    """What a list shows of a job: whether it waits to retry or in the broker (dispatched,
    and for how long), and its newest error."""
    retrying = job.status is JobStatus.SCHEDULED and job.attempts > 0
    error = last_error(job) if job.status is not JobStatus.SUCCEEDED else None
    return {
        "job": job,
        "retrying": retrying,
        "next_attempt": job.attempts + 1,
        "error": error,
        "dispatched_for": job.dispatched_seconds(now),
    }


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
    business_key: str | None = None,
    key: str | None = None,
    args: str | None = None,
    before: str | None = None,
) -> Response:
    who = user(request)
    if who is None:
        return to_login(request)
    form = _search_form(
        who,
        {
            "id": id,
            "task": task,
            "queue": queue,
            "status": status,
            "tenant": tenant,
            "due_after": due_after,
            "due_before": due_before,
            "business_key": business_key,
            "key": key,
            "args": args,
        },
    )
    nav = "parked" if form["status"] == "parked" else "jobs"
    errors: list[str] = []
    if form["id"] is not None:
        job_id = parse_id(form["id"])
        if job_id is not None:
            return RedirectResponse(f"/jobs/{job_id}", 303)
        errors.append(f"job id {form['id']!r} is not a number")
    cursor = parse_id(before) if before else None
    if before and cursor is None:
        errors.append(f"page cursor {before!r} is not a job id")
    wanted = replace(
        _job_filter(who, form, errors),
        before_id=cursor,
        limit=PAGE_SIZE + 1,
        with_attempts=True,
    )
    jobs: list[Job] = []
    next_url = None
    kept = {k: v for k, v in form.items() if v is not None and k != "id"}
    if not errors:
        jobs, last = page_of(duetime_app(request).store.list_jobs(wanted), PAGE_SIZE)
        if last is not None:
            next_url = "/jobs?" + urlencode({**kept, "before": last})
    first_url = None
    if cursor is not None:
        first_url = "/jobs" + (f"?{urlencode(kept)}" if kept else "")
    return render(
        request,
        who,
        "jobs.html",
        {
            "rows": [job_row(job, duetime_app(request).clock.now()) for job in jobs],
            "form": form,
            "searched": any(v is not None for k, v in kept.items() if k != "status"),
            "errors": errors,
            "next_url": next_url,
            "first_url": first_url,
            "page_size": PAGE_SIZE,
            "bulk_limit": BULK_LIMIT,
        },
        status=400 if errors else 200,
        nav=nav,
    )


@router.post("/jobs/cancel")
def bulk_cancel(
    request: Request,
    csrf_token: Annotated[str | None, Form()] = None,
    scope: Annotated[str, Form()] = "selected",
    ids: Annotated[list[str] | None, Form()] = None,
    task: Annotated[str | None, Form()] = None,
    queue: Annotated[str | None, Form()] = None,
    status: Annotated[str | None, Form()] = None,
    tenant: Annotated[str | None, Form()] = None,
    due_after: Annotated[str | None, Form()] = None,
    due_before: Annotated[str | None, Form()] = None,
    business_key: Annotated[str | None, Form()] = None,
    key: Annotated[str | None, Form()] = None,
    args: Annotated[str | None, Form()] = None,
    back: Annotated[str | None, Form()] = None,
) -> Response:
    """Cancel the ticked jobs, or every job the search matches (up to BULK_LIMIT); a job that
    cannot be cancelled any more is counted and named, never fatal."""
    who = user(request)
    refused = guard(request, who, csrf_token, Role.WRITE)
    if refused is not None or who is None:
        return refused or to_login(request)
    store = duetime_app(request).store
    try:
        if scope == "matching":
            form = _search_form(
                who,
                {
                    "task": task,
                    "queue": queue,
                    "status": status,
                    "tenant": tenant,
                    "due_after": due_after,
                    "due_before": due_before,
                    "business_key": business_key,
                    "key": key,
                    "args": args,
                },
            )
            errors: list[str] = []
            wanted = replace(_job_filter(who, form, errors), limit=BULK_LIMIT)
            if errors:
                raise InvalidRequest("; ".join(errors))
            chosen = [job for job in store.list_jobs(wanted) if _actions(job)["cancel"]]
            if not chosen:
                raise InvalidRequest(
                    "no job this search matches can be cancelled; nothing was cancelled"
                )
        else:
            numbers = [n for n in (parse_id(i) for i in ids or []) if n is not None]
            if not numbers:
                raise InvalidRequest("tick at least one job to cancel")
            found = (store.get_job(n, tenant=who.tenant_filter) for n in numbers[:BULK_LIMIT])
            chosen = [job for job in found if job is not None]
        message = _cancel_each(duetime_app(request), chosen)
    except DuetimeError as exc:
        if isinstance(exc, StoreUnavailable):
            raise
        return go_back(request, back, "/jobs", "error", str(exc))
    return go_back(request, back, "/jobs", "ok", message)


def _cancel_each(app: App, jobs: list[Job]) -> str:
    cancelled, stopping, skipped = 0, 0, []
    for job in jobs:
        try:
            moved = app.scoped(job.tenant).cancel(job.id)
        except DuetimeError as exc:
            if isinstance(exc, StoreUnavailable):
                raise
            skipped.append(f"#{job.id} ({job.status})")
            continue
        if moved.status is JobStatus.CANCEL_REQUESTED:
            stopping += 1
        else:
            cancelled += 1
    parts = [f"Cancelled {cancelled} job{'s' if cancelled != 1 else ''}."]
    if stopping:
        parts.append(f"{stopping} running: their handlers have been asked to stop.")
    if skipped:
        named = ", ".join(skipped[:10]) + (" ..." if len(skipped) > 10 else "")
        parts.append(f"{len(skipped)} could not be cancelled any more: {named}.")
    return " ".join(parts)


def _actions(job: Job) -> dict[str, bool]:
    """Which buttons the job page offers for the job's current status. A job only dispatched
    to the broker (no worker accepted it) is moved as a scheduled one: its attempt is
    withdrawn first (docs/outbox.md, "Withdrawn dispatches")."""
    status = job.status
    if job.dispatched_at is not None and status is JobStatus.RUNNING:
        status = JobStatus.SCHEDULED
    # a dead job that holds its sequence (sequence_on_dead="hold") is dismissed by a cancel
    holds = status in TRANSITIONS[Event.DISMISS] and job.sequence_hold
    return {
        "cancel": holds
        or (status in TRANSITIONS[Event.CANCEL] and status is not JobStatus.CANCEL_REQUESTED),
        "reschedule": status in TRANSITIONS[Event.RESCHEDULE],
        "replay": status in TRANSITIONS[Event.REPLAY],
        "resolve": status in TRANSITIONS[Event.RESOLVE_DONE],
    }


def _find_job(request: Request, who: Principal, job_id: str) -> Job | None:
    number = parse_id(job_id)
    if number is None:
        return None
    return duetime_app(request).store.get_job(number, tenant=who.tenant_filter)


def _schedule_link(job: Job) -> str | None:
    return f"/schedules/{job.schedule_id}" if job.schedule_id is not None else None


@router.get("/jobs/{job_id}")
def job_page(request: Request, job_id: str) -> Response:
    who = user(request)
    if who is None:
        return to_login(request)
    job = _find_job(request, who, job_id)
    if job is None:
        return error_page(request, who, 404, f"There is no job {job_id} that you can see.")
    return render(
        request,
        who,
        "job.html",
        {
            "job": job,
            "attempts": list(job.attempt_history),
            "now": duetime_app(request).clock.now(),
            "actions": _actions(job),
            "schedule_url": _schedule_link(job),
            "unserved": duetime_app(request).unserved(job),
            "max_children": MAX_RELATIVES_SHOWN,
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
    who = user(request)
    refused = guard(request, who, csrf_token, Role.WRITE)
    if refused is not None or who is None:
        return refused or to_login(request)
    job = _find_job(request, who, job_id)
    if job is None:
        return error_page(request, who, 404, f"There is no job {job_id} that you can see.")
    default = f"/jobs/{job.id}"
    try:
        # an admin acts in the job's own tenant; anyone else only ever finds their own jobs
        _, message = act(duetime_app(request).scoped(job.tenant), job.id)
    except DuetimeError as exc:
        if isinstance(exc, StoreUnavailable):
            raise
        return go_back(request, back, default, "error", str(exc))
    return go_back(request, back, default, "ok", message)


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
    ignore_backlog: Annotated[str | None, Form()] = None,
) -> Response:
    override = ignore_backlog is not None  # a checkbox: sent only when ticked

    def act(app: App, number: int) -> tuple[Job, str]:
        who = user(request) if override else None
        if override and (who is None or not who.role.allows(Role.ADMIN)):
            raise InvalidRequest("only admins may ignore a max backlog; replay without it")
        job = app.replay(number, ignore_backlog=override)
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
