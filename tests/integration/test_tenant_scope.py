"""A tenant's token sees the figures of its own jobs only (issue 20, section 3): the queues
it lists (/v1/queues, /v1/stats, the queues page) are those holding its jobs, and the
overview's dispatch table shows it no other tenant's outbox backlog. Admins see everything."""

from __future__ import annotations

import re

from integration.apiclient import running_api
from integration.test_dashboard import Env, env

__all__ = ["env"]  # the fixture, shared with test_dashboard.py


def two_tenants(env: Env) -> None:
    """acme uses the queue shared; globex uses shared, its own queue and an outbox queue
    whose two jobs wait in the outbox; an admin gave settings to globex's queue and to a
    queue nobody uses."""
    env.app.scoped("acme").enqueue("t", {}, queue="shared")
    env.app.scoped("globex").enqueue("t", {}, queue="shared")
    env.app.scoped("globex").enqueue("t", {}, queue="globex-only", delay=60)
    env.app.set_queue("globex-outbox", dispatch="outbox")
    env.app.scoped("globex").enqueue("t", {}, queue="globex-outbox")
    env.app.scoped("globex").enqueue("t", {}, queue="globex-outbox")
    assert len(env.app.store.dispatch_outbox(env.clock.now(), 10, 300)) == 2
    env.app.set_queue("globex-only", concurrency=2)
    env.app.set_queue("quiet", max_backlog=9)
    env.clock.advance(12)


def test_the_api_lists_a_tenant_only_the_queues_of_its_jobs(env: Env, store_url: str) -> None:
    two_tenants(env)
    with running_api(store_url) as api:
        own = api.call("GET", "/v1/queues", tenant="acme", role="read").json()
        assert [(q["queue"], q["backlog"]) for q in own] == [("shared", 1)]
        flow = api.call("GET", "/v1/stats", tenant="acme", role="read").json()["flow"]
        assert [(q["queue"], q["backlog"]) for q in flow["queues"]] == [("shared", 1)]
        assert [t["tenant"] for t in flow["tenants"]] == ["acme"]
        every = api.call("GET", "/v1/queues", role="admin").json()
        assert [q["queue"] for q in every] == ["globex-only", "globex-outbox", "quiet", "shared"]
        flow = api.call("GET", "/v1/stats", role="admin").json()["flow"]
        assert [q["queue"] for q in flow["queues"]] == [q["queue"] for q in every]


def test_the_queues_page_lists_a_tenant_only_the_queues_of_its_jobs(env: Env) -> None:
    two_tenants(env)
    page = env.logged_in(tenant="acme", role="read").get("/queues").text
    assert re.findall(r'data-queue="([^"]*)"', page) == ["shared"]
    assert re.findall(r'data-tenant="([^"]*)"', page) == ["acme"]
    page = env.logged_in(role="admin").get("/queues").text
    assert re.findall(r'data-queue="([^"]*)"', page) == [
        "globex-only",
        "globex-outbox",
        "quiet",
        "shared",
    ]


def dispatch(page: str) -> str:
    return page[page.index("data-dispatch") :]


def test_the_overview_shows_a_tenant_no_other_tenants_outbox(env: Env) -> None:
    two_tenants(env)
    table = dispatch(env.logged_in(tenant="acme", role="read").get("/").text)
    assert re.findall(r"<tr>\s*<td>([^<]*)</td>", table) == ["shared"]
    assert "globex" not in table and "Outbox backlog" not in table and "12.0 s" not in table
    assert "Publish rate" not in table
    table = dispatch(env.logged_in(role="admin").get("/").text)
    assert re.findall(r"<tr>\s*<td>([^<]*)</td>", table) == [
        "globex-only",
        "globex-outbox",
        "quiet",
        "shared",
    ]
    assert "<td>globex-outbox</td>\n        <td>outbox</td>" in table and "12.0 s" in table
