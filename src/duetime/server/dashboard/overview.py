"""/: the overview page, figures by status and queue, lag and throughput, each queue's
dispatch mode and (admins) outbox backlog."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from duetime.admin import figures as admin_figures
from duetime.server.dashboard.render import render
from duetime.server.dashboard.session import to_login, user
from duetime.server.state import server_state

router = APIRouter(include_in_schema=False)


@router.get("/")
def overview(request: Request) -> Response:
    who = user(request)
    if who is None:
        return to_login(request)
    state = server_state(request)
    stats = admin_figures.stats(state.app, who.tenant_filter)
    by_status = stats.by_status()
    windows = {w.minutes: w for w in stats.windows}
    queues = sorted(stats.by_queue().items())
    outbox = state.app.outbox_status()
    backlog = {q.queue: q for q in outbox.queues}
    modes = {q.queue: q for q in state.app.store.queue_settings()}
    # the outbox's figures are every tenant's: a tenant's token sees its own queues' modes only
    shown = {*modes, *backlog, *(q for q, _ in queues)} if who.sees_all else {q for q, _ in queues}
    dispatch = []
    for name in sorted(shown):
        waiting = backlog.get(name)
        oldest = waiting.oldest_created_at if waiting is not None else None
        dispatch.append(
            {
                "queue": name,
                "mode": str(modes[name].dispatch) if name in modes else "direct",
                "backlog": waiting.backlog if waiting is not None else 0,
                "oldest": (outbox.now - oldest).total_seconds() if oldest is not None else None,
            }
        )
    return render(
        request,
        who,
        "overview.html",
        {
            "stats": stats,
            "stats_json": stats.to_json(),
            "by_status": by_status,
            "queues": queues,
            "dispatch": dispatch,
            "outbox": outbox,
            "w5": windows.get(5),
            "w60": windows.get(60),
            "refresh_seconds": state.settings.refresh_seconds,
        },
        nav="overview",
    )
