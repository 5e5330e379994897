"""duetime's benchmark app: one no-op task that notes when it started and when it was due.

Workers load it as `duetime worker --app bench_app:app` with `bench/` on PYTHONPATH; the
database URL comes from DUETIME_DATABASE_URL (or --database-url).
"""

from __future__ import annotations

import asyncio

import duetime
from bench.common import record_start

app = duetime.App()

TASK = "bench.noop"


@app.task(name=TASK)
async def noop(i: int) -> None:
    record_start(duetime.current().due_at.timestamp())


LIMITED_TASK = "bench.noop_limited"  # the flow workload's `limit` setup: jobs carrying a key
LIMIT_KEY = "bench-dep"


@app.task(name=LIMITED_TASK, limits=[LIMIT_KEY])
async def noop_limited(i: int) -> None:
    record_start(duetime.current().due_at.timestamp())


PAYLOAD_TASK = "bench.noop_payload"  # the bytes workload: jobs with a 256-byte JSON payload


@app.task(name=PAYLOAD_TASK)
async def noop_payload(i: int, pad: str) -> None:
    record_start(duetime.current().due_at.timestamp())


SLEEP_TASK = "bench.sleep1ms"  # the pressure workload: jobs that take 1 ms (no record)


@app.task(name=SLEEP_TASK)
async def sleep1ms(i: int) -> None:
    await asyncio.sleep(0.001)


FANOUT_CHILD = "bench.fanout_child"  # the fanout workload: children returning a small result
FANOUT_CALLBACK = "bench.fanout_summary"  # ... and their callback, which reads every result


@app.task(name=FANOUT_CHILD)
async def fanout_child(i: int) -> dict[str, int]:
    return {"i": i}


@app.task(name=FANOUT_CALLBACK)
async def fanout_summary(n: int) -> int:
    results = await duetime.current().aparent_results()
    if len(results) != n:
        raise duetime.PermanentError(f"{len(results)} parent results of {n}")
    return sum(r["i"] for r in results.values())
