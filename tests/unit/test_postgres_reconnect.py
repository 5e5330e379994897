"""The PostgreSQL pool's reconnection attempts (no server needed): a connection that cannot be
opened is tried again at most RECONNECT_DELAY_MAX s later, jittered so that processes that
lost the server together do not retry in lockstep (docs/stores.md). This also pins the
psycopg_pool internals the cap relies on (AddConnection, schedule_task): a psycopg_pool that
moved them fails here, not silently in a failover."""

from __future__ import annotations

import logging
import threading
from typing import Any

import psycopg
import psycopg_pool
import pytest

from duetime.store.postgres import driver as pg


class _Refused(psycopg.Connection[Any]):
    @classmethod
    def connect(cls, *args: Any, **kwargs: Any) -> Any:
        raise psycopg.OperationalError("connection refused (test)")


def test_reconnection_attempts_are_at_most_the_cap_apart_and_jittered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert pg.RECONNECTS_CAPPED, "psycopg_pool no longer has the names the cap relies on"
    attempts = 7  # psycopg_pool's own delays: 1, 2, 4, 8, 16, 32 s
    delays: list[float] = []
    enough = threading.Event()
    base_schedule = psycopg_pool.ConnectionPool.schedule_task

    def schedule(self: Any, task: Any, delay: float) -> None:
        if not isinstance(task, pg.AddConnection):
            base_schedule(self, task, delay)
            return
        delays.append(delay)
        if len(delays) >= attempts:
            enough.set()
        else:
            self.run_task(task)  # its next attempt now, not after `delay`

    monkeypatch.setattr(psycopg_pool.ConnectionPool, "schedule_task", schedule)
    logger = logging.getLogger("psycopg.pool")
    monkeypatch.setattr(logger, "disabled", True)  # a warning per failed attempt
    pool = pg._ReconnectingPool("", min_size=1, connection_class=_Refused, open=True, name="test")
    try:
        assert enough.wait(30), f"only {len(delays)} attempts were scheduled"
    finally:
        pool.close(timeout=1)
    assert all(0 < d <= pg.RECONNECT_DELAY_MAX for d in delays), delays
    # psycopg_pool's own delays past the cap are capped each to its own value
    capped = delays[2:]
    assert len(set(capped)) == len(capped), capped
    assert all(d >= pg.RECONNECT_DELAY_MAX / 2 for d in capped), capped
