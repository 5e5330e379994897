"""Prometheus metrics end to end: a real `duetime worker --metrics-port` scraped over HTTP,
and the server's /metrics (admin only) compared with what the store says."""

from __future__ import annotations

import math
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from duetime import App
from duetime.admin import figures as admin_figures
from duetime.admin.tokens import create_token
from duetime.core.clock import ManualClock
from duetime.core.errors import StoreUnavailable
from duetime.core.limits import LimitSettings, parse_rate
from duetime.core.requests import TaskDefaults
from duetime.core.states import JobStatus
from duetime.server import ServerSettings, create_app
from integration.procs import Processes, describe, run_cli, wait_until
from jobhelpers import claim_one, enqueue, job_in

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """Every sample of a scrape, keyed by (name, labels)."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert response.status == 200
        return parse(response.read().decode())


# -- a worker process -------------------------------------------------------------------------


def test_a_worker_serves_its_own_metrics(db_url: str, app: App, procs: Processes) -> None:
    ids = [app.enqueue("noop").id for _ in range(3)]
    ids.append(app.enqueue("fail.permanent").id)
    ids.append(app.enqueue("noop", queue="other").id)
    worker = procs.worker(db_url, "--metrics-port", "0")  # 0: any free port, logged
    port = int(worker.wait_event("metrics.serving", 30)["port"])

    wait_until(
        lambda: worker.alive() and all(app.get_job(i).terminal for i in ids),
        30,
        lambda: f"jobs did not finish\n{worker.tail()}",
    )

    # an outcome is counted just after it is committed: wait for the last one to show
    def all_counted() -> Samples | None:
        s = scrape(port)
        done = value(s, "duetime_attempts_total", task="noop", outcome="succeeded") == 4
        return s if done else None

    samples = wait_until(all_counted, 10, lambda: f"not all 4 successes counted: {scrape(port)}")
    assert value(samples, "duetime_attempts_total", task="fail.permanent", outcome="dead") == 1
    assert value(samples, "duetime_jobs_claimed_total", queue="default") == 4
    assert value(samples, "duetime_jobs_claimed_total", queue="other") == 1
    assert value(samples, "duetime_scheduling_lag_seconds_count", queue="default") == 4
    assert value(samples, "duetime_scheduling_lag_seconds_count", queue="other") == 1
    assert value(samples, "duetime_attempt_duration_seconds_count", task="noop") == 4
    assert value(samples, "duetime_stale_completions_rejected_total") == 0
    assert value(samples, "duetime_lease_expiries_total") == 0
    assert value(samples, "duetime_worker_busy") == 0
    # measured at the node's start (SQLite: the machine's own clock, 0); the database runs here
    assert abs(value(samples, "duetime_clock_offset_seconds")) < 0.05
    assert value(samples, "process_cpu_seconds_total") > 0  # the process's own figures

    assert worker.terminate_and_wait() == 0
    with pytest.raises(urllib.error.URLError):
        scrape(port)
    assert worker.problems() == []


def test_without_the_flag_nothing_listens(db_url: str, app: App, procs: Processes) -> None:
    job = app.enqueue("noop")
    worker = procs.worker(db_url)
    wait_until(
        lambda: worker.alive() and app.get_job(job.id).terminal,
        30,
        lambda: f"job did not finish\n{worker.tail()}",
    )
    assert worker.terminate_and_wait() == 0
    assert worker.events("metrics.serving") == []


def test_a_port_in_use_is_one_clear_error(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        url = f"sqlite:///{tmp_path / 'unused.db'}"
        done = run_cli(
            ["worker", "--app", "itapp:app", "--database-url", url, "--metrics-port", str(port)]
        )
    assert done.returncode == 1, describe(done)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, describe(done)
    assert f"127.0.0.1:{port}" in lines[0] and "already in use" in lines[0], describe(done)
    assert "--metrics-port" in lines[0], describe(done)


# -- the server -------------------------------------------------------------------------------


@pytest.fixture
def server_app(db_url: str, clock: ManualClock) -> Iterator[App]:
    instance = App(db_url, clock=clock)
    yield instance
    instance.close()


@pytest.fixture
def client(server_app: App) -> Iterator[TestClient]:
    with TestClient(create_app(server_app, ServerSettings())) as test_client:
        yield test_client


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def test_server_metrics_match_the_store(
    server_app: App, client: TestClient, clock: ManualClock
) -> None:
    store = server_app.store
    for status in (JobStatus.DEAD, JobStatus.PARKED, JobStatus.SUCCEEDED, JobStatus.RUNNING):
        job_in(store, clock, status)
    enqueue(store, clock, queue="mail")
    enqueue(store, clock, queue="mail", tenant="other")
    clock.advance(90)  # the two mail jobs are now 90 s overdue
    job, lease = claim_one(store, clock)  # one of them starts, 90 s late
    assert job.queue == "mail" and lease is not None
    clock.advance(2)
    _, admin = create_token(server_app, "t1", "admin")

    response = client.get("/metrics", headers=bearer(admin))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    samples = parse(response.text)

    counts = {(c.queue, c.status): c.count for c in store.job_counts(None)}
    assert counts[("mail", "running")] == 1 and counts[("mail", "scheduled")] == 1
    for queue in {q for q, _ in counts}:
        for status in JobStatus:
            got = value(samples, "duetime_jobs", queue=queue, status=str(status))
            assert got == counts.get((queue, str(status)), 0), (queue, status)
    assert value(samples, "duetime_dead_letters") == 1
    assert value(samples, "duetime_parked_jobs") == 1
    assert value(samples, "duetime_oldest_overdue_seconds") == pytest.approx(92.0)

    figures = admin_figures.stats(server_app, None)
    for w in figures.windows:
        window = f"{w.minutes}m"
        assert value(samples, "duetime_recent_attempts", window=window, outcome="started") == 5
        assert value(samples, "duetime_recent_attempts", window=window, outcome="succeeded") == 1
        assert value(samples, "duetime_recent_attempts", window=window, outcome="failed") == (
            w.failed
        )
        assert value(
            samples, "duetime_recent_throughput_per_second", window=window
        ) == pytest.approx(w.throughput_per_second)
        p99 = value(
            samples, "duetime_recent_scheduling_lag_seconds", window=window, quantile="0.99"
        )
        assert p99 == pytest.approx(90.0) and w.lag_p99 == pytest.approx(90.0)
        p50 = value(samples, "duetime_recent_scheduling_lag_seconds", window=window, quantile="0.5")
        assert p50 == w.lag_p50
    assert value(samples, "process_cpu_seconds_total") > 0  # the server process's own


def test_server_metrics_with_no_attempts_yet(client: TestClient, server_app: App) -> None:
    _, admin = create_token(server_app, "t1", "admin")
    samples = parse(client.get("/metrics", headers=bearer(admin)).text)
    assert value(samples, "duetime_dead_letters") == 0
    assert value(samples, "duetime_oldest_overdue_seconds") == 0
    lag = value(samples, "duetime_recent_scheduling_lag_seconds", window="5m", quantile="0.95")
    assert math.isnan(lag)


def test_server_metrics_need_an_admin_token(client: TestClient, server_app: App) -> None:
    _, reader = create_token(server_app, "t1", "read")
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers=bearer("dt_nonsense")).status_code == 401
    refused = client.get("/metrics", headers=bearer(reader))
    assert refused.status_code == 403, refused.text
    assert "admin" in refused.json()["detail"]


def test_server_metrics_are_open_with_auth_off(server_app: App) -> None:
    server = create_app(server_app, ServerSettings(auth=False))
    with TestClient(server, base_url="http://127.0.0.1") as open_client:  # loopback only
        response = open_client.get("/metrics")
    assert response.status_code == 200
    assert "duetime_jobs" in response.text


@pytest.mark.parametrize(
    "error",
    [StoreUnavailable("connection refused"), StoreUnavailable("the SQLite database is locked")],
    ids=["unavailable", "locked"],
)
def test_a_store_outage_makes_metrics_answer_503(
    server_app: App, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    _, admin = create_token(server_app, "t1", "admin")

    def down(*_: object) -> None:
        raise error

    monkeypatch.setattr(server_app.store, "job_counts", down)
    api = create_app(server_app, ServerSettings())
    with TestClient(api, raise_server_exceptions=False) as test_client:
        response = test_client.get("/metrics", headers=bearer(admin))
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "5"


def test_server_metrics_show_the_outbox(
    server_app: App, client: TestClient, clock: ManualClock
) -> None:
    store = server_app.store
    server_app.set_queue("broker", dispatch="outbox")
    for _ in range(3):
        enqueue(store, clock, queue="broker")
    events = store.dispatch_outbox(clock.now(), 10, 300)
    store.mark_published([events[0].id], clock.now(), 300)
    clock.advance(30)
    _, admin = create_token(server_app, "t1", "admin")
    samples = parse(client.get("/metrics", headers=bearer(admin)).text)
    assert value(samples, "duetime_outbox_backlog", queue="broker") == 2
    assert value(samples, "duetime_outbox_oldest_unpublished_age_seconds") == 30
    assert value(samples, "duetime_outbox_publish_rate_per_second") == pytest.approx(1 / 60)
    # all three wait for a worker: running jobs that are not executing (docs/outbox.md)
    assert value(samples, "duetime_outbox_dispatched", queue="broker") == 3
    assert value(samples, "duetime_outbox_oldest_dispatched_age_seconds") == 30


def test_server_metrics_show_queue_and_tenant_flow(
    server_app: App, client: TestClient, clock: ManualClock
) -> None:
    store = server_app.store
    server_app.set_queue("mail", concurrency=2)
    server_app.pause_queue("held")
    server_app.set_tenant("acme", concurrency=5)
    for _ in range(3):
        enqueue(store, clock, queue="mail", tenant="acme")
    enqueue(store, clock, queue="held", tenant="acme")
    clock.advance(5)
    enqueue(store, clock, queue="mail", tenant="globex", delay=60)  # not due: not waiting
    claim_one(store, clock)
    clock.advance(10)
    _, admin = create_token(server_app, "t1", "admin")
    samples = parse(client.get("/metrics", headers=bearer(admin)).text)
    assert value(samples, "duetime_queue_backlog", queue="mail") == 3
    assert value(samples, "duetime_queue_running", queue="mail") == 1
    assert value(samples, "duetime_queue_waiting", queue="mail") == 2
    assert value(samples, "duetime_queue_waiting_seconds", queue="mail") == 15
    assert value(samples, "duetime_queue_backlog", queue="held") == 1
    assert value(samples, "duetime_queue_waiting", queue="held") == 1  # paused: still waiting
    assert value(samples, "duetime_queue_waiting_seconds", queue="held") == 15
    assert value(samples, "duetime_queue_paused", queue="held") == 1
    assert value(samples, "duetime_queue_paused", queue="mail") == 0
    assert value(samples, "duetime_queue_concurrency_limit", queue="mail") == 2
    assert value(samples, "duetime_tenant_backlog", tenant="acme") == 3
    assert value(samples, "duetime_tenant_running", tenant="acme") == 1
    assert value(samples, "duetime_tenant_waiting", tenant="acme") == 3
    assert value(samples, "duetime_tenant_waiting_seconds", tenant="acme") == 15
    assert value(samples, "duetime_tenant_backlog", tenant="globex") == 1
    assert value(samples, "duetime_tenant_waiting", tenant="globex") == 0
    assert value(samples, "duetime_tenant_waiting_seconds", tenant="globex") == 0
    assert value(samples, "duetime_tenant_concurrency_limit", tenant="acme") == 5


def test_server_metrics_show_the_limits(
    server_app: App, client: TestClient, clock: ManualClock
) -> None:
    store = server_app.store
    store.set_limit(
        LimitSettings("api", rate=parse_rate("1/s"), burst=2, concurrency=1, breaker_threshold=0.5),
        clock.now(),
    )
    for _ in range(3):
        enqueue(store, clock, defaults=TaskDefaults(limits=("api",)))
    assert len(store.claim(worker_id="w", queues=None, limit=5, now=clock.now())) == 1
    clock.advance(4)
    _, admin = create_token(server_app, "t1", "admin")
    samples = parse(client.get("/metrics", headers=bearer(admin)).text)
    assert value(samples, "duetime_limit_running", key="api") == 1
    assert value(samples, "duetime_limit_waiting", key="api") == 2
    assert value(samples, "duetime_limit_waiting_seconds", key="api") == 4
    assert value(samples, "duetime_limit_tokens", key="api") == 2
    assert value(samples, "duetime_limit_paused", key="api") == 0
    assert ("duetime_limit_breaker_open", frozenset({("key", "api")})) in samples
