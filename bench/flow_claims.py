"""Claim cost of flow control (docs/flow-control.md), controls off versus on, in one process.

For each setup (off; a paused queue elsewhere; queue and tenant caps that never bind; a queue
weight) it enqueues N due jobs over two queues and two tenants into a fresh database, then
claims 10 at a time (finishing each batch) until none is left, and prints the jobs claimed
per second of time spent in claim() alone. `{setup}` in the URL names each database:

    .venv/bin/python bench/flow_claims.py 'sqlite:////tmp/flow-{setup}.db' 20000

(PostgreSQL and MariaDB: create the four empty databases flow_off, flow_pause, flow_cap and
flow_weight first, then pass e.g. postgresql://postgres@127.0.0.1:5432/flow_{setup}.)
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime

from duetime.core.models import Outcome
from duetime.core.requests import TaskDefaults, build_new_job
from duetime.core.states import Event
from duetime.store import open_store

SETUPS = ("off", "pause", "cap", "weight")


def run(url: str, n: int, setup: str) -> float:
    store = open_store(url)
    store.migrate()
    now = datetime.now(UTC)
    jobs = [
        build_new_job(
            "t",
            {},
            now=now,
            tenant="a" if i % 2 else "b",
            defaults=TaskDefaults(),
            queue="q1" if i % 3 else "q2",
        )
        for i in range(n)
    ]
    for i in range(0, n, 1000):
        store.enqueue(jobs[i : i + 1000], now)
    if setup == "cap":
        store.set_queue("q1", now, concurrency=1000)
        store.set_tenant("a", now, concurrency=1000)
    elif setup == "weight":
        store.set_queue("q1", now, weight=2)
    elif setup == "pause":
        store.set_queue("other", now, paused=True)
    claimed = 0
    spent = 0.0
    while True:
        started = time.perf_counter()
        claims = store.claim(worker_id="w", queues=None, limit=10, now=datetime.now(UTC))
        spent += time.perf_counter() - started
        if not claims:
            break
        claimed += len(claims)
        store.finish_many([(c.lease, Outcome(Event.SUCCEED)) for c in claims], datetime.now(UTC))
    store.close()
    if claimed != n:
        raise SystemExit(f"{setup}: claimed {claimed} of {n} jobs")
    return n / spent


def main() -> None:
    url, n = sys.argv[1], int(sys.argv[2])
    for setup in SETUPS:
        rate = run(url.format(setup=setup), n, setup)
        sys.stdout.write(f"{setup:7s} {rate:8.0f} jobs claimed per second of claim()\n")


if __name__ == "__main__":
    main()
