"""The database's clock (Store.database_now) on every dialect, and the clock offset a node
keeps in its registry row."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from duetime import App
from duetime.core.clock import CorrectedClock, ManualClock, SystemClock
from duetime.core.models import Node
from duetime.store.base import Store


def test_database_now_is_the_databases_clock_read_as_the_statement_runs(store: Store) -> None:
    before = datetime.now(UTC)
    first = store.database_now()
    after = datetime.now(UTC)
    assert first.tzinfo is not None and first.utcoffset() == timedelta(0)
    # the database runs on this machine: its clock is this one (to its precision, 1 ms)
    assert before - timedelta(milliseconds=50) <= first <= after + timedelta(milliseconds=50)
    time.sleep(0.05)
    second = store.database_now()
    assert second - first >= timedelta(milliseconds=40)  # read anew, not a transaction's start
    assert store.clock_is_local is (store.dialect == "sqlite")


def test_a_clock_measured_against_the_database_on_this_machine_is_hardly_corrected(
    store: Store,
) -> None:
    clock = CorrectedClock(SystemClock())
    for _ in range(3):
        reading = clock.measure(store.database_now)
    assert reading is not None and reading.round_trip < 0.5
    assert clock.offset is not None and abs(clock.offset) < 0.05
    assert abs((clock.now() - datetime.now(UTC)).total_seconds()) < 0.05


def node(node_id: str, clock: ManualClock, offset: float | None) -> Node:
    now = clock.now()
    return Node(node_id, "host-a", 1, None, 2, ("worker",), "0.1.0", now, now, clock_offset=offset)


def test_a_nodes_clock_offset_is_registered_and_renewed_by_its_heartbeat(
    store: Store, clock: ManualClock
) -> None:
    store.register_node(node("fast", clock, 30.25), clock.now())
    store.register_node(node("unmeasured", clock, None), clock.now())
    listed = {n.id: n for n in store.list_nodes()}
    assert listed["fast"].clock_offset == 30.25 and listed["unmeasured"].clock_offset is None
    clock.advance(5)
    store.touch_node("fast", clock.now(), -29.5)
    store.touch_node("unmeasured", clock.now())
    listed = {n.id: n for n in store.list_nodes()}
    assert listed["fast"].clock_offset == -29.5 and listed["fast"].last_seen_at == clock.now()
    assert listed["unmeasured"].clock_offset is None
    assert listed["fast"].to_json(clock.now(), 30)["clock_offset_seconds"] == -29.5
    assert listed["fast"].clock_skewed(1.0) and not replace(
        listed["fast"], clock_offset=0.5
    ).clock_skewed(1.0)


def test_an_app_on_its_own_clock_reads_the_databases_on_open_and_again_a_minute_later(
    store_url: str,
) -> None:
    app = App(database_url=store_url)
    try:
        assert isinstance(app.clock, CorrectedClock) and app.clock.offset is None
        store = app.store  # opening reads the database's clock
        local = store.clock_is_local
        assert app.clock.offset == 0.0 if local else abs(app.clock.offset or 9) < 0.05
        # this machine's clock jumps 30 s ahead: the App follows once its reading is stale
        machine = ManualClock(datetime.now(UTC) + timedelta(seconds=30))
        app.clock.base = machine
        app.store  # noqa: B018 - a use within the minute reads nothing
        assert app.clock.offset == 0.0 if local else abs(app.clock.offset or 9) < 0.05
        machine.advance(31)
        app.store  # noqa: B018 - the reading is stale: read again
        if local:  # SQLite reads this machine's clock: there is no offset to follow
            assert app.clock.offset == 0.0
        else:
            assert app.clock.offset == pytest.approx(61, abs=0.5)
            assert abs((app.clock.now() - store.database_now()).total_seconds()) < 0.5
    finally:
        app.close()


def test_an_app_on_an_injected_clock_is_never_corrected(store_url: str) -> None:
    manual = ManualClock()
    app = App(database_url=store_url, clock=manual)
    try:
        app.store  # noqa: B018
        assert app.clock is manual and app.clock.now() == ManualClock().now()
    finally:
        app.close()


def test_the_first_enqueue_of_an_app_computes_its_delay_on_the_databases_clock(
    store_url: str,
) -> None:
    """The very call that opens the store (and reads the database's clock) computes a
    relative due time on the database's clock, not on this machine's 30 s fast one."""
    app = App(database_url=store_url)
    try:
        assert isinstance(app.clock, CorrectedClock)
        app.clock.base = ManualClock(datetime.now(UTC) + timedelta(seconds=30))
        job = app.enqueue("t", delay=5)
        reference = app.store.database_now()
        expected = 35.0 if app.store.clock_is_local else 5.0  # SQLite: the machine's clock
        assert (job.due_at - reference).total_seconds() == pytest.approx(expected, abs=0.5)
        [many] = app.enqueue_many("t", [{}], delay=5)
        assert (many.due_at - reference).total_seconds() == pytest.approx(expected, abs=0.5)
    finally:
        app.close()
