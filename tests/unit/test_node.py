"""A node runs its services: started in order, stopped in reverse, and the signals that stop it."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

import pytest

from duetime.core.errors import InvalidRequest, StoreUnavailable
from duetime.runtime.node import (
    EVENT_LOOPS,
    Node,
    event_loop_factory,
    loop_name,
    run_until_signalled,
)
from duetime.runtime.service import Pulse, Service


class Recorder(Service):
    """A service that notes what the node asks of it in a shared journal."""

    def __init__(self, name: str, journal: list[str], *, crash: bool = False) -> None:
        super().__init__()
        self.name = name
        self.journal = journal
        self.crash = crash
        self.running = Pulse()

    async def start(self) -> None:
        self.journal.append(f"start {self.name}")

    async def run(self) -> None:
        self.running.fire()
        if self.crash:
            raise RuntimeError(f"{self.name} broke")
        while not self.stopping:
            await self.pause(3600)
        self.journal.append(f"stopped {self.name}")

    def stop(self) -> None:
        self.journal.append(f"stop {self.name}")
        super().stop()


def test_services_start_in_order_and_stop_in_reverse_one_after_another() -> None:
    journal: list[str] = []
    services = [Recorder(name, journal) for name in ("registry", "reaper", "slots")]

    async def scenario() -> None:
        stop = asyncio.Event()
        node = asyncio.create_task(Node(services).run(stop))
        for service in services:
            await service.running.wait(1)
        assert journal == ["start registry", "start reaper", "start slots"]
        journal.clear()
        stop.set()
        await asyncio.wait_for(node, 5)

    asyncio.run(scenario())
    assert journal == [
        "stop slots",
        "stopped slots",
        "stop reaper",
        "stopped reaper",
        "stop registry",
        "stopped registry",
    ]


def test_a_crashed_service_is_logged_and_stops_the_node(caplog: pytest.LogCaptureFixture) -> None:
    journal: list[str] = []
    services = [Recorder("registry", journal), Recorder("relay", journal, crash=True)]
    with caplog.at_level(logging.ERROR, logger="duetime.worker"):
        asyncio.run(asyncio.wait_for(Node(services).run(asyncio.Event()), 5))
    assert journal[-2:] == ["stop registry", "stopped registry"]
    assert "stop relay" not in journal  # it had ended already
    [record] = caplog.records
    assert record.getMessage() == "worker duty relay crashed"
    assert "relay broke" in str(record.exc_info and record.exc_info[1])


def test_a_failed_start_runs_nothing() -> None:
    journal: list[str] = []

    class Unregistered(Recorder):
        async def start(self) -> None:
            raise ConnectionError("database down")

    later = Recorder("slots", journal)
    with pytest.raises(ConnectionError):
        asyncio.run(Node([Unregistered("registry", journal), later]).run(asyncio.Event()))
    assert journal == [] and later.running.count == 0


class Unreachable(Recorder):
    """A service whose start finds the database unreachable `times` times, then succeeds."""

    def __init__(self, name: str, journal: list[str], times: int) -> None:
        super().__init__(name, journal)
        self.times = times

    async def start(self) -> None:
        if self.times:
            self.times -= 1
            self.journal.append(f"unreachable {self.name}")
            raise StoreUnavailable("PostgreSQL at db:5432/app failed: terminating connection")
        await super().start()


def test_a_start_that_finds_the_database_unreachable_is_tried_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A dropped connection while a worker starts (its clock read, its node's registration)
    is waited out, as the database's absence before it started is (the worker exited 1)."""
    journal: list[str] = []
    services = [Unreachable("registry", journal, times=2), Recorder("slots", journal)]

    async def scenario() -> None:
        stop = asyncio.Event()
        node = asyncio.create_task(Node(services, start_retry=0.0).run(stop))
        await services[1].running.wait(1)
        stop.set()
        await asyncio.wait_for(node, 5)

    with caplog.at_level(logging.WARNING, logger="duetime.worker"):
        asyncio.run(scenario())
    assert journal[:4] == [
        "unreachable registry",
        "unreachable registry",
        "start registry",
        "start slots",
    ]
    assert "database unavailable while starting registry" in caplog.records[0].getMessage()


