"""Outbox dispatch end to end on the real RabbitMQ (tests/amqpbroker.py), on every dialect
(SQLite, PostgreSQL, MariaDB/MySQL): the relay dispatches and publishes, broker-fed workers run
each job once."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import duetime
from amqpbroker import broker_url
from conftest import STORE_KINDS
from duetime.core.outbox import DISPATCH_HOLDER, Dispatch, OutboxEvent
from duetime.core.retry import RetryPolicy
from duetime.core.states import JobStatus
from duetime.runtime.outbox.broker import Broker
from duetime.runtime.outbox.relay import relay_services
from duetime.runtime.service import BlockingCalls, Service
from duetime.runtime.worker import Worker
from integration.tcpproxy import Proxy
from kit import DialectKit, kit_named


@pytest.fixture(params=STORE_KINDS)
def kit(request: pytest.FixtureRequest) -> DialectKit:
    """Every registered dialect (the integration suite's default is sqlite and postgres)."""
    return kit_named(request.param)


@pytest.fixture(scope="module")
def amqp_url() -> str:
    return broker_url()


async def delete_broker_queue(amqp_url: str, queue: str) -> None:
    async with Broker(amqp_url) as broker:
        await broker.delete(queue)


@pytest.fixture
def queue(amqp_url: str) -> Iterator[str]:
    """A queue name of this test alone; its broker queue is deleted afterwards."""
    name = f"ob{uuid.uuid4().hex[:10]}"
    yield name
    asyncio.run(delete_broker_queue(amqp_url, name))


@pytest.fixture
def app(db_url: str) -> Iterator[duetime.App]:
    instance = duetime.App(database_url=db_url)
    yield instance
    instance.close()


async def run_while(
    services: list[Service], worker: Worker | None, done: Callable[[], bool], timeout: float = 30
) -> None:
    """Run the worker (with `services` on its node) or the services alone until done()."""
    from duetime.runtime.node import Node

    stop = asyncio.Event()
    runner = worker.run(stop) if worker is not None else Node(services).run(stop)
    task = asyncio.create_task(runner)
    deadline = time.monotonic() + timeout
    try:
        while not done():
            assert time.monotonic() < deadline, "condition not reached in time"
            assert not task.done(), f"stopped early: {task}"
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


def relay(app: duetime.App, amqp_url: str, **kw: Any) -> list[Service]:
    return relay_services(
        app.store, app.clock, BlockingCalls(2), amqp_url, relay_id=f"r-{uuid.uuid4().hex}", **kw
    )


def statuses(app: duetime.App, ids: list[int]) -> list[JobStatus]:
    return [app.get_job(i).status for i in ids]


def test_outbox_queue_runs_end_to_end_through_the_broker(
    app: duetime.App, amqp_url: str, queue: str
) -> None:
    ran: list[int] = []

    @app.task(name="work", queue=queue)
    def work(n: int) -> dict[str, int]:
        ran.append(n)
        return {"n": n}  # a result flows through the broker path too

    @app.task(name="direct", queue=f"{queue}-db")
    def direct() -> None:
        ran.append(-1)

    app.set_queue(queue, dispatch="outbox")
    jobs = [work.enqueue({"n": n}) for n in range(20)]
    plain = direct.enqueue({})
    ids = [j.id for j in jobs] + [plain.id]
    worker = Worker(
        app,
        poll_interval=0.05,
        broker_url=amqp_url,
        services=relay(app, amqp_url),
    )
    asyncio.run(
        run_while(
            [],
            worker,
            lambda: all(s is JobStatus.SUCCEEDED for s in statuses(app, ids)),
        )
    )
    assert sorted(ran) == [-1, *range(20)]  # each once
    for n, job in enumerate(jobs):
        [attempt] = app.get_job(job.id).attempt_history
        assert attempt.worker_id == worker.worker_id != DISPATCH_HOLDER
        assert app.result(job.id) == {"n": n}
    status = app.outbox_status()
    assert status.backlog == 0 and status.oldest_unpublished_age_seconds is None
    assert app.queue(queue).dispatch is Dispatch.OUTBOX
    assert worker.feed is not None and worker.feed.accepted == 20


def proxied(amqp_url: str, proxy: Proxy) -> str:
    parts = urlsplit(amqp_url)
    return parts._replace(
        netloc=f"{parts.username}:{parts.password}@127.0.0.1:{proxy.port}"
    ).geturl()


def test_broker_stopped_mid_run_loses_nothing_and_drains_at_the_rate(
    app: duetime.App, amqp_url: str, queue: str
) -> None:
    """While the broker is unreachable, enqueue and dispatch go on and the outbox grows; when
    it returns, the backlog is published at the configured rate and every job runs once."""
    ran: list[int] = []

    @app.task(name="work", queue=queue)
    def work(n: int) -> None:
        ran.append(n)

    app.set_queue(queue, dispatch="outbox")
    parts = urlsplit(amqp_url)
    rate = 20.0

    async def scenario() -> None:
        proxy = Proxy(parts.hostname or "127.0.0.1", parts.port or 5672)
        await proxy.start()
        url = proxied(amqp_url, proxy)
        worker = Worker(
            app, poll_interval=0.05, broker_url=url, services=relay(app, url, rate=rate)
        )
        assert worker.feed is not None
        worker.feed.refresh_interval = 0.2
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        try:
            first = [work.enqueue({"n": n}).id for n in range(5)]
            await wait_for(lambda: all(s is JobStatus.SUCCEEDED for s in statuses(app, first)))
            await proxy.stop()  # the broker goes away
            later = [work.enqueue({"n": n}).id for n in range(5, 35)]
            await wait_for(lambda: app.outbox_status().backlog == 30)
            await asyncio.sleep(1.0)
            assert app.outbox_status().backlog == 30  # nothing published, nothing lost
            assert all(s is JobStatus.RUNNING for s in statuses(app, later))  # dispatched
            await proxy.start()  # the broker is back
            await wait_for(lambda: all(s is JobStatus.SUCCEEDED for s in statuses(app, later)), 60)
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)
            await proxy.stop()
        published = sorted(e.published_at for e in _read_events(app) if e.job_id in later)
        spread = (published[-1] - published[0]).total_seconds()
        assert spread >= (30 - rate) / rate * 0.8, spread  # a 30-event backlog at 20/s: 0.5 s

    asyncio.run(scenario())
    assert sorted(ran) == list(range(35))
    assert app.outbox_status().backlog == 0


