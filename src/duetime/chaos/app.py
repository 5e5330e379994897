"""The chaos run's tasks: every execution is logged before its effect, effects apply once.

Each handler first appends a row to `chaos_executions` on its own autocommit connection (so the
execution is on record even if the attempt later loses its lease), may call a simulated
external provider that deduplicates by business key (`chaos_provider`, every call logged in
`chaos_provider_calls`), and applies its local effect (`chaos_effects`) inside
`duetime.current().transaction()`, the fenced completion transaction.

Run by `duetime worker --app duetime.chaos.app:app --database-url ...` (PostgreSQL only).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg

import duetime

SCHEMA = """
CREATE TABLE IF NOT EXISTS chaos_accepted (
    job_id bigint PRIMARY KEY,
    kind text NOT NULL,
    task text NOT NULL,
    due_at timestamptz NOT NULL,
    deadline_at timestamptz,
    accepted_at timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS chaos_executions (
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL,
    generation bigint NOT NULL,
    attempt integer NOT NULL,
    business_key text NOT NULL,
    task text NOT NULL,
    kind text NOT NULL,
    pid integer NOT NULL,
    started_at timestamptz NOT NULL,
    due_at timestamptz NOT NULL,
    nominal_at timestamptz,
    db_started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    execution_key text UNIQUE  -- one per execution: a retried insert of it adds no row
);
CREATE TABLE IF NOT EXISTS chaos_effects (
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL,
    generation bigint NOT NULL,
    business_key text NOT NULL,
    pid integer NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS chaos_provider (
    business_key text PRIMARY KEY,
    job_id bigint NOT NULL,
    generation bigint NOT NULL,
    charged_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS chaos_provider_calls (
    id bigserial PRIMARY KEY,
    business_key text NOT NULL,
    job_id bigint NOT NULL,
    generation bigint NOT NULL,
    deduplicated boolean NOT NULL,
    called_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS chaos_faults (
    id bigserial PRIMARY KEY,
    kind text NOT NULL,
    pid integer,
    at timestamptz NOT NULL,
    detail text NOT NULL DEFAULT ''
);
"""

# tasks whose success applies a local effect through the completion transaction
EFFECT_TASKS = (
    "chaos.effect", "chaos.slow", "chaos.flaky", "chaos.provider", "chaos.tick", "chaos.posting"
)  # fmt: skip
PROVIDER_TASKS = ("chaos.provider",)

FAST_RETRY = duetime.RetryPolicy(base=0.5, cap=2.0)
MAX_ATTEMPTS = 30  # kills and outages cost attempts; the run is about effects, not budgets

app = duetime.App()
_local = threading.local()


def create_tables(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(SCHEMA)


def _side_connection() -> psycopg.Connection[Any]:
    """This thread's autocommit connection for the execution log and the provider."""
    conn: psycopg.Connection[Any] | None = getattr(_local, "conn", None)
    if conn is None or conn.closed or conn.broken:
        conn = psycopg.connect(app.database_url, autocommit=True, connect_timeout=5)
        _local.conn = conn
    return conn


def _side_write(sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Run one autocommit statement, reconnecting while the database restarts (up to ~15 s);
    raise if it never works (the attempt then fails and is retried)."""
    delay = 0.2
    deadline = time.monotonic() + 15
    while True:
        try:
            cur = _side_connection().execute(sql, params)
            return cur.fetchall() if cur.description else []
        except psycopg.OperationalError:
            conn = getattr(_local, "conn", None)
            if conn is not None:
                conn.close()
            _local.conn = None
            if time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


def log_execution(
    row: tuple[int, int, int, str, str, str, int],
    due_at: datetime,
    nominal_at: datetime | None,
    key: str | None = None,
) -> str:
    """Append one execution (job id, generation, attempt, business key, task, kind, pid) to
    chaos_executions under `key` (a fresh one by default) and return the key. Its insert is
    retried when the connection drops; if the first had committed (its answer lost in a
    promotion or a partition), the retry adds nothing: one execution stays one row."""
    key = key or uuid.uuid4().hex
    _side_write(
        "INSERT INTO chaos_executions (job_id, generation, attempt, business_key, task, kind,"
        " pid, started_at, due_at, nominal_at, execution_key)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (execution_key) DO NOTHING",
        (*row, datetime.now(UTC), due_at, nominal_at, key),
    )
    return key


def _begin(kind: str) -> duetime.AttemptContext:
    """Log this execution, before any effect. started_at is this worker's clock (perhaps skewed
    on purpose); db_started_at, the database's, is what the checker judges early starts by."""
    ctx = duetime.current()
    row = (
        ctx.job_id, ctx.generation, ctx.attempt, ctx.business_key, ctx.task, kind, os.getpid()
    )  # fmt: skip
    log_execution(row, ctx.due_at, ctx.nominal_at)
    return ctx


def _apply(ctx: duetime.AttemptContext) -> None:
    """The local effect, committed with the attempt's success (fenced by its generation)."""
    with ctx.transaction() as conn:
        conn.execute(
            "INSERT INTO chaos_effects (job_id, generation, business_key, pid)"
            " VALUES (%s, %s, %s, %s)",
            (ctx.job_id, ctx.generation, ctx.business_key, os.getpid()),
        )


def _call_provider(ctx: duetime.AttemptContext) -> None:
    """A simulated external provider that deduplicates requests by idempotency key."""
    rows = _side_write(
        "INSERT INTO chaos_provider (business_key, job_id, generation) VALUES (%s, %s, %s)"
        " ON CONFLICT (business_key) DO NOTHING RETURNING business_key",
        (ctx.business_key, ctx.job_id, ctx.generation),
    )
    _side_write(
        "INSERT INTO chaos_provider_calls (business_key, job_id, generation, deduplicated)"
        " VALUES (%s, %s, %s, %s)",
        (ctx.business_key, ctx.job_id, ctx.generation, not rows),
    )


def effect(n: int, kind: str) -> None:
    _apply(_begin(kind))


def slow(n: int, kind: str, seconds: float) -> None:
    ctx = _begin(kind)
    time.sleep(seconds)  # on purpose not stopping when the lease is lost: fencing must hold
    _apply(ctx)


def flaky(n: int, kind: str) -> None:
    ctx = _begin(kind)
    if ctx.attempt == 1:
        raise RuntimeError("chaos: the first attempt fails on purpose")
    _apply(ctx)


def doomed(n: int, kind: str) -> None:
    _begin(kind)
    raise duetime.PermanentError("chaos: this job can never succeed")


def provider(n: int, kind: str, pause: float = 0.0) -> None:
    ctx = _begin(kind)
    _call_provider(ctx)
    time.sleep(pause)  # a window where a crash leaves the charge made but the job not done
    _apply(ctx)


def posting(n: int, kind: str, account: str) -> None:
    """A job of the sequence `account` (the task's template, --sequences): a kind ending in
    "doomed" dies (and holds its sequence until the run's operator dismisses it), one ending
    in "flaky" fails its first attempt."""
    ctx = _begin(kind)
    if kind.endswith("doomed"):
        raise duetime.PermanentError("chaos: this posting can never succeed")
    if kind.endswith("flaky") and ctx.attempt == 1:
        raise RuntimeError("chaos: the first attempt fails on purpose")
    _apply(ctx)


def tick(kind: str = "recurring") -> None:
    _apply(_begin(kind))


# registered by call rather than decorator, so the functions keep their types
app.task(effect, name="chaos.effect", lease=3, retry=FAST_RETRY, max_attempts=MAX_ATTEMPTS)
app.task(slow, name="chaos.slow", lease=2, retry=FAST_RETRY, max_attempts=MAX_ATTEMPTS)
app.task(flaky, name="chaos.flaky", lease=3, retry=FAST_RETRY, max_attempts=MAX_ATTEMPTS)
app.task(doomed, name="chaos.doomed", lease=3, retry=FAST_RETRY, max_attempts=MAX_ATTEMPTS)
app.task(provider, name="chaos.provider", lease=2, retry=FAST_RETRY, max_attempts=MAX_ATTEMPTS)
app.task(
    posting, name="chaos.posting", lease=3, retry=FAST_RETRY, max_attempts=MAX_ATTEMPTS,
    sequence="{account}", sequence_on_dead="hold",
)  # fmt: skip
app.task(tick, name="chaos.tick", lease=3, retry=FAST_RETRY, max_attempts=MAX_ATTEMPTS)
