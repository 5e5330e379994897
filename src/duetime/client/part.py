"""AppPart: what each group of App's methods (client/jobs.py, schedules.py, queues.py...) reads
of the App, and nothing more: its tenant, clock, store, task registry and payload limit.

The groups are mixed into App (client/app.py), which sets these; they are declared here only
for the type checker. A group calls no method of another group: what two groups share is a
function over an `AppLike` (client/lookup.py, client/schedules.py, duetime.tasks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from duetime.core.clock import Clock
from duetime.store.base import Store
from duetime.tasks import AnyTask


class AppLike(Protocol):
    """An App seen by the functions its groups share."""

    tenant: str
    clock: Clock
    tasks: dict[str, AnyTask]
    max_payload_bytes: int

    @property
    def store(self) -> Store: ...


class AppPart:
    """The base of each group of App's methods: the App's attributes those methods read."""

    if TYPE_CHECKING:
        tenant: str
        clock: Clock
        tasks: dict[str, AnyTask]
        max_payload_bytes: int

        @property
        def store(self) -> Store: ...
