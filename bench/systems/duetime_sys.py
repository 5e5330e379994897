"""duetime, on each of its stores: the orchestrator's description and the measured steps.

The steps run in duetime's own virtualenv (`.venv`):
    .venv/bin/python -m bench.systems.duetime_sys <step> '<json params>'
"""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import chunks, payloads, step_main
from bench.systems.base import Setting, System, Tuned

TASK = "bench.noop"  # registered by bench/bench_app.py
CONCURRENCY = 10
# `duetime worker --help`: "--concurrency: jobs run at once (default 10)". The worker has no
# claim-batch option: each claim asks for the free slots plus a prefetch of up to 10 x
# concurrency (Worker(prefetch=None)), so the claim batch follows the concurrency.
DEFAULT_CONCURRENCY = 10


def outbox_argvs(root: Path, broker_url: str) -> tuple[Any, Any]:
    """(worker argv, relay argv), each a function of the database URL, for the outbox
    workload: broker-fed workers and one `duetime relay`."""
    duetime_cli = root / ".venv" / "bin" / "duetime"

    def worker(url: str) -> list[str]:
        return [
            str(duetime_cli),
            "worker",
            "--app",
            "bench_app:app",
            "--database-url",
            url,
            "--concurrency",
            str(CONCURRENCY),
            "--broker-url",
            broker_url,
            "--log-level",
            "WARNING",
        ]

    def relay(url: str) -> list[str]:
        return [
            str(duetime_cli),
            "relay",
            "--database-url",
            url,
            "--broker-url",
            broker_url,
            "--log-level",
            "WARNING",
        ]

    return worker, relay


def make_system(store: str, root: Path) -> System:
    python = root / ".venv" / "bin" / "python"
    duetime_cli = root / ".venv" / "bin" / "duetime"

    def argv(concurrency: int | None) -> Any:
        def worker_argv(url: str) -> list[str]:
            flags = [] if concurrency is None else ["--concurrency", str(concurrency)]
            return [
                str(duetime_cli),
                "worker",
                "--app",
                "bench_app:app",
                "--database-url",
                url,
                *flags,
                "--log-level",
                "WARNING",
            ]

        return worker_argv

    def tune(setting: Setting) -> Tuned | None:
        if setting.kind == "defaults":
            return Tuned(argv(None), {"concurrency": DEFAULT_CONCURRENCY})
        if setting.kind == "sweep" and setting.concurrency is not None:
            return Tuned(argv(setting.concurrency), {"concurrency": setting.concurrency})
        return None  # the throttled row is pgqueuer's

    worker_argv = argv(CONCURRENCY)
    return System(
        name=f"duetime-{store}",
        kind="duetime",
        store=store,
        python=python,
        module="bench.systems.duetime_sys",
        worker_argv=worker_argv,
        # both tables: a job that ended moves to the history table (docs/history-plan.md)
        done_query="SELECT (SELECT count(*) FROM duetime_jobs WHERE status = 'succeeded') + "
        "(SELECT count(*) FROM duetime_jobs_done WHERE status = 'succeeded')",
        tune=tune,
    )


# -- steps (run in duetime's venv) -------------------------------------------------------------


def _app(url: str) -> Any:
    from bench.bench_app import app

    app.database_url = url
    app.store  # noqa: B018 - open (and for SQLite migrate) before any timing starts
    return app


def setup(p: dict[str, Any]) -> dict[str, Any]:
    import duetime

    applied = duetime.App(p["url"]).migrate()
    return {"migrations": applied}


def enqueue_bulk(p: dict[str, Any]) -> dict[str, Any]:
    """N jobs through App.enqueue_many, `batch` jobs a call (of `task`, default the bench
    task)."""
    app = _app(p["url"])
    task = p.get("task", TASK)
    pad = int(p.get("payload_bytes", 0))
    t0 = time.perf_counter()
    for offset, size in chunks(p["n"], p["batch"]):
        app.enqueue_many(task, payloads(size, offset, pad))
    seconds = time.perf_counter() - t0
    app.close()
    return {"seconds": seconds, "jobs": p["n"]}


