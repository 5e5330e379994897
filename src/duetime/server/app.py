"""The ASGI application: error mapping, body limits, and the routers put together."""

from __future__ import annotations

import logging

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from duetime.client import App
from duetime.core.errors import (
    BacklogFull,
    DuetimeError,
    IdempotencyConflict,
    IllegalTransition,
    InvalidRequest,
    JobNotFound,
    PayloadTooLarge,
    ScheduleExists,
    ScheduleNotFound,
    SchemaError,
    StoreUnavailable,
)
from duetime.server import (
    api_flow,
    api_jobs,
    api_limits,
    api_schedules,
    api_stats,
    dashboard,
    health,
    metrics,
    swagger,
)
from duetime.server.state import ServerSettings, ServerState
from duetime.version import __version__

log = logging.getLogger("duetime.server")

RETRY_AFTER_SECONDS = 5


class BodyLimit:
    """Refuse request bodies over a size limit with 413, before the route reads them."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._refuse(send)
                return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise HTTPException(413, self.message)
            return message

        await self.app(scope, counted, send)

    @property
    def message(self) -> str:
        return f"request body is over the limit of {self.max_bytes} bytes"

    async def _refuse(self, send: Send) -> None:
        response = JSONResponse({"detail": self.message}, 413)
        await response({"type": "http"}, _no_body, send)


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


def _error(status: int, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"detail": message}, status, headers=headers or None)


# the words duetime's messages use for a request field, when they differ from its name
FIELD_WORDS = {
    "timezone": ("time zone",),
    "every_seconds": ("interval",),
    "catchup_window_seconds": ("catch-up window", "catchup window"),
    "due_at": ("due time",),
    "name": ("schedule name",),
    "task": ("task name", "schedule task"),
    "Idempotency-Key": ("idempotency key",),
    "business_key": ("business key",),
    "retry_budget": ("retry budget",),
    "breaker_threshold": ("breaker threshold",),
    "breaker_cooldown": ("breaker cool-down",),
}


def invalid(message: str, fields: tuple[str, ...] = ()) -> JSONResponse:
    """422 in FastAPI's field-level shape. duetime's messages start with the field they are
    about, in plain words ("deadline ...", "time zone ..."), so the field is found from that."""

    def words(name: str) -> set[str]:
        return {
            name,
            name.removesuffix("_at"),
            name.removesuffix("_seconds"),
            *FIELD_WORDS.get(name, ()),
        }

    # the longest matching word wins: "schedule task" is about task, not name
    matches = [(len(w), f) for f in fields for w in words(f) if message.startswith(w)]
    field = max(matches)[1] if matches else None
    loc: list[str] = ["body", field] if field else ["body"]
    return JSONResponse({"detail": [{"loc": loc, "msg": message, "type": "value_error"}]}, 422)


def create_app(app: App, settings: ServerSettings | None = None) -> FastAPI:
    """The duetime server for one App (its store, clock and known tasks)."""
    settings = settings or ServerSettings()
    api = FastAPI(
        title="duetime",
        version=__version__,
        summary="A durable, distributed job scheduler: jobs, schedules, dead letters, stats.",
        docs_url=None,  # /docs is swagger.router: Swagger UI from the package, not a CDN
        redoc_url=None,
    )
    api.state.duetime = ServerState(app, settings)

    @api.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        if isinstance(exc, StoreUnavailable):
            log.warning("store unavailable for %s %s: %s", request.method, request.url.path, exc)
            return _error(
                503,
                "the database is unavailable right now, so nothing was committed; retry later "
                "(with the same Idempotency-Key, a retried enqueue cannot create a duplicate)",
                **{"Retry-After": str(RETRY_AFTER_SECONDS)},
            )
        log.exception("unexpected error in %s %s", request.method, request.url.path)
        return _error(500, "internal error; the server log has the details")

    @api.exception_handler(DuetimeError)
    async def known(request: Request, exc: DuetimeError) -> JSONResponse:
        if isinstance(exc, StoreUnavailable):
            return await unexpected(request, exc)
        if isinstance(exc, PayloadTooLarge):
            return _error(413, str(exc))
        if isinstance(exc, BacklogFull):  # admission control: nothing stored, come back later
            return _error(429, str(exc), **{"Retry-After": str(exc.retry_after)})
        if isinstance(exc, JobNotFound | ScheduleNotFound):
            return _error(404, str(exc))
        if isinstance(exc, IdempotencyConflict | IllegalTransition | ScheduleExists):
            return _error(409, str(exc))
        if isinstance(exc, InvalidRequest):
            return invalid(str(exc), getattr(request.state, "fields", ()))
        if isinstance(exc, SchemaError):
            return _error(503, str(exc), **{"Retry-After": str(RETRY_AFTER_SECONDS)})
        return _error(400, str(exc))

    @api.exception_handler(RequestValidationError)
    async def validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        detail = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        return JSONResponse({"detail": detail}, 422)

    @api.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and request.url.path.startswith("/v1"):
            # a body FastAPI could not parse (too deeply nested JSON, invalid UTF-8): invalid
            # input like any other, so 422 in the same shape
            msg = "the body is not JSON this API can read (check its encoding and nesting)"
            return JSONResponse(
                {"detail": [{"loc": ["body"], "msg": msg, "type": "json_invalid"}]}, 422
            )
        return _error(exc.status_code, str(exc.detail), **(exc.headers or {}))

    api.include_router(health.router)
    api.include_router(api_jobs.router)
    api.include_router(api_schedules.router)
    api.include_router(api_stats.router)
    api.include_router(api_flow.router)
    api.include_router(api_limits.router)
    api.include_router(metrics.router)
    api.include_router(dashboard.router)
    api.include_router(swagger.router)
    dashboard.mount_static(api)
    api.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    return api
