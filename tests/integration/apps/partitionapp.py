"""The app of the partition tests (test_partition.py): a handler whose local effect is written
in its completion transaction, with points the test times a network cut against.

`partition.effect(hold=...)`, on the files of DUETIME_IT_OUT:
- writes `started-<job_id>-<attempt>` ({"pid"}) when it starts;
- hold="before": then waits for `go-<job_id>` before it opens its completion transaction (the
  cut comes between statements);
- opens `duetime.current().transaction()`, adds 1 to `partition_effects.n` of its job (an upsert:
  the row stays locked until the transaction ends) and writes `intxn-<job_id>-<attempt>`;
- hold="inside": waits for `enter-<job_id>` before it opens the transaction, then for
  `go-<job_id>` inside it (the cut comes in the middle of it, its row lock held);
- writes `committed-<job_id>-<attempt>` when the block committed, or
  `refused-<job_id>-<attempt>` ({"error"}) when it raised, and raises again.
Only attempt 1 holds; a later attempt runs straight through.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import duetime
from duetime import App, RetryPolicy

OUT_ENV = "DUETIME_IT_OUT"
LEASE_S = 3.0
HOLD_LIMIT_S = 120.0


def _out() -> Path:
    folder = os.environ.get(OUT_ENV)
    if not folder:
        raise RuntimeError(f"{OUT_ENV} is not set: the partition app has nowhere to write")
    return Path(folder)


def _marker(kind: str, **body: object) -> None:
    ctx = duetime.current()
    final = _out() / f"{kind}-{ctx.job_id}-{ctx.attempt}"
    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    tmp.write_text(
        json.dumps({"pid": os.getpid(), "at": time.time(), "token": ctx.fencing_token, **body})
    )
    tmp.rename(final)


def _wait_for_go(job_id: int, kind: str = "go") -> None:
    go = _out() / f"{kind}-{job_id}"
    deadline = time.monotonic() + HOLD_LIMIT_S
    while not go.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {go.name} within {HOLD_LIMIT_S:g}s")
        time.sleep(0.05)


def _upsert(conn: Any, job_id: int, attempt: int) -> None:
    """The effect; its row stays locked until the transaction ends."""
    params = {"job": job_id, "attempt": attempt, "pid": os.getpid()}
    if type(conn).__module__.startswith("pymysql"):  # MariaDB/MySQL
        with conn.cursor() as cur:
            cur.execute(
                "INSERT INTO partition_effects (job_id, n, attempt, pid) "
                "VALUES (%(job)s, 1, %(attempt)s, %(pid)s) ON DUPLICATE KEY UPDATE "
                "n = n + 1, attempt = %(attempt)s, pid = %(pid)s",
                params,
            )
        return
    conn.execute(
        "INSERT INTO partition_effects (job_id, n, attempt, pid) "
        "VALUES (%(job)s, 1, %(attempt)s, %(pid)s) ON CONFLICT (job_id) DO UPDATE "
        "SET n = partition_effects.n + 1, attempt = %(attempt)s, pid = %(pid)s",
        params,
    )


def make_app(database_url: str | None = None) -> App:
    app = App(database_url)

    # a short lease and backoff: a lost attempt is taken over within a few seconds
    @app.task(
        name="partition.effect",
        lease=LEASE_S,
        max_attempts=5,
        retry=RetryPolicy(base=0.2, cap=0.5),
    )
    def effect(hold: str = "") -> None:
        ctx = duetime.current()
        holds = ctx.attempt == 1 and hold
        _marker("started")
        if holds == "before":
            _wait_for_go(ctx.job_id)
        if holds == "inside":  # the test opens the way when it is ready to cut
            _wait_for_go(ctx.job_id, "enter")
        try:
            with ctx.transaction() as conn:
                _upsert(conn, ctx.job_id, ctx.attempt)
                _marker("intxn")
                if holds == "inside":
                    _wait_for_go(ctx.job_id)
        except Exception as exc:
            _marker("refused", error=f"{type(exc).__name__}: {exc}"[:300])
            raise
        _marker("committed")

    return app


app = make_app()
