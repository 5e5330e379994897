"""OpenTelemetry traces (docs/tracing.md) on each store, in-process: an enqueue's span, the
trace context stored with its job, and each attempt's span under it, with the SDK's in-memory
exporter (tests/traces.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

import duetime
from duetime import tracing
from duetime.core.states import JobStatus
from duetime.runtime.worker import Worker
from duetime.store.base import Store
from jobhelpers import run_until
from traces import Traces


@pytest.fixture
def traces(monkeypatch: pytest.MonkeyPatch) -> Traces:
    return Traces(monkeypatch)


@pytest.fixture
def app(store_url: str, make_store: Callable[[], Store]) -> Iterator[duetime.App]:
    application = duetime.App(database_url=store_url)
    yield application
    application.close()


def run(app: duetime.App, *job_ids: int) -> None:
    worker = Worker(app, poll_interval=0.02)
    asyncio.run(run_until(worker, lambda: all(app.get_job(i).terminal for i in job_ids)))


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def test_a_request_its_enqueue_and_the_attempt_form_one_tree(
    app: duetime.App, traces: Traces
) -> None:
    @app.task(name="mail", queue="emails")
    def mail(to: str) -> None:
        with traces.provider.get_tracer("handler").start_as_current_span("smtp"):
            pass

    with traces.provider.get_tracer("web").start_as_current_span("POST /signup") as request:
        job = mail.enqueue({"to": "ada@example.com"})
    run(app, job.id)

    enqueue = traces.one("duetime.enqueue mail")
    attempt = traces.one("duetime.run mail")
    handler = traces.one("smtp")
    trace_id = request.get_span_context().trace_id
    assert {s.context.trace_id for s in (enqueue, attempt, handler)} == {trace_id}
    assert parent_of(enqueue) == request.get_span_context().span_id
    assert parent_of(attempt) == enqueue.context.span_id
    assert parent_of(handler) == attempt.context.span_id  # the handler runs in the run span
    assert enqueue.kind is SpanKind.PRODUCER and attempt.kind is SpanKind.CONSUMER
    assert enqueue.attributes is not None and attempt.attributes is not None
    assert enqueue.attributes["duetime.job.id"] == job.id
    assert enqueue.attributes["messaging.destination.name"] == "emails"
    stored = app.get_job(job.id).trace_context
    assert stored is not None
    assert json.loads(stored)["traceparent"].split("-")[1] == f"{trace_id:032x}"
    epoch = 1 if app.store.dialect == "postgres" else 0
    assert dict(attempt.attributes) == {
        "messaging.system": "duetime",
        "messaging.operation.type": "process",
        "messaging.operation.name": "run",
        "messaging.destination.name": "emails",
        "messaging.message.id": str(job.id),
        "duetime.task": "mail",
        "duetime.job.id": job.id,
        "duetime.attempt": 1,
        "duetime.queue": "emails",
        "duetime.tenant": "default",
        "duetime.generation": 1,
        "duetime.fencing_token": (epoch << 32) | 1,
        "duetime.worker.id": attempt.attributes["duetime.worker.id"],
        "duetime.outcome": "succeeded",
    }
    assert attempt.status.status_code is StatusCode.UNSET


def test_a_batch_has_one_enqueue_span_and_each_job_its_context(
    app: duetime.App, traces: Traces
) -> None:
    @app.task(name="ping")
    def ping(n: int) -> None:
        pass

    jobs = ping.enqueue_many([{"n": i} for i in range(3)])
    run(app, *(j.id for j in jobs))
    enqueue = traces.one("duetime.enqueue ping")
    assert enqueue.attributes is not None
    assert enqueue.attributes["messaging.batch.message_count"] == 3
    runs = traces.spans("duetime.run ping")
    assert len(runs) == 3
    assert {parent_of(s) for s in runs} == {enqueue.context.span_id}


def test_a_retry_is_a_new_span_under_the_same_enqueue(app: duetime.App, traces: Traces) -> None:
    @app.task(name="flaky")
    def flaky() -> None:
        if duetime.current().attempt == 1:
            raise duetime.Retry(after=0.05, reason="HTTP 429")

    job = flaky.enqueue()
    run(app, job.id)
    assert app.get_job(job.id).status is JobStatus.SUCCEEDED
    enqueue = traces.one("duetime.enqueue flaky")
    first, second = sorted(traces.spans("duetime.run flaky"), key=lambda s: s.start_time or 0)
    assert parent_of(first) == parent_of(second) == enqueue.context.span_id
    assert first.context.span_id != second.context.span_id
    assert first.attributes is not None and second.attributes is not None
    assert (first.attributes["duetime.attempt"], first.attributes["duetime.outcome"]) == (
        1,
        "retried",
    )
    assert (second.attributes["duetime.attempt"], second.attributes["duetime.outcome"]) == (
        2,
        "succeeded",
    )
    assert first.attributes["duetime.generation"] == 1
    assert second.attributes["duetime.generation"] == 2
    assert first.status.status_code is StatusCode.ERROR
    assert second.status.status_code is StatusCode.UNSET


def test_an_exception_is_recorded_on_the_attempts_span(app: duetime.App, traces: Traces) -> None:
    @app.task(name="broken", max_attempts=1)
    def broken() -> None:
        raise ValueError("no such customer")

    job = broken.enqueue()
    run(app, job.id)
    span = traces.one("duetime.run broken")
    assert span.attributes is not None and span.attributes["duetime.outcome"] == "dead"
    assert span.status.status_code is StatusCode.ERROR
    assert "no such customer" in (span.status.description or "")
    [event] = [e for e in span.events if e.name == "exception"]
    assert event.attributes is not None
    assert event.attributes["exception.type"] == "ValueError"
    assert event.attributes["exception.message"] == "no such customer"
    assert "raise ValueError" in str(event.attributes["exception.stacktrace"])


def test_without_a_tracer_provider_nothing_is_stored(
    app: duetime.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API's no-op tracer (no provider configured) makes spans without a context: the job
    stores none, and it runs as any other."""
    monkeypatch.setattr(tracing, "_tracer", lambda: trace.NoOpTracer())
    seen: list[Any] = []

    @app.task(name="plain")
    def plain() -> None:
        seen.append(trace.get_current_span().get_span_context().is_valid)

    job = plain.enqueue()
    assert app.get_job(job.id).trace_context is None
    run(app, job.id)
    assert app.get_job(job.id).status is JobStatus.SUCCEEDED and seen == [False]