def enqueue_single(p: dict[str, Any]) -> dict[str, Any]:
    """N jobs through App.enqueue, one call (one transaction) each."""
    app = _app(p["url"])
    args = payloads(p["n"])
    t0 = time.perf_counter()
    for a in args:
        app.enqueue(TASK, a)
    seconds = time.perf_counter() - t0
    app.close()
    return {"seconds": seconds, "jobs": p["n"]}


def enqueue_delayed(p: dict[str, Any]) -> dict[str, Any]:
    """One job per due instant (Unix seconds, ascending), each with App.enqueue(at=...)."""
    app = _app(p["url"])
    late = 0
    for i, due in enumerate(p["dues"]):
        app.enqueue(TASK, {"i": i}, at=datetime.fromtimestamp(due, UTC))
        if time.time() >= due:
            late += 1
    app.close()
    return {"late": late, "finished_at": time.time()}


def enqueue_burst(p: dict[str, Any]) -> dict[str, Any]:
    """M jobs all due at one instant, through enqueue_many(at=...)."""
    app = _app(p["url"])
    at = datetime.fromtimestamp(p["at"], UTC)
    for offset, size in chunks(p["m"], p["batch"]):
        app.enqueue_many(TASK, payloads(size, offset), at=at)
    app.close()
    return {"finished_at": time.time()}


def outbox_setup(p: dict[str, Any]) -> dict[str, Any]:
    """The outbox workload: the bench task's queue in outbox mode, its broker queue empty."""
    import asyncio

    from duetime.runtime.outbox.broker import Broker

    app = _app(p["url"])
    queue = app.tasks[TASK].defaults.queue
    app.set_queue(queue, dispatch="outbox")
    app.close()

    async def empty() -> None:
        async with Broker(p["broker_url"]) as broker:
            await broker.delete(queue)

    asyncio.run(empty())
    return {"queue": queue}


FLOW_CAP = 1000  # a queue and a tenant concurrency far above any run's worker slots
FLOW_RATE = "1000000/s"  # a limit key's rate that never binds


def flow_setup(p: dict[str, Any]) -> dict[str, Any]:
    """The flow workload's controls (docs/flow-control.md), set before the jobs are enqueued:
    `cap` a concurrency cap on the bench task's queue and on its tenant that never binds,
    `weight` a weight of 2 on its tenant (claims take the weighted path), `limit` a limit on
    the key of bench_app's LIMITED_TASK (concurrency 1000, a rate that never binds; the
    workload enqueues that task), `all` every one of these."""
    from bench.bench_app import LIMIT_KEY

    app = _app(p["url"])
    queue = app.tasks[TASK].defaults.queue
    if p["setup"] in ("cap", "all"):
        app.set_queue(queue, concurrency=FLOW_CAP)
        app.set_tenant(app.tenant, concurrency=FLOW_CAP)
    if p["setup"] in ("weight", "all"):
        app.set_tenant(app.tenant, weight=2)
    if p["setup"] in ("limit", "all"):
        app.set_limit(LIMIT_KEY, rate=FLOW_RATE, concurrency=FLOW_CAP)
    flows = {
        "queue": [q.queue for q in app.queues() if q.concurrency is not None],
        "tenants": [(t.tenant, t.concurrency, t.weight) for t in app.tenants()],
        "limits": [s.settings.key for s in app.limits()],
    }
    app.close()
    return flows


