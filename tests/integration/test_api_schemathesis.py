"""Property-based API testing with schemathesis against /openapi.json: generated requests,
valid and invalid, must never cause a 5xx and every response must match the documented schema.
Runs on SQLite and PostgreSQL (the stricter store: NUL bytes, integer ranges, encodings); the
routes that set flow controls and limits get more examples, valid and invalid (issue 20)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from duetime import App
from duetime.admin.tokens import create_token
from duetime.server import ServerSettings, create_app
from duetime.store import open_store

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture
def api_schema(store_url: str) -> Iterator[Any]:
    if store_url.startswith("postgresql"):
        from conftest import reset_postgres

        reset_postgres(store_url)
    store = open_store(store_url)
    store.migrate()
    store.close()
    app = App(store_url)
    secret = create_token(app, "acme", "admin")[1]
    # some data for ids and names to hit
    view = app.scoped("acme")
    for i in range(3):
        view.enqueue("t.seed", {"i": i})
    view.add_schedule("seed", task="t.seed", cron="*/5 * * * *", timezone="Europe/Paris")
    server = create_app(app, ServerSettings())
    schema = schemathesis.openapi.from_asgi("/openapi.json", server)
    schema.config.headers = {"Authorization": f"Bearer {secret}"}
    yield schema
    app.close()


@pytest.mark.long
def test_api_never_fails_and_matches_its_schema(api_schema: Any) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 20
    statuses: dict[int, int] = {}
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=60,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def check(case: Any) -> None:
            response = case.call_and_validate(checks=CHECKS)
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

        check()
    # the token was used: most answers are not 401, and successes were reached
    assert statuses.get(401, 0) < sum(statuses.values()) / 10, statuses
    assert sum(n for code, n in statuses.items() if code < 300) > 50, statuses


# the routes of flow control and limits per dependency, fuzzed harder: valid and invalid bodies
CONTROLS = ("/v1/queues", "/v1/tenants", "/v1/limits")


@pytest.mark.long
def test_flow_and_limit_routes_never_fail_on_any_body(api_schema: Any) -> None:
    """Every setting of a queue, a tenant or a limit key, with values valid and not (booleans,
    strings, huge and tiny numbers): a 2xx or a 4xx, never a 5xx (issue 20, section 3)."""
    operations = [
        result.ok()
        for result in api_schema.get_all_operations()
        if result.ok().path.startswith(CONTROLS) and result.ok().method.upper() in ("PATCH", "PUT")
    ]
    assert len(operations) == 3, [op.path for op in operations]
    statuses: dict[int, int] = {}
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=80,
                deadline=None,
                suppress_health_check=list(HealthCheck),
                derandomize=True,
                database=None,
            )
            def check(case: Any) -> None:
                response = case.call_and_validate(checks=CHECKS)
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

            check()
    assert statuses.get(200, 0) > 20 and statuses.get(422, 0) > 20, statuses
