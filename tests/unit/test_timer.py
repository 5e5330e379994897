"""The timer's near future, and how wake-ups feed it (a manual clock; no store, no sleeping)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from duetime.core.claim_floor import ClaimFloor
from duetime.core.clock import ManualClock
from duetime.core.models import Wakeup
from duetime.runtime.fairness import ClaimFairness
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


class BelowFloorStore(NearFutureStore):
    """next_due as above, and earliest_due from jobs (due instant, queue, task)."""

    def __init__(self, jobs: list[tuple[datetime, str, str]]) -> None:
        super().__init__([at for at, _, _ in jobs])
        self.jobs = jobs
        self.looked: list[tuple[datetime, Sequence[str] | None, Sequence[str] | None]] = []

    def earliest_due(
        self, until: datetime, queues: Sequence[str] | None, tasks: Sequence[str] | None
    ) -> datetime | None:
        self.looked.append((until, queues, tasks))
        found = [
            at
            for at, queue, task in self.jobs
            if at <= until
            and (queues is None or queue in queues)
            and (tasks is None or task in tasks)
        ]
        return min(found, default=None)


def floored_timer(
    store: BelowFloorStore, clock: ManualClock, floor_at: datetime | None
) -> tuple[Timer, ClaimFairness, list[int]]:
    """A timer beside slots whose claims' floor stands at `floor_at` (a plain claim at
    floor_at + MARGIN that took every due job set it), claiming task "t" of queue "q"."""
    fairness = ClaimFairness(floor=ClaimFloor(margin=MARGIN))
    if floor_at is not None:
        assert fairness.floor is not None
        fairness.floor.start(floor_at + MARGIN)
        fairness.floor.claimed(10, 0, plain=True)
    woken: list[int] = []
    timer = Timer(
        store,
        clock,
        BlockingCalls(1),
        queues=["q"],
        wake=lambda: woken.append(1),
        fairness=fairness,
        tasks=lambda: ["t"],
        look_every=timedelta(seconds=5),
    )
    return timer, fairness, woken


MARGIN = timedelta(seconds=0.25)


def test_with_a_floor_the_refills_read_from_it_and_look_below_it_now_and_then() -> None:
    """A walk from a day back steps over every job claimed since a transaction held open
    began: with the claims' floor, the refill reads from there, and below it the timer looks
    every few seconds (not at every refill) for a job of its slots' queues and tasks."""
    clock = ManualClock()
    t0 = clock.now()
    floor_at = t0 - timedelta(seconds=1)
    store = BelowFloorStore([])
    timer, fairness, woken = floored_timer(store, clock, floor_at)
    asyncio.run(timer.run_once())
    assert store.asked == [(floor_at, t0 + HORIZON, ["q"])]
    assert store.looked == [(floor_at, ["q"], ["t"])]  # the first pass looks
    asyncio.run(timer.run_once())  # within look_every: a refill alone
    assert len(store.asked) == 2 and len(store.looked) == 1
    clock.advance(4.9)
    asyncio.run(timer.run_once())  # still within look_every
    assert len(store.looked) == 1
    clock.advance(0.1)  # look_every went by
    asyncio.run(timer.run_once())
    assert len(store.looked) == 2
    assert fairness.floor_now() == floor_at and woken == []  # nothing below it


def test_a_job_found_below_the_floor_lowers_it_and_wakes_the_slots() -> None:
    clock = ManualClock()
    t0 = clock.now()
    floor_at = t0 - timedelta(seconds=1)
    lost = t0 - timedelta(hours=2)  # due two hours ago, its wake-up lost
    store = BelowFloorStore(
        [
            (lost, "q", "t"),
            (t0 - timedelta(hours=3), "q", "other"),  # a task the slots do not run
            (t0 - timedelta(hours=4), "elsewhere", "t"),  # a queue they do not serve
        ]
    )
    timer, fairness, woken = floored_timer(store, clock, floor_at)
    asyncio.run(timer.run_once())
    assert fairness.floor_now() == lost and woken == [1]


def test_without_a_floor_the_refill_reads_from_a_day_back_and_nothing_looks() -> None:
    clock = ManualClock()
    t0 = clock.now()
    store = BelowFloorStore([(t0 - timedelta(hours=5), "q", "t")])
    timer, _, _ = floored_timer(store, clock, None)
    asyncio.run(timer.run_once())
    assert store.asked == [(t0 - LOOKBACK, t0 + HORIZON, ["q"])] and store.looked == []
    old = t0 - 2 * LOOKBACK
    timer2, _, _ = floored_timer(store, clock, old)  # a floor older than a day back
    asyncio.run(timer2.run_once())
    assert store.asked[-1] == (t0 - LOOKBACK, t0 + HORIZON, ["q"])
    assert store.looked == [(old, ["q"], ["t"])]
