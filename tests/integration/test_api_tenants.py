"""Tenant isolation: a token never sees or touches another tenant's jobs or schedules (404),
on every endpoint; admin tokens see every tenant."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from duetime.core.models import Outcome
from duetime.core.retry import ErrorCategory
from duetime.core.states import Event
from integration.apiclient import Api, running_api


@pytest.fixture
def api(store_url: str) -> Iterator[Api]:
    with running_api(store_url) as api:
        yield api


def test_tenants_are_isolated_on_every_endpoint(api: Api) -> None:
    acme, globex = api.app.scoped("acme"), api.app.scoped("globex")
    job = globex.enqueue("g.task", {"secret": "globex data"}, queue="g")
    dead = globex.enqueue("g.dead", {}, queue="gdead", max_attempts=1)
    claim = api.app.store.claim(worker_id="w", queues=["gdead"], limit=1, now=api.app.clock.now())
    api.app.store.finish(
        claim[0].lease,
        Outcome(Event.GIVE_UP, error_category=ErrorCategory.PERMANENT, error_message="x"),
        api.app.clock.now(),
    )
    globex.add_schedule("shared-name", task="g.task", cron="0 * * * *", timezone="UTC")
    own = acme.enqueue("a.task", {}, queue="a")
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()

    # jobs: another tenant's job does not exist for acme, whatever the action
    for method, template, body, target in [
        ("GET", "/v1/jobs/{}", None, job.id),
        ("POST", "/v1/jobs/{}/cancel", None, job.id),
        ("POST", "/v1/jobs/{}/reschedule", {"due_at": later}, job.id),
        ("POST", "/v1/jobs/{}/replay", None, dead.id),
        ("POST", "/v1/jobs/{}/resolve", {"done": True}, job.id),
    ]:
        r = api.call(method, template.format(target), json=body, tenant="acme", role="write")
        assert r.status_code == 404, (template, r.text)
        assert "globex" not in r.text and "g.task" not in r.text
        missing = api.call(method, template.format(987654), json=body, tenant="acme")
        # exactly the answer for a job that does not exist at all
        assert missing.json()["detail"] == r.json()["detail"].replace(str(target), "987654")
    listed = api.call("GET", "/v1/jobs", tenant="acme", role="read").json()["items"]
    assert [j["id"] for j in listed] == [own.id]
    assert api.call("GET", "/v1/jobs", params={"status": "dead"}, tenant="acme").json() == {
        "items": [],
        "next_cursor": None,
    }
    assert (
        api.call("GET", "/v1/jobs", params={"tenant": "globex"}, tenant="acme").status_code == 403
    )

    # schedules: the same name in acme is simply not there; acme may create its own
    for method, suffix, body in [
        ("GET", "", None),
        ("PATCH", "", {"cron": "5 * * * *"}),
        ("DELETE", "", None),
        ("POST", "/pause", None),
        ("POST", "/resume", None),
        ("POST", "/trigger", None),
        ("GET", "/preview", None),
        ("POST", "/backfill", {"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z"}),
    ]:
        r = api.call(method, f"/v1/schedules/shared-name{suffix}", json=body, tenant="acme")
        assert r.status_code == 404, (suffix, r.text)
    assert api.call("GET", "/v1/schedules", tenant="acme").json() == {"items": []}
    r = api.call("GET", "/v1/schedules/shared-name", params={"tenant": "globex"}, tenant="acme")
    assert r.status_code == 403
    mine = api.call(
        "POST",
        "/v1/schedules",
        json={"name": "shared-name", "task": "a.task", "every_seconds": 60, "timezone": "UTC"},
        tenant="acme",
    )
    assert mine.status_code == 201 and mine.json()["tenant"] == "acme"
    assert globex.get_schedule("shared-name").spec.task == "g.task"  # untouched

    # stats and dead letters
    stats = api.call("GET", "/v1/stats", tenant="acme").json()
    assert stats["by_status"] == {"scheduled": 1} and set(stats["by_queue"]) == {"a"}
    r = api.call(
        "POST", "/v1/dead-letters/replay", json={"ids": [dead.id]}, tenant="acme", role="admin"
    )
    # an admin of acme sees every tenant: admins are operators of the whole installation
    assert r.json()["replayed"] == 1

    # nothing of globex changed through acme's write token
    assert globex.get_job(job.id).status == "scheduled"
    assert globex.get_job(job.id).version == job.version


def test_admin_tokens_see_and_steer_every_tenant(api: Api) -> None:
    a = api.app.scoped("acme").enqueue("a.t", {}, queue="a")
    g = api.app.scoped("globex").enqueue("g.t", {}, queue="g")
    api.app.scoped("globex").add_schedule("g-sched", task="g.t", cron="0 * * * *", timezone="UTC")
    items = api.call("GET", "/v1/jobs", tenant="acme", role="admin").json()["items"]
    assert {j["id"] for j in items} == {a.id, g.id}
    only = api.call("GET", "/v1/jobs", params={"tenant": "globex"}, role="admin").json()["items"]
    assert [j["id"] for j in only] == [g.id]
    assert api.call("GET", f"/v1/jobs/{g.id}", tenant="acme", role="admin").status_code == 200
    r = api.call("POST", f"/v1/jobs/{g.id}/cancel", tenant="acme", role="admin")
    assert r.status_code == 200 and r.json()["tenant"] == "globex"
    names = api.call("GET", "/v1/schedules", role="admin").json()["items"]
    assert [(s["tenant"], s["name"]) for s in names] == [("globex", "g-sched")]
    r = api.call("POST", "/v1/schedules/g-sched/pause", params={"tenant": "globex"}, role="admin")
    assert r.status_code == 200 and r.json()["paused"] is True
    # an admin enqueues into its own tenant
    r = api.call("POST", "/v1/jobs", json={"task": "x"}, tenant="acme", role="admin")
    assert r.json()["tenant"] == "acme"
