"""The completer: outcomes written in batches, each answered only after its commit, a stale
one refused alone, retried while the database is down (a fake store; no database)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from duetime.core.clock import ManualClock
from duetime.core.errors import StoreUnavailable
from duetime.core.models import Lease, Outcome
from duetime.core.states import Event
from duetime.runtime.completer import Completer
from duetime.runtime.service import BlockingCalls


class Ledger:
    """finish_many as a store answers it: per item, unless told to fail or to hold."""

    def __init__(self, refuse: set[int] | None = None, failures: int = 0) -> None:
        self.batches: list[list[tuple[Lease, Outcome]]] = []
        self.refuse = refuse or set()
        self.failures = failures
        self.hold = threading.Event()
        self.hold.set()

    def finish_many(
        self, items: Sequence[tuple[Lease, Outcome]], now: datetime, **_: Any
    ) -> list[bool]:
        assert self.hold.wait(10)
        if self.failures:
            self.failures -= 1
            raise StoreUnavailable("connection refused")
        self.batches.append(list(items))
        return [lease.job_id not in self.refuse for lease, _ in items]


def lease(job_id: int) -> Lease:
    return Lease(job_id, job_id * 10, 1)


def completer(store: Any, clock: ManualClock, **kw: Any) -> Completer:
    return Completer(store, clock, BlockingCalls(1), **kw)


def test_outcomes_go_in_one_batch_and_a_stale_one_is_refused_alone() -> None:
    async def scenario() -> tuple[list[bool | None], Ledger]:
        ledger = Ledger(refuse={2})
        c = completer(ledger, ManualClock(), linger=0.05)
        running = asyncio.create_task(c.run())
        answers = await asyncio.gather(
            *(c.record(lease(i), Outcome(Event.SUCCEED), give_up_after=60) for i in (1, 2, 3))
        )
        c.stop()
        await running
        return answers, ledger

    answers, ledger = asyncio.run(scenario())
    assert answers == [True, False, True]
    assert [[le.job_id for le, _ in batch] for batch in ledger.batches] == [[1, 2, 3]]


def test_a_full_batch_is_written_at_once_and_nothing_is_answered_before_its_commit() -> None:
    async def scenario() -> None:
        ledger = Ledger()
        ledger.hold.clear()  # the transaction has not committed yet
        c = completer(ledger, ManualClock(), max_batch=2, linger=3600)
        running = asyncio.create_task(c.run())
        first = [
            asyncio.create_task(c.record(lease(i), Outcome(Event.SUCCEED), give_up_after=60))
            for i in (1, 2)
        ]
        for _ in range(20):
            await asyncio.sleep(0)
        assert not any(t.done() for t in first)  # written, not yet committed: not answered
        ledger.hold.set()
        assert await asyncio.gather(*first) == [True, True]  # no hour of lingering: it was full
        c.stop()
        await running

    asyncio.run(scenario())


def test_a_batch_is_tried_again_while_the_database_is_down() -> None:
    async def scenario() -> tuple[bool | None, Ledger, datetime]:
        ledger = Ledger(failures=2)
        clock = ManualClock()
        c = completer(ledger, clock, linger=0)
        running = asyncio.create_task(c.run())
        decided = clock.now()
        retry = Outcome(Event.RETRY, due_at=decided + timedelta(seconds=5), decided_at=decided)
        record = asyncio.create_task(c.record(lease(1), retry, give_up_after=60))
        await c.flushed.wait(2)  # two failed tries
        clock.advance(30)  # the database came back half a minute later
        answer = await record
        c.stop()
        await running
        return answer, ledger, decided

    answer, ledger, decided = asyncio.run(scenario())
    assert answer is True
    [[(_, written)]] = ledger.batches
    # the retry's 5 s delay counts from when the outcome was written, not when it was decided
    assert written.due_at is not None and written.decided_at is not None
    assert written.due_at - decided >= timedelta(seconds=35)
    # and the store counts it on from the instant it records
    assert written.due_at - written.decided_at == timedelta(seconds=5)


def test_an_outcome_that_cannot_be_written_in_time_is_given_up() -> None:
    async def scenario() -> bool | None:
        ledger = Ledger(failures=1000)
        c = completer(ledger, ManualClock(), linger=0)
        running = asyncio.create_task(c.run())
        answer = await c.record(lease(1), Outcome(Event.SUCCEED), give_up_after=0)
        c.stop()
        await running
        return answer

    assert asyncio.run(scenario()) is None  # the lease lapses; the reaper retries the job


def test_a_retry_without_decided_at_counts_its_delay_from_when_it_was_handed_over() -> None:
    """An outcome given back unstarted (due again now) says no decided_at: its delay counts
    from record(), the instant the completer notes for it; a success needs no instant."""

    async def scenario() -> tuple[Ledger, datetime]:
        ledger = Ledger(failures=1)
        clock = ManualClock()
        c = completer(ledger, clock, linger=0)
        running = asyncio.create_task(c.run())
        handed = clock.now()
        again = Outcome(Event.RETRY, due_at=handed)  # due again at once, as handed over
        records = [
            asyncio.create_task(c.record(lease(1), again, give_up_after=60)),
            asyncio.create_task(c.record(lease(2), Outcome(Event.SUCCEED), give_up_after=60)),
        ]
        await c.flushed.wait(1)  # one failed try
        clock.advance(20)  # written 20 s after it was handed over
        assert await asyncio.gather(*records) == [True, True]
        c.stop()
        await running
        return ledger, handed

    ledger, handed = asyncio.run(scenario())
    [[(_, written), (_, succeeded)]] = ledger.batches
    assert written.due_at == written.decided_at == handed + timedelta(seconds=20)
    assert succeeded == Outcome(Event.SUCCEED)


class Overlapping(Ledger):
    """A Ledger that holds every write until told, counting the writes under way at once."""

    def __init__(self, failures: int = 0) -> None:
        super().__init__(failures=failures)
        self.hold.clear()
        self.lock = threading.Condition()
        self.under_way = 0
        self.most = 0

    def finish_many(
        self, items: Sequence[tuple[Lease, Outcome]], now: datetime, **kw: Any
    ) -> list[bool]:
        with self.lock:
            self.under_way += 1
            self.most = max(self.most, self.under_way)
            self.lock.notify_all()
        try:
            return super().finish_many(items, now, **kw)
        finally:
            with self.lock:
                self.under_way -= 1

    def reached(self, writes: int) -> bool:
        """Wait (a thread's wait, bounded) until `writes` writes are under way at once."""
        with self.lock:
            return self.lock.wait_for(lambda: self.under_way >= writes, timeout=10)


def _four_outcomes_in_two_writes(ledger: Overlapping) -> tuple[list[bool | None], bool]:
    """Four outcomes recorded through a completer that writes batches of 2, two at once, into
    `ledger`, which holds both writes until both are under way; the answers, and whether any
    was answered before the ledger let the writes go."""

    async def scenario() -> tuple[list[bool | None], bool]:
        c = Completer(ledger, ManualClock(), BlockingCalls(2), max_batch=2, linger=0, max_writes=2)
        running = asyncio.create_task(c.run())
        records = [
            asyncio.create_task(c.record(lease(i), Outcome(Event.SUCCEED), give_up_after=60))
            for i in (1, 2, 3, 4)
        ]
        assert await asyncio.to_thread(ledger.reached, 2)  # both batches sent, none committed
        answered_early = any(r.done() for r in records)
        ledger.hold.set()
        answers = await asyncio.gather(*records)
        c.stop()
        await running
        return answers, answered_early

    return asyncio.run(scenario())


def test_a_second_batch_is_written_while_the_first_is_under_way() -> None:
    ledger = Overlapping()
    answers, answered_early = _four_outcomes_in_two_writes(ledger)
    assert not answered_early
    assert answers == [True, True, True, True]
    assert sorted(le.job_id for batch in ledger.batches for le, _ in batch) == [1, 2, 3, 4]
    assert ledger.most == 2


def test_batches_that_failed_side_by_side_are_each_written_once_when_the_store_answers() -> None:
    ledger = Overlapping(failures=2)  # both batches under way fail
    answers, _ = _four_outcomes_in_two_writes(ledger)
    assert answers == [True, True, True, True]
    assert ledger.failures == 0  # both tries failed, then the outcomes were written
    assert sorted(le.job_id for batch in ledger.batches for le, _ in batch) == [1, 2, 3, 4]


def test_a_second_write_waits_for_a_quarter_of_a_batch() -> None:
    """While a batch is being written, a few outcomes wait for the next write instead of a
    commit of their own: another write starts once a quarter of a full batch waits."""

    async def scenario() -> Overlapping:
        ledger = Overlapping()
        c = Completer(ledger, ManualClock(), BlockingCalls(2), max_batch=8, linger=0, max_writes=2)
        running = asyncio.create_task(c.run())

        def record(i: int) -> asyncio.Task[bool | None]:
            return asyncio.create_task(c.record(lease(i), Outcome(Event.SUCCEED), give_up_after=60))

        records = [record(1)]
        assert await asyncio.to_thread(ledger.reached, 1)  # the first batch, held
        records.append(record(2))
        for _ in range(10):  # the completer's loop looks at it: too few for a write of its own
            await asyncio.sleep(0)
        records.append(record(3))  # a quarter of a batch waits: the second write takes both
        assert await asyncio.to_thread(ledger.reached, 2)
        ledger.hold.set()
        assert await asyncio.gather(*records) == [True, True, True]
        c.stop()
        await running
        return ledger

    ledger = asyncio.run(scenario())
    batches = sorted([le.job_id for le, _ in batch] for batch in ledger.batches)
    assert batches == [[1], [2, 3]]
