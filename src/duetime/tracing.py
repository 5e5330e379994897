"""OpenTelemetry traces of enqueues and attempts (the `otel` extra, docs/tracing.md).

The only module of duetime that imports opentelemetry, and only once the application has
imported it itself (`enabled()`: `opentelemetry.trace` is in sys.modules, which configuring a
tracer provider does): a process that does not trace imports nothing of it and pays one
dictionary lookup per enqueue and attempt. Spans go to the tracer provider the application
configured; without one, the API's no-op spans carry no context and nothing is stored.

- `enqueue_span`: `duetime.enqueue <task>` (PRODUCER) around an enqueue; the trace context it
  yields, as the configured propagator injects it (W3C traceparent and tracestate by default),
  is stored with the job.
- `RunSpan`: `duetime.run <task>` (CONSUMER) around one attempt, child of the stored context,
  current while the handler runs (the handler's own spans are its children).
- `publish_headers`: `duetime.publish <task>` (PRODUCER) per outbox event the relay publishes,
  child of its job's context; the broker message's headers carry it to the broker-fed worker.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from duetime.core.models import Attempt, Job
    from duetime.core.outbox import OutboxEvent

log = logging.getLogger("duetime.tracing")

TRACER_NAME = "duetime"
MESSAGING_SYSTEM = "duetime"
# the headers of W3C Trace Context: what is kept of a carrier past MAX_CARRIER
CONTEXT_HEADERS = ("traceparent", "tracestate")
MAX_CARRIER = 4096  # characters of stored JSON: a larger carrier (much baggage) is cut down


def enabled() -> bool:
    """Whether this process traces: the application imported OpenTelemetry's trace API."""
    return "opentelemetry.trace" in sys.modules


def _tracer() -> Any:
    from opentelemetry import trace

    return trace.get_tracer(TRACER_NAME)


def _attributes(
    kind: str,
    operation: str,
    task: str,
    queue: str,
    message_id: int | None = None,
    job_id: int | None = None,
) -> dict[str, Any]:
    """What every span of duetime says: the messaging semantic conventions' attributes (its
    operation's type and name, the queue as destination, the message's id) and duetime's."""
    attributes: dict[str, Any] = {
        "messaging.system": MESSAGING_SYSTEM,
        "messaging.operation.type": kind,
        "messaging.operation.name": operation,
        "messaging.destination.name": queue,
        "duetime.task": task,
        "duetime.queue": queue,
    }
    if message_id is not None:
        attributes["messaging.message.id"] = str(message_id)
    if job_id is not None:
        attributes["duetime.job.id"] = job_id
    return attributes


def _carrier_json(carrier: Mapping[str, Any]) -> str | None:
    """What the propagator injected (W3C traceparent and tracestate by default, baggage, or
    another propagator's headers) as the JSON text stored with a job; None if nothing. Past
    MAX_CARRIER characters only the W3C Trace Context headers are kept."""
    kept = {str(k): str(v) for k, v in carrier.items()}
    text = json.dumps(kept, separators=(",", ":"), sort_keys=True)
    if len(text) > MAX_CARRIER:
        kept = {k: kept[k] for k in CONTEXT_HEADERS if k in kept}
        text = json.dumps(kept, separators=(",", ":"), sort_keys=True)
    return text if kept else None


def carrier_of(headers: Mapping[str, Any] | None) -> str | None:
    """The stored form (JSON text) of the trace context in a broker message's headers (the
    relay puts nothing else there); None without headers."""
    return _carrier_json(headers) if headers else None


def _parent(trace_context: str | None) -> Any:
    """The OpenTelemetry context extracted from a stored trace context; none stored, an empty
    one (the span is a root, whatever span is current where the worker runs)."""
    from opentelemetry import propagate
    from opentelemetry.context import Context

    carrier = stored_headers(trace_context)
    return propagate.extract(carrier) if carrier else Context()


def _inject() -> str | None:
    """The current context, injected by the configured propagator, as stored text."""
    from opentelemetry import propagate, trace

    if not trace.get_current_span().get_span_context().is_valid:
        return None  # no provider configured: nothing worth storing
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return _carrier_json(carrier)


class EnqueueSpan:
    """The span of one enqueue: `trace_context` is what to store with its jobs."""

    def __init__(self, span: Any, trace_context: str | None) -> None:
        self.span = span
        self.trace_context = trace_context

    def created(self, job_ids: Sequence[int], *, batch: bool = False) -> None:
        """Name the jobs the enqueue created or found: one job's id, or a batch's count."""
        if batch:
            self.span.set_attribute("messaging.batch.message_count", len(job_ids))
        elif job_ids:
            self.span.set_attribute("duetime.job.id", job_ids[0])
            self.span.set_attribute("messaging.message.id", str(job_ids[0]))


