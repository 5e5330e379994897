"""The REST API v1 on both stores: every endpoint, every error status, nothing stored on error."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from duetime.admin.tokens import create_token
from duetime.core.clock import ManualClock
from duetime.core.models import Node, Outcome
from duetime.core.reconcile import Reconcile  # noqa: F401  (the parked path is in the store)
from duetime.core.retry import ErrorCategory
from duetime.core.states import AttemptStatus, Event
from integration.apiclient import Api, running_api


@pytest.fixture
def api(store_url: str) -> Iterator[Api]:
    with running_api(store_url, max_payload_bytes=2000, max_body_bytes=64 * 1024) as api:
        yield api


def iso(dt: datetime) -> str:
    return dt.isoformat()


def make_dead(api: Api, tenant: str = "acme", task: str = "t.fail", **kw: Any) -> int:
    """A job of `tenant` that failed for good: claimed, then given up, with an error."""
    kw.setdefault("queue", "doomed")
    job = api.app.scoped(tenant).enqueue(task, {"n": 1}, max_attempts=1, **kw)
    run_attempt(
        api,
        job.id,
        Outcome(
            Event.GIVE_UP, error_category=ErrorCategory.PERMANENT, error_message="card declined"
        ),
    )
    return job.id


def run_attempt(api: Api, job_id: int, outcome: Outcome | None) -> Any:
    """Claim `job_id` (it must be the next due job of its queue) and record `outcome`."""
    store = api.app.store
    job = store.get_job(job_id)
    assert job is not None
    claims = store.claim(worker_id="w-test", queues=[job.queue], limit=1, now=api.app.clock.now())
    assert [c.job.id for c in claims] == [job_id], claims
    if outcome is not None:
        store.finish(claims[0].lease, outcome, api.app.clock.now())
    return claims[0].lease


# -- POST /v1/jobs ------------------------------------------------------------------------------


def test_enqueue_creates_and_idempotency_key_returns_the_original(api: Api) -> None:
    body = {"task": "mail.send", "args": {"to": "a@example.com"}, "queue": "mail", "priority": 5}
    first = api.call("POST", "/v1/jobs", json=body, headers={"Idempotency-Key": "k-1"})
    assert first.status_code == 201, first.text
    job = first.json()
    assert job["task"] == "mail.send" and job["status"] == "scheduled" and job["tenant"] == "acme"
    assert job["queue"] == "mail" and job["priority"] == 5 and job["idempotency_key"] == "k-1"
    assert datetime.fromisoformat(job["due_at"]).utcoffset() is not None  # RFC 3339, offset
    again = api.call("POST", "/v1/jobs", json=body, headers={"Idempotency-Key": "k-1"})
    assert again.status_code == 200 and again.json()["id"] == job["id"]
    other = api.call(
        "POST", "/v1/jobs", json={**body, "args": {"to": "b"}}, headers={"Idempotency-Key": "k-1"}
    )
    assert other.status_code == 409 and "different request" in other.json()["detail"]
    # the same key in another tenant is another job
    elsewhere = api.call(
        "POST", "/v1/jobs", json=body, headers={"Idempotency-Key": "k-1"}, tenant="globex"
    )
    assert elsewhere.status_code == 201 and elsewhere.json()["id"] != job["id"]
    assert api.count_jobs() == 2


def test_enqueue_timing_fields(api: Api) -> None:
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=2)
    r = api.call("POST", "/v1/jobs", json={"task": "t", "due_at": iso(at)})
    assert r.status_code == 201 and datetime.fromisoformat(r.json()["due_at"]) == at
    r = api.call(
        "POST",
        "/v1/jobs",
        json={
            "task": "t",
            "delay_seconds": 60,
            "deadline_at": iso(at + timedelta(hours=1)),
            "max_attempts": 3,
        },
    )
    job = r.json()
    assert r.status_code == 201 and job["max_attempts"] == 3
    due = datetime.fromisoformat(job["due_at"])
    assert timedelta(seconds=55) < due - datetime.now(UTC) <= timedelta(seconds=60)
    assert datetime.fromisoformat(job["deadline_at"]) == at + timedelta(hours=1)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"args": {}}, "task"),
        ({"task": ""}, "task"),
        ({"task": "t", "priority": "high"}, "priority"),
        ({"task": "t", "args": [1, 2]}, "args"),
        ({"task": "t", "due_at": "2030-01-01T09:00:00"}, "due_at"),  # no offset
        ({"task": "t", "delay_seconds": -1}, "delay_seconds"),
        ({"task": "t", "max_attempts": 0}, "max_attempts"),
        ({"task": "t", "colour": "red"}, "colour"),
        ({"task": "t\x00x"}, "task"),
        ({"task": "t", "due_at": "2030-01-01T09:00:00Z", "delay_seconds": 5}, None),
        ({"task": "t", "deadline_at": "2000-01-01T00:00:00Z"}, "deadline_at"),
        # a boolean or a string is not a number (issue 20: true was taken as 1, "5" as 5)
        ({"task": "t", "priority": True}, "priority"),
        ({"task": "t", "priority": "5"}, "priority"),
        ({"task": "t", "max_attempts": True}, "max_attempts"),
        ({"task": "t", "delay_seconds": "60"}, "delay_seconds"),
        ({"task": "t", "delay_seconds": False}, "delay_seconds"),
    ],
)
def test_enqueue_refuses_invalid_input_field_by_field(
    api: Api, body: dict[str, Any], field: str | None
) -> None:
    r = api.call("POST", "/v1/jobs", json=body)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert isinstance(detail, list) and detail[0]["msg"]
    if field is not None:
        assert any(field in map(str, d["loc"]) for d in detail), detail
    assert api.count_jobs() == 0


def test_a_server_that_knows_its_tasks_refuses_what_they_cannot_run(api: Api) -> None:
    """Started with --app, the server knows the tasks: unknown ones and args that do not bind
    to the handler are a 422 naming the field, and nothing is stored."""

    @api.app.task(name="greet")
    def greet(name: str) -> None:
        pass

    cases = [
        ({"task": "nosuch", "args": {}}, "task", "task 'nosuch' is not registered"),
        ({"task": "greet", "args": {"nam": "x"}}, "args", "missing a required argument"),
        ({"task": "greet"}, "args", "missing a required argument: 'name'"),
    ]
    for body, field, fragment in cases:
        r = api.call("POST", "/v1/jobs", json=body)
        assert r.status_code == 422, r.text
        [detail] = r.json()["detail"]
        assert detail["loc"] == ["body", field] and fragment in detail["msg"], detail
    assert api.count_jobs() == 0
    assert api.call("POST", "/v1/jobs", json={"task": "greet", "args": {"name": "x"}}).is_success


def test_job_detail_says_when_no_worker_serves_its_task(api: Api) -> None:
    job = api.call("POST", "/v1/jobs", json={"task": "emails.sned", "args": {}}).json()
    detail = api.call("GET", f"/v1/jobs/{job['id']}").json()
    assert detail["unserved"].startswith("no worker serves task 'emails.sned'"), detail
    now = api.app.clock.now()
    node = Node("n1", "host", 1, None, 4, ("worker",), "0", now, now, tasks=("emails.sned",))
    api.app.store.register_node(node, now)
    assert api.call("GET", f"/v1/jobs/{job['id']}").json()["unserved"] is None


def test_enqueue_refuses_oversized_payloads_with_413(api: Api) -> None:
    r = api.call("POST", "/v1/jobs", json={"task": "t", "args": {"blob": "x" * 3000}})
    assert r.status_code == 413 and "limit" in r.json()["detail"]
    r = api.call("POST", "/v1/jobs", json={"task": "t", "args": {"blob": "x" * 70_000}})
    assert r.status_code == 413 and "limit" in r.json()["detail"]
    chunks = [b'{"task": "t", "args": {"blob": "', *[b"x" * 10_000] * 7, b'"}}']
    r = api.call(  # no Content-Length: the body is counted as it streams in
        "POST", "/v1/jobs", content=iter(chunks), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 413
    r = api.call(
        "POST", "/v1/jobs", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 422
    assert api.count_jobs() == 0


def test_auth_is_required_and_roles_are_enforced(api: Api) -> None:
    body = {"task": "t"}
    assert api.client.post("/v1/jobs", json=body).status_code == 401
    assert api.client.get("/v1/jobs").status_code == 401
    r = api.client.get("/v1/jobs", headers={"Authorization": "Bearer dt_nope"})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert api.client.get("/v1/jobs", headers={"Authorization": "Basic abc"}).status_code == 401
    assert api.call("POST", "/v1/jobs", json=body, role="read").status_code == 403
    assert api.call("GET", "/v1/jobs", role="read").status_code == 200
    token_id = api.app.store.find_token(
        __import__("duetime.core.tokens", fromlist=["hash_secret"]).hash_secret(api.token()),
        api.app.clock.now(),
    )
    assert token_id is not None
    api.app.revoke_token(token_id.id)
    assert api.call("GET", "/v1/jobs").status_code == 401
    assert api.count_jobs() == 0


# -- reading jobs ----------------------------------------------------------------------------


def test_an_expired_token_is_refused_with_401_saying_so(api: Api) -> None:
    token, secret = create_token(api.app, "acme", "read", expires_in=timedelta(days=1))
    assert token.expires_at is not None
    headers = {"Authorization": f"Bearer {secret}"}
    assert api.client.get("/v1/jobs", headers=headers).status_code == 200
    api.app.clock = ManualClock(token.expires_at)
    r = api.client.get("/v1/jobs", headers=headers)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    expires = token.expires_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert r.json()["detail"] == (
        f"token {secret[:10]}... expired at {expires}; "
        "create a new one with `duetime tokens create`"
    )
    api.app.clock = ManualClock(token.expires_at - timedelta(seconds=1))
    assert api.client.get("/v1/jobs", headers=headers).status_code == 200


def test_get_job_shows_attempts_and_list_pages_with_cursors(api: Api) -> None:
    view = api.app.scoped("acme")
    ids = [view.enqueue("t.list", {"i": i}, queue="q1" if i % 2 else "q2").id for i in range(7)]
    lease = run_attempt(
        api,
        ids[0],
        Outcome(
            Event.RETRY,
            due_at=api.app.clock.now() + timedelta(hours=1),
            error_category=ErrorCategory.RETRYABLE,
            error_message="timeout talking to smtp",
            error_traceback="Traceback ...\nTimeoutError",
        ),
    )
    r = api.call("GET", f"/v1/jobs/{ids[0]}")
    assert r.status_code == 200
    job = r.json()
    (attempt,) = job["attempt_history"]
    assert attempt["generation"] == lease.generation == 1
    assert attempt["status"] == str(AttemptStatus.FAILED) and attempt["worker_id"] == "w-test"
    assert attempt["error_message"] == "timeout talking to smtp"
    assert attempt["error_traceback"].endswith("TimeoutError")
    assert attempt["started_at"] and attempt["finished_at"] and attempt["lease_expires_at"]
    assert api.call("GET", "/v1/jobs/999999").status_code == 404
    assert api.call("GET", "/v1/jobs/0").status_code == 422

    seen: list[int] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 3, "task": "t.list"}
        if cursor:
            params["cursor"] = cursor
        page = api.call("GET", "/v1/jobs", params=params).json()
        seen += [j["id"] for j in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == sorted(ids, reverse=True)
    q1 = api.call("GET", "/v1/jobs", params={"queue": "q1"}).json()["items"]
    assert {j["id"] for j in q1} == {i for n, i in enumerate(ids) if n % 2}
    scheduled = api.call("GET", "/v1/jobs", params={"status": "scheduled"}).json()["items"]
    assert len(scheduled) == 7
    later = api.call(
        "GET", "/v1/jobs", params={"due_after": iso(datetime.now(UTC) + timedelta(minutes=30))}
    ).json()["items"]
    assert [j["id"] for j in later] == [ids[0]]
    assert api.call("GET", "/v1/jobs", params={"status": "bogus"}).status_code == 422
    assert api.call("GET", "/v1/jobs", params={"cursor": "abc"}).status_code == 422
    assert api.call("GET", "/v1/jobs", params={"limit": 0}).status_code == 422


# -- steering jobs ---------------------------------------------------------------------------


def test_cancel_reschedule_replay_resolve_and_409s(api: Api) -> None:
    view = api.app.scoped("acme")
    job = view.enqueue("t.steer", {})
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    r = api.call("POST", f"/v1/jobs/{job.id}/reschedule", json={"due_at": iso(at)})
    assert r.status_code == 200 and datetime.fromisoformat(r.json()["due_at"]) == at
    assert r.json()["version"] == job.version + 1
    r = api.call("POST", f"/v1/jobs/{job.id}/reschedule", json={"due_at": "tomorrow"})
    assert r.status_code == 422
    r = api.call("POST", f"/v1/jobs/{job.id}/cancel")
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    r = api.call("POST", f"/v1/jobs/{job.id}/cancel")
    assert r.status_code == 409 and "it is cancelled" in r.json()["detail"]
    r = api.call("POST", f"/v1/jobs/{job.id}/reschedule", json={"due_at": iso(at)})
    assert r.status_code == 409
    r = api.call("POST", f"/v1/jobs/{job.id}/replay")
    assert r.status_code == 200 and r.json()["status"] == "scheduled"
    r = api.call("POST", f"/v1/jobs/{job.id}/replay")
    assert r.status_code == 409 and "replay applies only to" in r.json()["detail"]
    r = api.call("POST", f"/v1/jobs/{job.id}/resolve", json={"done": True})
    assert r.status_code == 409
    for action in ("cancel", "replay"):
        assert api.call("POST", f"/v1/jobs/424242/{action}").status_code == 404
        assert api.call("POST", f"/v1/jobs/{job.id}/{action}", role="read").status_code == 403

    parked = view.enqueue("t.parked", {}, queue="parking")
    lease = run_attempt(api, parked.id, None)
    api.app.store.finish(
        lease,
        Outcome(Event.PARK, error_category=ErrorCategory.UNKNOWN_OUTCOME, error_message="?"),
        api.app.clock.now(),
    )
    assert api.call("GET", f"/v1/jobs/{parked.id}").json()["status"] == "parked"
    r = api.call("POST", f"/v1/jobs/{parked.id}/resolve", json={"done": True})
    assert r.status_code == 200 and r.json()["status"] == "succeeded"
    assert api.call("POST", f"/v1/jobs/{parked.id}/resolve", json={}).status_code == 422


def test_a_dispatched_job_shows_since_when_and_is_rescheduled_or_cancelled(api: Api) -> None:
    # docs/outbox.md, "Withdrawn dispatches": running, its attempt waiting in the broker
    api.app.set_queue("broker", dispatch="outbox")
    view = api.app.scoped("acme")
    first, second = (view.enqueue("t.sent", {}, queue="broker") for _ in range(2))
    api.app.store.dispatch_outbox(api.app.clock.now(), 10, 300)
    shown = api.call("GET", f"/v1/jobs/{first.id}").json()
    assert shown["status"] == "running" and shown["dispatched_at"] is not None
    listed = api.call("GET", "/v1/jobs", params={"queue": "broker"}).json()["items"]
    assert all(j["dispatched_at"] is not None for j in listed)
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    r = api.call("POST", f"/v1/jobs/{first.id}/reschedule", json={"due_at": iso(at)})
    assert r.status_code == 200, r.text
    moved = r.json()
    assert moved["status"] == "scheduled" and moved["dispatched_at"] is None
    assert moved["attempts"] == 0 and datetime.fromisoformat(moved["due_at"]) == at
    r = api.call("POST", f"/v1/jobs/{second.id}/cancel")
    assert r.status_code == 200 and r.json()["status"] == "cancelled"


# -- schedules -------------------------------------------------------------------------------


def test_schedules_end_to_end(api: Api) -> None:
    body = {
        "name": "nightly",
        "task": "report.build",
        "args": {"kind": "daily"},
        "cron": "30 2 * * *",
        "timezone": "Europe/Paris",
        "misfire": "coalesce",
        "overlap": "skip",
        "jitter_seconds": 0,
    }
    r = api.call("POST", "/v1/schedules", json=body)
    assert r.status_code == 201, r.text
    s = r.json()
    assert s["name"] == "nightly" and s["tenant"] == "acme" and s["misfire"] == "coalesce"
    assert api.call("POST", "/v1/schedules", json=body).status_code == 409
    bad = api.call("POST", "/v1/schedules", json={**body, "name": "x", "timezone": "EST"})
    assert bad.status_code == 422 and "IANA" in bad.json()["detail"][0]["msg"]
    both = api.call("POST", "/v1/schedules", json={**body, "name": "y", "every_seconds": 60})
    assert both.status_code == 422
    assert (
        api.call("POST", "/v1/schedules", json={**body, "name": "z", "misfire": "x"}).status_code
        == 422
    )
    assert [x["name"] for x in api.call("GET", "/v1/schedules").json()["items"]] == ["nightly"]
    assert api.call("GET", "/v1/schedules/nightly").json()["cron"] == "30 2 * * *"
    assert api.call("GET", "/v1/schedules/missing").status_code == 404

    preview = api.call("GET", "/v1/schedules/nightly/preview", params={"count": 3}).json()
    assert len(preview["fires"]) == 3
    first = preview["fires"][0]
    assert first["local"].startswith(first["local"][:10]) and "T02:30:00+01:00" in first["local"]
    assert api.call("GET", "/v1/schedules/nightly/preview", params={"count": 0}).status_code == 422

    r = api.call("PATCH", "/v1/schedules/nightly", json={"cron": "0 3 * * *", "overlap": "allow"})
    assert (
        r.status_code == 200 and r.json()["cron"] == "0 3 * * *" and r.json()["overlap"] == "allow"
    )
    assert (
        api.call("PATCH", "/v1/schedules/nightly", json={"timezone": "Mars/Base"}).status_code
        == 422
    )
    assert api.call("PATCH", "/v1/schedules/nope", json={"cron": "* * * * *"}).status_code == 404

    assert api.call("POST", "/v1/schedules/nightly/pause").json()["paused"] is True
    assert api.call("POST", "/v1/schedules/nightly/resume").json()["paused"] is False
    trig = api.call("POST", "/v1/schedules/nightly/trigger")
    assert trig.status_code == 200 and trig.json()["schedule"] == "nightly"
    assert trig.json()["origin"] == "trigger"

    start = datetime(2026, 3, 1, tzinfo=UTC)
    r = api.call(
        "POST",
        "/v1/schedules/nightly/backfill",
        json={"from": iso(start), "to": iso(start + timedelta(days=3))},
    )
    assert r.status_code == 200 and len(r.json()["jobs"]) == 3
    again = api.call(
        "POST",
        "/v1/schedules/nightly/backfill",
        json={"from": iso(start), "to": iso(start + timedelta(days=3))},
    )
    assert sorted(again.json()["jobs"]) == sorted(r.json()["jobs"])  # idempotent
    bad = api.call("POST", "/v1/schedules/nightly/backfill", json={"from": iso(start)})
    assert bad.status_code == 422
    assert api.call("POST", "/v1/schedules/nightly/pause", role="read").status_code == 403

    assert api.call("DELETE", "/v1/schedules/nightly").status_code == 204
    assert api.call("GET", "/v1/schedules/nightly").status_code == 404
    assert api.call("DELETE", "/v1/schedules/nightly").status_code == 404
    every = api.call(
        "POST",
        "/v1/schedules",
        json={"name": "tick", "task": "t", "every_seconds": 30, "timezone": "UTC"},
    )
    assert every.status_code == 201 and every.json()["every_seconds"] == 30


# -- dead letters and stats ----------------------------------------------------------------


def test_dead_letters_list_and_paced_bulk_replay(api: Api) -> None:
    dead = [make_dead(api, task="t.fail" if i < 4 else "t.other") for i in range(6)]
    listed = api.call("GET", "/v1/jobs", params={"status": "dead"}).json()["items"]
    assert sorted(j["id"] for j in listed) == sorted(dead)
    assert listed[0]["attempt_history"] == [] or True
    full = api.call("GET", f"/v1/jobs/{dead[0]}").json()
    assert full["attempt_history"][-1]["error_message"] == "card declined"

    body = {"ids": [*dead[:3], 999999], "per_second": 10}
    assert api.call("POST", "/v1/dead-letters/replay", json=body).status_code == 403  # write
    started = time.monotonic()
    r = api.call("POST", "/v1/dead-letters/replay", json=body, role="admin")
    took = time.monotonic() - started
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["matched"] == 4 and report["replayed"] == 3
    assert report["skipped"][0]["id"] == 999_999
    assert took >= 0.19  # 3 replays at 10/s: two waits of 0.1 s (a skipped id costs none)
    r = api.call(
        "POST", "/v1/dead-letters/replay", json={"filter": {"task": "t.other"}}, role="admin"
    )
    assert r.json()["replayed"] == 2
    again = api.call("POST", "/v1/dead-letters/replay", json={"ids": dead[:1]}, role="admin")
    assert again.json()["replayed"] == 0 and "not dead" in again.json()["skipped"][0]["reason"]
    for body in ({}, {"ids": [1], "filter": {}}, {"ids": [1], "per_second": 0}):
        assert (
            api.call("POST", "/v1/dead-letters/replay", json=body, role="admin").status_code == 422
        )
    slow = {"filter": {}, "per_second": 0.001}
    make_dead(api, queue="doomed-later")
    assert api.call("POST", "/v1/dead-letters/replay", json=slow, role="admin").status_code == 422


def test_stats_report_counts_lag_and_throughput(api: Api) -> None:
    view = api.app.scoped("acme")
    done = view.enqueue("t.s", {}, queue="fast")
    for _ in range(3):
        view.enqueue("t.s", {}, queue="fast")
    run_attempt(api, done.id, Outcome(Event.SUCCEED))
    make_dead(api)
    api.app.scoped("globex").enqueue("t.s", {}, queue="elsewhere")
    r = api.call("GET", "/v1/stats")
    assert r.status_code == 200
    s = r.json()
    assert s["by_status"] == {"scheduled": 3, "succeeded": 1, "dead": 1}
    assert s["by_queue"]["fast"] == {"scheduled": 3, "succeeded": 1}
    assert "elsewhere" not in s["by_queue"]
    five = s["windows"]["5m"]
    assert five["succeeded"] == 1 and five["started"] == 2 and five["failed"] == 1
    assert five["lag_seconds"]["p50"] is not None and five["lag_seconds"]["p50"] >= 0
    assert s["windows"]["60m"]["throughput_per_second"] == pytest.approx(1 / 3600, abs=1e-4)
    assert len(s["series"]) == 60 and sum(p["succeeded"] for p in s["series"]) == 1
    assert s["oldest_overdue_seconds"] is not None
    everyone = api.call("GET", "/v1/stats", role="admin").json()
    assert everyone["by_queue"]["elsewhere"] == {"scheduled": 1}
    one = api.call("GET", "/v1/stats", role="admin", params={"tenant": "globex"}).json()
    assert one["by_status"] == {"scheduled": 1}
    assert api.call("GET", "/v1/stats", params={"tenant": "globex"}).status_code == 403


def test_health_readiness_and_openapi(api: Api) -> None:
    assert api.client.get("/healthz").json()["status"] == "ok"
    assert api.client.get("/readyz").json()["status"] == "ok"
    doc = api.client.get("/openapi.json").json()
    paths = doc["paths"]
    for path in (
        "/v1/jobs",
        "/v1/jobs/{job_id}",
        "/v1/jobs/{job_id}/cancel",
        "/v1/jobs/{job_id}/reschedule",
        "/v1/jobs/{job_id}/replay",
        "/v1/schedules",
        "/v1/schedules/{name}",
        "/v1/schedules/{name}/pause",
        "/v1/schedules/{name}/resume",
        "/v1/schedules/{name}/trigger",
        "/v1/schedules/{name}/preview",
        "/v1/schedules/{name}/backfill",
        "/v1/dead-letters/replay",
        "/v1/stats",
    ):
        assert path in paths, path
