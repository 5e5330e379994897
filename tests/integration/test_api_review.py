"""Regressions from a review of the API and dashboard: each test reproduces one finding."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from duetime import App
from duetime.core.errors import InvalidRequest
from duetime.server import ServerSettings, create_app
from integration.apiclient import Api, running_api


@pytest.fixture
def api(store_url: str) -> Iterator[Api]:
    with running_api(store_url) as api:
        yield api


def test_deeply_nested_args_are_refused_and_nothing_is_stored(api: Api) -> None:
    raw = '{"task": "t", "args": {"a": ' + "[" * 600 + "]" * 600 + "}}"
    r = api.call("POST", "/v1/jobs", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert "nest" in r.json()["detail"][0]["msg"]
    assert api.count_jobs() == 0
    assert api.call("GET", "/v1/jobs").status_code == 200
    # so deep that the JSON parser gives up: still 422, not 400
    raw = '{"task": "t", "args": {"a": ' + "[" * 5000 + "]" * 5000 + "}}"
    r = api.call("POST", "/v1/jobs", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert api.count_jobs() == 0


def test_unicode_digits_in_ids_and_cursors_are_not_500(api: Api) -> None:
    for value in ("²", "①", "٣"):
        assert api.call("GET", "/v1/jobs", params={"cursor": value}).status_code == 422


def test_schedule_names_the_api_cannot_address_are_refused(api: Api) -> None:
    base = {"task": "t", "every_seconds": 60, "timezone": "UTC"}
    for name in (".", ".."):
        r = api.call("POST", "/v1/schedules", json={**base, "name": name})
        assert r.status_code == 422, (name, r.text)
        assert r.json()["detail"][0]["loc"][-1] == "name"
    assert api.call("GET", "/v1/schedules").json()["items"] == []
    # a '/' is sent as %2F (docs/api.md)
    assert api.call("POST", "/v1/schedules", json={**base, "name": "a/b"}).status_code == 201
    assert api.call("GET", "/v1/schedules/a%2Fb").json()["name"] == "a/b"


def test_patch_null_only_clears_start_and_end(api: Api) -> None:
    body = {"name": "s", "task": "t", "args": {"x": 1}, "every_seconds": 60, "timezone": "UTC"}
    assert api.call("POST", "/v1/schedules", json=body).status_code == 201
    r = api.call("PATCH", "/v1/schedules/s", json={"args": None})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == "args"
    assert api.call("GET", "/v1/schedules/s").json()["args"] == {"x": 1}
    r = api.call("PATCH", "/v1/schedules/s", json={"end_at": None})
    assert r.status_code == 200


def test_preview_near_the_end_of_time_returns_what_exists(api: Api) -> None:
    body = {
        "name": "far",
        "task": "t",
        "cron": "0 0 1 1 *",
        "timezone": "UTC",
        "start_at": "8999-06-01T00:00:00Z",
    }
    assert api.call("POST", "/v1/schedules", json=body).status_code == 201
    r = api.call("GET", "/v1/schedules/far/preview", params={"count": 1000})
    assert r.status_code == 200, r.text
    assert len(r.json()["fires"]) == 1000  # 9000-01-01 to 9999-01-01


def test_the_last_full_page_has_no_next_cursor(api: Api) -> None:
    view = api.app.scoped("acme")
    for _ in range(5):
        view.enqueue("t", {})
    page = api.call("GET", "/v1/jobs", params={"limit": 5}).json()
    assert len(page["items"]) == 5 and page["next_cursor"] is None
    page = api.call("GET", "/v1/jobs", params={"limit": 4}).json()
    assert page["next_cursor"] is not None
    rest = api.call("GET", "/v1/jobs", params={"limit": 4, "cursor": page["next_cursor"]}).json()
    assert len(rest["items"]) == 1 and rest["next_cursor"] is None


def test_a_timezone_error_names_the_timezone_field(api: Api) -> None:
    body = {"name": "s", "task": "t", "every_seconds": 60, "timezone": "EST"}
    r = api.call("POST", "/v1/schedules", json=body)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "timezone"]


def test_token_tenants_follow_the_job_tenant_limit(api: Api) -> None:
    from duetime.admin.tokens import create_token

    with pytest.raises(InvalidRequest, match="tenant"):
        create_token(api.app, "x" * 150, "write")
    with pytest.raises(InvalidRequest, match="tenant"):
        create_token(api.app, "   ", "write")


def test_no_auth_refuses_cross_site_writes_and_foreign_hosts(tmp_path: object) -> None:
    app = App(f"sqlite:///{tmp_path}/na.db")
    app.migrate()
    job = app.enqueue("t", {})
    server = create_app(app, ServerSettings(auth=False))
    with TestClient(server, base_url="http://127.0.0.1:8000") as c:
        evil = {"sec-fetch-site": "cross-site", "origin": "https://evil.example"}
        assert c.post(f"/v1/jobs/{job.id}/cancel", headers=evil).status_code == 403
        assert (
            c.post(
                f"/v1/jobs/{job.id}/cancel", headers={"origin": "https://evil.example"}
            ).status_code
            == 403
        )
        assert app.get_job(job.id).status == "scheduled"
        r = c.get("/v1/jobs", headers={"host": "attacker.example"})  # DNS rebinding
        assert r.status_code == 403
        assert c.post(f"/v1/jobs/{job.id}/cancel").status_code == 200  # curl on the machine
    with TestClient(server, base_url="http://localhost:8000") as c:
        assert c.get("/v1/stats").status_code == 200
    app.close()


def test_late_after_seconds_is_set_reset_and_checked(api: Api) -> None:
    body = {"name": "pulse", "task": "t", "every_seconds": 2, "timezone": "UTC"}
    created = api.call("POST", "/v1/schedules", json={**body, "late_after_seconds": 300})
    assert created.status_code == 201, created.text
    assert created.json()["late_after_seconds"] == 300
    reset = api.call("PATCH", "/v1/schedules/pulse", json={"late_after_seconds": None})
    assert reset.status_code == 200, reset.text
    assert reset.json()["late_after_seconds"] is None
    bad = api.call("PATCH", "/v1/schedules/pulse", json={"late_after_seconds": 1})
    assert bad.status_code == 422, bad.text
    detail = bad.json()["detail"][0]
    assert detail["loc"] == ["body", "late_after_seconds"] and "at least 2s" in detail["msg"]
    assert api.call("GET", "/v1/schedules/pulse").json()["late_after_seconds"] is None
