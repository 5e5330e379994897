"""/: the overview page, figures by status and queue, lag and throughput."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from duetime import operators
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
    stats = operators.stats(state.app, who.tenant_filter)
    by_status = stats.by_status()
    windows = {w.minutes: w for w in stats.windows}
    queues = sorted(stats.by_queue().items())
    return render(
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
