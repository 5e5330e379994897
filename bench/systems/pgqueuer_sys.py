"""pgqueuer (PostgreSQL only): the orchestrator's description and the measured steps.

The steps run in the benchmark virtualenv (`.bench-venv`), where pgqueuer is installed:
    .bench-venv/bin/python -m bench.systems.pgqueuer_sys <step> '<json params>'
Nothing here imports pgqueuer at module level, so duetime's venv can read the description.

Batch enqueue is `Queries.enqueue` with lists (one INSERT ... SELECT FROM UNNEST per call);
a delay is `execute_after`, a timedelta added to the database's NOW() at insert.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.common import chunks, payloads, step_main
from bench.systems.base import Setting, System, Tuned

ENTRYPOINT = "bench_noop"  # as in bench/pgqueuer_app.py
SLEEP_ENTRYPOINT = "bench_sleep1ms"  # bench/pgqueuer_app.py: the pressure workload's 1 ms job
# pgqueuer 1.6.0's defaults, in pgqueuer.run() and QueueManager.run(): batch_size=10 (jobs per
# dequeue), max_concurrent_tasks=None (no cap on the jobs a worker holds at once)
DEFAULT_BATCH_SIZE = 10
DEFAULT_MAX_CONCURRENT_TASKS = None
# the previous tables' configuration (the "throttled" row): pgqueuer refuses
# max_concurrent_tasks below twice the batch size, so 5 per dequeue for 10 at once
THROTTLED_BATCH_SIZE = 5
THROTTLED_MAX_CONCURRENT_TASKS = 10


def make_system(root: Path) -> System:
    bin_dir = root / ".bench-venv" / "bin"

    def argv(*options: str) -> Any:
        def worker_argv(url: str) -> list[str]:
            # bench/pgqueuer_app.py runs pgqueuer.run(), as `pgq run` would (which crashes at
            # start in pgqueuer 1.6.0; see that module); an option left out keeps its default
            return [str(bin_dir / "python"), "-m", "pgqueuer_app", *options]

        return worker_argv

    def tune(setting: Setting) -> Tuned | None:
        if setting.kind == "defaults":
            params = {
                "batch_size": DEFAULT_BATCH_SIZE,
                "max_concurrent_tasks": DEFAULT_MAX_CONCURRENT_TASKS,
            }
            return Tuned(argv(), params)
        if setting.kind == "sweep" and setting.concurrency is not None:
            # C jobs per dequeue, no cap (its default): a cap of C would force batch <= C / 2
            c = setting.concurrency
            params = {"batch_size": c, "max_concurrent_tasks": DEFAULT_MAX_CONCURRENT_TASKS}
            return Tuned(argv(str(c)), params)
        if setting.kind == "throttled":
            b, m = THROTTLED_BATCH_SIZE, THROTTLED_MAX_CONCURRENT_TASKS
            return Tuned(argv(str(b), str(m)), {"batch_size": b, "max_concurrent_tasks": m})
        return None

    return System(
        name="pgqueuer",
        kind="pgqueuer",
        store="postgres",
        python=bin_dir / "python",
        module="bench.systems.pgqueuer_sys",
        # ontime, burst (and the named drainN workloads): its defaults
        worker_argv=argv(),
        # a finished job is deleted from the queue table in the same statement that logs it
        done_query="SELECT count(*) FROM pgqueuer",
        counts_remaining=True,
        tune=tune,
    )


# -- steps (run in the bench venv) -------------------------------------------------------------


def _encode(args: dict[str, Any]) -> bytes:
    return json.dumps(args).encode()


async def _queries(url: str) -> Any:
    import asyncpg
    from pgqueuer.queries import Queries

    connection = await asyncpg.connect(url)
    return connection, Queries.from_asyncpg_connection(connection)


def setup(p: dict[str, Any]) -> dict[str, Any]:
    async def run() -> None:
        connection, queries = await _queries(p["url"])
        await queries.install()
        await connection.close()

    asyncio.run(run())
    return {}


def enqueue_bulk(p: dict[str, Any]) -> dict[str, Any]:
    async def run() -> float:
        connection, queries = await _queries(p["url"])
        t0 = time.perf_counter()
        for offset, size in chunks(p["n"], p["batch"]):
            await queries.enqueue(
                [ENTRYPOINT] * size, [_encode(a) for a in payloads(size, offset)], [0] * size
            )
        seconds = time.perf_counter() - t0
        await connection.close()
        return seconds

    return {"seconds": asyncio.run(run()), "jobs": p["n"]}


def enqueue_single(p: dict[str, Any]) -> dict[str, Any]:
    async def run() -> float:
        connection, queries = await _queries(p["url"])
        args = payloads(p["n"])
        t0 = time.perf_counter()
        for a in args:
            await queries.enqueue(ENTRYPOINT, _encode(a), 0)
        seconds = time.perf_counter() - t0
        await connection.close()
        return seconds

    return {"seconds": asyncio.run(run()), "jobs": p["n"]}


def enqueue_delayed(p: dict[str, Any]) -> dict[str, Any]:
    """All jobs in one list call, each with its own execute_after."""

    async def run() -> dict[str, Any]:
        connection, queries = await _queries(p["url"])
        dues: list[float] = p["dues"]
        n = len(dues)
        now = time.time()
        await queries.enqueue(
            [ENTRYPOINT] * n,
            [_encode({"i": i}) for i in range(n)],
            [0] * n,
            [timedelta(seconds=due - now) for due in dues],
        )
        finished = time.time()
        await connection.close()
        return {"late": sum(1 for due in dues if due <= finished), "finished_at": finished}

    return asyncio.run(run())


def enqueue_burst(p: dict[str, Any]) -> dict[str, Any]:
    """execute_after is relative to the database's NOW(): each batch gets at - time.time()."""

    async def run() -> float:
        connection, queries = await _queries(p["url"])
        for offset, size in chunks(p["m"], p["batch"]):
            delay = timedelta(seconds=p["at"] - time.time())
            await queries.enqueue(
                [ENTRYPOINT] * size,
                [_encode(a) for a in payloads(size, offset)],
                [0] * size,
                [delay] * size,
            )
        finished = time.time()
        await connection.close()
        return finished

    return {"finished_at": asyncio.run(run())}


def pressure_enqueue(p: dict[str, Any]) -> dict[str, Any]:
    """The pressure workload's offered load (bench/pressure.py): the jobs of
    SLEEP_ENTRYPOINT (due now) that the schedule offers, sent every tick with
    `Queries.enqueue` of lists, one statement a call (bench/pressure_offer.py runs the
    schedule)."""
    from bench.pressure_offer import offer

    loop = asyncio.new_event_loop()
    connection, queries = loop.run_until_complete(_queries(p["url"]))

    def send(offset: int, size: int) -> None:
        loop.run_until_complete(
            queries.enqueue(
                [SLEEP_ENTRYPOINT] * size,
                [_encode(a) for a in payloads(size, offset)],
                [0] * size,
            )
        )

    try:
        return offer(p, send)
    finally:
        loop.run_until_complete(connection.close())
        loop.close()


STEPS = {
    "setup": setup,
    "pressure_enqueue": pressure_enqueue,
    "enqueue_bulk": enqueue_bulk,
    "enqueue_single": enqueue_single,
    "enqueue_delayed": enqueue_delayed,
    "enqueue_burst": enqueue_burst,
}

if __name__ == "__main__":
    step_main(STEPS)
