"""The dashboard: server-rendered pages over the same App as the API.

Pages identify the user by the session cookie (a random session id the database knows by its
hash, HTTP-only and SameSite=Strict) or a bearer token; every form that changes something is a
POST carrying the session's CSRF token. Illegal moves come back as a readable message on the
page, never as a 500.

This package: filters (Jinja filters), session (the logged-in user and the dashboard's
cookies), render (templates and error pages), forms (CSRF and role guard, typed fields),
and one module of routes per area: login, overview, jobs, schedules, dead_letters, nodes,
queues.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.staticfiles import StaticFiles

from duetime.server.dashboard import (
    dead_letters,
    jobs,
    limits,
    login,
    nodes,
    overview,
    queues,
    schedules,
)

STATIC = Path(__file__).parent.parent / "static"

router = APIRouter(include_in_schema=False)
router.include_router(login.router)
router.include_router(overview.router)
router.include_router(jobs.router)
router.include_router(schedules.router)
router.include_router(dead_letters.router)
router.include_router(nodes.router)
router.include_router(queues.router)
router.include_router(limits.router)


def mount_static(api: FastAPI) -> None:
    """Serve the dashboard's static files (one stylesheet, one script) at /static."""
    api.mount("/static", StaticFiles(directory=STATIC), name="static")
