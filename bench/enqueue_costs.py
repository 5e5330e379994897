"""Where an enqueue's cost is, on PostgreSQL (docs/performance.md, "Where the enqueue's cost
is"): a fresh database, migrated, then

- `--part layers`: one-job enqueues (`App.enqueue`), the client's CPU and wall time per call,
  and the same for parts of it: the request's checks (the `NewJob`); the store's enqueue of a
  `NewJob` made in the call (so the request's checks included); the store's pooled connection
  taken and given back in autocommit, with nothing run in it, and with the prepared
  `enqueue_one` statement run in it on a cursor of tuple rows and on the driver's own cursor
  (dict rows); psycopg alone running that statement on a connection of its own; and psycopg's
  `SELECT 1`. The parts run one after another, each on the same database;
- `--part indexes`: the wall time, from the client, of `insert_job_batch` of 1,000 jobs (a
  bulk enqueue's statement, prepared, in a transaction rolled back: the parameters sent, the
  statement run, its answer read; the median of `--reps`), into `duetime_jobs` and into
  copies of it (its columns, defaults, checks, foreign key and fillfactor) with no index, and
  with each of its indexes alone.

Prints one JSON line. Run each part a few times and take the medians:

    PYTHONPATH=src:. .venv/bin/python -m bench.enqueue_costs --part layers
    PYTHONPATH=src:. .venv/bin/python -m bench.enqueue_costs --part indexes
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import psycopg

from bench.dbs import DEFAULT_PG_URL, Servers


def per_call(calls: int, fn: Callable[[int], object]) -> dict[str, float]:
    """The client's CPU and wall time per call of fn(i), in microseconds: each the median of
    three rounds of `calls` calls, after a warm-up of a tenth of them."""
    for i in range(calls // 10):
        fn(i)
    cpus, walls = [], []
    for _ in range(3):
        c0, t0 = time.process_time(), time.perf_counter()
        for i in range(calls):
            fn(i)
        cpus.append((time.process_time() - c0) / calls * 1e6)
        walls.append((time.perf_counter() - t0) / calls * 1e6)
    return {
        "cpu_us": round(statistics.median(cpus), 1),
        "wall_us": round(statistics.median(walls), 1),
    }


def layers(app: Any, url: str, calls: int) -> dict[str, Any]:
    from duetime.client.lookup import new_job_of
    from duetime.store.sql.shared import job_params

    store = app.store
    driver = store.driver
    now = app.clock.now()
    new = new_job_of(app, "noop", {"i": 0}, {})
    [statement] = driver.statements("enqueue_one")
    params = driver.encode(
        {**job_params(0, new, now), "wake": driver.wake_payload(new.queue, new.due_at)}
    )

    def checkout(i: int) -> None:
        with driver.single():
            pass

    tuple_cursors: dict[int, Any] = {}

    def checkout_and_statement(i: int) -> None:
        with driver.single() as c:
            cur = tuple_cursors.get(id(c.native))
            if cur is None:
                cur = tuple_cursors[id(c.native)] = c.native.cursor()
            cur.execute(statement, params, prepare=True)
            cur.fetchall()

    def checkout_and_statement_dict(i: int) -> None:
        with driver.single() as c:
            cur = c.native.statement_cursor()
            cur.execute(statement, params, prepare=True)
            cur.fetchall()

    figures = {
        "app_enqueue": per_call(calls, lambda i: app.enqueue("noop", {"i": i})),
        "request": per_call(calls, lambda i: new_job_of(app, "noop", {"i": i}, {})),
        "store_enqueue": per_call(
            calls, lambda i: store.enqueue([new_job_of(app, "noop", {"i": i}, {})], now)
        ),
        "connection_checkout": per_call(calls, checkout),
        "connection_checkout_and_statement": per_call(calls, checkout_and_statement),
        "connection_checkout_and_statement_dict_rows": per_call(calls, checkout_and_statement_dict),
    }
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:

        def alone(i: int) -> None:
            cur.execute(statement, params, prepare=True)
            cur.fetchall()

        def select_1(i: int) -> None:
            cur.execute("SELECT 1", prepare=True)
            cur.fetchall()

        figures["psycopg_statement_alone"] = per_call(calls, alone)
        figures["psycopg_select_1"] = per_call(calls, select_1)
    return figures


def indexes(app: Any, url: str, reps: int) -> dict[str, Any]:
    [statement] = app.store.driver.statements("insert_job_batch")
    rows = [[{"i": i}, None, f"default/noop:{os.urandom(16).hex()}"] for i in range(1000)]
    params = {
        "rows": json.dumps(rows),
        "tenant": "default",
        "queue": "default",
        "task": "noop",
        "priority": 0,
        "due_at": app.clock.now(),
        "deadline_at": None,
        "status": "scheduled",
        "max_attempts": 3,
        "retry_base": 1.0,
        "retry_cap": 60.0,
        "lease_seconds": 30.0,
        "timeout_seconds": None,
        "request_hash": "",
        "now": app.clock.now(),
        "origin": None,
        "limits": None,
        "trace_context": None,
        "wake": None,
    }
    out: dict[str, Any] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        defs = [
            (name, sql)
            for name, sql in conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'duetime_jobs' "
                "ORDER BY indexname"
            )
        ]

        [(options,)] = conn.execute(
            "SELECT coalesce(array_to_string(reloptions, ', '), '') FROM pg_class "
            "WHERE oid = 'duetime_jobs'::regclass"
        )
        foreign = [
            sql
            for (sql,) in conn.execute(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conrelid = 'duetime_jobs'::regclass AND contype = 'f'"
            )
        ]

        def replaced(text: str, old: str, new: str) -> str:
            assert old in text, f"{old!r} not found in {text!r}"
            return text.replace(old, new)

        def timed(table: str) -> float:
            sql = replaced(statement, "INSERT INTO duetime_jobs ", f"INSERT INTO {table} ")
            times = []
            for _ in range(reps):
                with conn.transaction(force_rollback=True):
                    t0 = time.perf_counter()
                    conn.execute(sql, params, prepare=True)
                    times.append(time.perf_counter() - t0)
            return round(statistics.median(times) * 1e3, 2)

        out["duetime_jobs"] = timed("duetime_jobs")
        candidates: list[tuple[str, str | None]] = [("no index", None), *defs]
        for label, definition in candidates:
            conn.execute("DROP TABLE IF EXISTS bench_jobs_copy")
            conn.execute(
                "CREATE TABLE bench_jobs_copy (LIKE duetime_jobs INCLUDING ALL EXCLUDING INDEXES)"
                + (f" WITH ({options})" if options else "")
            )
            for constraint in foreign:
                conn.execute(f"ALTER TABLE bench_jobs_copy ADD {constraint}")
            if definition is not None:
                conn.execute(
                    replaced(
                        replaced(definition, f"INDEX {label} ", "INDEX "),
                        " public.duetime_jobs ",
                        " bench_jobs_copy ",
                    )
                )
            out[label] = timed("bench_jobs_copy")
        conn.execute("DROP TABLE bench_jobs_copy")
    return {"ms_per_1000_jobs": out}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--admin-url", default=DEFAULT_PG_URL)
    p.add_argument("--part", choices=["layers", "indexes"], default="layers")
    p.add_argument("--calls", type=int, default=2000, help="calls per round (layers)")
    p.add_argument("--reps", type=int, default=15, help="inserts per table (indexes)")
    p.add_argument("--tag", default="", help="a name for the tree under test, echoed")
    args = p.parse_args()

    import duetime

    db = Servers(pg_url=args.admin_url).create("postgres", f"duetime_enqueue_costs_{os.getpid()}")
    try:
        app = duetime.App(db.url)

        @app.task(name="noop")
        def noop(i: int) -> None:
            """Never run: the jobs are only enqueued."""

        try:
            app.migrate()
            if args.part == "layers":
                figures = layers(app, db.url, args.calls)
            else:
                figures = indexes(app, db.url, args.reps)
            print(json.dumps({"tag": args.tag, "part": args.part, **figures}))  # noqa: T201
        finally:
            app.close()
    finally:
        db.drop()


if __name__ == "__main__":
    main()
