"""Property-based fuzzing of what people type (issue 20, section 3): any JSON value in any
setting of a queue, a tenant or a limit key on the API, any text in the dashboard's forms. No
input may cause a 5xx, and a value of the wrong type (a boolean, a numeric string) is never
taken. Runs on SQLite and PostgreSQL; 200 examples per form and route, seconds each."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from duetime import App
from duetime.core.clock import ManualClock
from integration.apiclient import Api, running_api
from integration.test_dashboard import Env, csrf

FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
    database=None,
)

# numbers at and past every bound: 0, negatives, 2**31, 2**63, the float extremes
EDGES = [0, 1, -1, 2**31, 2**63, -(2**63), 10**9 + 1, 1e300, -1e300, 5e-324, 1e38, 0.5]
NUMBERS = st.one_of(
    st.sampled_from(EDGES),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
)
SPECIAL_TEXTS = st.sampled_from(
    [
        "off",
        "none",
        "5",
        "0.2",
        "-1e300",
        "1e300",
        str(2**63),
        "nan",
        "inf",
        "30s",
        "-5s",
        "1e38/s",
        "5/s",
        "0.0000001/s",
        "A" * 300,
        "[" * 1000,
        "",
        " ",
    ]
)
# (the values at the bounds drawn as often as any text)
TEXTS = st.one_of(SPECIAL_TEXTS, st.text(max_size=30))
VALUES = st.one_of(
    st.booleans(), NUMBERS, st.sampled_from(EDGES), TEXTS, st.none(), st.lists(st.integers())
)

FLOW_FIELDS = ["concurrency", "max_backlog", "weight"]
LIMIT_FIELDS = [
    "rate",
    "burst",
    "concurrency",
    "retry_budget",
    "breaker_threshold",
    "breaker_cooldown",
]


@pytest.fixture
def api(store_url: str) -> Iterator[Api]:
    with running_api(store_url) as api:
        yield api


def _no_server_error(r: Any, sent: object) -> None:
    assert r.status_code < 500, (sent, r.status_code, r.text[:300])
    assert "Traceback" not in r.text, sent


def _wrong_type(value: object, *, off: bool) -> bool:
    """A boolean, or a string where a number is meant (except "off" where it switches off)."""
    return isinstance(value, bool) or (isinstance(value, str) and not (off and value == "off"))


@pytest.mark.parametrize("path", ["/v1/queues/q", "/v1/tenants/t"])
def test_flow_settings_never_fail_and_never_take_a_wrong_type(api: Api, path: str) -> None:
    fields = [*FLOW_FIELDS, "paused"] if "queues" in path else FLOW_FIELDS

    @FUZZ
    @given(body=st.dictionaries(st.sampled_from(fields), VALUES, min_size=1, max_size=2))
    def check(body: dict[str, Any]) -> None:
        r = api.call("PATCH", path, json=body, tenant="ops", role="admin")
        _no_server_error(r, body)
        if r.status_code == 200:
            got = r.json()
            for field, value in body.items():
                wrong = (
                    _wrong_type(value, off=False)
                    if field != "paused"
                    else (not isinstance(value, bool | None))
                )
                assert not wrong, (body, got)
            for field in ("concurrency", "max_backlog"):
                assert got[field] is None or 0 <= got[field] <= 10**9, got
            assert 0.01 <= got["weight"] <= 1000, got

    check()


def test_limit_settings_never_fail_and_never_take_a_wrong_type(api: Api) -> None:
    @FUZZ
    @given(body=st.dictionaries(st.sampled_from(LIMIT_FIELDS), VALUES, min_size=1, max_size=2))
    def check(body: dict[str, Any]) -> None:
        r = api.call("PUT", "/v1/limits/k", json=body, tenant="ops", role="admin")
        _no_server_error(r, body)
        if r.status_code == 200:
            got = r.json()
            for field in ("burst", "concurrency", "retry_budget", "breaker_threshold"):
                if field in body:
                    assert not _wrong_type(body[field], off=True), (body, got)
            for field in ("burst", "concurrency"):
                assert got[field] is None or 1 <= got[field] <= 1_000_000, got
            assert 1 <= got["breaker_cooldown_seconds"] <= 86400, got
            if got["rate"] is not None:
                count = float(got["rate"].split("/")[0])
                assert 0.001 <= count <= 1_000_000 and math.isfinite(count), got

    check()


# -- the dashboard's forms ------------------------------------------------------------------


@pytest.fixture
def env(store_url: str) -> Iterator[Env]:
    clock = ManualClock(datetime(2026, 1, 15, 9, 0, tzinfo=UTC))
    app = App(store_url, clock=clock)
    app.migrate()
    yield Env(app, clock)
    app.close()


FORM_TEXT = st.one_of(SPECIAL_TEXTS, st.sampled_from([str(n) for n in EDGES]), st.text())


def _fuzz_form(c: TestClient, path: str, fields: list[str], token: str) -> None:
    @FUZZ
    @given(form=st.dictionaries(st.sampled_from(fields), FORM_TEXT, min_size=1, max_size=2))
    def check(form: dict[str, str]) -> None:
        r = c.post(path, data={"csrf_token": token, **form})
        _no_server_error(r, form)

    check()


@pytest.mark.long
def test_the_flow_and_limit_forms_never_fail(env: Env) -> None:
    c = env.logged_in(role="admin")
    token = csrf(c, "/queues")
    _fuzz_form(c, "/queues/emails/limits", FLOW_FIELDS, token)
    _fuzz_form(c, "/tenants/acme/limits", FLOW_FIELDS, token)
    _fuzz_form(c, "/limits/set", ["key", *LIMIT_FIELDS], token)


@pytest.mark.long
def test_the_schedule_job_and_dead_letter_forms_never_fail(env: Env) -> None:
    s = env.app.add_schedule("nightly", task="reports.build", every="1h", timezone="UTC")
    job = env.scheduled()
    c = env.logged_in(role="admin")
    token = csrf(c, "/queues")
    fields = ["cron", "every", "timezone", "args", "misfire", "overlap"]
    _fuzz_form(c, f"/schedules/{s.id}/edit", fields, token)
    _fuzz_form(c, f"/jobs/{job.id}/reschedule", ["due_at"], token)
    search = ["task", "queue", "status", "tenant", "due_after", "due_before", "key", "args"]
    _fuzz_form(c, "/jobs/cancel?scope=matching", ["scope", *search], token)
    _fuzz_form(c, "/dead-letters/replay", ["scope", "task", "queue", "tenant", "per_second"], token)


def test_the_login_form_never_fails(env: Env) -> None:
    c = env.client()
    page = c.get("/login")
    token = csrf(c, "/login") if page.status_code == 200 else ""
    _fuzz_form(c, "/login", ["token", "next"], token)
