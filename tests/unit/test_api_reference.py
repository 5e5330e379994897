"""The generated API reference covers every route and schema of the OpenAPI document."""

from __future__ import annotations

from duetime.server.reference import openapi, render


def test_reference_lists_every_operation_and_status() -> None:
    doc = openapi()
    text = render(doc)
    for path, item in doc["paths"].items():
        for method, op in item.items():
            assert f"## {method.upper()} {path}" in text
            for status in op["responses"]:
                assert f"| {status} |" in text
    for name in doc["components"]["schemas"]:
        assert f"## {name}" in text
    assert "## POST /v1/jobs" in text and "Idempotency-Key" in text
