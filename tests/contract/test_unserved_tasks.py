"""A job of a task no worker knows does not burn attempts: workers claim only the tasks they
have handlers for, nodes record the tasks they serve, and the job says why it waits."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

import duetime
from duetime.core.clock import ManualClock
from duetime.core.models import Node, unserved
from duetime.core.states import JobStatus
from duetime.runtime.worker import Worker
from duetime.store.base import Store
from jobhelpers import enqueue, run_until


def node(node_id: str, clock: ManualClock, tasks: tuple[str, ...] | None) -> Node:
    now = clock.now()
    return Node(node_id, "host", 1, None, 4, ("worker",), "0", now, now, tasks=tasks)


def test_a_claim_takes_only_the_tasks_named(store: Store, clock: ManualClock) -> None:
    a = enqueue(store, clock, task="a")
    b = enqueue(store, clock, task="b")
    c = enqueue(store, clock, task="c")
    none = store.claim(worker_id="w", queues=None, limit=10, now=clock.now(), tasks=[])
    assert none == []
    only_b = store.claim(worker_id="w", queues=["default"], limit=10, now=clock.now(), tasks=["b"])
    assert [x.job.id for x in only_b] == [b.id]
    a_or_c = store.claim(worker_id="w", queues=None, limit=10, now=clock.now(), tasks=["a", "c"])
    assert sorted(x.job.id for x in a_or_c) == [a.id, c.id]
    d = enqueue(store, clock, task="d")
    anything = store.claim(worker_id="w", queues=None, limit=10, now=clock.now())
    assert [x.job.id for x in anything] == [d.id]  # tasks=None: any task


def test_nodes_record_the_tasks_they_serve(store: Store, clock: ManualClock) -> None:
    store.register_node(node("n1", clock, ("greet", "charge")), clock.now())
    store.register_node(node("n2", clock, None), clock.now())  # an older worker: did not say
    nodes = {n.id: n for n in store.list_nodes()}
    assert nodes["n1"].tasks == ("greet", "charge") and nodes["n2"].tasks is None
    assert nodes["n1"].to_json(clock.now(), 30)["tasks"] == ["greet", "charge"]


def test_unserved_says_when_no_live_node_lists_the_task(clock: ManualClock) -> None:
    live = node("n1", clock, ("greet",))
    assert unserved("greet", [live], clock.now()) is None
    reason = unserved("nosuch", [live], clock.now())
    assert reason is not None and reason.startswith("no worker serves task 'nosuch'")
    assert unserved("greet", [], clock.now()) is not None  # no worker at all
    clock.advance(31)
    assert unserved("greet", [live], clock.now()) is not None  # its node went silent: dead
    stopped = replace(node("n2", clock, ("greet",)), stopped_at=clock.now())
    assert unserved("greet", [stopped], clock.now()) is not None
    assert unserved("nosuch", [node("n3", clock, None)], clock.now()) is None  # may serve it


@pytest.fixture
def app(store_url: str, make_store: Callable[[], Store]) -> Iterator[duetime.App]:
    application = duetime.App(database_url=store_url)
    yield application
    application.close()


def test_a_worker_leaves_unknown_tasks_waiting_and_says_so(
    app: duetime.App, store_url: str
) -> None:
    producer = duetime.App(database_url=store_url)  # registers no task: enqueues any
    lost = producer.enqueue("nobody.knows", {}, max_attempts=1)
    producer.close()

    @app.task(name="greet")
    def greet() -> None:
        pass

    known = greet.enqueue()
    worker = Worker(app, poll_interval=0.02)
    seen: dict[str, str | None] = {}

    def done() -> bool:
        if app.get_job(known.id).terminal and "lost" not in seen:
            seen["lost"] = app.unserved(app.get_job(lost.id))
            seen["known"] = app.unserved(app.get_job(known.id))
        return "lost" in seen

    asyncio.run(run_until(worker, done))
    waiting = app.get_job(lost.id)
    assert waiting.status is JobStatus.SCHEDULED and waiting.attempts == 0
    assert waiting.attempt_history == ()
    assert (seen["lost"] or "").startswith("no worker serves task 'nobody.knows'")
    assert seen["known"] is None  # succeeded: not waiting
    [me] = app.store.list_nodes()
    assert me.tasks == ("greet",)


def test_a_worker_whose_app_registers_no_task_warns(
    app: duetime.App, caplog: pytest.LogCaptureFixture
) -> None:
    job = app.enqueue("anything", {})
    worker = Worker(app, poll_interval=0.02)
    caplog.set_level(logging.WARNING, logger="duetime.worker")

    def warned() -> bool:
        return any("worker.no_tasks" in r.getMessage() for r in caplog.records)

    asyncio.run(run_until(worker, warned))
    assert app.get_job(job.id).attempts == 0  # it claimed nothing
