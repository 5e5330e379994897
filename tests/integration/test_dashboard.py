"""The dashboard over HTTP (TestClient), on SQLite and PostgreSQL: sessions, CSRF, roles,
tenants, every page, and every action's effect on the store."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from html import unescape
from typing import Any

import pytest
from fastapi.testclient import TestClient

from duetime import App
from duetime.admin.tokens import create_token, revoke_token
from duetime.core.clock import ManualClock
from duetime.core.models import Job, Node, Outcome
from duetime.core.outbox import Dispatched
from duetime.core.retry import ErrorCategory
from duetime.core.states import Event, JobStatus
from duetime.core.tokens import Role, hash_secret
from duetime.server import ServerSettings, create_app
from duetime.server.auth import SESSION_COOKIE

PAGES = ["/", "/jobs", "/schedules", "/dead-letters", "/jobs?status=parked", "/nodes", "/queues"]


@dataclass
class Env:
    app: App
    clock: ManualClock

    def client(self, **settings: Any) -> TestClient:
        host = "127.0.0.1" if settings.get("auth") is False else "testserver"  # --no-auth: loopback
        base = f"https://{host}" if settings.get("secure_cookies") else f"http://{host}"
        return TestClient(create_app(self.app, ServerSettings(**settings)), base_url=base)

    def token(self, tenant: str = "default", role: str = "admin") -> str:
        _, secret = create_token(self.app, tenant, role)
        return secret

    def logged_in(
        self, tenant: str = "default", role: str = "admin", **settings: Any
    ) -> TestClient:
        c = self.client(**settings)
        login(c, self.token(tenant, role))
        return c

    def scheduled(self, tenant: str = "default", **kw: Any) -> Job:
        """A job due in an hour (never claimed by the helpers below)."""
        kw.setdefault("delay", 3600)
        return self.app.scoped(tenant).enqueue(kw.pop("task", "reports.build"), {"n": 1}, **kw)

    def finished(self, event: Event, tenant: str = "default", **outcome: Any) -> Job:
        """A job run once and ended by `event` (GIVE_UP: dead, PARK: parked)."""
        job = self.app.scoped(tenant).enqueue(
            outcome.pop("task", "billing.charge"),
            {"invoice": 1042, "note": "<script>alert(1)</script>"},
            queue=outcome.pop("queue", "default"),
        )
        claims = self.app.store.claim(worker_id="w1", queues=None, limit=1, now=self.clock.now())
        assert [c.job.id for c in claims] == [job.id], "another job was due"
        assert self.app.store.finish(claims[0].lease, Outcome(event, **outcome), self.clock.now())
        self.clock.advance(1)
        return self.stored(job.id)

    def dead(self, tenant: str = "default", **kw: Any) -> Job:
        return self.finished(
            Event.GIVE_UP,
            tenant,
            error_category=ErrorCategory.PERMANENT,
            error_message="card declined <b>not bold</b>",
            error_traceback='Traceback (most recent call last):\n  File "x.py"\nValueError: no',
            **kw,
        )

    def parked(self, tenant: str = "default") -> Job:
        return self.finished(Event.PARK, tenant, error_category=ErrorCategory.UNKNOWN_OUTCOME)

    def stored(self, job_id: int) -> Job:
        job = self.app.store.get_job(job_id)
        assert job is not None
        return job


@pytest.fixture
def env(store_url: str) -> Iterator[Env]:
    clock = ManualClock(datetime(2026, 1, 15, 9, 0, tzinfo=UTC))
    app = App(store_url, clock=clock)
    app.migrate()
    yield Env(app, clock)
    app.close()


def login(c: TestClient, secret: str) -> None:
    page = c.get("/login")
    assert page.status_code == 200
    r = c.post(
        "/login",
        data={"token": secret, "csrf_token": csrf_in(page.text), "next": "/"},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    assert r.headers["location"] == "/"


def csrf_in(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]*)"', html)
    assert found is not None, "no CSRF field on the page"
    return found.group(1)


def csrf(c: TestClient, path: str = "/jobs") -> str:
    return csrf_in(c.get(path).text)


def job_ids(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<a href="/jobs/(\d+)" class="mono">#', html)]


def flash(html: str) -> str:
    found = re.search(r'<div class="flash flash-(?:ok|error)"[^>]*>(.*?)</div>', html, re.S)
    assert found is not None, "no flash message on the page"
    return unescape(found.group(1))


# -- sessions ---------------------------------------------------------------------------------


def test_pages_redirect_to_login_without_a_session(env: Env) -> None:
    job = env.scheduled()
    c = env.client()
    for path in [*PAGES, f"/jobs/{job.id}", "/schedules/1"]:
        r = c.get(path, follow_redirects=False)
        assert r.status_code == 303, path
        assert r.headers["location"].startswith("/login?next="), path
    r = c.get("/jobs?status=dead", follow_redirects=False)
    assert r.headers["location"] == "/login?next=%2Fjobs%3Fstatus%3Ddead"
    r = c.post(f"/jobs/{job.id}/cancel", data={"csrf_token": "x"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/login")
    assert env.stored(job.id).status is JobStatus.SCHEDULED
    assert "Log in" in c.get("/").text


def test_a_bad_token_is_refused(env: Env) -> None:
    c = env.client()
    page = c.get("/login")
    r = c.post("/login", data={"token": "dt_nope", "csrf_token": csrf_in(page.text)})
    assert r.status_code == 401
    assert "Unknown or revoked token" in r.text
    assert SESSION_COOKIE not in r.headers.get("set-cookie", "")
    assert c.get("/", follow_redirects=False).status_code == 303


def test_login_sets_an_http_only_strict_cookie_and_follows_next(env: Env) -> None:
    secret = env.token()
    c = env.client()
    page = c.get("/login?next=/dead-letters")
    r = c.post(
        "/login",
        data={"token": secret, "csrf_token": csrf_in(page.text), "next": "/dead-letters"},
        follow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"] == "/dead-letters"
    cookie = next(h for h in r.headers.get_list("set-cookie") if h.startswith(SESSION_COOKIE))
    assert cookie.startswith(f"{SESSION_COOKIE}=ds_") and secret not in cookie
    assert "HttpOnly" in cookie
    assert "samesite=strict" in cookie.lower()
    assert "Secure" not in cookie
    assert c.get("/").status_code == 200

    secure = env.client(secure_cookies=True)
    page = secure.get("/login")
    r = secure.post(
        "/login",
        data={"token": secret, "csrf_token": csrf_in(page.text)},
        follow_redirects=False,
    )
    cookie = next(h for h in r.headers.get_list("set-cookie") if h.startswith(SESSION_COOKIE))
    assert "Secure" in cookie and "HttpOnly" in cookie


def test_login_refuses_an_outside_redirect_and_a_form_without_its_nonce(env: Env) -> None:
    secret = env.token()
    c = env.client()
    r = c.post("/login", data={"token": secret, "csrf_token": "forged"}, follow_redirects=False)
    assert r.status_code == 403
    assert SESSION_COOKIE not in r.headers.get("set-cookie", "")
    page = c.get("/login")
    r = c.post(
        "/login",
        data={"token": secret, "csrf_token": csrf_in(page.text), "next": "//evil.example/x"},
        follow_redirects=False,
    )
    assert r.headers["location"] == "/"


def test_a_revoked_token_stops_working_on_the_next_request(env: Env) -> None:
    token, secret = create_token(env.app, "default", "admin")
    c = env.client()
    login(c, secret)
    assert c.get("/jobs").status_code == 200
    revoke_token(env.app, token.id)
    r = c.get("/jobs", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/login")
    page = c.get("/jobs")
    assert "session ended" in page.text
    assert c.get("/", follow_redirects=False).status_code == 303


def test_logout_ends_the_session(env: Env) -> None:
    c = env.logged_in()
    assert c.post("/logout", data={"csrf_token": "wrong"}).status_code == 403
    assert c.get("/", follow_redirects=False).status_code == 200
    r = c.post("/logout", data={"csrf_token": csrf(c)})
    assert r.status_code == 200 and "Logged out." in r.text
    assert c.get("/", follow_redirects=False).status_code == 303


def test_the_cookie_holds_a_server_side_session_that_logout_ends_everywhere(env: Env) -> None:
    secret = env.token()
    c = env.client()
    login(c, secret)
    session_id = c.cookies[SESSION_COOKIE]
    assert session_id.startswith("ds_") and session_id != secret
    # the session is stored hashed; neither the token nor the session id is in the database
    found = env.app.store.find_session(hash_secret(session_id), env.clock.now())
    assert found is not None and found.role is Role.ADMIN
    # a copy of the cookie works until logout, then nowhere
    copy = env.client()
    copy.cookies.set(SESSION_COOKIE, session_id)
    assert copy.get("/jobs", follow_redirects=False).status_code == 200
    assert copy.get("/v1/stats").status_code == 200  # the pages' refresh reads the API
    c.post("/logout", data={"csrf_token": csrf(c)})
    assert env.app.store.find_session(hash_secret(session_id), env.clock.now()) is None
    assert copy.get("/jobs", follow_redirects=False).status_code == 303
    assert copy.get("/v1/stats").status_code == 401
    # the raw token in the cookie is no session
    raw = env.client()
    raw.cookies.set(SESSION_COOKIE, secret)
    assert raw.get("/jobs", follow_redirects=False).status_code == 303


def test_a_session_ends_after_twelve_hours_or_when_its_token_expires(env: Env) -> None:
    c = env.logged_in()
    env.clock.advance(12 * 3600 - 1)
    assert c.get("/jobs", follow_redirects=False).status_code == 200
    env.clock.advance(1)
    r = c.get("/jobs", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/login")
    short = env.client()
    _, secret = create_token(env.app, "default", "read", expires_in=timedelta(hours=1))
    login(short, secret)
    env.clock.advance(3599)
    assert short.get("/jobs", follow_redirects=False).status_code == 200
    env.clock.advance(1)
    assert short.get("/jobs", follow_redirects=False).status_code == 303
    page = short.get("/login")
    r = short.post("/login", data={"token": secret, "csrf_token": csrf_in(page.text)})
    assert r.status_code == 401
    assert f"This token {secret[:10]}... expired at 2026-01-15T22:00:00Z" in unescape(r.text)


# -- pages --------------------------------------------------------------------------------------


def test_the_job_page_says_when_no_worker_serves_its_task(env: Env) -> None:
    job = env.scheduled(task="emails.sned")
    c = env.logged_in()
    page = c.get(f"/jobs/{job.id}").text
    assert "data-unserved>no worker serves task &#39;emails.sned&#39;" in page, page
    now = env.clock.now()
    node = Node("n1", "host", 1, None, 4, ("worker",), "0", now, now, tasks=("emails.sned",))
    env.app.store.register_node(node, now)
    assert "data-unserved" not in c.get(f"/jobs/{job.id}").text


def test_every_page_renders(env: Env) -> None:
    dead = env.dead()
    parked = env.parked()
    scheduled = env.scheduled(task="emails.send", queue="emails")
    env.app.add_schedule("paris", task="reports.build", cron="*/5 * * * *", timezone="Europe/Paris")
    schedule = env.app.get_schedule("paris")
    occurrence = env.app.trigger_schedule("paris")
    running = env.app.enqueue("emails.send", {"to": "a@example.com"})
    [claim] = env.app.store.claim(worker_id="w9", queues=None, limit=1, now=env.clock.now())
    assert claim.job.id in (occurrence.id, running.id)
    c = env.logged_in()
    for path in [
        *PAGES,
        f"/jobs/{occurrence.id}",
        f"/jobs/{running.id}",
        f"/jobs/{dead.id}",
        f"/jobs/{parked.id}",
        f"/jobs/{scheduled.id}",
        f"/schedules/{schedule.id}",
        "/jobs?task=emails.send&queue=emails&status=scheduled",
        "/jobs?due_after=2026-01-15T09:00&due_before=2026-01-16T00:00:00%2B01:00",
        "/dead-letters?task=billing.charge",
        "/static/dashboard.css",
        "/static/dashboard.js",
    ]:
        r = c.get(path)
        assert r.status_code == 200, (path, r.text[:500])
    page = c.get(f"/jobs/{dead.id}").text
    assert "card declined &lt;b&gt;not bold&lt;/b&gt;" in page  # escaped, never raw HTML
    assert "<b>not bold</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page
    assert "<details><summary>Traceback</summary>" in page
    assert "&#34;invoice&#34;: 1042" in page  # the payload, pretty-printed
    assert "Replay" in page and "Cancel job" not in page
    page = c.get(f"/jobs/{claim.job.id}").text
    assert "Ask it to stop" in page and "w9" in page
    page = c.get(f"/jobs/{occurrence.id}").text
    assert f'occurrence of schedule <a href="/schedules/{schedule.id}">paris</a>' in page
    page = c.get(f"/jobs/{parked.id}").text
    assert "Resolve: it is done" in page and "Run it again" in page
    page = c.get("/schedules").text
    assert "Europe/Paris" in page and "cron */5 * * * *" in page
    assert "2026-01-15 10:05:00 CET +01:00" in page  # local time of the next fire
    assert "2026-01-15T09:05:00Z" in page  # and UTC
    assert "enqueued" in page  # its last outcome
    page = c.get(f"/schedules/{schedule.id}").text
    assert page.count("CET +01:00") >= 10  # the preview of the next fires
    assert "late once the next tick is due" in page
    response = c.get("/")
    assert response.headers["content-security-policy"].startswith("default-src 'self'")
    assert response.headers["cache-control"] == "no-store"


def test_overview_shows_counts_and_refreshes_from_the_stats_api(env: Env) -> None:
    env.dead(queue="billing")
    env.parked()
    env.scheduled(queue="emails")
    env.scheduled(queue="emails")
    c = env.logged_in(refresh_seconds=7)
    page = c.get("/").text
    assert '<span class="tile-count" data-count="scheduled">2</span>' in page
    assert '<span class="tile-count" data-count="dead">1</span>' in page
    assert '<span class="tile-count" data-count="parked">1</span>' in page
    assert 'href="/jobs?status=parked"' in page
    assert 'data-src="/v1/stats" data-refresh="7"' in page
    assert 'id="stats-data"' in page and '"by_queue"' in page
    for name in ("succeeded", "lag", "failed"):
        assert f'data-chart="{name}"' in page
    assert '<a href="/jobs?queue=emails&amp;status=scheduled">2</a>' in page
    assert "Oldest overdue" in page and "p95" in page and "p99" in page


def test_overview_shows_each_queues_dispatch_mode_and_outbox_backlog(env: Env) -> None:
    env.scheduled(queue="emails")
    env.app.set_queue("broker", dispatch="outbox")
    env.scheduled(queue="broker", delay=0)
    env.scheduled(queue="broker", delay=0)
    assert len(env.app.store.dispatch_outbox(env.clock.now(), 10, 300)) == 2
    env.clock.advance(12)
    page = env.logged_in().get("/").text
    dispatch = page[page.index("data-dispatch") :]
    assert "<td>broker</td>\n        <td>outbox</td>" in dispatch
    assert '<td class="num">2</td>' in dispatch and "12.0 s" in dispatch
    assert "<td>emails</td>\n        <td>direct</td>" in dispatch


def test_jobs_search_filters_and_pages_newest_first(env: Env) -> None:
    first = env.scheduled(task="emails.send", queue="emails")
    env.clock.advance(60)
    later = [env.scheduled(task="reports.build") for _ in range(54)]
    c = env.logged_in()
    r = c.get(f"/jobs?id={first.id}", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/jobs/{first.id}"
    page = c.get("/jobs").text
    ids = job_ids(page)
    assert ids == sorted((j.id for j in [first, *later]), reverse=True)[:50]
    next_link = re.search(r'<a href="([^"]+)" rel="next">', page)
    assert next_link is not None
    rest = job_ids(c.get(next_link.group(1).replace("&amp;", "&")).text)
    assert rest == sorted([first.id, *(j.id for j in later)], reverse=True)[50:]
    assert job_ids(c.get("/jobs?task=emails.send").text) == [first.id]
    assert job_ids(c.get("/jobs?queue=emails&status=scheduled").text) == [first.id]
    assert job_ids(c.get("/jobs?status=dead").text) == []
    due = first.due_at
    end = due + timedelta(seconds=30)
    window = f"due_after={due:%Y-%m-%dT%H:%M:%S}&due_before={end:%Y-%m-%dT%H:%M:%S}"
    assert job_ids(c.get(f"/jobs?{window}").text) == [first.id]
    bad = c.get("/jobs?status=nonsense&due_after=yesterday")
    assert bad.status_code == 400
    assert "unknown status" in bad.text and "is not a time" in bad.text


# -- CSRF and roles -----------------------------------------------------------------------------


def test_forms_without_the_right_csrf_token_change_nothing(env: Env) -> None:
    job = env.scheduled()
    dead = env.dead()
    env.app.add_schedule("nightly", task="t", cron="0 3 * * *", timezone="UTC")
    schedule = env.app.get_schedule("nightly")
    c = env.logged_in()
    token = csrf(c)
    posts = [
        (f"/jobs/{job.id}/cancel", {}),
        (f"/jobs/{job.id}/reschedule", {"due_at": "2026-02-01T00:00"}),
        (f"/jobs/{dead.id}/replay", {}),
        (f"/schedules/{schedule.id}/pause", {}),
        ("/dead-letters/replay", {"scope": "matching"}),
    ]
    for path, data in posts:
        assert c.post(path, data=data).status_code == 403, path
        assert c.post(path, data={**data, "csrf_token": "0" * 64}).status_code == 403, path
        cross = c.post(
            path, data={**data, "csrf_token": token}, headers={"Sec-Fetch-Site": "cross-site"}
        )
        assert cross.status_code == 403, path
    assert env.stored(job.id).status is JobStatus.SCHEDULED
    assert env.stored(job.id).due_at == job.due_at
    assert env.stored(dead.id).status is JobStatus.DEAD
    assert not env.app.get_schedule("nightly").paused


def test_a_read_token_sees_no_buttons_and_cannot_act(env: Env) -> None:
    job = env.scheduled()
    dead = env.dead()
    env.app.add_schedule("nightly", task="t", cron="0 3 * * *", timezone="UTC")
    schedule = env.app.get_schedule("nightly")
    c = env.logged_in(role="read")
    for path in (f"/jobs/{job.id}", f"/jobs/{dead.id}", "/schedules", "/dead-letters"):
        page = c.get(path).text
        assert page.count('name="csrf_token"') == 1, path  # only the logout form
        for label in ("Cancel job", "Reschedule", ">Replay<", ">Pause<", "Replay selected"):
            assert label not in page, (path, label)
    assert "read-only" in c.get(f"/jobs/{job.id}").text
    token = csrf(c)
    for path in (
        f"/jobs/{job.id}/cancel",
        f"/jobs/{dead.id}/replay",
        f"/schedules/{schedule.id}/pause",
        "/dead-letters/replay",
    ):
        r = c.post(path, data={"csrf_token": token, "scope": "matching"})
        assert r.status_code == 403, path
        assert "role is read" in r.text
    assert env.stored(job.id).status is JobStatus.SCHEDULED
    assert env.stored(dead.id).status is JobStatus.DEAD
    assert not env.app.get_schedule("nightly").paused


def test_a_write_token_replays_one_job_but_not_in_bulk(env: Env) -> None:
    first, second = env.dead(), env.dead()
    c = env.logged_in(role="write")
    page = c.get("/dead-letters").text
    assert "Replay selected" not in page and ">Replay<" in page
    token = csrf(c)
    r = c.post("/dead-letters/replay", data={"csrf_token": token, "ids": [str(second.id)]})
    assert r.status_code == 403
    r = c.post(f"/jobs/{first.id}/replay", data={"csrf_token": token, "back": "/dead-letters"})
    assert r.status_code == 200 and r.url.path == "/dead-letters"
    assert f"Job {first.id} replayed" in flash(r.text)
    assert env.stored(first.id).status is JobStatus.SCHEDULED
    assert env.stored(second.id).status is JobStatus.DEAD


# -- tenants ------------------------------------------------------------------------------------


def test_a_token_never_sees_another_tenants_data(env: Env) -> None:
    mine = env.scheduled("acme")
    theirs = env.scheduled("globex", task="globex.secret", queue="globex-q")
    their_dead = env.dead("globex", task="globex.billing")
    env.app.scoped("globex").add_schedule("g-nightly", task="t", cron="0 3 * * *", timezone="UTC")
    their_schedule = env.app.scoped("globex").get_schedule("g-nightly")
    c = env.logged_in("acme", "write")
    assert c.get(f"/jobs/{mine.id}").status_code == 200
    assert c.get(f"/jobs/{theirs.id}").status_code == 404
    assert c.get(f"/schedules/{their_schedule.id}").status_code == 404
    assert job_ids(c.get("/jobs").text) == [mine.id]
    for path in PAGES:
        page = c.get(path).text
        assert "globex" not in page and "g-nightly" not in page, path
    token = csrf(c)
    assert c.post(f"/jobs/{theirs.id}/cancel", data={"csrf_token": token}).status_code == 404
    assert c.post(f"/jobs/{their_dead.id}/replay", data={"csrf_token": token}).status_code == 404
    r = c.post(f"/schedules/{their_schedule.id}/pause", data={"csrf_token": token})
    assert r.status_code == 404
    assert env.stored(theirs.id).status is JobStatus.SCHEDULED
    assert env.stored(their_dead.id).status is JobStatus.DEAD
    assert not env.app.scoped("globex").get_schedule("g-nightly").paused


def test_an_admin_sees_every_tenant_and_acts_in_the_jobs_tenant(env: Env) -> None:
    acme = env.scheduled("acme")
    globex = env.scheduled("globex")
    globex_dead = env.dead("globex")
    env.app.scoped("globex").add_schedule("g-nightly", task="t", cron="0 3 * * *", timezone="UTC")
    schedule = env.app.scoped("globex").get_schedule("g-nightly")
    c = env.logged_in("ops", "admin")
    assert set(job_ids(c.get("/jobs").text)) >= {acme.id, globex.id, globex_dead.id}
    assert job_ids(c.get("/jobs?tenant=acme").text) == [acme.id]
    assert "g-nightly" in c.get("/schedules").text
    token = csrf(c)
    r = c.post(f"/jobs/{globex.id}/cancel", data={"csrf_token": token})
    assert f"Job {globex.id} cancelled." in flash(r.text)
    assert env.stored(globex.id).status is JobStatus.CANCELLED
    c.post(f"/jobs/{globex_dead.id}/replay", data={"csrf_token": token})
    assert env.stored(globex_dead.id).status is JobStatus.SCHEDULED
    c.post(f"/schedules/{schedule.id}/pause", data={"csrf_token": token})
    assert env.app.scoped("globex").get_schedule("g-nightly").paused


# -- actions ------------------------------------------------------------------------------------


def test_cancel_reschedule_replay_and_resolve_change_the_store(env: Env) -> None:
    dead = env.dead()
    parked_done, parked_again = env.parked(), env.parked()
    job = env.scheduled()
    c = env.logged_in(role="write")
    token = csrf(c)

    r = c.post(
        f"/jobs/{job.id}/reschedule", data={"csrf_token": token, "due_at": "2026-03-01T08:30"}
    )
    assert r.status_code == 200 and r.url.path == f"/jobs/{job.id}"
    assert "read as UTC" in flash(r.text)
    assert env.stored(job.id).due_at == datetime(2026, 3, 1, 8, 30, tzinfo=UTC)
    r = c.post(
        f"/jobs/{job.id}/reschedule",
        data={"csrf_token": token, "due_at": "2026-03-01T09:30:00+01:00"},
    )
    assert "read as UTC" not in flash(r.text)
    assert env.stored(job.id).due_at == datetime(2026, 3, 1, 8, 30, tzinfo=UTC)
    r = c.post(f"/jobs/{job.id}/reschedule", data={"csrf_token": token, "due_at": "soon"})
    assert r.status_code == 200 and "is not a time" in flash(r.text)

    r = c.post(f"/jobs/{job.id}/cancel", data={"csrf_token": token})
    assert flash(r.text) == f"Job {job.id} cancelled."
    assert env.stored(job.id).status is JobStatus.CANCELLED
    # an illegal move is a readable message on the page, not an error page
    r = c.post(f"/jobs/{job.id}/cancel", data={"csrf_token": token})
    assert r.status_code == 200
    assert f"cannot cancel job {job.id}: it is cancelled" in flash(r.text)
    assert 'class="flash flash-error"' in r.text

    r = c.post(f"/jobs/{dead.id}/replay", data={"csrf_token": token})
    assert "replayed" in flash(r.text)
    assert env.stored(dead.id).status is JobStatus.SCHEDULED

    c.post(f"/jobs/{parked_done.id}/resolve", data={"csrf_token": token, "outcome": "done"})
    assert env.stored(parked_done.id).status is JobStatus.SUCCEEDED
    c.post(f"/jobs/{parked_again.id}/resolve", data={"csrf_token": token, "outcome": "retry"})
    assert env.stored(parked_again.id).status is JobStatus.SCHEDULED
    r = c.post(f"/jobs/{parked_again.id}/resolve", data={"csrf_token": token, "outcome": "done"})
    assert "cannot" in flash(r.text)
    assert c.post("/jobs/999999/cancel", data={"csrf_token": token}).status_code == 404


def test_pause_and_resume_a_schedule(env: Env) -> None:
    env.app.add_schedule("paris", task="t", cron="*/5 * * * *", timezone="Europe/Paris")
    schedule = env.app.get_schedule("paris")
    c = env.logged_in(role="write")
    token = csrf(c)
    r = c.post(f"/schedules/{schedule.id}/pause", data={"csrf_token": token, "back": "/schedules"})
    assert r.url.path == "/schedules" and flash(r.text) == "Schedule 'paris' paused."
    assert env.app.get_schedule("paris").paused
    assert ">Resume<" in r.text and "— (paused)" in r.text
    r = c.post(f"/schedules/{schedule.id}/resume", data={"csrf_token": token})
    assert r.url.path == f"/schedules/{schedule.id}" and "resumed" in flash(r.text)
    assert not env.app.get_schedule("paris").paused


def test_bulk_replay_of_selected_and_matching_dead_jobs(env: Env) -> None:
    a, b = env.dead(task="billing.charge"), env.dead(task="billing.charge")
    other = env.dead(task="emails.send")
    alive = env.scheduled()
    c = env.logged_in("ops", "admin")
    token = csrf(c, "/dead-letters")
    r = c.post(
        "/dead-letters/replay",
        data={"csrf_token": token, "scope": "selected", "ids": [str(a.id), str(alive.id), "99999"]},
    )
    assert r.status_code == 200
    assert '<div class="kpi-value" data-report="matched">3</div>' in r.text
    assert 'data-report="replayed">1</div>' in r.text
    assert 'data-report="skipped">2</div>' in r.text
    assert f"job {alive.id} is scheduled, not dead" in r.text
    assert "job 99999 does not exist" in r.text
    assert env.stored(a.id).status is JobStatus.SCHEDULED

    r = c.post(
        "/dead-letters/replay",
        data={
            "csrf_token": token,
            "scope": "matching",
            "task": "billing.charge",
            "per_second": "500",
        },
    )
    assert 'data-report="replayed">1</div>' in r.text and "paced at 500 jobs/s" in r.text
    assert env.stored(b.id).status is JobStatus.SCHEDULED
    assert env.stored(other.id).status is JobStatus.DEAD
    r = c.post("/dead-letters/replay", data={"csrf_token": token, "scope": "selected"})
    assert "select at least one" in flash(r.text)
    r = c.post(
        "/dead-letters/replay",
        data={"csrf_token": token, "scope": "matching", "task": "nothing.here"},
    )
    assert "no dead job matches" in flash(r.text)
    r = c.post(
        "/dead-letters/replay",
        data={"csrf_token": token, "scope": "matching", "per_second": "-1"},
    )
    assert "more than 0" in flash(r.text)
    assert env.stored(other.id).status is JobStatus.DEAD


def test_dead_letters_show_the_last_error_and_filter(env: Env) -> None:
    charge = env.dead(task="billing.charge")
    mail = env.dead(task="emails.send", queue="emails")
    c = env.logged_in(role="read")
    page = c.get("/dead-letters").text
    assert job_ids(page) == [mail.id, charge.id]
    assert "card declined &lt;b&gt;not bold&lt;/b&gt;" in page and "permanent" in page
    assert job_ids(c.get("/dead-letters?task=emails.send").text) == [mail.id]
    assert job_ids(c.get("/dead-letters?queue=default").text) == [charge.id]


def test_without_auth_no_login_is_needed(env: Env) -> None:
    job = env.scheduled()
    c = env.client(auth=False)
    for path in PAGES:
        assert c.get(path, follow_redirects=False).status_code == 200, path
    assert c.get("/login", follow_redirects=False).headers["location"] == "/"
    page = c.get(f"/jobs/{job.id}").text
    assert "Log out" not in page
    assert c.post(f"/jobs/{job.id}/cancel", data={}).status_code == 403
    c.post(f"/jobs/{job.id}/cancel", data={"csrf_token": csrf_in(page)})
    assert env.stored(job.id).status is JobStatus.CANCELLED


# -- operators' pages and actions -------------------------------------------------------------


def _node(node_id: str, env: Env) -> Node:
    now = env.clock.now()
    return Node(node_id, "host-a", 123, ("mail",), 4, ("worker", "reaper"), "0.1.0", now, now)


def test_the_nodes_page_shows_live_dead_and_stopped_nodes_and_what_they_hold(env: Env) -> None:
    store = env.app.store
    store.register_node(_node("host-a:1:aa", env), env.clock.now())
    store.register_node(_node("host-b:2:bb", env), env.clock.now())
    store.register_node(_node("host-c:3:cc", env), env.clock.now())
    store.stop_node("host-c:3:cc", env.clock.now())
    job = env.app.enqueue("mail.send", {}, queue="mail")
    store.claim(worker_id="host-a:1:aa", queues=["mail"], limit=1, now=env.clock.now())
    env.clock.advance(40)
    store.touch_node("host-a:1:aa", env.clock.now())
    c = env.logged_in(role="admin")
    page = c.get("/nodes").text
    rows = dict(re.findall(r'<tr data-node="([^"]+)">(.*?)</tr>', page, re.S))
    assert sorted(rows) == ["host-a:1:aa", "host-b:2:bb"]
    assert ">live<" in rows["host-a:1:aa"] and f'href="/jobs/{job.id}"' in rows["host-a:1:aa"]
    # a tenant's token sees how many jobs a node holds, not which (they may be any tenant's)
    reader = env.logged_in(tenant="acme", role="read").get("/nodes").text
    assert 'data-node="host-a:1:aa"' in reader and f'href="/jobs/{job.id}"' not in reader
    assert ">dead<" in rows["host-b:2:bb"] and "40.0 s ago" in rows["host-b:2:bb"]
    assert "Show 1 stopped node" in page
    every = c.get("/nodes?all=true").text
    assert '<tr data-node="host-c:3:cc">' in every and ">stopped<" in every


def _retry(env: Env, message: str) -> Job:
    job = env.app.enqueue("billing.charge", {"invoice": 7}, max_attempts=10)
    claims = env.app.store.claim(worker_id="w1", queues=None, limit=1, now=env.clock.now())
    outcome = Outcome(
        Event.RETRY,
        due_at=env.clock.now() + timedelta(minutes=5),
        error_category=ErrorCategory.RETRYABLE,
        error_message=message,
    )
    assert env.app.store.finish(claims[0].lease, outcome, env.clock.now())
    return env.stored(job.id)


def test_a_job_waiting_to_retry_is_shown_apart_from_a_fresh_one(env: Env) -> None:
    fresh = env.scheduled()
    retrying = _retry(env, "TimeoutError: upstream took too long")
    dead = env.dead()
    c = env.logged_in(role="read")
    page = c.get("/jobs").text
    rows = {
        int(n): row
        for row in re.findall(r"<tr(?: class=\"retrying\")?>.*?</tr>", page, re.S)
        for n in re.findall(r'<a href="/jobs/(\d+)" class="mono">', row)
    }
    assert 'class="badge s-retrying"' in rows[retrying.id]
    assert "attempt 2/10" in rows[retrying.id]
    assert "upstream took too long" in rows[retrying.id]
    assert "s-retrying" not in rows[fresh.id] and ">scheduled<" in rows[fresh.id]
    assert "card declined &lt;b&gt;not bold&lt;/b&gt;" in rows[dead.id]
    assert "<th>Last error</th>" in page


def test_jobs_search_by_business_key_idempotency_key_and_args(env: Env) -> None:
    keyed = env.app.enqueue("billing.charge", {"customer": "cus_1042"}, key="order-42")
    other = env.app.enqueue("billing.charge", {"customer": "cus_2000"}, key="order-43")
    c = env.logged_in(role="read")
    assert job_ids(c.get("/jobs", params={"key": "order-42"}).text) == [keyed.id]
    by_business = c.get("/jobs", params={"business_key": other.business_key}).text
    assert job_ids(by_business) == [other.id]
    assert job_ids(c.get("/jobs", params={"args": "CUS_1042"}).text) == [keyed.id]
    assert job_ids(c.get("/jobs", params={"args": "cus_", "key": "order-43"}).text) == [other.id]
    page = c.get("/jobs", params={"args": "nothing-like-it"}).text
    assert job_ids(page) == [] and "No job matches." in page


def test_bulk_cancel_of_selected_and_matching_jobs(env: Env) -> None:
    a, b, c_job = env.scheduled(), env.scheduled(), env.scheduled(task="mail.send")
    dead = env.dead()
    c = env.logged_in(role="write")
    token = csrf(c)
    r = c.post(
        "/jobs/cancel",
        data={"csrf_token": token, "ids": [str(a.id), str(dead.id)], "back": "/jobs"},
    )
    assert r.url.path == "/jobs"
    assert flash(r.text) == (
        f"Cancelled 1 job. 1 could not be cancelled any more: #{dead.id} (dead)."
    )
    assert env.stored(a.id).status is JobStatus.CANCELLED
    r = c.post(
        "/jobs/cancel",
        data={"csrf_token": token, "scope": "matching", "task": "reports.build"},
    )
    assert flash(r.text) == "Cancelled 1 job."
    assert env.stored(b.id).status is JobStatus.CANCELLED
    assert env.stored(c_job.id).status is JobStatus.SCHEDULED
    r = c.post("/jobs/cancel", data={"csrf_token": token, "scope": "matching", "task": "nope"})
    assert "nothing was cancelled" in flash(r.text)
    # the CSRF token and the role are checked as on every form
    assert c.post("/jobs/cancel", data={"ids": [str(c_job.id)]}).status_code == 403
    reader = env.logged_in(role="read")
    r = reader.post("/jobs/cancel", data={"csrf_token": csrf(reader), "ids": [str(c_job.id)]})
    assert r.status_code == 403
    assert env.stored(c_job.id).status is JobStatus.SCHEDULED


def test_the_job_page_shows_each_attempts_duration(env: Env) -> None:
    job = env.app.enqueue("billing.charge", {})
    store = env.app.store
    first = store.claim(worker_id="w1", queues=None, limit=1, now=env.clock.now())[0]
    env.clock.advance(2.5)
    store.finish(first.lease, Outcome(Event.RETRY, due_at=env.clock.now()), env.clock.now())
    store.claim(worker_id="w1", queues=None, limit=1, now=env.clock.now())
    env.clock.advance(90)
    page = env.logged_in(role="read").get(f"/jobs/{job.id}").text
    assert re.findall(r"<td class=\"num\" data-duration>(.*?)</td>", page) == ["2.5 s", "1m 30s …"]


def test_schedules_read_their_cron_in_words_and_can_be_triggered_and_edited(env: Env) -> None:
    env.app.add_schedule("standup", task="t", cron="0 9 * * 1-5", timezone="Europe/Paris")
    s = env.app.get_schedule("standup")
    c = env.logged_in(role="write")
    listing = c.get("/schedules").text
    assert "at 09:00 on Monday to Friday" in listing
    page = c.get(f"/schedules/{s.id}").text
    assert "at 09:00 on Monday to Friday" in page and ">Trigger now<" in page
    token = csrf_in(page)
    r = c.post(f"/schedules/{s.id}/trigger", data={"csrf_token": token})
    assert r.url.path == f"/schedules/{s.id}"
    job_id = int(re.findall(r"job (\d+), due", flash(r.text))[0])
    assert env.stored(job_id).origin == "trigger"
    r = c.post(
        f"/schedules/{s.id}/edit",
        data={
            "csrf_token": token,
            "cron": "",
            "every": "15m",
            "timezone": "UTC",
            "args": '{"region": "eu"}',
            "misfire": "coalesce",
            "overlap": "skip",
        },
    )
    assert flash(r.text) == "Schedule 'standup' changed: every 15 min in UTC."
    changed = env.app.get_schedule("standup")
    assert changed.spec.every_seconds == 900 and changed.spec.cron is None
    assert changed.spec.args == {"region": "eu"} and changed.spec.misfire == "coalesce"
    assert changed.spec.timezone == "UTC" and changed.spec.overlap == "skip"
    r = c.post(
        f"/schedules/{s.id}/edit",
        data={"csrf_token": token, "cron": "0 * * * *", "every": "15m", "timezone": "UTC"},
    )
    assert "not both" in flash(r.text)
    r = c.post(f"/schedules/{s.id}/edit", data={"csrf_token": token, "args": "[1]"})
    assert "JSON object" in flash(r.text)
    assert env.app.get_schedule("standup").spec.every_seconds == 900
    reader = env.logged_in(role="read")
    r = reader.post(f"/schedules/{s.id}/trigger", data={"csrf_token": csrf(reader)})
    assert r.status_code == 403


def test_an_admin_pauses_resumes_and_limits_a_queue_and_a_tenant(env: Env) -> None:
    env.scheduled(queue="emails")
    env.scheduled(tenant="acme", queue="emails")
    c = env.logged_in(role="admin")
    page = c.get("/queues")
    assert 'data-queue="emails"' in page.text and 'data-tenant="acme"' in page.text
    token = csrf_in(page.text)
    r = c.post("/queues/emails/pause", data={"csrf_token": token})
    assert r.url.path == "/queues" and "paused" in flash(r.text)
    assert env.app.queue("emails").paused and ">Resume<" in r.text
    r = c.post("/queues/emails/resume", data={"csrf_token": token})
    assert not env.app.queue("emails").paused
    r = c.post(
        "/queues/emails/limits",
        data={"csrf_token": token, "concurrency": "3", "max_backlog": "", "weight": "2"},
    )
    assert flash(r.text) == "Queue 'emails' changed."
    q = env.app.queue("emails")
    assert (q.concurrency, q.max_backlog, q.weight) == (3, None, 2.0)
    r = c.post("/queues/emails/limits", data={"csrf_token": token, "concurrency": "lots"})
    assert "concurrency must be a whole number" in flash(r.text)
    assert env.app.queue("emails").concurrency == 3
    r = c.post("/tenants/acme/limits", data={"csrf_token": token, "max_backlog": "100"})
    assert flash(r.text) == "Tenant 'acme' changed."
    assert env.app.tenant_settings("acme").max_backlog == 100


def test_the_queues_page_shows_the_due_jobs_not_started_and_their_wait(env: Env) -> None:
    env.scheduled(queue="emails")  # due in an hour: in the backlog, not waiting
    env.app.scoped("acme").enqueue("reports.build", {"n": 2}, queue="emails")  # due now
    env.clock.advance(90)
    page = env.logged_in(role="read", tenant="acme").get("/queues").text
    assert '<th class="num">Waiting</th>' in page
    emails = re.search(r'<tr data-queue="emails">.*?</tr>', page, re.S)
    assert emails is not None and 'data-waiting="1"' in emails.group(0), page
    assert "oldest 1m 30s" in emails.group(0), emails.group(0)
    admin = env.logged_in(role="admin").get("/queues").text
    rows = dict(re.findall(r'<tr data-tenant="([^"]+)">(.*?)</tr>', admin, re.S))
    assert 'data-waiting="1"' in rows["acme"] and "oldest 1m 30s" in rows["acme"], admin
    assert 'data-waiting="0"' in rows["default"] and "oldest" not in rows["default"], admin


def test_only_admins_steer_queues(env: Env) -> None:
    env.scheduled(queue="emails")
    c = env.logged_in(role="write")
    page = c.get("/queues")
    assert page.status_code == 200 and ">Pause<" not in page.text
    r = c.post("/queues/emails/pause", data={"csrf_token": csrf_in(c.get("/jobs").text)})
    assert r.status_code == 403 and not env.app.queue("emails").paused


def test_a_dispatched_job_shows_it_waits_in_the_broker_and_can_be_rescheduled(env: Env) -> None:
    # docs/outbox.md, "Withdrawn dispatches": running, yet not executing
    env.app.set_queue("broker", dispatch="outbox")
    job = env.scheduled(queue="broker", delay=0)
    [event] = env.app.store.dispatch_outbox(env.clock.now(), 10, 300)
    env.clock.advance(12)
    c = env.logged_in(role="write")
    listed = c.get("/jobs").text
    assert "dispatched, in the broker 12.0 s" in listed
    page = c.get(f"/jobs/{job.id}").text
    assert "data-dispatched" in page and "12.0 s ago" in page and "not executing" in page
    assert f'action="/jobs/{job.id}/reschedule"' in page
    assert "Cancel job" in page and "Ask it to stop" not in page
    r = c.post(
        f"/jobs/{job.id}/reschedule",
        data={"csrf_token": csrf_in(page), "due_at": "2026-03-01T08:30:00Z"},
    )
    assert "rescheduled" in flash(r.text)
    moved = env.stored(job.id)
    assert moved.status is JobStatus.SCHEDULED and moved.attempt_history == ()
    assert moved.due_at == datetime(2026, 3, 1, 8, 30, tzinfo=UTC)
    assert "data-dispatched" not in c.get(f"/jobs/{job.id}").text
    assert (
        env.app.store.accept_dispatch(Dispatched.from_body(event.body()), "w", env.clock.now())
        is None
    )


def test_the_nodes_page_shows_each_nodes_clock_offset_and_marks_one_past_a_second(
    env: Env,
) -> None:
    store = env.app.store
    store.register_node(replace(_node("fast:1:aa", env), clock_offset=30.004), env.clock.now())
    store.register_node(replace(_node("true:2:bb", env), clock_offset=-0.0021), env.clock.now())
    store.register_node(_node("manual:3:cc", env), env.clock.now())  # not measured
    page = env.logged_in(role="read").get("/nodes").text
    rows = dict(re.findall(r'<tr data-node="([^"]+)">(.*?)</tr>', page, re.S))
    assert 'class="badge s-clock-off"' in rows["fast:1:aa"] and "+30.0 s" in rows["fast:1:aa"]
    assert "s-clock-off" not in rows["true:2:bb"] and "-0.002 s" in rows["true:2:bb"]
    assert (
        'data-clock-offset=""' in rows["manual:3:cc"] and "s-clock-off" not in rows["manual:3:cc"]
    )


def test_the_job_page_shows_the_result_and_the_progress_escaped(env: Env) -> None:
    done = env.finished(
        Event.SUCCEED,
        result='{"html":"<script>alert(1)</script>","rows":3}',
        progress=1.0,
        progress_message="<b>all</b> done",
    )
    running = env.app.enqueue("reports.build", {"n": 2})
    [claim] = env.app.store.claim(worker_id="w1", queues=None, limit=1, now=env.clock.now())
    assert claim.job.id == running.id
    assert env.app.store.record_progress([(claim.lease, 0.4, "rows 4/10")], env.clock.now())
    c = env.logged_in()
    page = c.get(f"/jobs/{done.id}").text
    assert "data-result" in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert" not in page
    assert "&lt;b&gt;all&lt;/b&gt; done" in page and "<strong>100%</strong>" in page
    page = c.get(f"/jobs/{running.id}").text
    assert "data-progress" in page and '<progress max="1" value="0.4">' in page
    assert "rows 4/10" in page and "data-result" not in page
