"""Dependencies at the edges (docs/workflows.md, "Dependencies"), on each store: the REST
field depends_on and a job's parents and children in GET /v1/jobs/{id}; `duetime enqueue
--depends-on`, `jobs show` and `jobs list --status blocked`; the dashboard's job page, which
links parents and children with their states."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from duetime import App
from integration.apiclient import Api, running_api
from integration.procs import describe, run_cli
from integration.test_dashboard import Env, env  # noqa: F401 (the dashboard's fixture)


@pytest.fixture
def api(store_url: str) -> Iterator[Api]:
    with running_api(store_url) as api:
        yield api


def test_the_api_enqueues_a_child_and_shows_parents_and_children(api: Api) -> None:
    parent = api.call("POST", "/v1/jobs", json={"task": "a", "delay_seconds": 3600}).json()
    r = api.call(
        "POST",
        "/v1/jobs",
        json={"task": "b", "depends_on": [parent["id"]], "on_parent_failure": "run"},
    )
    assert r.status_code == 201, r.text
    child = r.json()
    assert child["status"] == "blocked" and child["on_parent_failure"] == "run"
    shown = api.call("GET", f"/v1/jobs/{child['id']}").json()
    assert shown["parents"] == [{"id": parent["id"], "status": "scheduled"}]
    shown = api.call("GET", f"/v1/jobs/{parent['id']}").json()
    assert shown["children"] == [{"id": child["id"], "status": "blocked"}]
    listed = api.call("GET", "/v1/jobs?status=blocked").json()
    assert [j["id"] for j in listed["items"]] == [child["id"]]


@pytest.mark.parametrize(
    "body",
    [{"depends_on": [0]}, {"depends_on": ["1"]}, {"depends_on": 1}, {"on_parent_failure": "x"}],
)
def test_the_api_refuses_bad_dependency_fields(api: Api, body: dict[str, object]) -> None:
    r = api.call("POST", "/v1/jobs", json={"task": "t", **body})
    assert r.status_code == 422, r.text
    assert api.count_jobs() == 0


def test_the_api_refuses_a_missing_or_foreign_parent_in_one_line(api: Api) -> None:
    theirs = api.call("POST", "/v1/jobs", json={"task": "a"}, tenant="globex").json()
    for parent, says in ((theirs["id"], "is not a job of tenant"), (999999, "does not exist")):
        r = api.call("POST", "/v1/jobs", json={"task": "b", "depends_on": [parent]})
        assert r.status_code == 422, r.text
        [problem] = r.json()["detail"]  # as every refused request: one problem, one line
        assert says in problem["msg"] and "\n" not in problem["msg"]
    assert api.count_jobs() == 1


def test_the_cli_enqueues_a_child_and_shows_its_parents(store_url: str) -> None:
    app = App(store_url)
    app.migrate()
    try:
        a = app.enqueue("a", delay=3600)
        b = app.enqueue("b", delay=3600)
    finally:
        app.close()
    url = ["--database-url", store_url]
    done = run_cli(["enqueue", "c", "--depends-on", f"{a.id},{b.id}", "--json", *url])
    assert done.returncode == 0, describe(done)
    child = json.loads(done.stdout)
    assert child["status"] == "blocked"
    done = run_cli(["jobs", "show", str(child["id"]), *url])
    assert done.returncode == 0, describe(done)
    shown = _fields(done.stdout)
    assert shown["parents"] == f"{a.id} (scheduled), {b.id} (scheduled)", done.stdout
    assert shown["status"] == "blocked: waits for its parents to end"
    done = run_cli(["jobs", "show", str(a.id), *url])
    assert _fields(done.stdout)["children"] == f"{child['id']} (blocked)", describe(done)
    done = run_cli(["jobs", "list", "--status", "blocked", "--json", *url])
    assert [j["id"] for j in json.loads(done.stdout)["items"]] == [child["id"]], describe(done)
    done = run_cli(["enqueue", "c", "--depends-on", "1,x", *url])
    assert done.returncode == 2 and "--depends-on" in done.stderr, describe(done)
    done = run_cli(["enqueue", "c", "--depends-on", "999999", *url])
    # a flag value refused, as every other: exit 2, the reason on stderr
    assert done.returncode == 2 and "parent job 999999 does not exist" in done.stderr


def _fields(text: str) -> dict[str, str]:
    """`jobs show`'s field lines: name, then the value after the padding."""
    return {k: v.strip() for k, _, v in (line.partition(" ") for line in text.splitlines()) if k}


def test_the_job_page_links_parents_and_children_with_their_states(env: Env) -> None:  # noqa: F811
    parent = env.scheduled(task="<b>parent</b>")
    child = env.app.enqueue("child", depends_on=[parent.id])
    c: TestClient = env.logged_in()
    page = c.get(f"/jobs/{child.id}").text
    assert "data-blocked" in page
    assert f'<a href="/jobs/{parent.id}" class="mono">#{parent.id}</a>' in page
    assert '<span class="badge s-scheduled">scheduled</span>' in page
    page = c.get(f"/jobs/{parent.id}").text
    assert f'<a href="/jobs/{child.id}" class="mono">#{child.id}</a>' in page
    assert "<b>parent</b>" not in page  # escaped
    env.app.cancel(parent.id)
    page = c.get(f"/jobs/{child.id}").text
    assert f"data-cancel-reason>Cancelled: parent job {parent.id} ended cancelled." in page
