"""The app of the failover drills (tests/integration/test_failover.py), loaded by real worker
processes with `--app failoverapp:app`.

Every execution appends one JSON line to `<DUETIME_IT_OUT>/exec-<pid>.txt`:
{"job", "token", "attempt", "task", "key", "pid", "start", "end"} (epoch seconds; "key" is
the idempotency key the job was enqueued with, from its business key), flushed at once,
so a test counts effects (executions) per job, whatever the store says afterwards.
`fo.hold` also writes `hold-<job_id>-<pid>` when it starts, so a test knows which process
runs it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import IO

import duetime
from duetime import App

OUT_ENV = "DUETIME_IT_OUT"

_lock = threading.Lock()
_file: IO[str] | None = None


def _out() -> Path:
    folder = os.environ.get(OUT_ENV)
    if not folder:
        raise RuntimeError(f"{OUT_ENV} is not set: the failover app has nowhere to write")
    return Path(folder)


def _record(task: str, start: float) -> None:
    global _file
    ctx = duetime.current()
    line = json.dumps(
        {
            "job": ctx.job_id,
            "token": str(ctx.fencing_token),
            "attempt": ctx.attempt,
            "task": task,
            "key": ctx.business_key.split(":", 1)[-1],  # the idempotency key, when it had one
            "pid": os.getpid(),
            "start": start,
            "end": time.time(),
        }
    )
    with _lock:
        if _file is None:
            _file = open(_out() / f"exec-{os.getpid()}.txt", "a")
        _file.write(line + "\n")
        _file.flush()


def make_app(database_url: str | None = None) -> App:
    app = App(database_url)

    @app.task(name="fo.record")
    def record(n: int = 0) -> None:
        start = time.time()
        time.sleep(0.02)
        _record("fo.record", start)

    @app.task(name="fo.slow", lease=30)
    def slow(seconds: float = 3.0) -> None:
        """A handler long enough to be running when the primary is killed."""
        start = time.time()
        time.sleep(seconds)
        _record("fo.slow", start)

    @app.task(name="fo.hold", lease=60, max_attempts=3)
    def hold(seconds: float = 8.0) -> None:
        """Writes hold-<job>-<pid> at its start, then sleeps without looking at anything."""
        start = time.time()
        marker = _out() / f"hold-{duetime.current().job_id}-{os.getpid()}"
        marker.write_text(
            json.dumps({"start": start, "token": str(duetime.current().fencing_token)})
        )
        time.sleep(seconds)
        _record("fo.hold", start)

    @app.schedule("fo.tick", every="1s", timezone="UTC", misfire="skip")
    @app.task(name="fo.tick")
    def tick() -> None:
        _record("fo.tick", time.time())

    return app


def executions(out_dir: Path) -> list[dict[str, object]]:
    """Every execution recorded so far by every process (a half-written line is skipped)."""
    found: list[dict[str, object]] = []
    for path in sorted(out_dir.glob("exec-*.txt")):
        for line in path.read_text().splitlines():
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


app = make_app()
