"""/v1/queues and /v1/tenants (docs/flow-control.md): listing for readers, changes for admins,
and admission control's 429 with Retry-After on enqueue."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from integration.apiclient import Api, running_api


@pytest.fixture
def api(store_url: str) -> Iterator[Api]:
    with running_api(store_url) as api:
        yield api


def test_pause_resume_and_set_limits_need_an_admin_token(api: Api) -> None:
    for method, path, body in [
        ("POST", "/v1/queues/mail/pause", None),
        ("POST", "/v1/queues/mail/resume", None),
        ("PATCH", "/v1/queues/mail", {"concurrency": 3}),
        ("PATCH", "/v1/tenants/acme", {"weight": 2}),
    ]:
        r = api.call(method, path, json=body, tenant="acme", role="write")
        assert r.status_code == 403, (path, r.text)
    assert api.app.store.queue_settings() == [] and api.app.store.tenant_settings() == []

    r = api.call("POST", "/v1/queues/mail/pause", tenant="ops", role="admin")
    assert r.status_code == 200 and r.json()["paused"] is True
    r = api.call(
        "PATCH", "/v1/queues/mail", json={"concurrency": 3, "max_backlog": 10}, role="admin"
    )
    assert r.status_code == 200, r.text
    assert (r.json()["paused"], r.json()["concurrency"], r.json()["max_backlog"]) == (True, 3, 10)
    r = api.call("PATCH", "/v1/queues/mail", json={"concurrency": None}, role="admin")
    assert (r.json()["concurrency"], r.json()["max_backlog"]) == (None, 10)  # null: no limit
    r = api.call("POST", "/v1/queues/mail/resume", role="admin")
    assert r.json()["paused"] is False
    r = api.call("PATCH", "/v1/queues/mail", json={"concurrency": -1}, role="admin")
    assert r.status_code == 422
    r = api.call("PATCH", "/v1/tenants/acme", json={"weight": 2, "concurrency": 4}, role="admin")
    assert r.status_code == 200, r.text
    assert (r.json()["tenant"], r.json()["weight"], r.json()["concurrency"]) == ("acme", 2, 4)


def test_lists_show_counts_and_a_tenant_sees_its_own(api: Api) -> None:
    api.app.scoped("acme").enqueue("t", {}, queue="mail")
    api.app.scoped("acme").enqueue("t", {}, queue="mail", delay=3600)  # not due: not waiting
    api.app.scoped("globex").enqueue("t", {}, queue="mail")
    api.app.set_queue("mail", concurrency=2)
    api.app.set_tenant("globex", max_backlog=5)
    admin = api.call("GET", "/v1/queues", role="admin").json()
    assert [(q["queue"], q["concurrency"], q["backlog"], q["waiting"]) for q in admin] == [
        ("mail", 2, 3, 2)
    ]
    assert 0 <= admin[0]["waiting_seconds"] < 60
    own = api.call("GET", "/v1/queues", tenant="acme", role="read").json()
    assert [(q["queue"], q["backlog"], q["waiting"]) for q in own] == [("mail", 2, 1)]
    one = api.call("GET", "/v1/queues/mail", tenant="acme", role="read").json()
    assert (one["backlog"], one["running"], one["waiting"]) == (2, 0, 1)
    unknown = api.call("GET", "/v1/queues/quiet", role="admin").json()
    assert (unknown["backlog"], unknown["waiting"], unknown["waiting_seconds"]) == (0, 0, 0)
    tenants = api.call("GET", "/v1/tenants", role="admin").json()
    assert [(t["tenant"], t["max_backlog"], t["backlog"], t["waiting"]) for t in tenants] == [
        ("acme", None, 2, 1),
        ("globex", 5, 1, 1),
    ]
    assert all(0 <= t["waiting_seconds"] < 60 for t in tenants)
    assert [t["tenant"] for t in api.call("GET", "/v1/tenants", tenant="acme").json()] == ["acme"]
    stats = api.call("GET", "/v1/stats", role="admin").json()
    assert [(q["queue"], q["backlog"], q["waiting"]) for q in stats["flow"]["queues"]] == [
        ("mail", 3, 2)
    ]
    assert {(t["tenant"], t["waiting"]) for t in stats["flow"]["tenants"]} == {
        ("acme", 1),
        ("globex", 1),
    }


def test_enqueue_past_max_backlog_answers_429_with_retry_after(api: Api) -> None:
    api.app.set_queue("mail", max_backlog=1)
    first = api.call("POST", "/v1/jobs", json={"task": "t", "queue": "mail"})
    assert first.status_code == 201, first.text
    before = api.count_jobs()
    refused = api.call("POST", "/v1/jobs", json={"task": "t", "queue": "mail"})
    assert refused.status_code == 429, refused.text
    assert int(refused.headers["Retry-After"]) > 0
    assert "max backlog of 1" in refused.json()["detail"]
    assert api.count_jobs() == before  # nothing stored
    api.app.set_tenant("acme", max_backlog=1)
    other = api.call("POST", "/v1/jobs", json={"task": "t", "queue": "other"})
    assert other.status_code == 429 and "tenant 'acme'" in other.json()["detail"]


@pytest.mark.parametrize(
    "body",
    [
        {"concurrency": True},
        {"max_backlog": False},
        {"paused": 1},
        {"paused": "true"},
        {"concurrency": "5"},
        {"max_backlog": 2**63},
        {"concurrency": 10**9 + 1},
        {"weight": 5e-324},
        {"weight": 1e6},
        {"weight": True},
        {"weight": "2"},
    ],
)
def test_flow_settings_refuse_type_confusion_and_out_of_range_values(
    api: Api, body: dict[str, object]
) -> None:
    """Issue 20: true became 1, false a max_backlog of 0 (refusing every enqueue), 1 a pause,
    "5" a 5; weights of 5e-324 were taken. Each is a 422 naming its field; nothing changes."""
    for path in ("/v1/queues/mail", "/v1/tenants/acme"):
        if "paused" in body and "tenants" in path:
            continue
        r = api.call("PATCH", path, json=body, tenant="ops", role="admin")
        assert r.status_code == 422, (path, body, r.text)
        [problem] = r.json()["detail"]
        assert problem["loc"][:2] == ["body", next(iter(body))], problem
    assert api.app.store.queue_settings() == [] and api.app.store.tenant_settings() == []
    ok = api.call("PATCH", "/v1/tenants/acme", json={"weight": 2, "concurrency": 0}, role="admin")
    assert ok.status_code == 200 and (ok.json()["weight"], ok.json()["concurrency"]) == (2, 0)
