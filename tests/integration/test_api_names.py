"""Names with '/' in API paths (issue 20, section 3): a queue, tenant, limit key or schedule
whose name holds '/' is addressed as one path segment with the '/' written %2F, and only
that one is read or changed."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import pytest

from duetime.admin.flow import set_queue_flow, set_tenant_flow
from duetime.admin.tokens import create_token
from duetime.core.errors import InvalidRequest
from integration.apiclient import Api, running_api


@pytest.fixture
def api(store_url: str) -> Iterator[Api]:
    with running_api(store_url) as api:
        yield api


def seg(name: str) -> str:
    return quote(name, safe="")


@pytest.mark.parametrize(
    "name", ["../tenants/acme", "x/../shared", "a/pause", "50% off", "two\nlines/pause"]
)
def test_a_queue_with_a_slash_in_its_name_is_read_paused_and_changed(api: Api, name: str) -> None:
    api.app.scoped("acme").enqueue("t", {}, queue="shared")
    api.app.scoped("acme").enqueue("t", {}, queue=name)
    r = api.call("POST", f"/v1/queues/{seg(name)}/pause", role="admin")
    assert r.status_code == 200, r.text
    assert (r.json()["queue"], r.json()["paused"]) == (name, True)
    r = api.call("PATCH", f"/v1/queues/{seg(name)}", json={"max_backlog": 4}, role="admin")
    assert r.status_code == 200, r.text
    r = api.call("GET", f"/v1/queues/{seg(name)}", role="read")
    assert r.status_code == 200, r.text
    assert (r.json()["queue"], r.json()["max_backlog"], r.json()["backlog"]) == (name, 4, 1)
    r = api.call("POST", f"/v1/queues/{seg(name)}/resume", role="admin")
    assert r.status_code == 200 and r.json()["paused"] is False, r.text
    assert {q.queue for q in api.app.store.queue_settings()} == {name}
    assert not api.app.queue("shared").paused


def test_a_tenant_with_a_slash_in_its_name_is_changed(api: Api) -> None:
    r = api.call("PATCH", "/v1/tenants/a%2Fb", json={"weight": 2}, role="admin")
    assert r.status_code == 200, r.text
    assert (r.json()["tenant"], r.json()["weight"]) == ("a/b", 2)
    assert api.app.tenant_settings("b").weight == 1.0


def test_a_limit_key_with_a_slash_is_set_read_and_deleted(api: Api) -> None:
    r = api.call("PUT", "/v1/limits/payments%2Fv2", json={"rate": "5/s"}, role="admin")
    assert r.status_code == 200, r.text
    assert r.json()["key"] == "payments/v2"
    r = api.call("GET", "/v1/limits/payments%2Fv2", role="admin")
    assert r.status_code == 200 and r.json()["key"] == "payments/v2", r.text
    r = api.call("DELETE", "/v1/limits/payments%2Fv2", role="admin")
    assert r.status_code == 204, r.text
    assert api.app.limits() == []


def test_a_schedule_with_a_slash_in_its_name_is_read_previewed_and_paused(api: Api) -> None:
    view = api.app.scoped("acme")
    view.add_schedule("reports/daily", task="t", cron="0 9 * * *", timezone="UTC")
    view.add_schedule("reports/preview", task="t", cron="0 10 * * *", timezone="UTC")
    view.add_schedule("reports", task="t", cron="0 11 * * *", timezone="UTC")
    r = api.call("GET", "/v1/schedules/reports%2Fdaily", role="read")
    assert r.status_code == 200 and r.json()["name"] == "reports/daily", r.text
    r = api.call("GET", "/v1/schedules/reports%2Fdaily/preview?count=2", role="read")
    assert r.status_code == 200, r.text
    assert r.json()["name"] == "reports/daily" and len(r.json()["fires"]) == 2
    # the schedule named reports/preview, not the preview of the schedule named reports
    r = api.call("GET", "/v1/schedules/reports%2Fpreview", role="read")
    assert r.status_code == 200 and r.json()["name"] == "reports/preview", r.text
    r = api.call("GET", "/v1/schedules/reports/preview", role="read")
    assert r.status_code == 200 and r.json()["name"] == "reports", r.text
    assert "fires" in r.json()
    r = api.call("POST", "/v1/schedules/reports%2Fdaily/pause", role="write")
    assert r.status_code == 200 and r.json()["paused"] is True, r.text
    paused = {s.name: s.paused for s in api.app.store.list_schedules("acme")}
    assert paused == {"reports/daily": True, "reports/preview": False, "reports": False}
    r = api.call("DELETE", "/v1/schedules/reports%2Fdaily", role="write")
    assert r.status_code == 204, r.text
    assert {s.name for s in api.app.store.list_schedules("acme")} == {"reports", "reports/preview"}


def test_a_token_for_a_dot_tenant_is_refused(api: Api) -> None:
    for name in (".", ".."):
        with pytest.raises(InvalidRequest, match="cannot be written in a URL"):
            create_token(api.app, name, "read")
    r = api.call("POST", "/v1/jobs", json={"task": "t", "queue": ".."})
    assert r.status_code == 422 and "cannot be written in a URL" in r.text, r.text


def test_a_dot_queue_or_tenant_cannot_be_set_either(api: Api) -> None:
    """`duetime queues set ..` and `tenants set .` would make rows no URL reaches."""
    for name in (".", ".."):
        with pytest.raises(InvalidRequest, match="cannot be written in a URL"):
            set_queue_flow(api.app, name, paused=True)
        with pytest.raises(InvalidRequest, match="cannot be written in a URL"):
            set_tenant_flow(api.app, name, weight=2.0)
    assert [q.queue for q in api.app.store.queue_settings()] == []
