"""procrastinate's benchmark app (bench-venv only): one no-op async task.

    procrastinate --app=procrastinate_app.app worker --concurrency=10

with `bench/` on PYTHONPATH and the database in BENCH_DB_URL.
"""

from __future__ import annotations

import os

from procrastinate import App, JobContext, PsycopgConnector

from bench.common import DB_URL_ENV, record_start

TASK = "bench_noop"

app = App(connector=PsycopgConnector(conninfo=os.environ.get(DB_URL_ENV, "")))


@app.task(name=TASK, pass_context=True)
async def noop(context: JobContext, i: int) -> None:
    scheduled = context.job.scheduled_at
    record_start(scheduled.timestamp() if scheduled else 0.0)
