"""Nodes register, heartbeat and stop; the store tells what each holds."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest

import duetime
from duetime.core.clock import ManualClock
from duetime.core.models import Node
from duetime.runtime.worker import Worker
from duetime.store.base import Store
from jobhelpers import enqueue, run_until


def node(node_id: str, clock: ManualClock) -> Node:
    return Node(
        node_id,
        "host-a",
        123,
        ("mail",),
        4,
        ("worker", "reaper"),
        "0.1.0",
        clock.now(),
        clock.now(),
    )


def test_register_heartbeat_stop_and_holdings(store: Store, clock: ManualClock) -> None:
    store.register_node(node("host-a:123:aa", clock), clock.now())
    store.register_node(node("host-b:456:bb", clock), clock.now())
    enqueue(store, clock, args={"i": 1})
    enqueue(store, clock, args={"i": 2})
    claims = store.claim(worker_id="host-a:123:aa", queues=None, limit=2, now=clock.now())
    clock.advance(20)
    store.touch_node("host-a:123:aa", clock.now())
    clock.advance(20)
    nodes = {n.id: n for n in store.list_nodes()}
    a, b = nodes["host-a:123:aa"], nodes["host-b:456:bb"]
    assert a.holding == tuple(sorted(c.job.id for c in claims)) and b.holding == ()
    assert a.queues == ("mail",) and a.duties == ("worker", "reaper") and a.concurrency == 4
    assert a.state(clock.now(), 30) == "live"
    assert b.state(clock.now(), 30) == "dead"  # silent for 40 s
    store.stop_node("host-b:456:bb", clock.now())
    stopped = {n.id: n for n in store.list_nodes()}["host-b:456:bb"]
    assert stopped.state(clock.now(), 30) == "stopped"
    store.register_node(node("host-b:456:bb", clock), clock.now() + timedelta(seconds=1))
    revived = {n.id: n for n in store.list_nodes()}["host-b:456:bb"]
    assert revived.stopped_at is None


@pytest.fixture
def app(store_url: str, make_store: Callable[[], Store]) -> Iterator[duetime.App]:
    application = duetime.App(database_url=store_url)
    yield application
    application.close()


def test_a_worker_registers_and_stops(app: duetime.App) -> None:
    started = threading.Event()
    release = threading.Event()

    @app.task(name="hold")
    def hold() -> None:
        started.set()
        assert release.wait(20)

    job = hold.enqueue()
    worker = Worker(app, poll_interval=0.02, queues=["default"], concurrency=3)
    seen: list[Node] = []

    def done() -> bool:
        if started.is_set() and not seen:
            seen.extend(app.store.list_nodes())
            release.set()
        return app.get_job(job.id).terminal

    asyncio.run(run_until(worker, done))
    [me] = seen
    assert me.id == worker.worker_id and me.holding == (job.id,)
    assert me.queues == ("default",) and me.concurrency == 3 and "planner" in me.duties
    [after] = app.store.list_nodes()
    assert after.stopped_at is not None and after.holding == ()
