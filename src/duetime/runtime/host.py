"""Host: what the runtime takes of the app whose jobs it runs (duetime.App is one).

The store, the clock, the task registry (name -> Task: the handlers, their defaults and
reconcile), the bound of a result's JSON (result_max_bytes), the priority share each claim
keeps for the lower classes (read at every claim: it may change while a worker runs) and
sync_schedules (the schedules the app declares in code, written when a worker starts
planning). The runtime needs nothing else of the App and
never imports duetime.client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from duetime.core.clock import Clock
from duetime.store.base import Store
from duetime.tasks import AnyTask


class Host(Protocol):
    """The app a worker runs: its store, clock, registered tasks, priority share and declared
    schedules."""

    @property
    def store(self) -> Store: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def tasks(self) -> Mapping[str, AnyTask]: ...

    @property
    def priority_share(self) -> float: ...

    @property
    def result_max_bytes(self) -> int: ...

    def sync_schedules(self) -> dict[str, str]: ...
