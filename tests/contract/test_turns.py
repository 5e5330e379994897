"""Turns (Store.take_turn) on every dialect: a duty whose one pass serves the whole fleet runs
on one node per interval, by the database's clock, whichever nodes ask and however many."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from duetime.core.clock import ManualClock
from duetime.core.states import JobStatus
from duetime.runtime.reaper import Reaper, ReaperService, ReapResult
from duetime.runtime.service import BlockingCalls
from duetime.store.base import Store
from jobhelpers import lapsed
from kit import DialectKit

HOUR = 3600.0


def test_a_duty_is_one_nodes_turn_until_its_last_pass_is_old_enough(store: Store) -> None:
    assert store.take_turn("reaper", "node-a", HOUR)  # its first pass ever
    assert not store.take_turn("reaper", "node-b", HOUR)  # node-a's pass is recent
    assert not store.take_turn("reaper", "node-a", HOUR)  # for node-a itself too
    assert store.take_turn("other", "node-b", HOUR)  # each duty has its own turn
    assert store.take_turn("reaper", "node-b", 0.0)  # a pass 0 s old is old enough for 0 s
    assert not store.take_turn("reaper", "node-a", HOUR)  # node-b's pass now


def test_of_nodes_that_ask_at_once_one_gets_the_turn(
    kit: DialectKit, store_url: str, store: Store, make_store: Callable[[], Store]
) -> None:
    stores = [store] + [make_store() for _ in range(3)]

    def race() -> list[bool]:
        """Eight nodes (two threads on each of four stores) ask for the turn at once."""
        start = threading.Barrier(8)
        got: list[bool] = []

        def ask(s: Store, name: str) -> None:
            start.wait()
            got.append(s.take_turn("race", name, HOUR))

        threads = [
            threading.Thread(target=ask, args=(s, f"node-{i}-{j}"))
            for i, s in enumerate(stores)
            for j in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sorted(got)

    assert race() == [False] * 7 + [True]  # the duty's first pass: its row made by one
    assert race() == [False] * 8  # that pass is recent
    old = datetime.now(UTC) - timedelta(hours=2)
    kit.execute(store_url, "UPDATE duetime_turns SET passed_at = ?", [kit.instant(old)])
    assert race() == [False] * 7 + [True]  # the row updated by one


def test_a_pass_recorded_ahead_of_the_database_clock_gives_the_turn_up(
    kit: DialectKit, store_url: str, store: Store
) -> None:
    assert store.take_turn("reaper", "node-a", HOUR)
    ahead = datetime.now(UTC) + timedelta(days=1)  # a node's clock was set back since
    kit.execute(store_url, "UPDATE duetime_turns SET passed_at = ?", [kit.instant(ahead)])
    assert store.take_turn("reaper", "node-b", HOUR)
    assert not store.take_turn("reaper", "node-a", HOUR)  # node-b's pass, by the database


def test_of_two_nodes_reaping_services_one_runs_the_pass(store: Store, clock: ManualClock) -> None:
    job = lapsed(store, clock)
    results: list[ReapResult] = []
    calls = BlockingCalls(2)
    services = [
        ReaperService(
            Reaper(store, clock), calls, interval=HOUR, on_result=results.append, holder=name
        )
        for name in ("node-a", "node-b")
    ]

    async def scenario() -> None:
        running = [asyncio.create_task(s.run()) for s in services]
        for s in services:
            await asyncio.wait_for(s.passes.wait(1), 10)
            s.stop()
        await asyncio.wait_for(asyncio.gather(*running), 10)

    asyncio.run(scenario())
    calls.close()
    assert [r.reaped for r in results] == [1]  # one pass, by whichever node asked first
    assert sorted(s.skipped for s in services) == [0, 1]
    back = store.get_job(job.id)
    assert back is not None and back.status is JobStatus.SCHEDULED
