"""A node's timer: the near future of due instants, so that claims happen on the due instant.

DueTimes is the pure part: the instants at which jobs fall due in the next few seconds. The
Timer service keeps it filled from the store (Store.next_due, every `refill` seconds and when a
wake-up says something changed) and adds the instants wake-ups announce. The slots
(runtime/slots.py) sleep until the next instant, then claim: the store decides what is due,
so nothing starts before its due time, a cancel or a reschedule that lands first wins, and a
node that dies loses nothing (its timer was only a copy of what the store holds).

Where the slots' claims keep a floor (core/claim_floor.py, PostgreSQL), the refills read from
the floor, not from a day back, and every FLOOR_CHECK_EVERY the timer looks below the floor
(Store.earliest_due) for work no wake-up told of, which lowers the floor: both off the claims'
path, where a walk from a day back would step over every job claimed since a transaction
held open somewhere began (docs/performance.md, "The floor everywhere").
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta

from duetime.core.claim_floor import FLOOR_CHECK_EVERY
from duetime.core.clock import Clock
from duetime.core.models import Wakeup
from duetime.runtime.fairness import ClaimFairness
from duetime.runtime.service import BlockingCalls, IntervalService
from duetime.store.base import Store

HORIZON = timedelta(seconds=10)  # how far ahead the timer looks
LOOKBACK = timedelta(days=1)  # and how far back (work already due)
MAX_INSTANTS = 2000  # instants read per refill
MIN_REFILL = 0.02  # seconds between refills asked for by wake-ups


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
    new work is due now, or the next instant changed. With the slots' `fairness` (whose
    floor their claims walk from), it reads from the floor and looks below it every
    `look_every` (by its clock) for a job of the slots' queues and `tasks` due there."""

    name = "timer"

    def __init__(
        self,
        store: Store,
        clock: Clock,
        calls: BlockingCalls,
        *,
        queues: Sequence[str] | None,
        wake: Callable[[], None],
        due: DueTimes | None = None,
        refill: float = 1.0,
        fairness: ClaimFairness | None = None,
        tasks: Callable[[], Sequence[str]] | None = None,
        look_every: timedelta = FLOOR_CHECK_EVERY,
    ) -> None:
        super().__init__(refill)
        self.store = store
        self.clock = clock
        self.calls = calls
        self.queues = list(queues) if queues else None
        self.slots_wake = wake
        self.due = due if due is not None else DueTimes()  # shared with the slots that read it
        self._last_refill = 0.0  # time.monotonic() of the last refill
        self._deferred = False  # a refill is scheduled
        self.fairness = fairness  # the slots' claim policy, whose floor their claims walk from
        self.tasks = tasks  # the slots' tasks: what their claims take (set as they start)
        self.look_every = look_every
        self._next_look: datetime | None = None  # the next look below the floor, by the clock

    async def run_once(self) -> None:
        now = self.clock.now()
        self._last_refill = time.monotonic()
        floor = self.fairness.floor_now() if self.fairness is not None else None
        # from a while back: work already due (a wake-up's or a poll's to claim) counts too;
        # with a floor, from there (below it: the looks)
        since = now - LOOKBACK if floor is None else max(floor, now - LOOKBACK)
        instants = await self.calls(
            functools.partial(self.store.next_due, since, now + HORIZON, self.queues, MAX_INSTANTS)
        )
        before = self.due.next()
        self.due.replace(instants)
        first = self.due.next()
        if first is not None and (first != before or first <= self.clock.now()):
            self.slots_wake()  # work is due now, or the next instant moved
        if self.fairness is not None and floor is not None:
            if self._next_look is None or now >= self._next_look:
                await self._look_below(self.fairness, floor, now)

    async def _look_below(self, fairness: ClaimFairness, floor: datetime, now: datetime) -> None:
        """Look for a job the slots' claims may take due at or before their `floor` (work no
        wake-up told of); one found lowers the floor to its instant and wakes the slots."""
        self._next_look = now + self.look_every
        tasks = self.tasks() if self.tasks is not None else None
        found = await self.calls(
            functools.partial(self.store.earliest_due, floor, self.queues, tasks)
        )
        if found is not None:
            fairness.heard([Wakeup(due_at=found)])  # as a wake-up naming its instant
            self.slots_wake()

    def heard(self, wakeups: Sequence[Wakeup]) -> None:
        """Wake-ups from the store: add the instants they name (and wake the slots when one is
        due now or comes before what they wait for); a wake-up that says only that something
        changed asks for a refill, at most every MIN_REFILL seconds (SQLite says so on every
        commit, this worker's own included)."""
        now = self.clock.now()
        wake_slots = refill = False
        for wakeup in wakeups:
            if wakeup.due_at is None:
                refill = True
            elif wakeup.queue in ("", None) or self.queues is None or wakeup.queue in self.queues:
                if wakeup.due_at <= now:
                    wake_slots = True
                elif wakeup.due_at <= now + HORIZON:
                    before = self.due.next()
                    self.due.add(wakeup.due_at)
                    wake_slots = wake_slots or self.due.next() != before
        if refill:
            self._refill_soon()
        if wake_slots:
            self.slots_wake()

    def _refill_soon(self) -> None:
        since = time.monotonic() - self._last_refill
        if since >= MIN_REFILL:
            self.wake()  # the next pass now
        elif not self._deferred:
            self._deferred = True
            asyncio.get_running_loop().call_later(MIN_REFILL - since, self._refill_now)

    def _refill_now(self) -> None:
        self._deferred = False
        self.wake()