def claim_latency(p: dict[str, Any]) -> dict[str, Any]:
    """Median time of Store.claim(limit=10) over `calls` calls, on a fresh store, while
    every call finds 10 due jobs."""
    from duetime.store import open_store

    app = _app(p["url"])
    limit = 10
    for offset, size in chunks(p["calls"] * limit + 1, 1000):  # + 1 for the warm-up
        app.enqueue_many(TASK, payloads(size, offset))
    app.close()
    store = open_store(p["url"])
    try:
        store.claim(worker_id="bench-warmup", queues=None, limit=1, now=datetime.now(UTC))
        times: list[float] = []
        claimed = 0
        for _ in range(p["calls"]):
            now = datetime.now(UTC)
            t0 = time.perf_counter()
            got = store.claim(worker_id="bench-claim", queues=None, limit=limit, now=now)
            times.append(time.perf_counter() - t0)
            claimed += len(got)
    finally:
        store.close()
    times.sort()
    return {
        "median_ms": statistics.median(times) * 1000,
        "p90_ms": times[int(0.9 * (len(times) - 1))] * 1000,
        "calls": len(times),
        "claimed": claimed,
    }


def fill_backlog(p: dict[str, Any]) -> dict[str, Any]:
    """PostgreSQL only: `future` jobs due a year from now and `finished` succeeded jobs, each
    with its attempt. One job of each kind is made through duetime itself (enqueue, claim,
    finish); the rest are copies of it made by INSERT ... SELECT, column for column, so the
    copies are whatever the current schema says a job and an attempt are (since migration 24
    a success is on its job's row: each copy gets an attempt id of its own, and no attempt
    row is copied, as the template has none)."""
    import psycopg

    from duetime.core.models import Outcome
    from duetime.core.states import Event

    app = _app(p["url"])
    t0 = time.perf_counter()
    future = app.enqueue(TASK, {"i": -1}, at=datetime.now(UTC) + timedelta(days=365))
    done = app.enqueue(TASK, {"i": -2})
    store = app.store
    claims = store.claim(worker_id="bench-backlog", queues=None, limit=1, now=datetime.now(UTC))
    if len(claims) != 1 or claims[0].job.id != done.id:
        raise RuntimeError("could not claim the template job")
    store.finish(claims[0].lease, Outcome(event=Event.SUCCEED), datetime.now(UTC))
    app.close()

    with psycopg.connect(p["url"], autocommit=True) as conn:

        def columns(table: str, skip: set[str]) -> list[str]:
            rows = conn.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = %s AND is_generated = 'NEVER' ORDER BY ordinal_position",
                (table,),
            ).fetchall()
            return [r[0] for r in rows if r[0] not in skip]

        # the finished template is in the history table once it has moved (docs/history-plan.md),
        # and so are its copies: ids from the jobs table's counter (the history table has none)
        [(moved,)] = conn.execute(
            "SELECT count(*) FROM duetime_jobs_done WHERE id = %s", (done.id,)
        ).fetchall()
        finished_table = "duetime_jobs_done" if moved else "duetime_jobs"
        job_names = columns("duetime_jobs", {"id"})
        job_cols = ", ".join(job_names)
        # each finished copy's success its own attempt id (where the template keeps it)
        next_id = "CASE WHEN attempt_id IS NOT NULL THEN nextval('duetime_attempts_id_seq') END"
        job_sel = ", ".join(next_id if c == "attempt_id" else c for c in job_names)
        attempt_cols = columns("duetime_attempts", {"id", "job_id"})
        attempt_list = ", ".join(attempt_cols)
        attempt_sel = ", ".join(f"a.{c}" for c in attempt_cols)
        step = 100_000
        for _, size in chunks(p["future"], step):
            conn.execute(
                f"INSERT INTO duetime_jobs ({job_cols}) SELECT {job_cols} "  # noqa: S608
                "FROM duetime_jobs, generate_series(1, %s) WHERE id = %s",
                (size, future.id),
            )
        for _, size in chunks(p["finished"], step):
            conn.execute(
                f"WITH new AS (INSERT INTO {finished_table} (id, {job_cols}) "  # noqa: S608
                f"SELECT nextval('duetime_jobs_id_seq'), {job_sel} "
                f"FROM {finished_table}, generate_series(1, %s) "
                "WHERE id = %s RETURNING id) "
                f"INSERT INTO duetime_attempts (job_id, {attempt_list}) "
                f"SELECT new.id, {attempt_sel} FROM new "
                "CROSS JOIN duetime_attempts a WHERE a.job_id = %s",
                (size, done.id, done.id),
            )
        conn.execute("VACUUM ANALYZE")
        # the fill's gigabyte of dirty pages is written now, not by the checkpointer during the
        # drain that follows: a backlog that built up over days has no such write pending
        conn.execute("CHECKPOINT")
        counts: dict[str, int] = dict(
            conn.execute(
                "SELECT status, count(*) FROM (SELECT status FROM duetime_jobs UNION ALL "
                "SELECT status FROM duetime_jobs_done) AS j GROUP BY status"
            ).fetchall()
        )
    return {"seconds": time.perf_counter() - t0, "counts": counts}


