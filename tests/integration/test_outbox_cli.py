"""The outbox from the command line, on every dialect: `duetime queues set|list`, `duetime
relay` alone moving due jobs to RabbitMQ, `duetime worker --broker-url` running them,
`duetime outbox status`."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from amqpbroker import broker_url
from conftest import STORE_KINDS
from duetime import App
from duetime.core.states import JobStatus
from duetime.runtime.outbox.broker import Broker
from integration.procs import DUETIME, Processes, describe, run_cli, wait_until
from kit import DialectKit, kit_named


@pytest.fixture(params=STORE_KINDS)
def kit(request: pytest.FixtureRequest) -> DialectKit:
    """Every registered dialect (the integration suite's default is sqlite and postgres)."""
    return kit_named(request.param)


@pytest.fixture
def amqp_url() -> Iterator[str]:
    """The broker, with the default queue's broker queue (duetime.default) empty before and
    after: these tests use the default queue, as the integration app does. It is purged, not
    deleted: a quorum queue declared again just after its delete (by the next test's relay)
    can keep a consumer of the deleted one (a worker killed a moment before), which then takes
    the new queue's messages and never runs them."""
    url = broker_url()

    async def purge() -> None:
        async with Broker(url) as broker:
            await broker.purge("default")

    asyncio.run(purge())
    yield url
    asyncio.run(purge())


def test_queues_set_and_list(db_url: str) -> None:
    done = run_cli(["queues", "set", "mail", "--dispatch", "outbox", "--database-url", db_url])
    assert done.returncode == 0, describe(done)
    assert done.stdout.strip() == "queue mail: dispatch outbox"
    listed = run_cli(["queues", "list", "--json", "--database-url", db_url])
    assert listed.returncode == 0, describe(listed)
    rows = json.loads(listed.stdout)
    assert [(r["queue"], r["dispatch"], r["outbox_backlog"]) for r in rows] == [
        ("mail", "outbox", 0)
    ]
    text = run_cli(["queues", "list", "--database-url", db_url]).stdout
    assert "mail" in text and "outbox" in text
    bad = run_cli(["queues", "set", "mail", "--dispatch", "kafka", "--database-url", db_url])
    assert bad.returncode == 2 and "invalid choice" in bad.stderr, describe(bad)
    nothing = run_cli(["queues", "set", "mail", "--database-url", db_url])
    assert nothing.returncode == 2 and "--dispatch" in nothing.stderr, describe(nothing)


def test_relay_alone_publishes_and_a_broker_fed_worker_runs_each_job_once(
    db_url: str, app: App, amqp_url: str, procs: Processes, tmp_path: Path
) -> None:
    app.set_queue("default", dispatch="outbox")
    ids = [app.enqueue("drain.record", {}).id for _ in range(12)]
    log = tmp_path / "relay.log"
    with open(log, "wb") as out:
        relay = subprocess.Popen(
            [str(DUETIME), "relay", "--database-url", db_url, "--broker-url", amqp_url],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=procs.env(),
        )
    try:
        # the relay alone moves every due job to the broker: dispatched (running, held for
        # the broker) and published
        wait_until(
            lambda: app.outbox_status(3600).queues != [] and app.outbox_status().backlog == 0,
            30,
            lambda: log.read_text()[-2000:],
        )
        assert {app.get_job(i).status for i in ids} == {JobStatus.RUNNING}
        status = run_cli(["outbox", "status", "--json", "--database-url", db_url])
        assert status.returncode == 0, describe(status)
        figures = json.loads(status.stdout)
        assert figures["backlog"] == 0 and figures["oldest_unpublished_age_seconds"] is None
        assert figures["publish_rate_per_second"] == pytest.approx(12 / 60)
        worker = procs.worker(db_url, "--broker-url", amqp_url)
        wait_until(
            lambda: {app.get_job(i).status for i in ids} == {JobStatus.SUCCEEDED},
            30,
            lambda: "\n".join(
                [
                    f"job statuses: {sorted(str(app.get_job(i).status) for i in ids)}",
                    f"outbox: {app.outbox_status()}",
                    worker.tail(),
                    "--- relay log ---",
                    log.read_text()[-2000:],
                ]
            ),
        )
        assert worker.alive()
    finally:
        relay.terminate()
        relay.wait(30)
    assert relay.returncode == 0, log.read_text()[-2000:]
    executions = [
        line.split()[0]
        for f in procs.out_dir.glob("exec-*.txt")
        for line in f.read_text().splitlines()
    ]
    assert sorted(map(int, executions)) == ids  # each once


def test_relay_needs_a_broker_url(db_url: str) -> None:
    done = run_cli(["relay", "--database-url", db_url])
    assert done.returncode == 2 and "--broker-url" in done.stderr, describe(done)


def test_published_jobs_no_worker_took_are_rescheduled_and_run_direct_after_a_switch(
    db_url: str, app: App, amqp_url: str, procs: Processes, tmp_path: Path
) -> None:
    # issue 20: the relay published, no broker-fed worker consumes; an operator reschedules
    # one job from the command line, then switches the queue to direct and starts a plain
    # worker: the others run at once (not after the 300 s dispatch lease), one attempt each,
    # and their messages, consumed later, are dropped as stale
    app.set_queue("default", dispatch="outbox")
    ids = [app.enqueue("drain.record", {}).id for _ in range(8)]
    log = tmp_path / "relay.log"
    with open(log, "wb") as out:
        relay = subprocess.Popen(
            [str(DUETIME), "relay", "--database-url", db_url, "--broker-url", amqp_url],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=procs.env(),
        )
    try:
        wait_until(
            lambda: app.outbox_status(3600).queues != [] and app.outbox_status().backlog == 0,
            30,
            lambda: log.read_text()[-2000:],
        )
    finally:
        relay.terminate()
        relay.wait(30)
    assert all(app.get_job(i).dispatched_at is not None for i in ids)
    shown = run_cli(["jobs", "show", str(ids[0]), "--database-url", db_url])
    assert "dispatched, waiting in the broker" in shown.stdout, describe(shown)
    listed = run_cli(["jobs", "list", "--database-url", db_url])
    assert listed.stdout.count("running (dispatched") == len(ids), describe(listed)

    moved = run_cli(["jobs", "reschedule", str(ids[0]), "--in", "1h", "--database-url", db_url])
    assert moved.returncode == 0, describe(moved)
    assert f"job {ids[0]} is scheduled" in moved.stdout
    switched = run_cli(
        ["queues", "set", "default", "--dispatch", "direct", "--database-url", db_url]
    )
    assert switched.returncode == 0, describe(switched)
    plain = procs.worker(db_url)  # no broker URL: it claims from the database
    wait_until(
        lambda: {app.get_job(i).status for i in ids[1:]} == {JobStatus.SUCCEEDED},
        15,
        plain.tail,
    )
    assert all(app.get_job(i).attempts == 1 for i in ids[1:])  # the withdrawn one not counted
    assert app.get_job(ids[0]).status is JobStatus.SCHEDULED
    # back to outbox: their messages, still in RabbitMQ, are dropped as stale by a broker-fed
    # worker (with the relay on its node), and the rescheduled job, due again, runs once
    back = run_cli(["queues", "set", "default", "--dispatch", "outbox", "--database-url", db_url])
    assert back.returncode == 0, describe(back)
    now = app.clock.now().isoformat()
    due = run_cli(["jobs", "reschedule", str(ids[0]), "--at", now, "--database-url", db_url])
    assert due.returncode == 0, describe(due)
    fed = procs.worker(db_url, "--broker-url", amqp_url, "--relay", name="fed")
    wait_until(lambda: app.get_job(ids[0]).status is JobStatus.SUCCEEDED, 30, fed.tail)
    wait_until(
        lambda: fed.log_path.read_text().count("broker.message_dropped") >= len(ids) - 1,
        30,
        fed.tail,
    )
    executions = [
        line.split()[0]
        for f in procs.out_dir.glob("exec-*.txt")
        for line in f.read_text().splitlines()
    ]
    assert sorted(map(int, executions)) == ids  # each once
    assert app.get_job(ids[0]).attempts == 1


def test_a_relay_registers_in_duetime_nodes_and_serves_no_task(
    db_url: str, app: App, amqp_url: str, procs: Processes, tmp_path: Path
) -> None:
    log = tmp_path / "relay.log"
    with open(log, "wb") as out:
        relay = subprocess.Popen(
            [str(DUETIME), "relay", "--database-url", db_url, "--broker-url", amqp_url],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=procs.env(),
        )

    def relays(*flags: str) -> list[dict[str, object]]:
        done = run_cli(["nodes", "--json", "--database-url", db_url, *flags])
        assert done.returncode == 0, describe(done)
        return [n for n in json.loads(done.stdout) if n["pid"] == relay.pid]

    try:
        [node] = wait_until(relays, 30, lambda: log.read_text()[-2000:])
        assert node["state"] == "live" and node["duties"] == ["dispatcher", "relay"]
        assert node["tasks"] == [] and str(node["id"]).startswith("relay:")
        table = run_cli(["nodes", "--database-url", db_url]).stdout
        assert "dispatcher,relay" in table
        # it serves no task: a job nobody's worker serves still says so
        job = app.enqueue("drain.record", {})
        assert app.unserved(app.get_job(job.id)) is not None
    finally:
        relay.terminate()
        relay.wait(30)
    assert relay.returncode == 0, log.read_text()[-2000:]
    [stopped] = relays("--all")
    assert stopped["state"] == "stopped"
