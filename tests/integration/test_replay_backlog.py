"""Replaying a dead job is admitted like an enqueue (issue 20, section 3;
docs/flow-control.md): past its queue's or tenant's max_backlog the API answers 429 with
Retry-After, the CLI exits 1, the dashboard says why, and nothing changes; an admin (or the
CLI) may override the bound with ignore_backlog. A bulk replay stops at the full backlog."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from duetime import App, BacklogFull
from duetime.core.states import JobStatus
from integration.apiclient import Api, running_api
from integration.test_cli_ops import as_json, cli, failed, make_dead, ok, ops
from integration.test_dashboard import Env, csrf_in, env, flash

__all__ = ["env", "ops"]  # the fixtures, shared with test_dashboard.py and test_cli_ops.py


@pytest.fixture
def api(store_url: str) -> Iterator[Api]:
    with running_api(store_url) as api:
        yield api


def statuses(app: App, ids: list[int]) -> list[str]:
    return [str(app.store.get_job(i).status) for i in ids]  # type: ignore[union-attr]


def test_the_python_api_refuses_a_replay_past_the_max_backlog(ops: App) -> None:
    [one, two, three] = make_dead(ops, "t", "mail", 3)
    ops.set_queue("mail", max_backlog=0)
    with pytest.raises(BacklogFull, match=f"job {one} was not replayed"):
        ops.replay(one)
    with pytest.raises(BacklogFull):
        ops.replay_dead([one, two])
    assert statuses(ops, [one, two, three]) == ["dead"] * 3
    assert ops.replay(one, ignore_backlog=True).status is JobStatus.SCHEDULED
    ops.set_queue("mail", max_backlog=2)
    report = ops.replay_dead(queue="mail")  # room for one more: the replay stops there
    assert report.replayed == [two] and [i for i, _ in report.skipped] == [three]
    assert report.stopped is not None and "max backlog of 2" in report.stopped
    assert "max backlog of 2" in report.skipped[0][1]
    report = ops.replay_dead(queue="mail", ignore_backlog=True)
    assert (report.replayed, report.stopped) == ([three], None)


def test_the_api_answers_429_unless_an_admin_overrides(api: Api) -> None:
    view = api.app.scoped("acme")
    [one, two, three] = make_dead(view, "t", "mail", 3)
    api.app.set_queue("mail", max_backlog=0)
    assert api.call("POST", "/v1/jobs", json={"task": "t", "queue": "mail"}).status_code == 429
    r = api.call("POST", f"/v1/jobs/{one}/replay")
    assert r.status_code == 429 and int(r.headers["Retry-After"]) > 0, r.text
    assert "max backlog of 0" in r.json()["detail"] and "ignore_backlog" in r.json()["detail"]
    r = api.call("POST", "/v1/dead-letters/replay", json={"filter": {}}, role="admin")
    assert r.status_code == 429 and "Retry-After" in r.headers, r.text
    r = api.call("POST", "/v1/dead-letters/replay", json={"ids": [one]}, role="admin")
    assert r.status_code == 429, r.text
    assert statuses(api.app, [one, two, three]) == ["dead"] * 3
    r = api.call("POST", f"/v1/jobs/{one}/replay", params={"ignore_backlog": "true"})
    assert r.status_code == 403 and "admin" in r.json()["detail"], r.text
    r = api.call("POST", f"/v1/jobs/{one}/replay", params={"ignore_backlog": "true"}, role="admin")
    assert r.status_code == 200 and r.json()["status"] == "scheduled", r.text
    api.app.set_queue("mail", max_backlog=2)
    r = api.call("POST", "/v1/dead-letters/replay", json={"filter": {}}, role="admin")
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["replayed_ids"], [s["id"] for s in body["skipped"]]) == ([two], [three])
    assert "max backlog of 2" in body["stopped"], body
    r = api.call(
        "POST",
        "/v1/dead-letters/replay",
        json={"ids": [three], "ignore_backlog": True},
        role="admin",
    )
    assert r.status_code == 200 and r.json()["replayed_ids"] == [three], r.text
    assert r.json()["stopped"] is None


def test_the_dashboard_says_why_and_lets_an_admin_override(env: Env) -> None:
    dead = [env.dead(queue="mail").id for _ in range(2)]
    env.app.set_queue("mail", max_backlog=0)
    writer = env.logged_in(role="write")
    page = writer.get(f"/jobs/{dead[0]}").text
    assert 'name="ignore_backlog"' not in page  # only admins may override
    r = writer.post(f"/jobs/{dead[0]}/replay", data={"csrf_token": csrf_in(page)})
    assert "max backlog of 0" in flash(r.text) and f"job {dead[0]} was not replayed" in flash(
        r.text
    )
    r = writer.post(
        f"/jobs/{dead[0]}/replay", data={"csrf_token": csrf_in(page), "ignore_backlog": "on"}
    )
    assert "only admins may ignore" in flash(r.text)
    assert statuses(env.app, dead) == ["dead", "dead"]
    admin = env.logged_in(role="admin")
    page = admin.get(f"/jobs/{dead[0]}").text
    assert 'name="ignore_backlog"' in page
    r = admin.post(
        f"/jobs/{dead[0]}/replay", data={"csrf_token": csrf_in(page), "ignore_backlog": "on"}
    )
    assert "replayed" in flash(r.text) and statuses(env.app, dead) == ["scheduled", "dead"]
    listing = admin.get("/dead-letters").text
    assert re.search(r'<form id="bulk-replay"[^>]*>.*?name="ignore_backlog"', listing, re.S)
    token = csrf_in(listing)
    r = admin.post("/dead-letters/replay", data={"csrf_token": token, "scope": "matching"})
    assert "max backlog of 0" in flash(r.text) and statuses(env.app, dead)[1] == "dead"
    r = admin.post(
        "/dead-letters/replay",
        data={"csrf_token": token, "scope": "matching", "ignore_backlog": "on"},
    )
    assert 'data-report="replayed">1<' in r.text and statuses(env.app, dead)[1] == "scheduled"


def test_the_cli_exits_1_unless_told_to_ignore_the_max_backlog(db_url: str, ops: App) -> None:
    [one, two, three] = make_dead(ops, "t", "mail", 3)
    ops.set_queue("mail", max_backlog=0)
    failed(cli(db_url, "jobs", "replay", str(one)), "max backlog of 0", "--ignore-backlog")
    failed(cli(db_url, "dlq", "replay", "--queue", "mail", "--yes"), "max backlog of 0")
    assert statuses(ops, [one, two, three]) == ["dead"] * 3
    ok(cli(db_url, "jobs", "replay", str(one), "--ignore-backlog"))
    ops.set_queue("mail", max_backlog=2)
    report = as_json(cli(db_url, "dlq", "replay", "--queue", "mail", "--yes", "--json"), 1)
    assert (report["replayed_ids"], [s["id"] for s in report["skipped"]]) == ([two], [three])
    assert "max backlog of 2" in report["stopped"]
    done = cli(db_url, "dlq", "replay", str(three), "--ignore-backlog")
    assert ok(done, done.stderr) == "replayed 1 of 1 jobs\n"
    assert statuses(ops, [one, two, three]) == ["scheduled"] * 3