async def wait_for(condition: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


def _read_events(app: duetime.App) -> list[OutboxEvent]:
    from duetime.store.sql.front import SQLStore

    store = app.store
    with store.driver.transaction(write=False) as c:  # type: ignore[attr-defined]
        cur = c.native.cursor()
        cur.execute("SELECT * FROM duetime_outbox ORDER BY id")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    assert isinstance(store, SQLStore)
    return [store.outbox._event(r) for r in rows]  # type: ignore[arg-type]


def test_a_message_redelivered_after_its_job_succeeded_is_dropped(
    app: duetime.App, amqp_url: str, queue: str
) -> None:
    ran: list[int] = []

    @app.task(name="work", queue=queue)
    def work(n: int) -> None:
        ran.append(n)

    app.set_queue(queue, dispatch="outbox")
    job = work.enqueue({"n": 1})

    def make_worker() -> Worker:
        return Worker(app, poll_interval=0.05, broker_url=amqp_url, services=relay(app, amqp_url))

    worker = make_worker()
    asyncio.run(run_while([], worker, lambda: statuses(app, [job.id]) == [JobStatus.SUCCEEDED]))
    [event] = [e for e in _read_events(app) if e.job_id == job.id]

    async def publish_again() -> None:
        async with Broker(amqp_url) as broker:
            assert await broker.publish([event]) == [event.id]

    asyncio.run(publish_again())
    again = make_worker()
    assert again.feed is not None
    feed = again.feed
    asyncio.run(run_while([], again, lambda: feed.dropped == 1))
    assert ran == [1]
    assert app.get_job(job.id).status is JobStatus.SUCCEEDED
    assert again.metrics.value("duetime_outbox_messages_dropped_total", reason="stale") == 1


def test_a_queue_switched_between_modes_with_jobs_in_flight_runs_each_job_once(
    app: duetime.App, amqp_url: str, queue: str
) -> None:
    ran: list[int] = []

    @app.task(name="work", queue=queue)
    async def work(n: int) -> None:
        await asyncio.sleep(0.02)
        ran.append(n)

    ids = [work.enqueue({"n": n}).id for n in range(60)]

    async def scenario() -> None:
        worker = Worker(
            app,
            concurrency=3,
            poll_interval=0.05,
            broker_url=amqp_url,
            services=relay(app, amqp_url),
        )
        assert worker.feed is not None
        worker.feed.refresh_interval = 0.1
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        try:
            await wait_for(lambda: len(ran) >= 10)
            app.set_queue(queue, dispatch="outbox")
            await wait_for(lambda: app.outbox_status(3600).queues != [] and len(ran) >= 30)
            app.set_queue(queue, dispatch="direct")
            await wait_for(lambda: all(s is JobStatus.SUCCEEDED for s in statuses(app, ids)), 60)
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)

    asyncio.run(scenario())
    assert sorted(ran) == list(range(60))
    holders = {app.get_job(i).attempt_history[-1].worker_id for i in ids}
    assert DISPATCH_HOLDER not in holders
    by_broker = {e.job_id for e in _read_events(app)}
    assert 0 < len(by_broker) < 60  # some ran through the broker, some were claimed


