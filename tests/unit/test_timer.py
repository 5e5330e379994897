"""The timer's near future, and how wake-ups feed it (a manual clock; no store, no sleeping)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from duetime.core.clock import ManualClock
from duetime.core.models import Wakeup
from duetime.runtime.service import BlockingCalls
from duetime.runtime.timer import HORIZON, LOOKBACK, DueTimes, Timer


def test_due_times_are_kept_once_each_and_given_in_order() -> None:
    clock = ManualClock()
    t0 = clock.now()
    due = DueTimes()
    for offset in (5, 1, 3, 1, 5):
        due.add(t0 + timedelta(seconds=offset))
    assert len(due) == 3 and due.next() == t0 + timedelta(seconds=1)
    assert due.pop_due(t0) == 0
    assert due.pop_due(t0 + timedelta(seconds=3)) == 2
    assert due.next() == t0 + timedelta(seconds=5)
    due.add(t0 + timedelta(seconds=1))  # forgotten once popped: can come back
    assert due.next() == t0 + timedelta(seconds=1)
    due.replace([t0 + timedelta(seconds=9), t0 + timedelta(seconds=7)])
    assert due.next() == t0 + timedelta(seconds=7) and len(due) == 2
    assert due.pop_due(t0 + timedelta(days=1)) == 2 and due.next() is None


class NearFutureStore:
    """next_due answers from a list of instants, as the store would."""

    def __init__(self, instants: list[datetime]) -> None:
        self.instants = instants
        self.asked: list[tuple[datetime, datetime, Sequence[str] | None]] = []

    def next_due(
        self, now: datetime, until: datetime, queues: Sequence[str] | None, limit: int
    ) -> list[datetime]:
        self.asked.append((now, until, queues))
        return sorted(i for i in self.instants if now < i <= until)[:limit]


def make_timer(store: Any, clock: ManualClock, queues: list[str] | None) -> tuple[Timer, list[int]]:
    woken: list[int] = []
    timer = Timer(store, clock, BlockingCalls(1), queues=queues, wake=lambda: woken.append(1))
    return timer, woken


def test_a_refill_reads_the_horizon_and_wakes_the_slots_when_the_next_instant_changes() -> None:
    clock = ManualClock()
    t0 = clock.now()
    store = NearFutureStore([t0 + timedelta(seconds=2), t0 + HORIZON + timedelta(seconds=1)])
    timer, woken = make_timer(store, clock, None)
    asyncio.run(timer.run_once())
    assert store.asked == [(t0 - LOOKBACK, t0 + HORIZON, None)]
    assert timer.due.next() == t0 + timedelta(seconds=2) and len(timer.due) == 1
    assert woken == [1]
    asyncio.run(timer.run_once())  # the same near future: the slots need not look again
    assert woken == [1]


def test_wake_ups_add_their_instants_for_the_queues_served() -> None:
    clock = ManualClock()
    t0 = clock.now()
    timer, woken = make_timer(NearFutureStore([]), clock, ["mail"])
    soon = t0 + timedelta(seconds=3)
    timer.heard([Wakeup("mail", soon), Wakeup("reports", t0 + timedelta(seconds=1))])
    assert timer.due.next() == soon and len(timer.due) == 1  # not the other queue's
    timer.heard([Wakeup("", t0 + timedelta(seconds=2))])  # every queue
    assert timer.due.next() == t0 + timedelta(seconds=2)
    timer.heard([Wakeup("mail", t0 + HORIZON + timedelta(seconds=5))])  # too far: a refill's
    assert len(timer.due) == 2
    assert len(woken) == 2  # the slots look when the next instant moves earlier
    timer.heard([Wakeup("mail", t0)])  # due now
    assert len(woken) == 3


def test_a_wake_up_without_details_asks_for_a_refill_now() -> None:
    clock = ManualClock()
    timer, woken = make_timer(NearFutureStore([clock.now()]), clock, None)
    timer.heard([Wakeup()])
    assert timer._woken  # the timer's next pass comes at once
    assert woken == []  # the refill decides whether the slots need to look
    asyncio.run(timer.run_once())
    assert woken == [1]  # it found work due now
