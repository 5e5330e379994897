"""The one kind of cache the SQL store keeps: a copy of rows read from the database, trusted
for a few seconds (the flow controls, the outbox-mode queues' names, the limits' names), on a
monotonic clock the front injects (SQLStore(monotonic=...)), so a test moves it by hand."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class TtlCache(Generic[T]):
    """A value trusted for `seconds` after the instant its read began (`now()`, monotonic
    seconds). Not locked: two threads may both read the database and both store their copy,
    each a whole value."""

    def __init__(self, seconds: float, now: Callable[[], float]) -> None:
        self.seconds = seconds
        self.now = now
        self._entry: tuple[float, T] | None = None

    def fresh(self) -> T | None:
        """The value, when it was read less than `seconds` ago; else None."""
        entry = self._entry
        if entry is not None and self.now() - entry[0] < self.seconds:
            return entry[1]
        return None

    def put(self, value: T, read_at: float) -> T:
        """Keep `value`, read from the instant `read_at` (taken with now() before the read)."""
        self._entry = (read_at, value)
        return value

    def clear(self) -> None:
        """Forget the value: the next fresh() is None (after this process changed the rows)."""
        self._entry = None
