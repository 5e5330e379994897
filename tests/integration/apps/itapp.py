"""The duetime app the integration tests run in real worker processes.

Workers load it with `--app itapp:app` (tests put this folder on PYTHONPATH); tests import it
as `integration.apps.itapp` and call make_app(url) to enqueue with the same task settings
(lease, retries), since a job takes them from the task registered in the enqueuing App.

Handlers write what they did into the folder named by DUETIME_IT_OUT:
- `exec-<pid>.txt`: one line "<job_id> <generation> <pid>" per execution of drain.record;
- `started-<job_id>-<attempt>` / `finished-<job_id>-<attempt>`: JSON markers
  {"pid", "generation", "attempt"} written atomically when a handler starts and ends;
- `ontime-<job_id>`: {"started", "due"} (epoch seconds) from on_time.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from pathlib import Path
from typing import IO

import duetime
from duetime import App, PermanentError, RetryPolicy

OUT_ENV = "DUETIME_IT_OUT"

_exec_lock = threading.Lock()
_exec_file: IO[str] | None = None


def out_dir() -> Path:
    folder = os.environ.get(OUT_ENV)
    if not folder:
        raise RuntimeError(f"{OUT_ENV} is not set: the integration app has nowhere to write")
    return Path(folder)


def write_marker(kind: str) -> None:
    """Write `<kind>-<job_id>-<attempt>` atomically (rename), so a reader never sees half."""
    ctx = duetime.current()
    body = {"pid": os.getpid(), "generation": ctx.generation, "attempt": ctx.attempt}
    final = out_dir() / f"{kind}-{ctx.job_id}-{ctx.attempt}"
    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(body))
    tmp.rename(final)


def record_execution() -> None:
    """Append one line per execution to this process's file, flushed at once."""
    global _exec_file
    ctx = duetime.current()
    line = f"{ctx.job_id} {ctx.generation} {os.getpid()}\n"
    with _exec_lock:
        if _exec_file is None:
            _exec_file = open(out_dir() / f"exec-{os.getpid()}.txt", "a")
        _exec_file.write(line)
        _exec_file.flush()


def make_app(database_url: str | None = None) -> App:
    app = App(database_url)

    @app.task(name="drain.record")
    def drain_record() -> None:
        record_execution()

    # short lease and backoff: a lost attempt is retried within a second or so
    @app.task(
        name="slow.first_attempt", lease=2, max_attempts=3, retry=RetryPolicy(base=0.5, cap=1)
    )
    def slow_first_attempt(seconds: float = 30.0) -> None:
        """Attempt 1 sleeps `seconds` (long enough to be killed or paused); later ones don't."""
        write_marker("started")
        if duetime.current().attempt == 1:
            time.sleep(seconds)
        write_marker("finished")

    @app.task(name="sleep", max_attempts=3)
    def sleep(seconds: float) -> None:
        """Sleeps without looking at cancellation: the worst case for a graceful shutdown."""
        write_marker("started")
        time.sleep(seconds)
        write_marker("finished")

    @app.task(name="flow.hold")
    def flow_hold(seconds: float = 0.2) -> None:
        """Holds its slot `seconds`; writes `hold-<job_id>-<attempt>`: its start and end
        (time.time(), inside the attempt's lease), for the flow-control tests."""
        ctx = duetime.current()
        started = time.time()
        time.sleep(seconds)
        body = {"start": started, "end": time.time(), "pid": os.getpid()}
        final = out_dir() / f"hold-{ctx.job_id}-{ctx.attempt}"
        tmp = final.with_name(f".{final.name}.tmp")
        tmp.write_text(json.dumps(body))
        tmp.rename(final)

    @app.task(name="noop")
    def noop() -> None:
        write_marker("finished")

    @app.task(name="nap")
    async def nap(seconds: float = 0.01) -> None:
        """An async handler: waits on the event loop's timer, then writes its markers."""
        write_marker("started")
        await asyncio.sleep(seconds)
        write_marker("finished")

    @app.task(name="on_time")
    def on_time(label: str = "") -> None:
        """Writes `ontime-<job_id>`: when the handler started and when the job was due."""
        ctx = duetime.current()
        body = {"started": time.time(), "due": ctx.due_at.timestamp()}
        final = out_dir() / f"ontime-{ctx.job_id}"
        tmp = final.with_name(f".{final.name}.tmp")
        tmp.write_text(json.dumps(body))
        tmp.rename(final)

    @app.task(name="fail.permanent")
    def fail_permanent() -> None:
        write_marker("started")
        raise PermanentError("this job always fails")

    return app


app = make_app()
