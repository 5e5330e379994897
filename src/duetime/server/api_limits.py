"""/v1/limits: limits per dependency (docs/flow-control.md), admin tokens only: a limit holds
every tenant's jobs that carry its key."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Path, Request, Response
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo
from pydantic_core import PydanticCustomError

from duetime.core.limits import (
    KEY_PATTERN,
    MAX_COUNT,
    MAX_RATE_COUNT,
    MIN_RATE_COUNT,
    OFF,
)
from duetime.server.auth import Principal, admin
from duetime.server.paths import named
from duetime.server.schemas import AUTH, LimitOut, Problem
from duetime.server.state import duetime_app

router = APIRouter(prefix="/v1")

NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": Problem, "description": "no limit with this key"}
}
Key = Annotated[
    str, Path(pattern=f"^{KEY_PATTERN.pattern}$", description="the limit key, e.g. payments-api")
]
FIELDS = ("rate", "burst", "concurrency", "retry_budget", "breaker_threshold", "breaker_cooldown")


def _number_or_off(kind: str, text_too: bool = False) -> Any:
    """A setting's JSON type: a number (a boolean is not one) or "off"; with `text_too`, any
    text (a duration such as "30s"). The bounds are the core's (core/limits.py), checked by
    App.set_limit as for the CLI's and the dashboard's values."""

    def check(value: object, info: ValidationInfo) -> object:
        if value is None or (isinstance(value, str) and (text_too or value == OFF)):
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise PydanticCustomError(
                "value_error",
                '{field} must be {kind} or "off", not {value}',
                {"field": FIELD_WORDS[str(info.field_name)], "kind": kind, "value": repr(value)},
            )
        return value

    return BeforeValidator(check)


FIELD_WORDS = {
    "burst": "burst",
    "concurrency": "concurrency",
    "retry_budget": "retry budget",
    "breaker_threshold": "breaker threshold",
    "breaker_cooldown": "breaker cool-down",
}
Count = Annotated[int | Literal["off"] | None, _number_or_off("a whole number")]
Fraction = Annotated[float | Literal["off"] | None, _number_or_off("a number")]
Cooldown = Annotated[float | str | None, _number_or_off("seconds or a duration", text_too=True)]


class LimitIn(BaseModel):
    """Each field given replaces that setting ("off" switches it off); fields left out stay."""

    model_config = ConfigDict(extra="forbid")

    rate: str | None = Field(
        default=None,
        max_length=40,
        examples=["5/s"],
        description=f"N/s, N/m or N/h, N from {MIN_RATE_COUNT:g} to {MAX_RATE_COUNT}; off",
    )
    burst: Count = Field(default=None, examples=[10], description=f"1 to {MAX_COUNT}; off")
    concurrency: Count = Field(default=None, examples=[3], description=f"1 to {MAX_COUNT}; off")
    retry_budget: Fraction = Field(
        default=None, examples=[0.2], description="above 0, at most 1; off"
    )
    breaker_threshold: Fraction = Field(
        default=None, examples=[0.5], description="above 0, at most 1; off"
    )
    breaker_cooldown: Cooldown = Field(
        default=None,
        examples=["10s"],
        description="seconds or a duration (30s, 2m), 1 s to 1 day; off: the default of 30 s",
    )


@router.get("/limits", response_model=list[LimitOut], responses=AUTH, tags=["limits"])
def list_limits(request: Request, who: Annotated[Principal, Depends(admin)]) -> list[Any]:
    """Every limit key: its settings, running and waiting jobs, bucket tokens and pause."""
    app = duetime_app(request)
    now = app.clock.now()
    return [s.to_json(now) for s in app.limits()]


@router.get(
    named("/limits/{key}"),
    response_model=LimitOut,
    responses={**AUTH, **NOT_FOUND},
    tags=["limits"],
)
def get_limit(key: Key, request: Request, who: Annotated[Principal, Depends(admin)]) -> Any:
    """One limit key."""
    app = duetime_app(request)
    for found in app.limits():
        if found.settings.key == key:
            return found.to_json(app.clock.now())
    raise HTTPException(404, f"no limit {key!r}; GET /v1/limits lists the limits")


@router.put(named("/limits/{key}"), response_model=LimitOut, responses=AUTH, tags=["limits"])
def put_limit(
    key: Key, body: LimitIn, request: Request, who: Annotated[Principal, Depends(admin)]
) -> Any:
    """Create the key's limit or change the settings given (as `duetime limits set`)."""
    request.state.fields = FIELDS
    app = duetime_app(request)
    status = app.set_limit(key, **body.model_dump(exclude_unset=True))
    return status.to_json(app.clock.now())


@router.delete(
    named("/limits/{key}"),
    status_code=204,
    response_class=Response,
    responses={**AUTH, **NOT_FOUND},
    tags=["limits"],
)
def delete_limit(key: Key, request: Request, who: Annotated[Principal, Depends(admin)]) -> Response:
    """Delete the key's limit: its jobs then start unlimited."""
    app = duetime_app(request)
    if not app.store.delete_limit(key):
        raise HTTPException(404, f"no limit {key!r}; GET /v1/limits lists the limits")
    return Response(status_code=204)
