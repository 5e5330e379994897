"""/nodes: the worker nodes the store knows of (what `duetime nodes` shows): live, dead or
stopped, their queues, duties, the jobs they hold right now (the job ids for admins only:
nodes run every tenant's jobs) and how far each one's clock is off the database's (marked past
a second)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from duetime.core.clock import CLOCK_OFFSET_WARNING
from duetime.server.dashboard.render import render
from duetime.server.dashboard.session import to_login, user
from duetime.server.state import duetime_app

DEAD_AFTER = 30.0  # seconds of silence after which a node is dead (as `duetime nodes`)
CLOCK_WARNING = CLOCK_OFFSET_WARNING  # seconds a node's clock may be off the database's

router = APIRouter(include_in_schema=False)


@router.get("/nodes")
def nodes_page(request: Request, show_all: Annotated[bool, Query(alias="all")] = False) -> Response:
    who = user(request)
    if who is None:
        return to_login(request)
    app = duetime_app(request)
    nodes = app.store.list_nodes()  # first: opening the store reads the database's clock
    now = app.clock.now()
    rows = [
        {
            "n": n,
            "state": n.state(now, DEAD_AFTER),
            "ago": (now - n.last_seen_at).total_seconds(),
            "skewed": n.clock_skewed(CLOCK_WARNING),
        }
        for n in nodes
    ]
    stopped = sum(1 for row in rows if row["state"] == "stopped")
    if not show_all:
        rows = [row for row in rows if row["state"] != "stopped"]
    return render(
        request,
        who,
        "nodes.html",
        {
            "rows": rows,
            "show_all": show_all,
            "stopped": stopped,
            "dead_after": DEAD_AFTER,
            "clock_warning": CLOCK_WARNING,
        },
        nav="nodes",
    )
