"""Names in dashboard URLs (issue 20, section 3): a queue or tenant name is one path segment
wherever a page builds a URL from it, so a name holding '/' or '..' cannot steer an admin's
click to another queue's or tenant's form, and such a queue is still steerable."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import quote, urljoin, urlsplit

from fastapi.testclient import TestClient

from integration.test_dashboard import Env, csrf_in, env, flash

__all__ = ["env"]  # the fixture, shared with test_dashboard.py

BASE = "http://testserver/queues"
TRICKY = ["../tenants/acme", "x/../shared", "a/limits", "50% off"]


class Forms(HTMLParser):
    """The action of every form, by the data-queue or data-tenant of its table row."""

    def __init__(self) -> None:
        super().__init__()
        self.row: tuple[str, str] | None = None
        self.actions: dict[tuple[str, str], list[str]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "tr":
            for kind in ("queue", "tenant"):
                if found.get(f"data-{kind}") is not None:
                    self.row = (kind, found[f"data-{kind}"] or "")
        if tag == "form" and self.row is not None:
            self.actions.setdefault(self.row, []).append(found["action"] or "")


def actions(html: str) -> dict[tuple[str, str], list[str]]:
    parser = Forms()
    parser.feed(html)
    return parser.actions


def where(action: str) -> str:
    """The path a browser posts the form to (dot segments removed as a browser does)."""
    return urlsplit(urljoin(BASE, action)).path


def test_queue_and_tenant_forms_post_to_their_own_routes(env: Env) -> None:
    env.scheduled(queue="shared")
    env.scheduled(tenant="acme", queue="shared")
    for name in TRICKY:  # any write token may name a queue by enqueueing into it
        env.scheduled(tenant="mallory", queue=name)
    env.scheduled(tenant="a/b", queue="shared")
    c = env.logged_in(role="admin")
    found = actions(c.get("/queues").text)
    for name in [*TRICKY, "shared"]:
        segment = quote(name, safe="")
        assert [where(a) for a in found[("queue", name)]] == [
            f"/queues/{segment}/pause",
            f"/queues/{segment}/limits",
        ], found[("queue", name)]
    assert [where(a) for a in found[("tenant", "a/b")]] == ["/tenants/a%2Fb/limits"]


def post(c: TestClient, action: str, data: dict[str, str]) -> str:
    r = c.post(urljoin(BASE, action), data=data)
    assert r.status_code == 200 and r.url.path == "/queues", (action, r.status_code, r.text)
    return flash(r.text)


def test_a_queue_named_with_slashes_and_dots_is_paused_and_limited_from_its_row(env: Env) -> None:
    env.scheduled(queue="shared")
    env.scheduled(tenant="acme", queue="shared")
    for name in TRICKY:
        env.scheduled(tenant="mallory", queue=name)
    c = env.logged_in(role="admin")
    page = c.get("/queues").text
    token = csrf_in(page)
    for name in TRICKY:
        pause, limits = actions(page)[("queue", name)]
        assert post(c, pause, {"csrf_token": token}) == (
            f"Queue {name!r} paused: it starts no jobs until resumed."
        )
        assert post(c, limits, {"csrf_token": token, "max_backlog": "7"}) == (
            f"Queue {name!r} changed."
        )
        q = env.app.queue(name)
        assert (q.paused, q.max_backlog) == (True, 7), name
    resume = actions(c.get("/queues").text)[("queue", "x/../shared")][0]
    assert where(resume).endswith("/resume")
    post(c, resume, {"csrf_token": token})
    assert not env.app.queue("x/../shared").paused
    # nothing else changed: not the queue the names point at, not the tenant
    shared = env.app.queue("shared")
    assert (shared.paused, shared.max_backlog) == (False, None)
    assert env.app.tenant_settings("acme").max_backlog is None
    assert {q.queue for q in env.app.store.queue_settings()} == set(TRICKY)


def test_a_tenant_named_with_a_slash_is_limited_from_its_row(env: Env) -> None:
    env.scheduled(tenant="a/b", queue="shared")
    env.scheduled(tenant="b", queue="shared")
    c = env.logged_in(role="admin")
    page = c.get("/queues").text
    [limits] = actions(page)[("tenant", "a/b")]
    assert post(c, limits, {"csrf_token": csrf_in(page), "weight": "3"}) == "Tenant 'a/b' changed."
    assert env.app.tenant_settings("a/b").weight == 3.0
    assert env.app.tenant_settings("b").weight == 1.0
