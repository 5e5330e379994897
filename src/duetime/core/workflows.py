"""Chains and groups (docs/workflows.md, "Chains and groups"): the steps a user describes, and
the links between them that Store.enqueue_graph makes, as positions in one call. Pure: the
client (client/workflows.py) builds the jobs, the store enqueues them in one transaction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from duetime.core.errors import InvalidRequest


@dataclass(frozen=True)
class Step:
    """One job of a chain or group: its task, its args and enqueue's options for it."""

    task: str
    args: Mapping[str, Any] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


def step(
    task: str,
    args: Mapping[str, Any] | None = None,
    *,
    at: datetime | str | None = None,
    delay: float | timedelta | str | None = None,
    key: str | None = None,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    deadline: datetime | str | None = None,
    business_key: str | None = None,
    on_parent_failure: str | None = None,
) -> Step:
    """A step of app.chain() or app.group(): the job enqueue(task, args, ...) would make. A
    step that waits for another (a chain's second and later, a group's callback) counts its
    `delay` from its release, takes `on_parent_failure` ("cancel", the default, or "run"),
    and takes no `key`."""
    given = {
        "at": at,
        "delay": delay,
        "key": key,
        "queue": queue,
        "priority": priority,
        "max_attempts": max_attempts,
        "deadline": deadline,
        "business_key": business_key,
        "on_parent_failure": on_parent_failure,
    }
    return Step(task, args, {k: v for k, v in given.items() if v is not None})


def check_steps(steps: Sequence[object], what: str) -> list[Step]:
    """The steps given to chain() or group(), checked: Step objects (made by duetime.step)."""
    for s in steps:
        if not isinstance(s, Step):
            raise InvalidRequest(
                f"{what} takes steps made by duetime.step(task, args, ...), not {s!r}"
            )
    return list(steps)  # type: ignore[arg-type]


def chain_links(count: int) -> list[list[int]]:
    """Each step of a chain of `count` waits for the one before it."""
    return [[i - 1] if i else [] for i in range(count)]


def group_links(count: int, callback: bool) -> list[list[int]]:
    """The `count` members of a group wait for nothing of theirs; its callback (last) waits
    for every member."""
    links: list[list[int]] = [[] for _ in range(count)]
    if callback:
        links.append(list(range(count)))
    return links
