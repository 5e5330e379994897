"""The relay's publishing pass on each store, with a fake broker and a fake monotonic clock:
the rate limit, and a publish that fails (docs/outbox.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from duetime.core.clock import ManualClock
from duetime.core.limits import LimitSettings, parse_rate
from duetime.core.outbox import Dispatch, OutboxEvent
from duetime.core.requests import TaskDefaults
from duetime.runtime.outbox.relay import Dispatcher, Relay
from duetime.runtime.service import BlockingCalls
from duetime.store.base import Store
from jobhelpers import enqueue, new

KEYED = TaskDefaults(limits=("api",))


class FakeBroker:
    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.down = False
        self.closed = 0

    async def publish(self, events: list[OutboxEvent], timeout: float) -> list[int]:
        if self.down:
            raise ConnectionError("broker down")
        self.batches.append([e.id for e in events])
        return [e.id for e in events]

    async def close(self) -> None:
        self.closed += 1


class Ticks:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def calls() -> Iterator[BlockingCalls]:
    pool = BlockingCalls(1)
    yield pool
    pool.close()


def test_the_relay_publishes_at_most_its_rate(
    store: Store, clock: ManualClock, calls: BlockingCalls
) -> None:
    store.set_queue("q", clock.now(), dispatch=Dispatch.OUTBOX)
    for _ in range(25):
        enqueue(store, clock, queue="q")
    broker, ticks = FakeBroker(), Ticks()
    relay = Relay(store, clock, calls, broker, relay_id="r", rate=10.0, monotonic=ticks)
    dispatcher = Dispatcher(store, clock, calls)

    async def scenario() -> list[int]:
        await dispatcher.run_once()
        counts = []
        for _ in range(4):
            ticks.now += 1.0  # one second: ten more events allowed
            counts.append(await relay.publish_once())
            counts.append(await relay.publish_once())  # no token left within the second
        return counts

    assert asyncio.run(scenario()) == [10, 0, 10, 0, 5, 0, 0, 0]
    published = [i for batch in broker.batches for i in batch]
    assert published == sorted(published) and len(set(published)) == 25  # in order, once
    assert store.outbox_figures(clock.now()).backlog == 0


def test_a_slow_publish_earns_no_tokens_beyond_the_burst(
    store: Store, clock: ManualClock, calls: BlockingCalls
) -> None:
    """A publish that first has to reconnect takes a while; the bucket was full during it, so
    the time it took must not be credited on top of the burst just spent."""
    store.set_queue("q", clock.now(), dispatch=Dispatch.OUTBOX)
    for _ in range(30):
        enqueue(store, clock, queue="q")
    ticks = Ticks()

    class SlowBroker(FakeBroker):
        async def publish(self, events: list[OutboxEvent], timeout: float) -> list[int]:
            ticks.now += 0.3  # connecting to the broker takes 0.3 s
            return await super().publish(events, timeout)

    broker = SlowBroker()
    relay = Relay(store, clock, calls, broker, relay_id="r", rate=20.0, monotonic=ticks)

    async def scenario() -> list[int]:
        await Dispatcher(store, clock, calls).run_once()
        ticks.now += 5.0  # idle long enough for a full bucket: one second's worth
        counts = [await relay.publish_once()]
        ticks.now += 0.075  # one and a half events at 20/s: one more event
        broker.publish = FakeBroker.publish.__get__(broker)  # type: ignore[method-assign]
        counts.append(await relay.publish_once())
        return counts

    assert asyncio.run(scenario()) == [20, 1]


def test_a_failed_publish_leaves_the_events_to_publish_again(
    store: Store, clock: ManualClock, calls: BlockingCalls
) -> None:
    store.set_queue("q", clock.now(), dispatch=Dispatch.OUTBOX)
    for _ in range(3):
        enqueue(store, clock, queue="q")
    broker = FakeBroker()
    relay = Relay(store, clock, calls, broker, relay_id="r")

    async def scenario() -> None:
        await Dispatcher(store, clock, calls).run_once()
        broker.down = True
        with pytest.raises(ConnectionError):
            await relay.publish_once()
        assert store.outbox_figures(clock.now()).backlog == 3  # nothing marked
        broker.down = False
        assert await relay.publish_once() == 3  # its own events, taken again at once

    asyncio.run(scenario())
    assert store.outbox_figures(clock.now()).backlog == 0


def test_the_dispatcher_comes_back_when_the_next_job_falls_due(
    store: Store, clock: ManualClock, calls: BlockingCalls
) -> None:
    store.set_queue("q", clock.now(), dispatch=Dispatch.OUTBOX)
    dispatcher = Dispatcher(store, clock, calls, interval=1.0)
    asyncio.run(dispatcher.run_once())
    assert dispatcher.next_delay() == 1.0  # nothing due within the interval
    enqueue(store, clock, queue="q", delay=0.25)
    enqueue(store, clock, queue="elsewhere", delay=0.1)  # direct mode: not the dispatcher's
    asyncio.run(dispatcher.run_once())
    assert dispatcher.next_delay() == 0.25
    clock.advance(0.25)
    asyncio.run(dispatcher.run_once())
    assert dispatcher.dispatched == 1


def test_the_dispatcher_comes_back_when_a_limit_allows_the_next_start(
    store: Store, clock: ManualClock, calls: BlockingCalls
) -> None:
    """A dispatch held back by a limit's bucket comes back when its next token does, not at
    the next interval: a rate bounds dispatches at its rate (issue 20: a claim held back by
    a rate waited for the poll interval)."""
    store.set_queue("q", clock.now(), dispatch=Dispatch.OUTBOX)
    store.set_limit(LimitSettings("api", rate=parse_rate("5/s"), burst=1), clock.now())
    for i in range(3):
        store.enqueue([new(clock, args={"i": i}, queue="q", defaults=KEYED)], clock.now())
    dispatcher = Dispatcher(store, clock, calls, interval=1.0)
    asyncio.run(dispatcher.run_once())
    assert dispatcher.dispatched == 1  # the one token
    assert 0.2 <= dispatcher.next_delay() <= 0.202
    clock.advance(dispatcher.next_delay())
    asyncio.run(dispatcher.run_once())
    assert dispatcher.dispatched == 2
