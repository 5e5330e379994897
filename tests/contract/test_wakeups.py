"""A worker's wake-ups service (runtime/wakeups.py) on each dialect's feed: PostgreSQL's
LISTEN socket is read in the event loop as wake-ups arrive, with no thread between the
socket and the claims; no wake-up is lost around the feed's own checks, which run in the
service's thread; a feed whose connection was lost is opened again."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from duetime.core.clock import ManualClock
from duetime.core.models import Wakeup
from duetime.runtime import wakeups as wakeups_module
from duetime.runtime.wakeups import Wakeups
from duetime.store import open_store
from duetime.store.base import SocketListener, Store
from jobhelpers import enqueue, until
from kit import DialectKit, kit_named


def _queues(heard: list[Wakeup]) -> set[str]:
    return {w.queue for w in heard if w.queue}


async def _listening(store: Store, clock: ManualClock, heard: Callable[[], bool]) -> None:
    """Enqueue a job every 50 ms until the service heard one (its feed opens in its thread,
    after the service started: a job enqueued before that is not heard)."""
    deadline = time.monotonic() + 15
    while not heard():
        assert time.monotonic() < deadline, "the wake-ups service never heard an enqueue"
        await _enqueue(store, clock, queue="opened")
        await asyncio.sleep(0.05)


async def _enqueue(store: Store, clock: ManualClock, **kw: Any) -> None:
    await asyncio.to_thread(enqueue, store, clock, **kw)


def test_the_feed_is_a_socket_where_the_database_sends_the_instants(
    store: Store, kit: DialectKit
) -> None:
    """PostgreSQL's feed is read in the worker's event loop (a SocketListener); SQLite's
    (a change counter polled) in the service's thread; MariaDB/MySQL have none."""
    listener = store.listen()
    try:
        assert (listener is None) == (kit.wakeups == "none")
        assert isinstance(listener, SocketListener) == (kit.wakeups == "due")
    finally:
        if listener is not None:
            listener.close()


def test_a_wake_up_is_heard_in_the_event_loop_while_the_services_thread_is_busy(
    store: Store, kit: DialectKit, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the feed is open, a wake-up reaches `heard` even while the service's thread is
    held: nothing but the event loop stands between the socket and the claims (a wake-up
    read in a thread waited there for a core, then for the loop's). SQLite's feed is read
    in the thread (its counter has no socket) and MariaDB/MySQL have none."""
    if kit.wakeups != "due":
        listener = store.listen()
        assert not isinstance(listener, SocketListener)
        if listener is not None:
            listener.close()
        return
    monkeypatch.setattr(wakeups_module, "WAIT", 30.0)  # no check of the feed meanwhile
    heard: list[Wakeup] = []
    service = Wakeups(store, heard.extend, retry=0.05)
    gate = threading.Event()

    async def scenario() -> None:
        running = asyncio.create_task(service.run())
        try:
            await _listening(store, clock, lambda: bool(heard))
            holding = threading.Event()

            def hold() -> None:
                holding.set()
                gate.wait(20)

            service._thread.submit(hold)  # the service's thread is held, once it is free
            deadline = time.monotonic() + 10
            while not holding.is_set():  # a wait under way in the thread ends at a wake-up
                assert time.monotonic() < deadline, "the service's thread was never free"
                await _enqueue(store, clock, queue="before")
                await asyncio.sleep(0.05)
            await _enqueue(store, clock, queue="while-held")
            await until(lambda: "while-held" in _queues(heard), timeout=5)
        finally:
            gate.set()
            service.stop()
            await _enqueue(store, clock, queue="stopping")  # ends a wait under way at once
            await asyncio.wait_for(running, 10)

    asyncio.run(scenario())


def test_no_wake_up_is_lost_around_the_feeds_checks(
    store: Store, kit: DialectKit, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The feed's checks run in the service's thread, the socket unwatched meanwhile: what
    arrived then is read there (by the check's own round trip, PostgreSQL's is-it-writable
    query, too). Every one of 1,000 jobs, each of its own queue and enqueued while the thread
    takes its turn every 2 ms and PostgreSQL's listener checks its server at each, is heard
    (PostgreSQL names each queue; SQLite says only that something changed)."""
    if kit.wakeups == "none":
        assert store.listen() is None
        return
    from duetime.store.postgres import driver as postgres_driver

    monkeypatch.setattr(wakeups_module, "WAIT", 0.002)
    monkeypatch.setattr(postgres_driver, "LISTENER_CHECK_EVERY", 0.0)
    heard: list[Wakeup] = []
    service = Wakeups(store, heard.extend, retry=0.05)
    queues = {f"q{i}" for i in range(1000)}

    def enqueue_all() -> None:
        for queue in sorted(queues):
            enqueue(store, clock, queue=queue)

    async def scenario() -> None:
        running = asyncio.create_task(service.run())
        try:
            await _listening(store, clock, lambda: bool(heard))
            before = len(heard)
            await asyncio.to_thread(enqueue_all)
            if kit.wakeups == "due":
                await until(lambda: queues <= _queues(heard), timeout=10)
            else:
                await until(lambda: len(heard) > before, timeout=10)
        finally:
            service.stop()
            await asyncio.wait_for(running, 10)

    asyncio.run(scenario())
    if kit.wakeups == "due":
        assert queues <= _queues(heard), f"lost: {sorted(queues - _queues(heard))[:10]}"


def test_postgres_a_feed_whose_connection_was_lost_is_opened_again(
    pg_database_url: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listening connection is ended by the server (pg_terminate_backend: a restart, a
    failover, a proxy's idle timeout): the event loop, reading the socket, learns it at once;
    the service opens the feed again `retry` seconds later and hears the next enqueue."""
    monkeypatch.setattr(wakeups_module, "WAIT", 30.0)  # the loss is seen by the loop's read
    name = f"dt-wakeups-{time.monotonic_ns()}"
    sep = "&" if "?" in pg_database_url else "?"
    store = open_store(f"{pg_database_url}{sep}application_name={name}")
    store.migrate()
    heard: list[Wakeup] = []
    failed: list[str] = []
    service = Wakeups(store, heard.extend, retry=0.05)

    admin = kit_named("postgres").connect(pg_database_url)

    def listening_pids() -> list[int]:  # its last statement: the LISTEN, or its check since
        rows = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
            " AND (query LIKE 'LISTEN %%' OR query LIKE '%%pg_is_in_recovery()%%')",
            (name,),
        ).fetchall()
        return [int(r[0]) for r in rows]

    class Failures(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            failed.append(record.getMessage())

    async def scenario() -> None:
        running = asyncio.create_task(service.run())
        try:
            await _listening(store, clock, lambda: bool(heard))
            (pid,) = listening_pids()
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            await until(lambda: bool(failed), timeout=10)  # seen without a check's round trip
            await until(lambda: listening_pids() not in ([], [pid]), timeout=10)
            await _enqueue(store, clock, queue="after")
            await until(lambda: "after" in _queues(heard), timeout=10)
        finally:
            service.stop()
            await _enqueue(store, clock, queue="stopping")  # ends a wait under way at once
            await asyncio.wait_for(running, 10)

    handler = Failures()
    logging.getLogger("duetime.worker").addHandler(handler)
    try:
        asyncio.run(scenario())
    finally:
        logging.getLogger("duetime.worker").removeHandler(handler)
        store.close()
        admin.close()
    assert any("wake-ups failed" in m for m in failed), failed