def pressure_enqueue(p: dict[str, Any]) -> dict[str, Any]:
    """The pressure workload's offered load (bench/pressure.py): the jobs of `task` (due now)
    that the schedule offers, sent every tick with App.enqueue_many (bench/pressure_offer.py
    runs the schedule)."""
    from bench.pressure_offer import offer

    app = _app(p["url"])
    try:
        return offer(p, lambda offset, size: app.enqueue_many(p["task"], payloads(size, offset)))
    finally:
        app.close()


def enqueue_fanout(p: dict[str, Any]) -> dict[str, Any]:
    """The fanout workload: `n` children and one callback depending on all of them, with
    App.group (one transaction)."""
    import duetime
    from bench.bench_app import FANOUT_CALLBACK, FANOUT_CHILD

    app = _app(p["url"])
    n = int(p["n"])
    t0 = time.perf_counter()
    group = app.group(
        [duetime.step(FANOUT_CHILD, {"i": i}) for i in range(n)],
        then=duetime.step(FANOUT_CALLBACK, {"n": n}),
    )
    seconds = time.perf_counter() - t0
    assert group.callback is not None
    app.close()
    return {"seconds": seconds, "children": n, "callback": group.callback.id}


def fanout_times(p: dict[str, Any]) -> dict[str, Any]:
    """The fanout workload's instants (epoch seconds, as the attempts recorded them): the
    children's first start and last end, and the callback's start and end, with its result."""
    from bench.bench_app import FANOUT_CHILD

    app = _app(p["url"])
    callback = app.get_job(int(p["callback"]))
    ends: list[float] = []
    starts: list[float] = []
    before: int | None = None
    while True:  # the children, newest first, 1000 a page, with their attempts
        page = app.list_jobs(task=FANOUT_CHILD, before_id=before, limit=1000, with_attempts=True)
        if not page:
            break
        for job in page:
            for a in job.attempt_history:
                starts.append(a.started_at.timestamp())
                if a.finished_at is not None:
                    ends.append(a.finished_at.timestamp())
        before = page[-1].id
    app.close()
    first = callback.attempt_history[0]
    return {
        "children": len(ends),
        "first_child_start": min(starts),
        "last_child_end": max(ends),
        "callback_start": first.started_at.timestamp(),
        "callback_end": first.finished_at.timestamp() if first.finished_at else None,
        "callback_status": str(callback.status),
        "callback_result": callback.result,
    }


STEPS = {
    "setup": setup,
    "enqueue_bulk": enqueue_bulk,
    "enqueue_single": enqueue_single,
    "enqueue_delayed": enqueue_delayed,
    "enqueue_burst": enqueue_burst,
    "outbox_setup": outbox_setup,
    "flow_setup": flow_setup,
    "claim_latency": claim_latency,
    "fill_backlog": fill_backlog,
    "pressure_enqueue": pressure_enqueue,
    "enqueue_fanout": enqueue_fanout,
    "fanout_times": fanout_times,
}

if __name__ == "__main__":
    step_main(STEPS)
