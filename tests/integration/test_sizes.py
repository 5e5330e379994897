"""Bytes per finished job on PostgreSQL stay under the target (issue 22, docs/performance.md
"Bytes per job"): jobs with a 256-byte JSON payload, claimed and finished in batches as a
worker does, then a plain VACUUM; the bytes of the jobs and attempts tables, their TOAST and
every index, over the jobs. `make bench BENCH_WORKLOADS=bytes` measures the same with worker
processes at any size (bench/sizes.py)."""

from __future__ import annotations

import json
from contextlib import closing
from datetime import UTC, datetime

import pytest

from duetime.core.models import Outcome
from duetime.core.requests import TaskDefaults, build_new_job
from duetime.core.states import Event
from duetime.store import open_store
from kit import kit_named

JOBS = 2_000
PAYLOAD = 256  # bytes of compact JSON per job's arguments
BATCH = 50  # jobs claimed (and then finished) at once, as a worker at concurrency 10 claims ahead
TARGET = 1_000  # bytes per finished job (issue 22)
TABLES = ("duetime_jobs", "duetime_jobs_done", "duetime_attempts")  # docs/history-plan.md


def args_of(i: int) -> dict[str, object]:
    bare = len(json.dumps({"i": i, "pad": ""}, separators=(",", ":")))
    return {"i": i, "pad": "x" * (PAYLOAD - bare)}


def relation_sizes(conn: object) -> dict[str, int]:
    """Bytes of each table (main, free space and visibility maps), its TOAST and its indexes."""
    sizes: dict[str, int] = {}
    for table in TABLES:
        [(heap, toast)] = conn.execute(  # type: ignore[attr-defined]
            "SELECT pg_table_size(c.oid) - COALESCE(pg_total_relation_size("
            "NULLIF(c.reltoastrelid, 0)), 0), "
            "COALESCE(pg_total_relation_size(NULLIF(c.reltoastrelid, 0)), 0) "
            "FROM pg_class c WHERE c.oid = to_regclass(%s)",
            (table,),
        ).fetchall()
        sizes[table], sizes[f"{table} TOAST"] = int(heap), int(toast)
        for name, size in conn.execute(  # type: ignore[attr-defined]
            "SELECT i.relname, pg_relation_size(i.oid) FROM pg_index x "
            "JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = to_regclass(%s)",
            (table,),
        ).fetchall():
            sizes[str(name)] = int(size)
    return sizes


XFAIL = pytest.mark.xfail(
    strict=True,
    reason="measured 2,007 to 2,318 bytes per finished job with migration 17 (2026-12-02, "
    "load average 11 to 18; the same hour with schema 16: 1,905 to 2,654; 1,839 on a quieter "
    "machine after migration 16): the attempts' finishes are HOT updates now (389 to 393 "
    "bytes of attempts a job, 397 to 410 before), but every job's row (512 bytes with this "
    "payload) is written three times and no status change of a job can be a HOT update; "
    "since migration 24 (a success on its job's row: no attempt row) 1,556 and 1,592 at "
    "100,000 jobs (2026-12-03, 2,030 and 1,806 before it); the target needs the finished job "
    "out of the hot table (docs/performance.md)",
)


@XFAIL
def test_a_finished_job_takes_at_most_1000_bytes_on_postgresql(tmp_path: object) -> None:
    kit = kit_named("postgres")
    url = kit.fresh_url(tmp_path, drop=True)  # type: ignore[arg-type]
    store = open_store(url)
    try:
        store.migrate()
        now = datetime.now(UTC)
        for start in range(0, JOBS, 500):
            store.enqueue(
                [
                    build_new_job(
                        "sizes.noop", args_of(i), now=now, tenant="default", defaults=TaskDefaults()
                    )
                    for i in range(start, min(JOBS, start + 500))
                ],
                now,
            )
        finished = 0
        while True:
            now = datetime.now(UTC)
            claims = store.claim(worker_id="sizes", queues=None, limit=BATCH, now=now)
            if not claims:
                break
            applied = store.finish_many(
                [(c.lease, Outcome(Event.SUCCEED)) for c in claims], datetime.now(UTC)
            )
            finished += sum(applied)
    finally:
        store.close()
    assert finished == JOBS
    with closing(kit.connect(url)) as conn:
        for table in TABLES:
            conn.execute(f"VACUUM {table}")
        sizes = relation_sizes(conn)
    per_job = sum(sizes.values()) / JOBS
    breakdown = ", ".join(f"{k} {v / JOBS:.0f}" for k, v in sorted(sizes.items()) if v)
    assert per_job <= TARGET, f"{per_job:.0f} bytes per finished job: {breakdown}"