VICTIM = Path(__file__).parent / "apps" / "outbox_victim.py"


def victim(*args: str) -> int:
    """Run outbox_victim.py; the exit status (-9: it SIGKILLed itself)."""
    done = subprocess.run(
        [sys.executable, str(VICTIM), *args], capture_output=True, timeout=60, check=False
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]
    return done.returncode


def publish_all(app: duetime.App, amqp_url: str) -> None:
    """The dispatcher and relay until every due job of outbox-mode queues is published."""

    def published() -> bool:
        status = app.outbox_status(3600)
        return status.backlog == 0 and status.queues != []

    asyncio.run(run_while(relay(app, amqp_url), None, published))


def test_a_relay_killed_between_publish_and_mark_costs_only_harmless_duplicates(
    app: duetime.App, db_url: str, amqp_url: str, queue: str
) -> None:
    ran: list[int] = []

    @app.task(name="work", queue=queue)
    def work(n: int) -> None:
        ran.append(n)

    app.set_queue(queue, dispatch="outbox")
    ids = [work.enqueue({"n": n}).id for n in range(10)]
    assert len(app.store.dispatch_outbox(app.clock.now(), 100, 300)) == 10
    victim("relay", db_url, amqp_url)  # published all ten, marked none
    assert app.outbox_status().backlog == 10
    worker = Worker(app, poll_interval=0.05, broker_url=amqp_url, services=relay(app, amqp_url))
    assert worker.feed is not None
    feed = worker.feed
    asyncio.run(
        run_while(
            [],
            worker,
            lambda: (
                all(s is JobStatus.SUCCEEDED for s in statuses(app, ids)) and feed.dropped == 10
            ),
        )
    )
    assert sorted(ran) == list(range(10))  # the second copies were dropped, not run
    assert app.outbox_status().backlog == 0


