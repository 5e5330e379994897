"""The app of the limits integration test (test_limits_procs.py): tasks calling limited
dependencies. Workers load it with `--app limitsapp:app`; each handler appends
"<job_id> <start> <end>" (time.time(), measured inside the handler) to a file per process in
the folder named by DUETIME_IT_OUT."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import duetime
from duetime import App

_lock = threading.Lock()


def _record(start: float) -> None:
    end = time.time()
    folder = Path(os.environ["DUETIME_IT_OUT"])
    with _lock, open(folder / f"spans-{os.getpid()}.txt", "a") as f:
        f.write(f"{duetime.current().job_id} {start} {end}\n")


def make_app(database_url: str | None = None) -> App:
    app = App(database_url)

    @app.task(name="api.call", limits=["api"])
    def api_call(seconds: float) -> None:
        start = time.time()
        time.sleep(seconds)  # the dependency's response time: attempts overlap
        _record(start)

    @app.task(name="bucket.call", limits=["bucket"])
    def bucket_call() -> None:
        _record(time.time())

    @app.task(name="dep.call", limits=["dep"], max_attempts=3)
    def dep_call(first: bool = False) -> None:
        start = time.time()
        if first and duetime.current().attempt == 1:
            _record(start)
            raise duetime.Retry(after=1.5, reason="429", dependency=True)
        time.sleep(0.02)
        _record(start)

    @app.task(
        name="flaky.call",
        limits=["flaky"],
        max_attempts=20,
        retry=duetime.RetryPolicy(base=0.05, cap=0.1),
    )
    def flaky_call() -> None:
        """Fails while the file `down` exists in the output folder: the dependency is down."""
        start = time.time()
        if (Path(os.environ["DUETIME_IT_OUT"]) / "down").exists():
            raise RuntimeError("the dependency is down")
        time.sleep(0.5)  # a probe lasts long enough to see that nothing ran beside it
        _record(start)

    @app.task(
        name="budget.call",
        limits=["budget"],
        max_attempts=3,
        retry=duetime.RetryPolicy(base=0.05, cap=0.1),
    )
    def budget_call() -> None:
        """Every first attempt fails: each job needs one retry."""
        start = time.time()
        if duetime.current().attempt == 1:
            raise RuntimeError("a transient failure")
        _record(start)

    @app.task(name="outbox.call")
    def outbox_call(seconds: float) -> None:
        """Run from the broker (its queue in outbox mode): as api.call, without a key."""
        start = time.time()
        time.sleep(seconds)
        _record(start)

    @app.task(name="plain")
    def plain() -> None:
        _record(time.time())

    return app


app = make_app()
