"""The wake-ups service (runtime/wakeups.py) over a feed on a socket, without a database: what
lands on the socket is read in the event loop, what the feed's checks read in the thread is
handed over too, a lost feed is opened again, and an event loop that cannot watch a socket
reads it in the thread. tests/contract/test_wakeups.py runs it on each dialect's own feed."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from typing import Any

import pytest
import uvloop

from duetime.core.models import Wakeup
from duetime.runtime import wakeups as wakeups_module
from duetime.runtime.wakeups import Wakeups
from duetime.store.base import SocketListener
from jobhelpers import until


class SocketFeed:
    """A SocketListener on one end of a socket pair: each line written to the other end is a
    wake-up of that queue. check_finds() sets what its next wait() returns (what a check would
    have read); a line "LOST" makes arrived() fail as a lost connection does."""

    def __init__(self) -> None:
        self.ours, self.theirs = socket.socketpair()
        self.ours.setblocking(False)
        self._checked: list[Wakeup] = []  # the loop sets, the thread takes: under the lock
        self._lock = threading.Lock()
        self.waits = 0
        self.wait_threads: set[str] = set()
        self.closed = False

    def check_finds(self, wakeups: list[Wakeup]) -> None:
        """What the next wait() returns, as if its check had read it."""
        with self._lock:
            self._checked = wakeups

    def send(self, queue: str) -> None:
        self.theirs.sendall(f"{queue}\n".encode())

    def fileno(self) -> int:
        return self.ours.fileno()

    def arrived(self) -> list[Wakeup]:
        try:
            data = self.ours.recv(65536)
        except BlockingIOError:
            return []
        queues = data.decode().split()
        if "LOST" in queues:
            raise ConnectionError("the feed's connection was lost")
        return [Wakeup(queue=q) for q in queues]

    def wait(self, timeout: float) -> list[Wakeup]:
        self.waits += 1
        self.wait_threads.add(threading.current_thread().name)
        with self._lock:
            found, self._checked = self._checked, []
        return found

    def close(self) -> None:
        self.closed = True
        self.ours.close()
        self.theirs.close()


class FeedStore:
    """The one method the service calls: listen(), a new SocketFeed each time."""

    def __init__(self) -> None:
        self.feeds: list[SocketFeed] = []

    def listen(self) -> SocketFeed:
        self.feeds.append(SocketFeed())
        return self.feeds[-1]


LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


@pytest.fixture(params=sorted(LOOPS))
def run_in_loop(request: pytest.FixtureRequest) -> Callable[[Any], None]:
    """Runs a coroutine in asyncio's own event loop and in uvloop's (workers run in uvloop's
    where it is installed): each watches the socket its own way."""

    def run(coro: Any) -> None:
        loop = LOOPS[request.param]()
        try:
            loop.run_until_complete(coro)
        finally:
            loop.close()

    return run


def _service(store: FeedStore, heard: list[Wakeup]) -> Wakeups:
    return Wakeups(store, heard.extend, retry=0.01)  # type: ignore[arg-type]


def _queues(heard: list[Wakeup]) -> list[str | None]:
    return [w.queue for w in heard]


async def _running(service: Wakeups, store: FeedStore, then: Callable[[], Any]) -> None:
    task = asyncio.create_task(service.run())
    try:
        await until(lambda: bool(store.feeds), timeout=5)
        await then()
    finally:
        service.stop()
        await asyncio.wait_for(task, 5)


def test_the_feed_is_a_socket_listener() -> None:
    feed = SocketFeed()
    assert isinstance(feed, SocketListener)
    feed.close()


def test_what_lands_on_the_socket_is_heard_in_the_loop_while_the_thread_is_held(
    monkeypatch: pytest.MonkeyPatch, run_in_loop: Callable[[Any], None]
) -> None:
    monkeypatch.setattr(wakeups_module, "WAIT", 30.0)
    store, heard = FeedStore(), list[Wakeup]()
    service = _service(store, heard)
    gate = threading.Event()

    async def then() -> None:
        service._thread.submit(gate.wait, 10)  # the thread is held from now on
        try:
            store.feeds[0].send("a")
            store.feeds[0].send("b")
            await until(lambda: _queues(heard) == ["a", "b"], timeout=5)
            assert store.feeds[0].waits == 0  # no check came due: the thread never read
        finally:
            gate.set()

    run_in_loop(_running(service, store, then))
    assert service.received.count >= 1


def test_what_the_checks_read_in_the_thread_is_heard_too(
    monkeypatch: pytest.MonkeyPatch, run_in_loop: Callable[[Any], None]
) -> None:
    monkeypatch.setattr(wakeups_module, "WAIT", 0.01)
    store, heard = FeedStore(), list[Wakeup]()
    service = _service(store, heard)

    async def then() -> None:
        feed = store.feeds[0]
        await until(lambda: feed.waits >= 2, timeout=5)  # the checks run every WAIT
        feed.check_finds([Wakeup(queue="read-by-a-check")])
        await until(lambda: "read-by-a-check" in _queues(heard), timeout=5)
        assert all(name.startswith("duetime-wakeups") for name in feed.wait_threads)
        feed.send("then-on-the-socket")  # and the socket is watched again after a check
        await until(lambda: "then-on-the-socket" in _queues(heard), timeout=5)

    run_in_loop(_running(service, store, then))


def test_a_feed_lost_as_it_is_read_is_closed_and_opened_again(
    monkeypatch: pytest.MonkeyPatch, run_in_loop: Callable[[Any], None]
) -> None:
    monkeypatch.setattr(wakeups_module, "WAIT", 30.0)  # seen by the read, not by a check
    store, heard = FeedStore(), list[Wakeup]()
    service = _service(store, heard)

    async def then() -> None:
        first = store.feeds[0]
        first.send("LOST")
        await until(lambda: len(store.feeds) == 2, timeout=5)
        assert first.closed
        store.feeds[1].send("again")
        await until(lambda: _queues(heard) == ["again"], timeout=5)

    run_in_loop(_running(service, store, then))
    assert store.feeds[-1].closed  # closed as the service stopped


def test_an_event_loop_that_cannot_watch_a_socket_reads_the_feed_in_the_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Windows' proactor loop has no add_reader: the feed is then read by its wait() in the
    service's thread, as a feed without a socket is."""
    monkeypatch.setattr(wakeups_module, "WAIT", 0.01)
    store, heard = FeedStore(), list[Wakeup]()
    service = _service(store, heard)

    class NoReaders(asyncio.SelectorEventLoop):
        def add_reader(self, *args: Any, **kwargs: Any) -> None:
            raise NotImplementedError

    async def then() -> None:
        feed = store.feeds[0]
        feed.check_finds([Wakeup(queue="from-wait")])
        await until(lambda: _queues(heard) == ["from-wait"], timeout=5)
        await until(lambda: feed.waits >= 3, timeout=5)

    loop = NoReaders()
    try:
        loop.run_until_complete(_running(service, store, then))
    finally:
        loop.close()


def test_a_failure_of_heard_on_the_socket_opens_the_feed_again_as_in_the_thread(
    monkeypatch: pytest.MonkeyPatch, run_in_loop: Callable[[Any], None]
) -> None:
    """`heard` raising in the loop's read is handled as a thread's wait raising it: logged
    as the feed failing, and the feed opened again; not lost in the loop's callback."""
    monkeypatch.setattr(wakeups_module, "WAIT", 30.0)
    store, heard = FeedStore(), list[Wakeup]()

    def hear(wakeups: Any) -> None:
        if any(w.queue == "boom" for w in wakeups):
            raise RuntimeError("heard failed")
        heard.extend(wakeups)

    service = Wakeups(store, hear, retry=0.01)  # type: ignore[arg-type]

    async def then() -> None:
        store.feeds[0].send("boom")
        await until(lambda: len(store.feeds) == 2, timeout=5)
        store.feeds[1].send("after")
        await until(lambda: _queues(heard) == ["after"], timeout=5)

    run_in_loop(_running(service, store, then))