@pytest.mark.parametrize("taken", [False, True], ids=["before taking", "after taking"])
def test_a_worker_killed_before_acknowledging_loses_nothing(
    app: duetime.App, db_url: str, amqp_url: str, queue: str, taken: bool
) -> None:
    """Killed before it took the attempt: the message is redelivered and runs elsewhere.
    Killed after: the redelivered copy is dropped, and the reaper retries the attempt once
    its lease ends (then it is dispatched and published again)."""
    ran: list[int] = []

    @app.task(name="work", queue=queue, lease=1.0, retry=RetryPolicy(base=0.1, cap=0.1))
    def work(n: int) -> None:
        ran.append(n)

    app.set_queue(queue, dispatch="outbox")
    ids = [work.enqueue({"n": n}).id for n in range(5)]
    publish_all(app, amqp_url)
    victim("worker", db_url, amqp_url, queue, "accept" if taken else "receive")
    worker = Worker(
        app,
        poll_interval=0.05,
        reap_interval=0.2,
        broker_url=amqp_url,
        services=relay(app, amqp_url),
    )
    asyncio.run(
        run_while([], worker, lambda: all(s is JobStatus.SUCCEEDED for s in statuses(app, ids)))
    )
    assert sorted(ran) == list(range(5))
    histories = [[str(a.status) for a in app.get_job(i).attempt_history] for i in ids]
    if taken:
        assert sorted(histories) == [["lost", "succeeded"]] + [["succeeded"]] * 4
        assert worker.feed is not None and worker.feed.dropped >= 1
    else:
        assert histories == [["succeeded"]] * 5


def test_a_worker_without_the_handler_puts_the_message_back_for_one_that_has_it(
    app: duetime.App, db_url: str, amqp_url: str, queue: str
) -> None:
    ran: list[int] = []

    @app.task(name="work", queue=queue)
    def work(n: int) -> None:
        ran.append(n)

    app.set_queue(queue, dispatch="outbox")
    job = work.enqueue({"n": 7})
    publish_all(app, amqp_url)
    other = duetime.App(database_url=db_url)  # knows no task
    try:

        @other.task(name="unrelated", queue=queue)
        def unrelated() -> None:
            raise AssertionError("never called")

        stranger = Worker(other, poll_interval=0.05, broker_url=amqp_url)
        assert stranger.feed is not None
        feed = stranger.feed
        asyncio.run(run_while([], stranger, lambda: feed.handled.count >= 1))
        assert feed.accepted == 0 and feed.dropped == 0
    finally:
        other.close()
    assert app.get_job(job.id).status is JobStatus.RUNNING  # still waiting in the broker
    worker = Worker(app, poll_interval=0.05, broker_url=amqp_url)
    asyncio.run(run_while([], worker, lambda: statuses(app, [job.id]) == [JobStatus.SUCCEEDED]))
    assert ran == [7]


def test_a_message_lost_by_the_broker_is_recovered_by_the_reaper_and_published_again(
    app: duetime.App, amqp_url: str, queue: str
) -> None:
    ran: list[int] = []

    @app.task(name="work", queue=queue, retry=RetryPolicy(base=0.1, cap=0.1))
    def work(n: int) -> None:
        ran.append(n)

    app.set_queue(queue, dispatch="outbox")
    job = work.enqueue({"n": 3})
    services = relay(app, amqp_url, dispatch_lease=1.0)

    def published() -> bool:
        status = app.outbox_status(3600)
        return status.backlog == 0 and status.queues != []

    asyncio.run(run_while(services, None, published))

    async def lose() -> int:  # broker data loss: the queue's messages are gone
        async with Broker(amqp_url) as broker:
            return await broker.purge(queue)

    assert asyncio.run(lose()) == 1
    worker = Worker(
        app,
        poll_interval=0.05,
        reap_interval=0.2,
        broker_url=amqp_url,
        services=relay(app, amqp_url, dispatch_lease=1.0),
    )
    asyncio.run(run_while([], worker, lambda: statuses(app, [job.id]) == [JobStatus.SUCCEEDED]))
    assert ran == [3]
    history = app.get_job(job.id).attempt_history
    assert [str(a.status) for a in history] == ["lost", "succeeded"]
    assert history[0].worker_id == DISPATCH_HOLDER  # it never reached a worker
    assert len([e for e in _read_events(app) if e.job_id == job.id]) == 2  # published again


