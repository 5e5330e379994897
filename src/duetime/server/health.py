"""/healthz (the process answers) and /readyz (the store is reachable and its schema current)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from duetime.core.errors import DuetimeError, StoreUnavailable
from duetime.server.state import duetime_app
from duetime.version import __version__

router = APIRouter(tags=["health"])


class Health(BaseModel):
    status: str
    version: str
    detail: str | None = None


@router.get("/healthz", response_model=Health)
def healthz() -> Health:
    """The process is up (it says nothing about the database)."""
    return Health(status="ok", version=__version__)


@router.get(
    "/readyz",
    response_model=Health,
    responses={503: {"model": Health, "description": "store unreachable or schema not current"}},
)
def readyz(request: Request) -> Health | JSONResponse:
    """The store answers and its schema is the one this version knows."""
    app = duetime_app(request)
    try:
        app.store.check_schema()
    except Exception as exc:
        if not isinstance(exc, (StoreUnavailable, DuetimeError)):
            raise
        body = Health(status="unavailable", version=__version__, detail=str(exc).splitlines()[0])
        return JSONResponse(body.model_dump(), 503, headers={"Retry-After": "5"})
    return Health(status="ok", version=__version__)
