"""Traces through the outbox (docs/tracing.md), on the real RabbitMQ and every dialect: the
relay's publish span is a child of the enqueue's stored context, the broker message's headers
carry it (and the baggage), and the broker-fed worker runs the attempt in a span under it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
from opentelemetry import baggage, context
from opentelemetry.trace import SpanKind, StatusCode

import duetime
from amqpbroker import broker_url
from conftest import STORE_KINDS
from duetime.core.states import JobStatus
from duetime.runtime.outbox.broker import Broker
from duetime.runtime.outbox.relay import relay_services
from duetime.runtime.service import BlockingCalls
from duetime.runtime.worker import Worker
from integration.test_outbox import run_while
from kit import DialectKit, kit_named
from traces import Traces


@pytest.fixture(params=STORE_KINDS)
def kit(request: pytest.FixtureRequest) -> DialectKit:
    return kit_named(request.param)


@pytest.fixture
def queue() -> Iterator[str]:
    name = f"tr{uuid.uuid4().hex[:10]}"
    yield name

    async def delete() -> None:
        async with Broker(broker_url()) as broker:
            await broker.delete(name)

    asyncio.run(delete())


def test_the_relay_carries_the_trace_to_the_broker_fed_worker(
    db_url: str, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    traces = Traces(monkeypatch)
    seen: list[object] = []
    amqp_url = broker_url()
    app = duetime.App(database_url=db_url)
    try:

        @app.task(name="work", queue=queue)
        def work(n: int) -> None:
            seen.append(baggage.get_baggage("user"))

        app.set_queue(queue, dispatch="outbox")
        token = context.attach(baggage.set_baggage("user", "ada"))
        try:
            with traces.provider.get_tracer("web").start_as_current_span("POST /work") as request:
                job = work.enqueue({"n": 1})
        finally:
            context.detach(token)
        relay = relay_services(
            app.store, app.clock, BlockingCalls(2), amqp_url, relay_id=f"r-{uuid.uuid4().hex}"
        )
        worker = Worker(app, poll_interval=0.05, broker_url=amqp_url, services=relay)
        asyncio.run(
            run_while([], worker, lambda: app.get_job(job.id).status is JobStatus.SUCCEEDED)
        )
        assert worker.feed is not None and worker.feed.accepted == 1
    finally:
        app.close()

    enqueue, run = traces.one("duetime.enqueue work"), traces.one("duetime.run work")
    # a publish the broker refused (a quorum queue just declared may refuse one) is a span of
    # its own, status ERROR; the event is published again, in a new span
    publishes = traces.spans("duetime.publish work")
    [publish] = [s for s in publishes if s.status.status_code is not StatusCode.ERROR]
    for refused in publishes:
        assert refused.parent is not None and refused.parent.span_id == enqueue.context.span_id
    assert {s.context.trace_id for s in (enqueue, publish, run)} == {
        request.get_span_context().trace_id
    }
    assert publish.parent is not None and publish.parent.span_id == enqueue.context.span_id
    assert run.parent is not None and run.parent.span_id == publish.context.span_id
    assert publish.kind is SpanKind.PRODUCER and run.kind is SpanKind.CONSUMER
    assert run.attributes is not None and run.attributes["duetime.outcome"] == "succeeded"
    assert publish.attributes is not None and publish.attributes["duetime.job.id"] == job.id
    assert seen == ["ada"]  # the baggage, through the message's headers
