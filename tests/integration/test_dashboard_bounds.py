"""The dashboard's forms refuse what the API and the CLI refuse, in one line on the page:
no value typed into a form may cause a 500 (issue 20, section 3)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from duetime import App
from duetime.core.clock import ManualClock
from integration.test_dashboard import Env, csrf, flash


@pytest.fixture
def env(store_url: str) -> Iterator[Env]:
    clock = ManualClock(datetime(2026, 1, 15, 9, 0, tzinfo=UTC))
    app = App(store_url, clock=clock)
    app.migrate()
    yield Env(app, clock)
    app.close()


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("concurrency", str(2**63), "concurrency must be a whole number from 0 to 1000000000"),
        ("max_backlog", "99999999999999999999", "max backlog must be a whole number from 0"),
        ("weight", "5e-324", "weight must be a number from 0.01 to 1000"),
        ("weight", "nan", "weight must be a number from 0.01 to 1000"),
        ("weight", "1e300", "weight must be a number from 0.01 to 1000"),
    ],
)
def test_queue_and_tenant_forms_refuse_out_of_range_values(
    env: Env, field: str, value: str, words: str
) -> None:
    c = env.logged_in(role="admin")
    token = csrf(c, "/queues")
    for path in ("/queues/emails/limits", "/tenants/acme/limits"):
        r = c.post(path, data={"csrf_token": token, field: value})
        assert r.status_code == 200, (path, r.text[-300:])
        assert words in flash(r.text), flash(r.text)
    assert env.app.store.queue_settings() == [] and env.app.store.tenant_settings() == []


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("breaker_cooldown", "-1e300", "breaker cool-down must be a duration from 1s to 1d"),
        ("breaker_cooldown", "-99999999999999", "breaker cool-down must be"),
        ("rate", "100000000000000000000000000000000000000/s", "rate"),
        ("rate", "0.0000000001/s", "rate"),
        ("burst", str(2**63), "burst must be a whole number from 1 to 1000000"),
    ],
)
def test_the_limit_form_refuses_out_of_range_values(
    env: Env, field: str, value: str, words: str
) -> None:
    c = env.logged_in(role="admin")
    token = csrf(c, "/limits")
    data = {"csrf_token": token, "key": "payments-api", field: value}
    if field == "burst":
        data["rate"] = "5/s"
    r = c.post("/limits/set", data=data)
    assert r.status_code == 200, r.text[-300:]
    assert words in flash(r.text), flash(r.text)
    assert env.app.limits() == []


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("every", "-1e300", "interval must not be negative"),
        ("every", "1e300", "interval"),
        ("every", "367d", "interval must be at most 366d"),
        ("timezone", "A" * 300, "time zone"),
        ("timezone", "Europe/" + "x" * 300, "time zone"),
        ("args", "[" * 1000, "args nest more than"),
        ("args", '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "args nest more than"),
    ],
)
def test_the_schedule_edit_form_refuses_out_of_range_values(
    env: Env, field: str, value: str, words: str
) -> None:
    s = env.app.add_schedule("nightly", task="reports.build", every="1h", timezone="UTC")
    c = env.logged_in(role="admin")
    page = f"/schedules/{s.id}"
    r = c.post(f"{page}/edit", data={"csrf_token": csrf(c, page), field: value})
    assert r.status_code == 200, r.text[-300:]
    assert words in flash(r.text), flash(r.text)
    assert env.app.store.list_schedules(None)[0].spec == s.spec
