"""What an operator action acts on: anything with a store and a clock (such as duetime.App)."""

from __future__ import annotations

from typing import Protocol

from duetime.core.clock import Clock
from duetime.store.base import Store


class Backend(Protocol):
    """What an operator action acts on: a store and the clock that says `now` (an App)."""

    @property
    def store(self) -> Store: ...

    @property
    def clock(self) -> Clock: ...
