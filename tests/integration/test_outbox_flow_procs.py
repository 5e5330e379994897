"""A queue cap on an outbox-mode queue across real processes, on every dialect: the relay
dispatches through the real RabbitMQ (tests/amqpbroker.py) to broker-fed `duetime worker`
processes, and the attempts the workers accepted never overlap beyond the cap
(docs/flow-control.md, "Queues in outbox mode")."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest

from amqpbroker import broker_url
from conftest import STORE_KINDS
from duetime import App
from duetime.core.outbox import DISPATCH_HOLDER
from duetime.runtime.outbox.broker import Broker
from integration.apps.limitsapp import make_app
from integration.procs import Processes
from integration.test_limits_procs import finished, handler_spans, max_overlap, seconds
from kit import DialectKit, kit_named

CAP = 3
JOBS = 30
WORKERS = 3


@pytest.fixture(params=STORE_KINDS)
def kit(request: pytest.FixtureRequest) -> DialectKit:
    """Every registered dialect (the integration suite's default is sqlite and postgres)."""
    return kit_named(request.param)


@pytest.fixture(scope="module")
def amqp_url() -> str:
    return broker_url()


@pytest.fixture
def queue(amqp_url: str) -> Iterator[str]:
    """A queue name of this test alone; its broker queue is deleted afterwards."""
    name = f"obcap{uuid.uuid4().hex[:10]}"
    yield name

    async def delete() -> None:
        async with Broker(amqp_url) as broker:
            await broker.delete(name)

    asyncio.run(delete())


@pytest.fixture
def limits_app(db_url: str) -> Iterator[App]:
    instance = make_app(db_url)
    yield instance
    instance.close()


def test_a_queue_cap_holds_for_outbox_dispatch_across_processes(
    limits_app: App, procs: Processes, db_url: str, amqp_url: str, queue: str
) -> None:
    limits_app.set_queue(queue, dispatch="outbox", concurrency=CAP)
    task = limits_app.tasks["outbox.call"]
    # the first dispatch's CAP jobs (claim order: by id) run long enough to overlap however
    # far apart a loaded machine accepts and starts them (with 0.1 s each, a CI run on MariaDB
    # saw at most 2 running at once: the cap held but looked unused)
    task.enqueue_many([{"seconds": 1.0}] * CAP + [{"seconds": 0.1}] * (JOBS - CAP), queue=queue)
    for n in range(WORKERS):
        relay = ["--relay"] if n == 0 else []  # one of them also runs the relay
        procs.worker(
            db_url,
            "--concurrency",
            "4",
            "--broker-url",
            amqp_url,
            *relay,
            app="limitsapp:app",
            poll_interval="0.05s",
        )
    jobs = finished(limits_app, "outbox.call", JOBS, procs)
    attempts = [j.attempt_history[-1] for j in jobs]
    assert all(j.attempts == 1 and len(j.attempt_history) == 1 for j in jobs)
    assert all(a.worker_id != DISPATCH_HOLDER for a in attempts)  # each accepted by a worker
    assert len({a.worker_id for a in attempts}) > 1  # the cap held over several processes
    # an attempt's recorded start is its acceptance by a worker, after its dispatch, which saw
    # the previous finish committed: the recorded intervals need no slack
    stored = [(seconds(a.started_at), seconds(a.finished_at)) for a in attempts if a.finished_at]
    assert len(stored) == JOBS
    assert max_overlap(stored) <= CAP
    spans = handler_spans(procs.out_dir, {j.id for j in jobs})
    assert len(spans) == JOBS
    assert max_overlap(spans) <= CAP
    assert max_overlap(spans) == CAP  # the cap was used, not only respected
    for worker in procs.started:
        assert worker.problems() == [], worker.tail()
