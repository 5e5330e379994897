"""/v1/limits: list, read, create or change, delete; admin tokens only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from integration.apiclient import Api, running_api


@pytest.fixture
def api(store_url: str) -> Iterator[Api]:
    with running_api(store_url) as api:
        yield api


def test_limits_round_trip(api: Api) -> None:
    admin = {"tenant": "ops", "role": "admin"}
    assert api.call("GET", "/v1/limits", **admin).json() == []
    put = api.call(
        "PUT", "/v1/limits/payments-api", json={"rate": "5/s", "concurrency": 3}, **admin
    )
    assert put.status_code == 200, put.text
    body = put.json()
    assert (body["key"], body["rate"], body["concurrency"], body["bucket_size"]) == (
        "payments-api",
        "5/s",
        3,
        5.0,
    )
    assert (body["breaker"], body["retries_allowed"], body["recent"]["starts"]) == (None, None, 0)
    guarded = api.call(
        "PUT",
        "/v1/limits/payments-api",
        json={"breaker_threshold": 0.5, "retry_budget": 0.2},
        **admin,
    ).json()
    assert (guarded["breaker"], guarded["retries_allowed"]) == ("closed", 10)
    changed = api.call("PUT", "/v1/limits/payments-api", json={"concurrency": "off"}, **admin)
    assert (changed.json()["rate"], changed.json()["concurrency"]) == ("5/s", None)
    got = api.call("GET", "/v1/limits/payments-api", **admin)
    assert got.status_code == 200 and got.json()["running"] == 0
    assert [x["key"] for x in api.call("GET", "/v1/limits", **admin).json()] == ["payments-api"]
    assert api.call("DELETE", "/v1/limits/payments-api", **admin).status_code == 204
    missing = api.call("DELETE", "/v1/limits/payments-api", **admin)
    assert missing.status_code == 404 and "no limit 'payments-api'" in missing.json()["detail"]
    assert api.call("GET", "/v1/limits/payments-api", **admin).status_code == 404


def test_bad_values_are_refused_field_by_field(api: Api) -> None:
    admin = {"tenant": "ops", "role": "admin"}
    bad = api.call("PUT", "/v1/limits/api", json={"rate": "5/x"}, **admin)
    assert bad.status_code == 422
    assert "rate '5/x' is not valid" in bad.text
    for field, value, words in (
        ("rate", "5/x", "rate"),
        ("burst", 0, "burst"),
        ("concurrency", -1, "concurrency"),
        ("retry_budget", 2, "retry budget"),
        ("breaker_threshold", "half", "breaker threshold"),
    ):
        refused = api.call("PUT", "/v1/limits/api", json={field: value}, **admin)
        assert refused.status_code == 422, (field, refused.text)
        [problem] = refused.json()["detail"]
        assert problem["loc"] == ["body", field] and problem["msg"].startswith(words), problem
    assert api.call("PUT", "/v1/limits/api", json={"speed": 1}, **admin).status_code == 422
    assert api.call("PUT", "/v1/limits/bad%20key", json={"rate": "1/s"}, **admin).status_code == 422
    assert api.call("GET", "/v1/limits", **admin).json() == []


def test_breaker_cooldown_round_trips_and_off_returns_to_the_default(api: Api) -> None:
    admin = {"tenant": "ops", "role": "admin"}
    body = {"breaker_threshold": 0.5, "breaker_cooldown": "2m"}
    put = api.call("PUT", "/v1/limits/payments-api", json=body, **admin)
    assert put.status_code == 200, put.text
    assert (put.json()["breaker"], put.json()["breaker_cooldown_seconds"]) == ("closed", 120.0)
    seconds = api.call("PUT", "/v1/limits/payments-api", json={"breaker_cooldown": 7.5}, **admin)
    assert seconds.json()["breaker_cooldown_seconds"] == 7.5
    got = api.call("GET", "/v1/limits/payments-api", **admin).json()
    assert (got["breaker_threshold"], got["breaker_cooldown_seconds"]) == (0.5, 7.5)
    off = api.call("PUT", "/v1/limits/payments-api", json={"breaker_cooldown": "off"}, **admin)
    assert off.json()["breaker_cooldown_seconds"] == 30.0
    bad = api.call("PUT", "/v1/limits/payments-api", json={"breaker_cooldown": "0.5s"}, **admin)
    assert bad.status_code == 422
    [problem] = bad.json()["detail"]
    assert problem["loc"] == ["body", "breaker_cooldown"]
    assert problem["msg"].startswith("breaker cool-down must be a duration from 1s to 1d")


def test_only_admins(api: Api) -> None:
    for role in ("read", "write"):
        assert api.call("GET", "/v1/limits", role=role).status_code == 403
        assert api.call("PUT", "/v1/limits/a", json={"rate": "1/s"}, role=role).status_code == 403
        assert api.call("DELETE", "/v1/limits/a", role=role).status_code == 403


def test_stats_show_the_limits_to_admins(api: Api) -> None:
    admin = {"tenant": "ops", "role": "admin"}
    assert api.call("PUT", "/v1/limits/api", json={"concurrency": 2}, **admin).status_code == 200
    stats = api.call("GET", "/v1/stats", **admin)
    assert stats.status_code == 200, stats.text
    [limit] = stats.json()["limits"]
    assert (limit["key"], limit["concurrency"], limit["running"]) == ("api", 2, 0)
    assert api.call("GET", "/v1/stats", role="read").json().get("limits") is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("breaker_cooldown", -1e300),
        ("breaker_cooldown", -99999999999999),
        ("breaker_cooldown", 1e300),
        ("breaker_cooldown", True),
        ("concurrency", True),
        ("concurrency", "5"),
        ("burst", False),
        ("concurrency", 2**63),
        ("retry_budget", True),
        ("retry_budget", "0.2"),
        ("breaker_threshold", 1e-400),
        ("rate", "100000000000000000000000000000000000/s"),
        ("rate", "0.0000001/s"),
    ],
)
def test_overflowing_and_confused_values_are_refused_in_one_line(
    api: Api, field: str, value: object
) -> None:
    """Issue 20: -1e300 seconds was a 500 (OverflowError), true a concurrency of 1, "5" a 5,
    1e38/s a rate. Each is a 422 naming its field; nothing is stored."""
    admin = {"tenant": "ops", "role": "admin"}
    body = {field: value, **({"rate": "5/s"} if field == "burst" else {})}
    refused = api.call("PUT", "/v1/limits/api", json=body, **admin)
    assert refused.status_code == 422, (field, value, refused.text)
    [problem] = refused.json()["detail"]
    assert problem["loc"][:2] == ["body", field], problem
    assert "\n" not in problem["msg"]
    assert api.call("GET", "/v1/limits", **admin).json() == []
