"""A model of where a finished job's bytes and writes go, for issue 22's storage redesign
(docs/performance.md, "The history model"): raw SQL on copies of duetime's PostgreSQL tables,
one connection, no worker, so that two write patterns compare on the same machine in one run.

* `today`: duetime's pattern. A job row inserted `scheduled`; the claim updates it to
  `running` and inserts its attempt; the finish updates the job to `succeeded` and the
  attempt (copies of `duetime_jobs` with fillfactor 50 and of `duetime_attempts`, every index
  of both).
* `history`: the finished job leaves the hot table. The claim updates the job only (lease and
  generation on the job row); the finish deletes it from the hot table and inserts it, as it
  ended, into a history table (primary key, the retention index on `updated_at`, the listing
  index `(tenant, status, id)`), and writes the attempt once, at its outcome.
* `history_lean`: as `history`, without the listing index on the history table.

Each mode enqueues N jobs with a 256-byte JSON payload (1,000 a statement), then claims 100 at
a time (`FOR UPDATE SKIP LOCKED`, the claim's order) and finishes each batch in a transaction,
then runs a plain `VACUUM` of each table and reports bytes per job of every relation (heap,
TOAST, indexes: `pg_total_relation_size`) and the drain's rate. A model, not duetime: it
leaves out the worker, leases, NOTIFY and every statement a drain does not need; what it
shows is what each pattern writes.

    .venv/bin/python -m bench.history_model [-n 100000] [--modes today,history,history_lean]
        [--pg-url postgresql://postgres@127.0.0.1:5432/postgres]

It creates a fresh database (duetime_model_<pid>), migrates duetime's schema into it for the
tables' definitions, and drops it at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass, field

import psycopg

from bench.dbs import Servers
from duetime.store import open_store

PAYLOAD = json.dumps({"i": 0, "pad": "x" * 238}, separators=(",", ":"))  # 256 bytes
ENQUEUE_BATCH = 1000
CLAIM_BATCH = 100
MODES = ("today", "history", "history_lean")

_ENQUEUE = (
    "INSERT INTO m_jobs (tenant, queue, task, args, due_at, status, max_attempts, retry_base,"
    " retry_cap, lease_seconds, request_hash, business_key, created_at, updated_at)"
    " SELECT 'default', 'default', 'bench.noop', %s::jsonb, now(), 'scheduled', 5, 1, 300, 30,"
    " md5(g::text) || md5(g::text), 'bench.noop:' || md5(g::text) || md5(g::text),"
    " now(), now() FROM generate_series(%s::int, %s::int) AS g"
)
_CLAIM = (
    "WITH n AS (SELECT id FROM m_jobs WHERE status = 'scheduled'"
    " ORDER BY priority DESC, due_at, id LIMIT %s FOR UPDATE SKIP LOCKED)"
    " UPDATE m_jobs AS j SET status = 'running', generation = j.generation + 1,"
    " attempts = j.attempts + 1, claim_token = 7, updated_at = now()"
    " FROM n WHERE j.id = n.id RETURNING j.id"
)
_ATTEMPT_AT_CLAIM = (
    "INSERT INTO m_att (job_id, generation, worker_id, status, lease_expires_at, started_at,"
    " due_at, claim_token) SELECT id, generation, 'host:12345:abcdef', 'running',"
    " now() + interval '30 seconds', now(), due_at, 7 FROM m_jobs WHERE id = ANY(%s)"
)
_FINISH_JOB = (
    "UPDATE m_jobs SET status = 'succeeded', updated_at = now(), version = version + 1"
    " WHERE id = ANY(%s)"
)
_FINISH_ATTEMPT = (
    "UPDATE m_att SET status = 'succeeded', finished_at = now()"
    " WHERE job_id = ANY(%s) AND generation = 1"
)
_MOVE_TO_HISTORY = (
    "WITH d AS (DELETE FROM m_jobs WHERE id = ANY(%s) RETURNING *)"
    " INSERT INTO m_done SELECT (d).* FROM d"
)
_ATTEMPT_AT_OUTCOME = (
    "INSERT INTO m_att (job_id, generation, worker_id, status, lease_expires_at, started_at,"
    " finished_at, due_at, claim_token) SELECT unnest(%s::bigint[]), 1, 'host:12345:abcdef',"
    " 'succeeded', now(), now(), now(), now(), 7"
)


@dataclass
class Result:
    mode: str
    n: int
    drain_s: float
    claim_s: float
    finish_s: float
    relations: dict[str, int] = field(default_factory=dict)  # relation -> bytes

    def per_job(self, name: str) -> float:
        return self.relations[name] / self.n

    @property
    def total(self) -> float:
        return sum(self.relations.values()) / self.n


def _tables(conn: psycopg.Connection[tuple[object, ...]], mode: str) -> list[str]:
    conn.execute("DROP TABLE IF EXISTS m_jobs, m_att, m_done CASCADE")
    conn.execute(
        "CREATE TABLE m_jobs (LIKE duetime_jobs INCLUDING DEFAULTS INCLUDING INDEXES)"
        " WITH (fillfactor = 50)"
    )
    conn.execute("CREATE TABLE m_att (LIKE duetime_attempts INCLUDING DEFAULTS INCLUDING INDEXES)")
    if mode == "today":
        conn.execute("ALTER TABLE m_att SET (fillfactor = 50)")  # as migration 17
        return ["m_jobs", "m_att"]
    conn.execute("CREATE TABLE m_done (LIKE duetime_jobs INCLUDING DEFAULTS)")
    conn.execute("ALTER TABLE m_done ADD PRIMARY KEY (id)")
    conn.execute("CREATE INDEX m_done_updated ON m_done (updated_at)")
    if mode == "history":
        conn.execute("CREATE INDEX m_done_listing ON m_done (tenant, status, id)")
    return ["m_jobs", "m_att", "m_done"]


def run(url: str, mode: str, n: int) -> Result:
    with psycopg.connect(url, autocommit=True) as conn:
        tables = _tables(conn, mode)
        for start in range(0, n, ENQUEUE_BATCH):
            conn.execute(_ENQUEUE, (PAYLOAD, start, min(start + ENQUEUE_BATCH, n) - 1))
        claim_s = finish_s = 0.0
        began = time.monotonic()
        while True:
            t0 = time.monotonic()
            with conn.transaction():
                ids = [r[0] for r in conn.execute(_CLAIM, (CLAIM_BATCH,)).fetchall()]
                if ids and mode == "today":
                    conn.execute(_ATTEMPT_AT_CLAIM, (ids,))
            t1 = time.monotonic()
            claim_s += t1 - t0
            if not ids:
                break
            with conn.transaction():
                if mode == "today":
                    conn.execute(_FINISH_JOB, (ids,))
                    conn.execute(_FINISH_ATTEMPT, (ids,))
                else:
                    conn.execute(_MOVE_TO_HISTORY, (ids,))
                    conn.execute(_ATTEMPT_AT_OUTCOME, (ids,))
            finish_s += time.monotonic() - t1
        drain_s = time.monotonic() - began
        result = Result(mode, n, drain_s, claim_s, finish_s)
        for table in tables:
            conn.execute(f"VACUUM {table}")
            heap = conn.execute("SELECT pg_table_size(%s::regclass)", (table,)).fetchone()
            result.relations[f"{table} (heap, TOAST)"] = int(heap[0]) if heap else 0
            for name, size in conn.execute(
                "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid)"
                " FROM pg_index WHERE indrelid = %s::regclass ORDER BY 1",
                (table,),
            ).fetchall():
                result.relations[str(name)] = int(size)
        return result


def table(results: list[Result]) -> str:
    names = sorted({k for r in results for k in r.relations})
    head = "| bytes per finished job | " + " | ".join(r.mode for r in results) + " |"
    lines = [head, "|---" * (len(results) + 1) + "|"]
    lines.append("| **total** | " + " | ".join(f"**{r.total:,.0f}**" for r in results) + " |")
    for name in names:
        cells = [f"{r.per_job(name):,.0f}" if name in r.relations else "" for r in results]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append(
        "| drain, jobs/s (1 connection) | "
        + " | ".join(f"{r.n / r.drain_s:,.0f}" for r in results)
        + " |"
    )
    lines.append(
        "| of which claims, finishes (s) | "
        + " | ".join(f"{r.claim_s:.1f}, {r.finish_s:.1f}" for r in results)
        + " |"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=100_000, help="jobs per mode (100,000)")
    parser.add_argument("--modes", default=",".join(MODES), help="some of " + ",".join(MODES))
    parser.add_argument(
        "--pg-url", default="postgresql://postgres@127.0.0.1:5432/postgres", help="admin URL"
    )
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown or args.n < CLAIM_BATCH:
        parser.error(f"modes are some of {', '.join(MODES)}; -n at least {CLAIM_BATCH}")
    servers = Servers(pg_url=args.pg_url)
    url = servers.create("postgres", f"duetime_model_{os.getpid()}").url
    try:
        store = open_store(url)
        try:
            store.migrate()
        finally:
            store.close()
        results = [run(url, mode, args.n) for mode in modes]
        print(table(results))  # noqa: T201 - a command's output
    finally:
        servers.drop_all()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
