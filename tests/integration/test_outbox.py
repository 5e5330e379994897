"""Outbox dispatch end to end on the real RabbitMQ (tests/amqpbroker.py), on SQLite and
PostgreSQL: the relay dispatches and publishes, broker-fed workers run each job once."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import duetime
from amqpbroker import broker_url
from duetime.core.outbox import DISPATCH_HOLDER, Dispatch
from duetime.core.states import JobStatus
from duetime.runtime.amqp import Broker
from duetime.runtime.relay import relay_services
from duetime.runtime.service import BlockingCalls, Service
from duetime.runtime.worker import Worker


@pytest.fixture(scope="module")
def amqp_url() -> str:
    return broker_url()


@pytest.fixture
def queue(amqp_url: str) -> Iterator[str]:
    """A queue name of this test alone; its broker queue is deleted afterwards."""
    name = f"ob{uuid.uuid4().hex[:10]}"
    yield name

    async def delete() -> None:
        broker = Broker(amqp_url)
        try:
            await broker.delete(name)
        finally:
            await broker.close()

    asyncio.run(delete())


@pytest.fixture
def app(db_url: str) -> Iterator[duetime.App]:
    instance = duetime.App(database_url=db_url)
    yield instance
    instance.close()


async def run_while(
    services: list[Service], worker: Worker | None, done: Callable[[], bool], timeout: float = 30
) -> None:
    """Run the worker (with `services` on its node) or the services alone until done()."""
    from duetime.runtime.node import Node

    stop = asyncio.Event()
    runner = worker.run(stop) if worker is not None else Node(services).run(stop)
    task = asyncio.create_task(runner)
    deadline = time.monotonic() + timeout
    try:
        while not done():
            assert time.monotonic() < deadline, "condition not reached in time"
            assert not task.done(), f"stopped early: {task}"
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


def relay(app: duetime.App, amqp_url: str, **kw: Any) -> list[Service]:
    return relay_services(
        app.store, app.clock, BlockingCalls(2), amqp_url, relay_id=f"r-{uuid.uuid4().hex}", **kw
    )


def statuses(app: duetime.App, ids: list[int]) -> list[JobStatus]:
    return [app.get_job(i).status for i in ids]


def test_outbox_queue_runs_end_to_end_through_the_broker(
    app: duetime.App, amqp_url: str, queue: str
) -> None:
    ran: list[int] = []

    @app.task(name="work", queue=queue)
    def work(n: int) -> None:
        ran.append(n)

    @app.task(name="direct", queue=f"{queue}-db")
    def direct() -> None:
        ran.append(-1)

    app.set_queue(queue, dispatch="outbox")
    jobs = [work.enqueue({"n": n}) for n in range(20)]
    plain = direct.enqueue({})
    ids = [j.id for j in jobs] + [plain.id]
    worker = Worker(
        app,
        poll_interval=0.05,
        broker_url=amqp_url,
        services=relay(app, amqp_url),
    )
    asyncio.run(
        run_while(
            [],
            worker,
            lambda: all(s is JobStatus.SUCCEEDED for s in statuses(app, ids)),
        )
    )
    assert sorted(ran) == [-1, *range(20)]  # each once
    for job in jobs:
        [attempt] = app.get_job(job.id).attempt_history
        assert attempt.worker_id == worker.worker_id != DISPATCH_HOLDER
    status = app.outbox_status()
    assert status.backlog == 0 and status.oldest_unpublished_age_seconds is None
    assert app.queue(queue).dispatch is Dispatch.OUTBOX
    assert worker.feed is not None and worker.feed.accepted == 20