def test_an_async_enqueue_is_a_child_of_the_callers_span(app: duetime.App, traces: Traces) -> None:
    """aenqueue runs the enqueue in a thread: the caller's span (an async route's request)
    is still its parent."""

    @app.task(name="later")
    def later() -> None:
        pass

    async def route() -> tuple[int, int]:
        with traces.provider.get_tracer("web").start_as_current_span("GET /later") as request:
            job = await later.aenqueue()
        return request.get_span_context().span_id, job.id

    request_id, job_id = asyncio.run(route())
    enqueue = traces.one("duetime.enqueue later")
    assert parent_of(enqueue) == request_id
    assert enqueue.attributes is not None and enqueue.attributes["duetime.job.id"] == job_id


def test_an_attempt_of_a_job_enqueued_untraced_is_a_root_span(
    app: duetime.App, traces: Traces, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job that stored no context (its enqueuing process did not trace) runs in a span of a
    trace of its own, not under whatever span is current where the worker runs."""

    @app.task(name="orphan")
    def orphan() -> None:
        pass

    with monkeypatch.context() as untraced:
        untraced.setattr(tracing, "enabled", lambda: False)
        job = orphan.enqueue()
    assert app.get_job(job.id).trace_context is None
    with traces.provider.get_tracer("test").start_as_current_span("unrelated"):
        run(app, job.id)
    attempt = traces.one("duetime.run orphan")
    assert attempt.parent is None
    assert attempt.context.trace_id != traces.one("unrelated").context.trace_id


def test_baggage_reaches_the_handler(app: duetime.App, traces: Traces) -> None:
    """The default propagator's baggage is stored with the trace context and is current in
    the handler."""
    from opentelemetry import baggage, context

    seen: list[object] = []

    @app.task(name="bag")
    def bag() -> None:
        seen.append(baggage.get_baggage("user"))

    token = context.attach(baggage.set_baggage("user", "ada"))
    try:
        job = bag.enqueue()
    finally:
        context.detach(token)
    run(app, job.id)
    assert seen == ["ada"]
