"""The stored form of a trace context (duetime/tracing.py): what the propagator injected,
whole up to MAX_CARRIER characters, then only the W3C Trace Context headers."""

from __future__ import annotations

import json

from duetime.tracing import MAX_CARRIER, _carrier_json, carrier_of, stored_headers

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_a_carrier_is_stored_whole_and_read_back_as_headers() -> None:
    carrier = {"traceparent": PARENT, "tracestate": "a=1", "baggage": "user=ada"}
    stored = _carrier_json(carrier)
    assert stored is not None and json.loads(stored) == carrier
    assert stored_headers(stored) == carrier
    assert carrier_of(carrier) == stored  # a broker message's headers: the same form


def test_a_large_carrier_keeps_only_the_trace_context() -> None:
    carrier = {"traceparent": PARENT, "baggage": "k=" + "v" * MAX_CARRIER}
    stored = _carrier_json(carrier)
    assert stored is not None and json.loads(stored) == {"traceparent": PARENT}


def test_nothing_injected_or_nothing_readable_is_nothing() -> None:
    assert _carrier_json({}) is None
    assert carrier_of(None) is None and carrier_of({}) is None
    assert stored_headers(None) == {} and stored_headers("not json") == {}
    assert stored_headers("[1, 2]") == {}
