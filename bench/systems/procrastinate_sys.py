"""procrastinate (PostgreSQL only): the orchestrator's description and the measured steps.

The steps run in the benchmark virtualenv (`.bench-venv`):
    .bench-venv/bin/python -m bench.systems.procrastinate_sys <step> '<json params>'
Nothing here imports procrastinate at module level.

Batch enqueue is `Task.batch_defer_async(*kwargs)` (one query for the batch); a due instant
is `configure(schedule_at=...)`, shared by every job of a batch_defer.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import chunks, payloads, step_main
from bench.systems.base import Setting, System, Tuned

CONCURRENCY = 10
# procrastinate 3.10's defaults (procrastinate/worker.py): WORKER_CONCURRENCY = 1,
# FETCH_JOB_POLLING_INTERVAL = 5.0 s; `procrastinate worker` passes nothing it was not given
DEFAULT_CONCURRENCY = 1
DEFAULT_POLL_INTERVAL = 5.0
# procrastinate's worker polls for jobs every 5 s by default and is woken by NOTIFY only when
# a job is deferred; a job scheduled for later is found by polling. 0.5 s is duetime's
# default poll interval, so both look for newly due jobs equally often.
POLL_INTERVAL = 0.5


def make_system(root: Path) -> System:
    bin_dir = root / ".bench-venv" / "bin"

    def argv(*options: str) -> Any:
        def worker_argv(url: str) -> list[str]:
            return [
                str(bin_dir / "procrastinate"),
                "--app=procrastinate_app.app",
                "worker",
                *options,
            ]

        return worker_argv

    def tune(setting: Setting) -> Tuned | None:
        # the drain's jobs are all due when the workers start: the polling interval, left at
        # its default here, only matters once the queue is empty
        if setting.kind == "defaults":
            params = {
                "concurrency": DEFAULT_CONCURRENCY,
                "fetch_job_polling_interval": DEFAULT_POLL_INTERVAL,
            }
            return Tuned(argv(), params)
        if setting.kind == "sweep" and setting.concurrency is not None:
            c = setting.concurrency
            params = {"concurrency": c, "fetch_job_polling_interval": DEFAULT_POLL_INTERVAL}
            return Tuned(argv(f"--concurrency={c}"), params)
        return None  # the throttled row is pgqueuer's

    worker_argv = argv(
        f"--concurrency={CONCURRENCY}", f"--fetch-job-polling-interval={POLL_INTERVAL}"
    )
    return System(
        name="procrastinate",
        kind="procrastinate",
        store="postgres",
        python=bin_dir / "python",
        module="bench.systems.procrastinate_sys",
        worker_argv=worker_argv,
        # jobs not finished yet: its partial index on todo and doing keeps this cheap, where
        # counting the succeeded ones reads every finished row
        done_query="SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')",
        counts_remaining=True,
        tune=tune,
    )


# -- steps (run in the bench venv, with BENCH_DB_URL set) ---------------------------------------


def _run(body: Any) -> Any:
    from bench.procrastinate_app import app

    async def run() -> Any:
        async with app.open_async():
            return await body(app)

    return asyncio.run(run())


def setup(p: dict[str, Any]) -> dict[str, Any]:
    async def body(app: Any) -> None:
        await app.schema_manager.apply_schema_async()

    _run(body)
    return {}


def enqueue_bulk(p: dict[str, Any]) -> dict[str, Any]:
    from bench.procrastinate_app import noop

    async def body(app: Any) -> float:
        t0 = time.perf_counter()
        for offset, size in chunks(p["n"], p["batch"]):
            await noop.batch_defer_async(*payloads(size, offset))
        return time.perf_counter() - t0

    return {"seconds": _run(body), "jobs": p["n"]}


def enqueue_single(p: dict[str, Any]) -> dict[str, Any]:
    from bench.procrastinate_app import noop

    async def body(app: Any) -> float:
        args = payloads(p["n"])
        t0 = time.perf_counter()
        for a in args:
            await noop.defer_async(**a)
        return time.perf_counter() - t0

    return {"seconds": _run(body), "jobs": p["n"]}


def enqueue_delayed(p: dict[str, Any]) -> dict[str, Any]:
    """One defer per job: schedule_at applies to a whole batch_defer, and every due differs."""
    from bench.procrastinate_app import noop

    async def body(app: Any) -> dict[str, Any]:
        late = 0
        for i, due in enumerate(p["dues"]):
            await noop.configure(schedule_at=datetime.fromtimestamp(due, UTC)).defer_async(i=i)
            if time.time() >= due:
                late += 1
        return {"late": late, "finished_at": time.time()}

    result: dict[str, Any] = _run(body)
    return result


def enqueue_burst(p: dict[str, Any]) -> dict[str, Any]:
    from bench.procrastinate_app import noop

    async def body(app: Any) -> float:
        deferrer = noop.configure(schedule_at=datetime.fromtimestamp(p["at"], UTC))
        for offset, size in chunks(p["m"], p["batch"]):
            await deferrer.batch_defer_async(*payloads(size, offset))
        return time.time()

    return {"finished_at": _run(body)}


STEPS = {
    "setup": setup,
    "enqueue_bulk": enqueue_bulk,
    "enqueue_single": enqueue_single,
    "enqueue_delayed": enqueue_delayed,
    "enqueue_burst": enqueue_burst,
}

if __name__ == "__main__":
    step_main(STEPS)
