"""A traced duetime app for a real `duetime worker` process (tests/integration/test_tracing.py).

Loading it configures OpenTelemetry as an application would: a tracer provider whose spans
are written, one JSON object per line, to `spans-<pid>.jsonl` in the folder named by
DUETIME_IT_OUT, as each ends (the test reads them back).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

import duetime


class JsonLinesExporter(SpanExporter):
    """Each finished span as a JSON line: its name, ids, parent, kind, attributes, events."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.lock, open(self.path, "a") as out:
            for s in spans:
                record = {
                    "name": s.name,
                    "trace_id": f"{s.context.trace_id:032x}",
                    "span_id": f"{s.context.span_id:016x}",
                    "parent_id": f"{s.parent.span_id:016x}" if s.parent else None,
                    "kind": s.kind.name,
                    "status": s.status.status_code.name,
                    "attributes": dict(s.attributes or {}),
                    "events": [e.name for e in s.events],
                }
                out.write(json.dumps(record) + "\n")
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(
    SimpleSpanProcessor(
        JsonLinesExporter(Path(os.environ["DUETIME_IT_OUT"]) / f"spans-{os.getpid()}.jsonl")
    )
)
trace.set_tracer_provider(provider)

app = duetime.App()


@app.task(name="traced")
def traced(n: int) -> None:
    with trace.get_tracer("handler").start_as_current_span("inside"):
        pass


@app.task(name="flaky", max_attempts=2, retry=duetime.RetryPolicy(base=0.05, cap=0.05))
def flaky() -> None:
    raise RuntimeError("upstream said no")
