"""The dashboard in a real browser: Debian's Chromium driven by Playwright, at 1280x800.

The server runs in-process (uvicorn in a thread) on an SQLite database seeded with an hour
of history. Full-page screenshots of every page go to $DUETIME_ARTIFACTS/dashboard (default
test-artifacts/dashboard); they are test artifacts, never committed.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from duetime import App
from duetime.admin.tokens import create_token
from duetime.core.clock import ManualClock
from duetime.core.models import Job, JobFilter, Node, Outcome
from duetime.core.retry import ErrorCategory
from duetime.core.states import Event, JobStatus
from duetime.server import ServerSettings, create_app
from duetime.store.base import Store
from jobhelpers import claim_one, enqueue

CHROMIUM = Path("/usr/bin/chromium")
WIDTH, HEIGHT = 1280, 800
TRACEBACK = """Traceback (most recent call last):
  File "/srv/app/tasks.py", line 42, in send_invoice
    gateway.charge(customer_id, amount)
  File "/srv/app/gateway.py", line 88, in charge
    raise PaymentDeclined(f"card declined for {customer_id}")
app.gateway.PaymentDeclined: card declined for cus_1042 <b>not bold</b>"""


def artifacts() -> Path:
    folder = Path(os.environ.get("DUETIME_ARTIFACTS", "test-artifacts")) / "dashboard"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Seeded:
    scheduled: Job  # due in an hour: the test cancels it
    dead: Job  # the test replays it
    parked: Job
    retried: Job  # a failed attempt, then a successful one
    retrying: Job  # a failed attempt, waiting to retry
    schedule_name: str


def _finish(store: Store, clock: ManualClock, event: Event, **outcome: Any) -> Job:
    job, lease = claim_one(store, clock)
    assert store.finish(lease, Outcome(event, **outcome), clock.now())
    loaded = store.get_job(job.id)
    assert loaded is not None
    return loaded


def seed(app: App) -> Seeded:
    """An hour of believable history: successes with some lag, failures, dead and parked jobs."""
    store = app.store
    now = datetime.now(UTC)
    clock = ManualClock(now - timedelta(minutes=58))
    tasks = [("emails.send_welcome", "emails"), ("reports.build_daily", "reports")]
    tasks.append(("billing.charge_invoice", "default"))
    retried: list[Job] = []
    for i in range(70):
        task, queue = tasks[i % 3]
        job = enqueue(store, clock, task=task, queue=queue, args={"n": i})
        clock.advance(0.05 + (i % 7) * 0.35 + (2.5 if i % 17 == 0 else 0))
        if i % 11 == 5:  # a failed attempt, retried at once
            _finish(
                store,
                clock,
                Event.RETRY,
                due_at=clock.now(),
                error_category=ErrorCategory.RETRYABLE,
                error_message="TimeoutError: upstream took too long",
            )
            clock.advance(1)
            retried.append(job)
        _finish(store, clock, Event.SUCCEED)
        clock.advance(40 + (i % 5) * 3)
    enqueue(store, clock, task="billing.charge_invoice", args={"invoice": 1041})
    _finish(
        store,
        clock,
        Event.GIVE_UP,
        error_category=ErrorCategory.PERMANENT,
        error_message="PaymentDeclined: card declined for cus_1041",
    )
    enqueue(store, clock, task="billing.charge_invoice", args={"invoice": 1042, "amount": 99.5})
    dead = _finish(
        store,
        clock,
        Event.GIVE_UP,
        error_category=ErrorCategory.PERMANENT,
        error_message="PaymentDeclined: card declined for cus_1042 <b>not bold</b>",
        error_traceback=TRACEBACK,
    )
    enqueue(store, clock, task="emails.send_welcome", queue="emails", args={"user": 7})
    parked = _finish(store, clock, Event.PARK, error_category=ErrorCategory.UNKNOWN_OUTCOME)
    node = Node(
        "web-1:4242:ab12",
        "web-1",
        4242,
        ("emails",),
        8,
        ("worker", "reaper"),
        "0.1.0",
        clock.now(),
        clock.now(),
    )
    store.register_node(node, clock.now())
    enqueue(store, clock, task="emails.send_welcome", queue="emails", args={"user": 55})
    store.claim(worker_id=node.id, queues=["emails"], limit=1, now=clock.now())
    store.touch_node(node.id, datetime.now(UTC))
    enqueue(
        store, clock, task="billing.charge_invoice", args={"customer": "cus_3003"}, max_attempts=10
    )
    retrying = _finish(
        store,
        clock,
        Event.RETRY,
        due_at=datetime.now(UTC) + timedelta(minutes=10),
        error_category=ErrorCategory.RETRYABLE,
        error_message="ConnectionError: gateway unreachable",
    )
    enqueue(store, clock, task="reports.build_daily", queue="reports", tenant="acme")
    for n in range(3):
        app.enqueue("emails.send_welcome", {"user": 100 + n}, delay=600 + n * 60, queue="emails")
    scheduled = app.enqueue(
        "reports.build_monthly",
        {"month": "2026-01", "recipients": ["ops@example.com", "cfo@example.com"]},
        delay=3600,
        queue="reports",
    )
    name = "paris-report"
    app.add_schedule(name, task="reports.build_daily", cron="*/5 * * * *", timezone="Europe/Paris")
    app.trigger_schedule(name)  # a tick in its history, and an occurrence in the jobs
    app.add_schedule("nightly-cleanup", task="maintenance.vacuum", cron="0 3 * * *", timezone="UTC")
    app.scoped("acme").add_schedule(
        "acme-sync", task="acme.sync", every="15m", timezone="America/New_York"
    )
    return Seeded(scheduled, dead, parked, retried[0], retrying, schedule_name=name)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, App, Seeded]]:
    app = App(f"sqlite:///{tmp_path / 'dashboard.db'}")
    app.migrate()
    seeded = seed(app)
    settings = ServerSettings(refresh_seconds=1)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(app, settings), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, name="dashboard-server", daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 15
    while True:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=1) as response:
                if response.status == 200:
                    break
        except OSError:
            pass
        assert time.monotonic() < deadline, "the dashboard server did not answer /healthz"
        assert thread.is_alive(), "the dashboard server thread died"
        time.sleep(0.05)
    try:
        yield base, app, seeded
    finally:
        server.should_exit = True
        thread.join(10)
        app.close()


def test_dashboard_in_a_real_browser(served: tuple[str, App, Seeded]) -> None:
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: the dashboard browser test needs Debian's Chromium. "
            "Run `make browser` (it runs `apt-get install -y chromium`), then run the tests again."
        )
    from playwright.sync_api import expect, sync_playwright

    base, app, seeded = served
    _, secret = create_token(app, "default", "admin", name="browser test")
    shots = artifacts()
    problems: list[str] = []

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
            page.set_default_timeout(10_000)
            page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
            page.on(
                "console",
                lambda msg: (
                    problems.append(f"console: {msg.text}")
                    if "Content Security Policy" in msg.text
                    else None
                ),
            )

            def snap(name: str) -> None:
                width = page.evaluate("document.documentElement.scrollWidth")
                assert width <= WIDTH, f"{name}: page is {width}px wide at {WIDTH}px (h-scroll)"
                page.screenshot(path=str(shots / f"{name}.png"), full_page=True)

            # login
            page.goto(base + "/")
            expect(page).to_have_url(re.compile(r"/login\?next="))
            snap("01-login")
            page.fill("#token", "dt_not-a-real-token")
            page.click("button:has-text('Log in')")
            expect(page.locator(".flash-error")).to_contain_text("Unknown or revoked token")
            page.fill("#token", secret)
            page.click("button:has-text('Log in')")
            expect(page).to_have_url(base + "/")
            expect(page.locator("h1")).to_have_text("Overview")
            expect(page.locator('.tile [data-count="dead"]')).to_have_text("2")
            expect(page.locator('.tile [data-count="parked"]')).to_have_text("1")
            expect(page.locator("[data-parked-alert]")).to_be_visible()
            expect(page.locator('svg[data-chart="succeeded"] rect').first).to_be_attached()
            expect(page.locator('svg[data-chart="lag"] path.line')).to_be_attached()
            snap("02-overview")
            # the figures refresh from /v1/stats with the session cookie, without a reload
            scheduled_tile = page.locator('.tile [data-count="scheduled"]')
            before = int(scheduled_tile.inner_text())
            app.enqueue("emails.send_welcome", {"user": 999}, delay=900, queue="emails")
            with page.expect_response(re.compile(r"/v1/stats$"), timeout=5_000) as refresh:
                pass
            assert refresh.value.status == 200, refresh.value.text()
            assert "duetime_session=" in (refresh.value.request.all_headers().get("cookie") or "")
            expect(scheduled_tile).to_have_text(str(before + 1))
            expect(page.locator("#refresh-status")).not_to_contain_text("failed")

            # find a job by id with the search box in the top bar, then cancel it
            job_id = seeded.scheduled.id
            page.fill("form.jump input[name=id]", str(job_id))
            page.press("form.jump input[name=id]", "Enter")
            expect(page).to_have_url(f"{base}/jobs/{job_id}")
            expect(page.locator("h1")).to_contain_text(f"#{job_id}")
            expect(page.locator("h1 .badge")).to_have_text("scheduled")
            expect(page.locator("pre.code").first).to_contain_text('"cfo@example.com"')
            snap("03-job-scheduled")
            page.click("button:has-text('Cancel job')")
            expect(page.locator(".flash-ok")).to_have_text(f"Job {job_id} cancelled.")
            expect(page.locator("h1 .badge")).to_have_text("cancelled")
            expect(page.locator("button:has-text('Replay')")).to_be_visible()
            snap("04-job-cancelled")
            stored = app.store.get_job(job_id)
            assert stored is not None and stored.status is JobStatus.CANCELLED

            # the jobs list, filtered
            page.click("nav.nav >> text=Jobs")
            expect(page.locator("table.grid tbody tr")).to_have_count(50)
            expect(page.locator("a[rel=next]")).to_be_visible()
            snap("05-jobs")
            page.select_option("#f-status", "scheduled")
            page.click("form.filters button:has-text('Search')")
            expect(page.locator("table.grid tbody tr")).to_have_count(7)
            expect(page.locator("table.grid")).not_to_contain_text("cancelled")
            # a job waiting to retry stands out from the fresh ones, with its last error
            retrying_row = page.locator("table.grid tbody tr.retrying")
            expect(retrying_row).to_have_count(1)
            expect(retrying_row.locator(".badge")).to_have_text("retrying")
            expect(retrying_row).to_contain_text("attempt 2/10")
            expect(retrying_row).to_contain_text("gateway unreachable")
            snap("05b-jobs-retrying")
            # search the args, then cancel what was found in bulk
            page.goto(f"{base}/jobs")
            page.fill("#f-args", "cus_3003")
            page.click("form.filters button:has-text('Search')")
            expect(page.locator("table.grid tbody tr")).to_have_count(1)
            page.check("input[data-select-all]")
            page.once("dialog", lambda dialog: dialog.accept())
            page.click("button:has-text('Cancel selected')")
            expect(page.locator(".flash-ok")).to_have_text("Cancelled 1 job.")
            expect(page.locator("table.grid tbody tr .badge")).to_have_text("cancelled")
            snap("05c-jobs-bulk-cancelled")
            cancelled = app.store.get_job(seeded.retrying.id)
            assert cancelled is not None and cancelled.status is JobStatus.CANCELLED

            # the dead letters: replay the dead job from its row
            page.click("nav.nav >> text=Dead letters")
            link = page.locator(f"a[href='/jobs/{seeded.dead.id}']")
            dead_row = page.locator("table.grid tbody tr", has=link)
            expect(dead_row).to_contain_text("card declined for cus_1042 <b>not bold</b>")
            expect(page.locator("table.grid tbody tr")).to_have_count(2)
            snap("06-dead-letters")
            dead_row.locator("button:has-text('Replay')").click()
            expect(page).to_have_url(f"{base}/dead-letters")
            expect(page.locator(".flash-ok")).to_contain_text(f"Job {seeded.dead.id} replayed")
            expect(page.locator("table.grid tbody tr")).to_have_count(1)
            replayed = app.store.get_job(seeded.dead.id)
            assert replayed is not None and replayed.status is JobStatus.SCHEDULED
            # bulk: "replay all matching" asks first (dismissed here), then tick all and replay
            page.once("dialog", lambda dialog: dialog.dismiss())
            page.click("button:has-text('Replay all matching')")
            expect(page).to_have_url(f"{base}/dead-letters")
            page.check("input[data-select-all]")
            expect(page.locator("input[name=ids]:checked")).to_have_count(1)
            page.click("button:has-text('Replay selected')")
            expect(page.locator("h1")).to_have_text("Bulk replay report")
            expect(page.locator('[data-report="replayed"]')).to_have_text("1")
            expect(page.locator('[data-report="skipped"]')).to_have_text("0")
            snap("06b-bulk-replay-report")
            assert app.store.list_jobs(JobFilter(status=JobStatus.DEAD)) == []
            page.goto(f"{base}/jobs/{seeded.dead.id}")
            expect(page.locator("h1 .badge")).to_have_text("scheduled")
            page.click("details summary")
            expect(page.locator("details pre")).to_contain_text("PaymentDeclined")
            snap("07-job-replayed-with-traceback")
            page.goto(f"{base}/jobs/{seeded.retried.id}")
            expect(page.locator("tbody.attempt")).to_have_count(2)
            expect(page.locator("tr.attempt-error")).to_contain_text("upstream took too long")
            expect(page.locator("[data-duration]").first).to_have_text(re.compile(r"\d+ ms"))
            snap("07b-job-retried")

            # the parked job: visible from the overview, resolvable on its page
            page.goto(f"{base}/jobs?status=parked")
            expect(page.locator("table.grid tbody tr")).to_have_count(1)
            snap("08-parked")
            page.click(f"a[href='/jobs/{seeded.parked.id}']")
            expect(page.locator("button:has-text('Resolve: it is done')")).to_be_visible()
            snap("09-job-parked")

            # schedules: pause the Paris one
            page.click("nav.nav >> text=Schedules")
            row = page.locator("table.grid tbody tr", has_text=seeded.schedule_name)
            expect(row).to_contain_text("Europe/Paris")
            expect(row).to_contain_text("active")
            expect(row).to_contain_text(re.compile(r"CES?T \+0[12]:00"))
            expect(page.locator("table.grid tbody tr")).to_have_count(3)
            snap("10-schedules")
            row.locator("button:has-text('Pause')").click()
            expect(page).to_have_url(f"{base}/schedules")
            expect(page.locator(".flash-ok")).to_have_text(
                f"Schedule '{seeded.schedule_name}' paused."
            )
            row = page.locator("table.grid tbody tr", has_text=seeded.schedule_name)
            expect(row.locator(".badge")).to_have_text("paused")
            expect(row.locator("button").first).to_have_text("Resume")
            assert app.get_schedule(seeded.schedule_name).paused
            snap("11-schedule-paused")
            row.locator(f"a:has-text('{seeded.schedule_name}')").click()
            expect(page.locator("h1")).to_contain_text(seeded.schedule_name)
            expect(page.locator("#preview ~ table tbody tr")).to_have_count(10)
            expect(page.locator("h1 ~ p [data-cron-words]")).to_have_text("every 5 minutes")
            snap("12-schedule")
            page.click("button:has-text('Trigger now')")
            expect(page.locator(".flash-ok")).to_contain_text(
                f"Schedule '{seeded.schedule_name}' triggered: job"
            )
            page.fill("#e-cron", "0 9 * * 1-5")
            page.click("button:has-text('Save changes')")
            expect(page.locator(".flash-ok")).to_contain_text("changed: cron 0 9 * * 1-5")
            expect(page.locator("h1 ~ p [data-cron-words]")).to_have_text(
                "at 09:00 on Monday to Friday"
            )
            assert app.get_schedule(seeded.schedule_name).spec.cron == "0 9 * * 1-5"
            snap("12b-schedule-edited")

            # the nodes: the live worker and the job it holds
            page.click("nav.nav >> text=Nodes")
            node_row = page.locator("tr[data-node='web-1:4242:ab12']")
            expect(node_row.locator(".badge")).to_have_text("live")
            expect(node_row).to_contain_text("emails")
            snap("13-nodes")

            # the queues: the acme job the seed enqueued due and never started waits in `reports`
            page.click("nav.nav >> text=Queues")
            waiting = page.locator("tr[data-queue='reports'] [data-waiting]")
            expect(waiting).to_have_attribute("data-waiting", "1")
            expect(waiting).to_contain_text(re.compile(r"oldest \d+m \d\ds"))
            acme = page.locator("tr[data-tenant='acme'] [data-waiting]")
            expect(acme).not_to_have_attribute("data-waiting", "0")
            snap("14-queues")

            # log out: the pages ask for a token again
            page.click("button:has-text('Log out')")
            expect(page).to_have_url(re.compile(r"/login"))
            page.goto(base + "/jobs")
            expect(page).to_have_url(re.compile(r"/login\?next=%2Fjobs"))
        finally:
            browser.close()
    assert not problems, problems