def test_a_stop_while_the_database_stays_unreachable_ends_the_start() -> None:
    journal: list[str] = []
    later = Recorder("slots", journal)

    async def scenario() -> None:
        stop = asyncio.Event()
        node = asyncio.create_task(
            Node([Unreachable("registry", journal, times=10**6), later], start_retry=0.01).run(stop)
        )
        await asyncio.sleep(0.05)
        stop.set()
        await asyncio.wait_for(node, 5)

    asyncio.run(scenario())
    assert "start registry" not in journal and later.running.count == 0


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_the_first_signal_asks_for_a_graceful_stop(
    caplog: pytest.LogCaptureFixture, loop: str
) -> None:
    exits: list[int] = []

    async def main(stop: asyncio.Event) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(stop.wait(), 5)

    with caplog.at_level(logging.INFO, logger="duetime.cli"):
        run_until_signalled(main, grace=1.5, loop=loop, exit_now=exits.append)
    assert exits == []
    assert signals_as_python_leaves_them(), "the signals still go to the closed loop"
    assert "received SIGTERM: finishing in-flight jobs (grace 1.5s)" in caplog.messages


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_second_signal_exits_at_once_with_status_1(
    caplog: pytest.LogCaptureFixture, loop: str
) -> None:
    exits: list[int] = []
    exited: list[asyncio.Event] = []

    def exit_now(code: int) -> None:
        exits.append(code)
        exited[0].set()

    async def main(stop: asyncio.Event) -> None:
        exited.append(asyncio.Event())
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.wait_for(stop.wait(), 5)
        os.kill(os.getpid(), signal.SIGTERM)  # while the graceful shutdown is under way
        await asyncio.wait_for(exited[0].wait(), 5)

    with caplog.at_level(logging.INFO, logger="duetime.cli"):
        run_until_signalled(main, grace=30, loop=loop, exit_now=exit_now)
    assert exits == [1]
    assert signals_as_python_leaves_them(), "the signals still go to the closed loop"
    assert caplog.messages[-1] == "second signal: exiting now; in-flight leases will be reaped"


# -- the event loop a node runs in ----------------------------------------------------------------


def signals_as_python_leaves_them() -> bool:
    """SIGINT raises KeyboardInterrupt and SIGTERM ends the process again (asyncio's own
    loop puts them back so when it closes; uvloop's, once closed, would keep its handler)."""
    return (
        signal.getsignal(signal.SIGINT) is signal.default_int_handler
        and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    )


def ran_in(loop: str) -> str:
    """The loop run_until_signalled(loop=...) ran its main in, as loop_name names it."""
    seen: list[str] = []

    async def main(stop: asyncio.Event) -> None:
        seen.append(loop_name(asyncio.get_running_loop()))

    run_until_signalled(main, grace=1, loop=loop)
    assert signals_as_python_leaves_them(), f"the signals still go to the closed {loop} loop"
    return seen[0]


def test_a_node_runs_in_uvloop_by_default_and_in_asyncios_loop_when_asked() -> None:
    """uvloop is a dependency of duetime here (Linux, CPython): `auto` takes it."""
    uvloop = pytest.importorskip("uvloop", reason="uvloop is not built for this platform")

    assert event_loop_factory("auto") is uvloop.new_event_loop
    assert event_loop_factory("uvloop") is uvloop.new_event_loop
    assert event_loop_factory("asyncio") is None
    assert (ran_in("auto"), ran_in("uvloop"), ran_in("asyncio")) == ("uvloop", "uvloop", "asyncio")


def test_without_uvloop_auto_runs_in_asyncios_loop_and_uvloop_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop fails
    assert event_loop_factory("auto") is None
    assert ran_in("auto") == "asyncio"
    with pytest.raises(InvalidRequest) as caught:
        event_loop_factory("uvloop")
    assert str(caught.value) == (
        "the uvloop event loop is not installed here: pip install uvloop, or run with "
        "--loop asyncio"
    )


def test_an_unknown_event_loop_is_refused_with_the_known_ones() -> None:
    assert EVENT_LOOPS == ("auto", "asyncio", "uvloop")
    with pytest.raises(InvalidRequest, match="one of auto, asyncio, uvloop, not 'tokio'"):
        event_loop_factory("tokio")
