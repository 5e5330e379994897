"""/dead-letters: dead jobs with their last error, and replaying them (selected or matching)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from duetime.admin.replay import dead_job_ids, replay_many
from duetime.core.errors import DuetimeError, InvalidRequest, StoreUnavailable
from duetime.core.models import Attempt, Job, JobFilter, page_of
from duetime.core.states import JobStatus
from duetime.core.tokens import Role
from duetime.server.dashboard.forms import guard, opt
from duetime.server.dashboard.render import PAGE_SIZE, render
from duetime.server.dashboard.session import go_back, to_login, user
from duetime.server.schemas import MAX_REPLAY_SECONDS, parse_id
from duetime.server.state import duetime_app

BULK_LIMIT = 1000  # dead jobs one "replay all matching" submits; run it again for more

router = APIRouter(include_in_schema=False)


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
    who = user(request)
    if who is None:
        return to_login(request)
    store = duetime_app(request).store
    form = {
        "task": opt(task),
        "queue": opt(queue),
        "tenant": opt(tenant) if who.sees_all else None,
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
    return render(
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
    ignore_backlog: Annotated[str | None, Form()] = None,
) -> Response:
    who = user(request)
    refused = guard(request, who, csrf_token, Role.ADMIN)
    if refused is not None or who is None:
        return refused or to_login(request)
    app = duetime_app(request)
    back = "/dead-letters"
    try:
        rate = _rate(per_second)
        if scope == "matching":
            chosen = dead_job_ids(
                app,
                opt(tenant) if who.sees_all else who.tenant,
                task=opt(task),
                queue=opt(queue),
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
        report = replay_many(
            app,
            chosen,
            tenant=who.tenant_filter,
            per_second=rate,
            ignore_backlog=ignore_backlog is not None,  # a checkbox: sent only when ticked
        )
    except DuetimeError as exc:
        if isinstance(exc, StoreUnavailable):
            raise
        return go_back(request, back, back, "error", str(exc))
    return render(
        request,
        who,
        "replay_report.html",
        {"report": report, "scope": scope, "per_second": rate, "bulk_limit": BULK_LIMIT},
        nav="dead",
    )


def _rate(value: str | None) -> float | None:
    text = opt(value)
    if text is None:
        return None
    try:
        rate = float(text)
    except ValueError:
        raise InvalidRequest(f"pace {text!r} is not a number of jobs per second") from None
    if not rate > 0 or rate == float("inf"):
        raise InvalidRequest("pace must be more than 0 jobs per second (or left empty)")
    return rate
