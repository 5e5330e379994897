"""Spans of duetime in tests: an SDK tracer provider of the test's own with the in-memory
exporter, and duetime.tracing's tracer pointed at it (not the process's global provider: the
other tests of the process stay untraced)."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from duetime import tracing


class Traces:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        monkeypatch.setattr(tracing, "_tracer", lambda: self.provider.get_tracer("duetime"))

    def spans(self, prefix: str = "") -> list[ReadableSpan]:
        """The finished spans whose names start with `prefix`."""
        return [s for s in self.exporter.get_finished_spans() if s.name.startswith(prefix)]

    def one(self, name: str) -> ReadableSpan:
        """The one finished span of that name."""
        [span] = [s for s in self.exporter.get_finished_spans() if s.name == name]
        return span
