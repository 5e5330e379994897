"""pgqueuer's benchmark worker (bench-venv only): a factory and a small runner.

    python -m pgqueuer_app [BATCH_SIZE [MAX_CONCURRENT_TASKS]]

with `bench/` on PYTHONPATH and the database in BENCH_DB_URL. An argument left out (or
`default`) is not passed, so pgqueuer uses its own default (`batch_size=10`, no
`max_concurrent_tasks` cap, in pgqueuer 1.6.0's `run` and `QueueManager.run`). The runner
does what `pgq run pgqueuer_app:factory --batch-size ... --max-concurrent-tasks ...` does, through
pgqueuer's documented `pgqueuer.run(factory, ...)`, on uvloop when installed as the CLI
does: with pgqueuer 1.6.0 and the typer release pip installs beside it, `pgq run` itself
exits at start (AttributeError: 'str' object has no attribute 'name', in its log setup).
One asyncpg connection, as in pgqueuer's own examples and its benchmark tool's default.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import pgqueuer
from pgqueuer import PgQueuer
from pgqueuer.models import Job

from bench.common import DB_URL_ENV, record_start

ENTRYPOINT = "bench_noop"
SLEEP_ENTRYPOINT = "bench_sleep1ms"  # the pressure workload's job (bench/pressure.py)


@asynccontextmanager
async def factory() -> AsyncIterator[PgQueuer]:
    connection = await asyncpg.connect(os.environ[DB_URL_ENV])
    pgq = PgQueuer.from_asyncpg_connection(connection)

    @pgq.entrypoint(ENTRYPOINT)
    async def noop(job: Job) -> None:
        record_start(job.execute_after.timestamp())

    @pgq.entrypoint(SLEEP_ENTRYPOINT)
    async def sleep1ms(job: Job) -> None:
        await asyncio.sleep(0.001)

    try:
        yield pgq
    finally:
        await connection.close()


def main(argv: list[str]) -> None:
    logging.basicConfig(level=logging.WARNING)
    options: dict[str, int] = {}
    for name, value in zip(("batch_size", "max_concurrent_tasks"), argv, strict=False):
        if value != "default":
            options[name] = int(value)
    worker = pgqueuer.run(factory, **options)  # type: ignore[arg-type]
    try:
        import uvloop
    except ImportError:
        asyncio.run(worker)
    else:
        uvloop.run(worker)


if __name__ == "__main__":
    main(sys.argv[1:])