def test_a_broker_queue_deleted_under_a_running_relay_is_declared_again_not_published_into(
    app: duetime.App, amqp_url: str, queue: str
) -> None:
    """An operator (or a delete racing a declare) removes the broker queue after the relay
    declared it: the relay's next messages would be unroutable, which the broker drops while
    confirming them. The relay must not count them as published: it declares the queue again
    and sends them once more, so they wait in the queue for a worker."""
    app.set_queue(queue, dispatch="outbox")
    first = app.enqueue("work", {"n": 1}, queue=queue)

    def published(count: int) -> bool:
        status = app.outbox_status(3600)
        return status.backlog == 0 and sum(q.published for q in status.queues) >= count

    async def waiting_messages() -> int:
        async with Broker(amqp_url) as broker:
            declared = await broker.declare(queue)  # it exists by now: this only reads it
            return int(declared.declaration_result.message_count)

    async def scenario() -> None:
        stop = asyncio.Event()
        from duetime.runtime.node import Node

        task = asyncio.create_task(Node(relay(app, amqp_url)).run(stop))
        try:
            deadline = time.monotonic() + 30
            while not published(1):
                assert time.monotonic() < deadline and not task.done(), "first not published"
                await asyncio.sleep(0.05)
            # the relay's channel still believes it declared the queue
            await delete_broker_queue(amqp_url, queue)
            app.enqueue("work", {"n": 2}, queue=queue)
            while not published(2):
                assert time.monotonic() < deadline and not task.done(), "second not published"
                await asyncio.sleep(0.05)
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)

    asyncio.run(scenario())
    assert first.id > 0
    # the first message went with the deleted queue; the second is in the queue again
    assert asyncio.run(waiting_messages()) == 1


def test_a_broker_fed_worker_consumes_again_after_its_queue_was_deleted(
    app: duetime.App, amqp_url: str, queue: str
) -> None:
    """Deleting a broker queue cancels its consumers. The worker must notice and consume the
    queue declared anew, or the jobs published into it would wait for nobody."""
    ran: list[int] = []

    @app.task(name="work", queue=queue)
    def work(n: int) -> None:
        ran.append(n)

    app.set_queue(queue, dispatch="outbox")
    first = work.enqueue({"n": 1})

    async def scenario() -> None:
        stop = asyncio.Event()
        worker = Worker(app, poll_interval=0.05, broker_url=amqp_url, services=relay(app, amqp_url))
        task = asyncio.create_task(worker.run(stop))
        try:
            deadline = time.monotonic() + 30
            while statuses(app, [first.id]) != [JobStatus.SUCCEEDED]:
                assert time.monotonic() < deadline and not task.done(), "first did not run"
                await asyncio.sleep(0.05)
            await delete_broker_queue(amqp_url, queue)  # the broker cancels the consumer
            second = work.enqueue({"n": 2})
            deadline = time.monotonic() + 20  # far less than the 300 s dispatch lease
            while statuses(app, [second.id]) != [JobStatus.SUCCEEDED]:
                assert time.monotonic() < deadline and not task.done(), "second did not run"
                await asyncio.sleep(0.05)
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)

    asyncio.run(scenario())
    assert ran == [1, 2]


def test_a_broker_queue_with_other_settings_is_refused_in_one_line_that_says_what_to_do(
    amqp_url: str, queue: str
) -> None:
    """A broker queue of the same name declared by someone else (a classic queue, not a
    quorum one) makes every declare fail; the error names the queue, the difference and the
    way out, and the relay logs it whole."""
    import aio_pika

    from duetime.core.outbox import broker_queue
    from duetime.logs import error_field
    from duetime.runtime.outbox.broker import BrokerQueueMismatch

    async def scenario() -> BrokerQueueMismatch:
        other = await aio_pika.connect(amqp_url)
        try:
            await (await other.channel()).declare_queue(broker_queue(queue), durable=True)
        finally:
            await other.close()
        async with Broker(amqp_url) as broker:
            with pytest.raises(BrokerQueueMismatch) as raised:
                await broker.declare(queue)
            return raised.value

    error = asyncio.run(scenario())
    text = str(error)
    assert "\n" not in text
    assert f"broker queue duetime.{queue} exists with other settings" in text
    assert "x-queue-type" in text and "quorum" in text
    assert f"rabbitmqctl delete_queue duetime.{queue}" in text
    assert error_field(error) == text  # logged whole, not cut at 200 characters
