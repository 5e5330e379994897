"""One planner replica for test_planner_replicas: walks a stepped clock through N ticks.

Usage: python planner_replica.py DATABASE_URL START_ISO STEPS GO_FILE
"""

from __future__ import annotations

import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

from duetime.core.clock import ManualClock
from duetime.runtime.planner import Planner
from duetime.store import open_store


def main() -> None:
    url, start_text, steps_text, go_file = sys.argv[1:5]
    start = datetime.fromisoformat(start_text)
    store = open_store(url)
    clock = ManualClock(start)
    planner = Planner(store, clock)
    deadline = time.monotonic() + 60
    while not Path(go_file).exists():  # start all replicas at once
        if time.monotonic() > deadline:
            raise SystemExit("go file never appeared")
        time.sleep(0.005)
    for step in range(1, int(steps_text) + 1):
        clock.set(start + timedelta(minutes=step))
        planner.run_once()
    store.close()


if __name__ == "__main__":
    main()