@contextmanager
def enqueue_span(task: str, *, queue: str, tenant: str) -> Iterator[EnqueueSpan]:
    """A `duetime.enqueue <task>` span (kind PRODUCER), current inside the block; an
    exception out of the block is recorded on it. Call only when enabled()."""
    from opentelemetry.trace import SpanKind

    attributes = _attributes("send", "enqueue", task, queue)
    attributes["duetime.tenant"] = tenant
    with _tracer().start_as_current_span(
        f"duetime.enqueue {task}", kind=SpanKind.PRODUCER, attributes=attributes
    ) as span:
        yield EnqueueSpan(span, _inject())


class RunSpan:
    """The `duetime.run <task>` span (kind CONSUMER) of one attempt, its parent the job's
    stored trace context; current from start() to end() (in the attempt's own task)."""

    @classmethod
    def start(cls, job: Job, attempt: Attempt) -> RunSpan | None:
        """The attempt's span, started and current; None (logged) if tracing failed: a fault
        of the tracing never stops the attempt."""
        try:
            return cls(job, attempt)
        except Exception:
            log.exception("could not start the span of job %s's attempt", job.id)
            return None

    def __init__(self, job: Job, attempt: Attempt) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace import SpanKind

        parent = _parent(job.trace_context)  # its span and its baggage
        self._span = _tracer().start_span(
            f"duetime.run {job.task}",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes={
                **_attributes("process", "run", job.task, job.queue, job.id, job.id),
                "duetime.attempt": job.attempts,
                "duetime.tenant": job.tenant,
                "duetime.generation": attempt.generation,
                "duetime.fencing_token": attempt.fencing_token,
                "duetime.worker.id": attempt.worker_id,
            },
        )
        self._token = context.attach(trace.set_span_in_context(self._span, parent))

    def exception(self, exc: BaseException) -> None:
        """What the handler raised, recorded on the span (an event with its traceback)."""
        self._span.record_exception(exc)

    def end(self, outcome: str, error: str | None = None) -> None:
        """End the span with the attempt's outcome (`duetime.outcome`); `error` (the outcome's
        error message, for a failed attempt) sets its status to ERROR."""
        from opentelemetry import context
        from opentelemetry.trace import Status, StatusCode

        try:
            self._span.set_attribute("duetime.outcome", outcome)
            if error is not None:
                self._span.set_status(Status(StatusCode.ERROR, error[:500]))
            self._span.end()
        except Exception:  # the outcome is recorded already: a fault here changes nothing
            log.exception("could not end the span of an attempt")
        finally:
            context.detach(self._token)


class PublishSpans:
    """The `duetime.publish <task>` spans of events being published, and their headers."""

    def __init__(self, events: Sequence[OutboxEvent]) -> None:
        from opentelemetry import propagate, trace
        from opentelemetry.trace import SpanKind

        tracer = _tracer()
        self.spans: list[Any] = []
        self.headers: list[dict[str, str]] = []
        for e in events:
            parent = _parent(e.trace_context)  # its span and its baggage
            span = tracer.start_span(
                f"duetime.publish {e.task}",
                context=parent,
                kind=SpanKind.PRODUCER,
                attributes={
                    **_attributes("send", "publish", e.task, e.queue, e.id, e.job_id),
                    "duetime.generation": e.generation,
                },
            )
            headers: dict[str, str] = {}
            if span.get_span_context().is_valid:
                propagate.inject(headers, context=trace.set_span_in_context(span, parent))
            self.spans.append(span)
            self.headers.append(headers)

    def end(self, results: Sequence[object]) -> None:
        """End each span with its publish's result (an exception: recorded, status ERROR)."""
        from opentelemetry.trace import Status, StatusCode

        for span, result in zip(self.spans, results, strict=True):
            if isinstance(result, BaseException):
                span.record_exception(result)
                span.set_status(Status(StatusCode.ERROR, str(result)[:500]))
            span.end()


def publish_headers(
    events: Sequence[OutboxEvent],
) -> tuple[list[dict[str, str]], PublishSpans | None]:
    """The headers of each event's broker message, and the publish spans to end once the
    broker answered (None: this process does not trace; the headers then carry the stored
    contexts as they are, and nothing of OpenTelemetry is imported). A fault of the tracing
    is logged and the stored contexts are sent: it never stops a publish."""
    if enabled():
        try:
            spans = PublishSpans(events)
        except Exception:
            log.exception("could not start the publish spans of %d outbox events", len(events))
        else:
            return spans.headers, spans
    return [stored_headers(e.trace_context) for e in events], None


def stored_headers(trace_context: str | None) -> dict[str, str]:
    """A stored trace context as message headers (none stored: no headers)."""
    if trace_context is None:
        return {}
    try:
        carrier = json.loads(trace_context)
    except ValueError:
        return {}
    if not isinstance(carrier, dict):
        return {}
    return {str(k): str(v) for k, v in carrier.items()}
