"""The dashboard's /limits page: admins see each key and create, change and delete limits;
other roles are refused."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from html import unescape

import pytest

from duetime import App
from duetime.core.clock import ManualClock
from duetime.core.limits import LimitSettings
from integration.test_dashboard import Env, csrf, flash


@pytest.fixture
def env(store_url: str) -> Iterator[Env]:
    clock = ManualClock(datetime(2026, 1, 15, 9, 0, tzinfo=UTC))
    app = App(store_url, clock=clock)
    app.migrate()
    yield Env(app, clock)
    app.close()


def test_admins_see_and_change_limits(env: Env) -> None:
    env.app.store.set_limit(LimitSettings("payments-api", concurrency=3), env.clock.now())
    c = env.logged_in()
    page = c.get("/limits")
    assert page.status_code == 200
    assert 'data-limit="payments-api"' in page.text and 'href="/limits"' in page.text
    token = csrf(c, "/limits")
    r = c.post(
        "/limits/set",
        data={"csrf_token": token, "key": "payments-api", "rate": "5/s", "concurrency": ""},
    )
    assert "Limit 'payments-api' saved." in unescape(flash(r.text))
    settings = env.app.limit("payments-api").settings
    assert (str(settings.rate), settings.concurrency) == ("5/s", 3)  # empty field: kept
    assert 'name="breaker_cooldown"' in c.get("/limits").text
    r = c.post(
        "/limits/set",
        data={
            "csrf_token": token,
            "key": "payments-api",
            "breaker_threshold": "0.5",
            "breaker_cooldown": "2m",
        },
    )
    assert "Limit 'payments-api' saved." in unescape(flash(r.text))
    assert env.app.limit("payments-api").settings.breaker_cooldown == 120
    assert "cool-down 2m 00s" in c.get("/limits").text
    r = c.post(
        "/limits/set", data={"csrf_token": token, "key": "payments-api", "breaker_cooldown": "0"}
    )
    assert "breaker cool-down must be a duration from 1s to 1d" in unescape(flash(r.text))
    r = c.post("/limits/set", data={"csrf_token": token, "key": "mail", "rate": "5/x"})
    assert "rate '5/x' is not valid" in unescape(flash(r.text))
    assert [s.settings.key for s in env.app.limits()] == ["payments-api"]
    r = c.post("/limits/delete", data={"csrf_token": token, "key": "payments-api"})
    assert "Limit 'payments-api' deleted." in unescape(flash(r.text))
    assert env.app.limits() == []


def test_other_roles_are_refused(env: Env) -> None:
    c = env.logged_in(role="write")
    assert c.get("/limits").status_code == 403
    assert 'href="/limits"' not in c.get("/").text
    r = c.post("/limits/set", data={"csrf_token": csrf(c), "key": "a", "rate": "1/s"})
    assert r.status_code == 403
    assert env.app.limits() == []
