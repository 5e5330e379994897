"""A node's timer: the near future of due instants, so that claims happen on the due instant.

DueTimes is the pure part: the instants at which jobs fall due in the next few seconds. The
Timer service keeps it filled from the store (Store.next_due, every `refill` seconds and when a
wake-up says something changed) and adds the instants wake-ups announce. The slots
(runtime/worker.py) sleep until the next instant, then claim: the store decides what is due,
so nothing starts before its due time, a cancel or a reschedule that lands first wins, and a
node that dies loses nothing (its timer was only a copy of what the store holds).
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta

from duetime.core.clock import Clock
from duetime.core.models import Wakeup
from duetime.runtime.service import BlockingCalls, IntervalService
from duetime.store.base import Store

HORIZON = timedelta(seconds=10)  # how far ahead the timer looks
MAX_INSTANTS = 2000  # instants read per refill


class DueTimes:
    """The instants at which known jobs fall due, earliest first, each once."""

    def __init__(self) -> None:
        self._heap: list[datetime] = []
        self._known: set[datetime] = set()

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, at: datetime) -> None:
        if at not in self._known:
            self._known.add(at)
            heapq.heappush(self._heap, at)

    def replace(self, instants: Iterable[datetime]) -> None:
        """Forget what was known; know these instead (a refill from the store)."""
        self._known = set(instants)
        self._heap = sorted(self._known)

    def next(self) -> datetime | None:
        return self._heap[0] if self._heap else None

    def pop_due(self, now: datetime) -> int:
        """Forget the instants at or before `now` (claims have taken their jobs); how many."""
        count = 0
        while self._heap and self._heap[0] <= now:
            self._known.discard(heapq.heappop(self._heap))
            count += 1
        return count


class Timer(IntervalService):
    """Keeps `due` filled with the near future (refilled every `refill` seconds, and soon
    after a wake-up that carries no instant) and calls `wake` when the slots should look:
    new work is due now, or the next instant changed."""

    name = "timer"

    def __init__(
        self,
        store: Store,
        clock: Clock,
        calls: BlockingCalls,
        *,
        queues: Sequence[str] | None,
        wake: Callable[[], None],
        refill: float = 1.0,
    ) -> None:
        super().__init__(refill)
        self.store = store
        self.clock = clock
        self.calls = calls
        self.queues = list(queues) if queues else None
        self.slots_wake = wake
        self.due = DueTimes()

    async def run_once(self) -> None:
        now = self.clock.now()
        instants = await self.calls(
            functools.partial(self.store.next_due, now, now + HORIZON, self.queues, MAX_INSTANTS)
        )
        before = self.due.next()
        self.due.replace(instants)
        if self.due.next() != before:
            self.slots_wake()

    def heard(self, wakeups: Sequence[Wakeup]) -> None:
        """Wake-ups from the store: add the instants they name; refill soon when one says only
        that something changed; wake the slots (the work may be due now)."""
        refill = False
        for wakeup in wakeups:
            if wakeup.due_at is None:
                refill = True
            elif wakeup.queue in ("", None) or self.queues is None or wakeup.queue in self.queues:
                if wakeup.due_at <= self.clock.now() + HORIZON:
                    self.due.add(wakeup.due_at)
        if refill:
            self.wake()  # the next pass now
        self.slots_wake()
