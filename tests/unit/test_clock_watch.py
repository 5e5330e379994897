"""A node reads the database's clock with each heartbeat, writes its offset in its row, and
warns once when the offset passes a threshold: fake clocks, a fake registry."""

from __future__ import annotations

import asyncio
import logging
import math
from datetime import datetime, timedelta

import pytest

from duetime.core.clock import CorrectedClock, ManualClock
from duetime.core.models import Node
from duetime.runtime.metrics import WorkerMetrics
from duetime.runtime.node import ClockWatch, NodeHeartbeat
from duetime.runtime.service import BlockingCalls


class Registry:
    """The few store methods a node heartbeat uses, on a database clock `behind` seconds
    behind the local one."""

    clock_is_local = False

    def __init__(self, local: ManualClock, behind: float) -> None:
        self.local = local
        self.behind = behind
        self.rows: dict[str, tuple[datetime, float | None]] = {}

    def database_now(self) -> datetime:
        self.local.advance(0.001)  # the round trip
        return self.local.now() - timedelta(seconds=self.behind)

    def register_node(self, node: Node, now: datetime) -> None:
        self.rows[node.id] = (now, node.clock_offset)

    def touch_node(self, node_id: str, now: datetime, clock_offset: float | None = None) -> None:
        self.rows[node_id] = (now, clock_offset)


def describe(clock: CorrectedClock | ManualClock) -> Node:
    now = clock.now()
    return Node("n1", "host", 1, None, 1, ("worker",), "0", now, now)


def events(caplog: pytest.LogCaptureFixture) -> list[tuple[str, dict[str, object]]]:
    return [
        (r.duetime_event, r.duetime)  # type: ignore[attr-defined]
        for r in caplog.records
        if hasattr(r, "duetime_event")
    ]


def test_the_warning_comes_once_past_the_threshold_and_once_back_within(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = WorkerMetrics(process=False)
    assert math.isnan(metrics.value("duetime_clock_offset_seconds"))
    watch = ClockWatch("n1", threshold=1.0, metrics=metrics)
    with caplog.at_level(logging.INFO, logger="duetime.worker"):
        for offset in (0.2, 30.1, 29.9, 30.0, 0.4, -0.9, -1.5):
            watch.saw(offset)
        watch.saw(None)  # an injected clock: nothing measured, nothing said
    seen = events(caplog)
    assert [name for name, _ in seen] == [
        "node.clock_offset",
        "node.clock_offset_ok",
        "node.clock_offset",
    ]
    assert seen[0][1]["offset_s"] == 30.1 and seen[0][1]["threshold_s"] == 1.0
    assert "ahead of" in str(seen[0][1]["hint"]) and "behind" in str(seen[2][1]["hint"])
    assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.INFO, logging.WARNING]
    assert metrics.value("duetime_clock_offset_seconds") == -1.5


def test_the_threshold_is_configurable_and_must_be_positive() -> None:
    watch = ClockWatch("n1", threshold=60.0)
    watch.saw(30.0)
    assert not watch.warned
    with pytest.raises(ValueError, match="above 0"):
        ClockWatch("n1", threshold=0)


@pytest.mark.parametrize("behind", [30.0, -30.0])
def test_each_heartbeat_reads_the_databases_clock_and_writes_the_offset(
    behind: float, caplog: pytest.LogCaptureFixture
) -> None:
    local = ManualClock()
    clock = CorrectedClock(local)
    store = Registry(local, behind)
    metrics = WorkerMetrics(process=False)
    calls = BlockingCalls(1)
    beat = NodeHeartbeat(
        store,  # type: ignore[arg-type]
        clock,
        calls,
        lambda: describe(clock),
        metrics=metrics,
    )

    async def scenario() -> None:
        await beat.start()
        local.advance(5)
        store.behind = behind + 0.5  # the local clock drifted half a second more
        await beat.run_once()

    try:
        with caplog.at_level(logging.INFO, logger="duetime.worker"):
            asyncio.run(scenario())
    finally:
        calls.close()
    seen_at, offset = store.rows["n1"]
    assert offset == pytest.approx(behind + 0.5, abs=0.002)
    true_now = local.now() - timedelta(seconds=store.behind)
    assert timedelta(0) <= true_now - seen_at <= timedelta(milliseconds=2)  # the database's time
    assert metrics.value("duetime_clock_offset_seconds") == pytest.approx(behind + 0.5, abs=0.002)
    assert [name for name, _ in events(caplog)] == ["node.clock_offset"]  # once, not per beat


def test_a_node_on_an_injected_clock_measures_nothing() -> None:
    local = ManualClock()
    store = Registry(local, 30.0)
    calls = BlockingCalls(1)
    beat = NodeHeartbeat(store, local, calls, lambda: describe(local))  # type: ignore[arg-type]

    async def scenario() -> None:
        await beat.start()
        await beat.run_once()

    try:
        asyncio.run(scenario())
    finally:
        calls.close()
    assert store.rows["n1"] == (local.now(), None)
