"""A worker's node services on each store, awaited through the pulses they fire (no sleeping)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest

import duetime
from duetime.core import models
from duetime.core.clock import ManualClock
from duetime.core.states import AttemptStatus, JobStatus
from duetime.runtime.node import Node, NodeHeartbeat
from duetime.runtime.reaper import Reaper, ReaperService, ReapResult
from duetime.runtime.service import BlockingCalls, Pulse, Service
from duetime.runtime.worker import Worker
from duetime.store.base import Store
from jobhelpers import lapsed


def test_a_reaper_pass_returns_a_lapsed_lease(store: Store, clock: ManualClock) -> None:
    job = lapsed(store, clock)
    results: list[ReapResult] = []
    calls = BlockingCalls(1)
    service = ReaperService(Reaper(store, clock), calls, interval=3600, on_result=results.append)

    async def scenario() -> None:
        running = asyncio.create_task(service.run())
        await asyncio.wait_for(service.passes.wait(1), 10)
        service.stop()
        await asyncio.wait_for(running, 10)

    asyncio.run(scenario())
    calls.close()
    assert [r.reaped for r in results] == [1]
    back = store.get_job(job.id)
    assert back is not None and back.status is JobStatus.SCHEDULED
    assert back.attempt_history[0].status is AttemptStatus.LOST


def test_the_registry_row_lives_and_stops_with_the_node(store: Store, clock: ManualClock) -> None:
    row = models.Node("host:1:abc", "h", 1, None, 2, ("worker",), "0", clock.now(), clock.now())
    calls = BlockingCalls(1)
    registry = NodeHeartbeat(store, clock, calls, lambda: row, interval=0)

    async def scenario() -> None:
        stop = asyncio.Event()
        node = asyncio.create_task(Node([registry]).run(stop))
        await asyncio.wait_for(registry.passes.wait(1), 10)  # registered, then renewed once
        [live] = store.list_nodes()
        assert live.id == "host:1:abc" and live.stopped_at is None
        stop.set()
        await asyncio.wait_for(node, 10)

    asyncio.run(scenario())
    calls.close()
    [stopped] = store.list_nodes()
    assert stopped.stopped_at is not None and stopped.duties == ("worker",)


@pytest.fixture
def app(store_url: str, make_store: Callable[[], Store]) -> Iterator[duetime.App]:
    application = duetime.App(database_url=store_url)
    yield application
    application.close()


class Relay(Service):
    """An extra service: notes what the worker's slots were doing when it was asked to stop."""

    name = "relay"

    def __init__(self, worker: Callable[[], Worker]) -> None:
        super().__init__()
        self.worker = worker
        self.running = Pulse()
        self.seen_at_stop: tuple[bool, int] | None = None

    async def run(self) -> None:
        self.running.fire()
        while not self.stopping:
            await self.pause(3600)

    def stop(self) -> None:
        slots = self.worker().slots
        self.seen_at_stop = (slots.stopping, len(slots.running))
        super().stop()


def test_shutdown_drains_attempts_then_stops_the_other_services(app: duetime.App) -> None:
    release: list[asyncio.Event] = []

    @app.task(name="hold")
    async def hold() -> None:
        await release[0].wait()

    job = hold.enqueue()
    workers: list[Worker] = []
    relay = Relay(lambda: workers[0])
    worker = Worker(app, poll_interval=0.02, grace=30, services=[relay])
    workers.append(worker)

    async def scenario() -> None:
        release.append(asyncio.Event())
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        await asyncio.wait_for(relay.running.wait(1), 10)
        while worker.in_flight == 0:
            await asyncio.wait_for(worker.slots.idle.wait(), 10)
        stop.set()
        await asyncio.wait_for(worker.slots.draining.wait(1), 10)
        assert not task.done() and relay.seen_at_stop is None  # still draining
        release[0].set()
        await asyncio.wait_for(task, 30)

    asyncio.run(scenario())
    assert app.get_job(job.id).status is JobStatus.SUCCEEDED
    assert relay.seen_at_stop == (True, 0)  # the relay stopped after the slots drained
    assert worker.stats.succeeded == 1 and worker.slots.finished.count == 1


def test_new_occurrences_wake_the_claim_loop(
    store_url: str, make_store: Callable[[], Store]
) -> None:
    clock = ManualClock()
    app = duetime.App(database_url=store_url, clock=clock)
    ran: list[str] = []

    @app.schedule(
        "every-minute", every="1m", timezone="UTC", start=clock.now() + timedelta(seconds=30)
    )
    @app.task(name="tick")
    def tick() -> None:
        ran.append(duetime.current().task)

    # the claim loop would poll only once an hour: only the planner's wake can start the job
    worker = Worker(app, poll_interval=3600, plan_interval=0.01)
    assert worker.planning is not None
    planning = worker.planning

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        await asyncio.wait_for(worker.slots.idle.wait(1), 10)  # claimed nothing: nothing due
        await asyncio.wait_for(planning.passes.wait(1), 10)
        assert planning.created.count == 0
        clock.advance(timedelta(seconds=30))
        await asyncio.wait_for(planning.created.wait(1), 10)
        await asyncio.wait_for(worker.slots.finished.wait(1), 10)
        stop.set()
        await asyncio.wait_for(task, 30)

    try:
        asyncio.run(scenario())
    finally:
        app.close()
    assert ran == ["tick"]
