"""Three planner processes on one database over 1,000 ticks create each occurrence once."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

import duetime
from duetime.core.clock import ManualClock
from duetime.core.models import JobFilter
from duetime.store.base import Store

START = datetime(2026, 3, 7, 0, 0, 30, tzinfo=UTC)
TICKS = 1000


@pytest.mark.long
def test_three_replicas_create_each_tick_once(
    store_url: str, make_store: Callable[[], Store], tmp_path: Path
) -> None:
    app = duetime.App(database_url=store_url, clock=ManualClock(START))
    app.add_schedule(
        "minutely", task="t", cron="* * * * *", timezone="America/New_York", misfire="catch_up"
    )
    go = tmp_path / "go"
    script = Path(__file__).with_name("planner_replica.py")
    replicas = [
        subprocess.Popen(
            [sys.executable, str(script), store_url, START.isoformat(), str(TICKS), str(go)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    go.touch()
    for replica in replicas:
        _, err = replica.communicate(timeout=300)
        assert replica.returncode == 0, err
    schedule = app.get_schedule("minutely")
    jobs = app.store.list_jobs(JobFilter(schedule_id=schedule.id, limit=10_000))
    nominals = Counter(j.nominal_at for j in jobs)
    assert len(jobs) == TICKS, f"{len(jobs)} occurrences for {TICKS} ticks"
    assert max(nominals.values()) == 1
    ticks = app.schedule_history("minutely", limit=10_000)
    assert Counter(t.outcome for t in ticks) == {"enqueued": TICKS}
    app.close()
