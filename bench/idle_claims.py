"""What a quiet worker's claim and a relay's dispatch cost beside a large future backlog
(docs/performance.md, "SQLite and MariaDB/MySQL are given the classes").

Into a fresh database it enqueues N jobs due in a year and 50 due now, claims the 50, then
times 7 claims with limit 100 that find nothing (every queue; the named queue; every queue
with a cap on the queue, the controlled claim), and, with the queue switched to outbox mode,
7 dispatches with limit 500 that find nothing. It prints the
median and the range of each, in milliseconds:

    .venv/bin/python bench/idle_claims.py sqlite:////tmp/idle.db 100000
    .venv/bin/python bench/idle_claims.py mysql://root@127.0.0.1:3306/idle 100000

(The database must be new or empty: PostgreSQL and MariaDB, create it first.)
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from duetime.core.outbox import Dispatch
from duetime.core.requests import TaskDefaults, build_new_job
from duetime.store import open_store

DUE = 50
RUNS = 7


def timed(call: Callable[[], Any]) -> str:
    spent = []
    for _ in range(RUNS):
        started = time.perf_counter()
        got = call()
        spent.append((time.perf_counter() - started) * 1000)
        if got:
            raise SystemExit(f"expected nothing, got {len(got)}")
    return f"median {statistics.median(spent):.2f} ms ({min(spent):.2f} to {max(spent):.2f})"


def main() -> None:
    url, n = sys.argv[1], int(sys.argv[2])
    store = open_store(url)
    store.migrate()
    now = datetime.now(UTC)
    later = now + timedelta(days=365)
    defaults = TaskDefaults()
    for first in range(0, n, 1000):
        jobs = [
            build_new_job("t", {}, now=now, tenant="default", defaults=defaults, at=later)
            for _ in range(min(1000, n - first))
        ]
        store.enqueue(jobs, now)
    store.enqueue(
        [build_new_job("t", {}, now=now, tenant="default", defaults=defaults) for _ in range(DUE)],
        now,
    )
    claimed = store.claim(worker_id="w", queues=None, limit=100, now=now)
    if len(claimed) != DUE:
        raise SystemExit(f"the first claim took {len(claimed)} jobs, not {DUE}")
    rows = {
        "claim, every queue": lambda: store.claim(worker_id="w", queues=None, limit=100, now=now),
        "claim, the queue": lambda: store.claim(
            worker_id="w", queues=["default"], limit=100, now=now
        ),
    }
    for name, call in rows.items():
        sys.stdout.write(f"{name:24s} {timed(call)}\n")
    store.set_queue("default", now, concurrency=1000)  # a cap: the controlled claim
    capped = timed(lambda: store.claim(worker_id="w", queues=None, limit=100, now=now))
    sys.stdout.write(f"{'claim, a capped queue':24s} {capped}\n")
    store.set_queue("default", now, concurrency=None, dispatch=Dispatch.OUTBOX)
    dispatch = timed(lambda: store.dispatch_outbox(now, 500, 300.0))
    sys.stdout.write(f"{'dispatch, outbox queue':24s} {dispatch}\n")
    store.close()


if __name__ == "__main__":
    main()
