"""What one read of the stats' samples costs (docs/performance.md, "The successes sampled by
their end"): a fresh PostgreSQL database holding `--jobs` successes in the history table,
started one by one over the last hour (distinct instants) and each ended up to 2 s after its
start, then `Store.attempt_samples(None, now - 1 hour, --limit)` (what `duetime stats`,
`GET /v1/stats`, the dashboard's overview and `/metrics` read) timed `--runs` times, from the
call to its list of samples. Prints one JSON line: the median, least and greatest wall time
in ms, and how many samples came back.

Compare two trees by alternating them (another tree's duetime on PYTHONPATH):

    for r in 1 2; do
        PYTHONPATH=/tmp/main/src:. .venv/bin/python -m bench.samples_cost --tag main
        PYTHONPATH=src:. .venv/bin/python -m bench.samples_cost --tag branch
    done
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from datetime import UTC, datetime, timedelta

import psycopg

from bench.dbs import DEFAULT_PG_URL, Servers
from duetime.store import open_store

FILL = (
    "INSERT INTO duetime_jobs_done (id, tenant, queue, task, args, priority, due_at, status, "
    "version, attempts, max_attempts, generation, retry_base, retry_cap, lease_seconds, "
    "request_hash, business_key, created_at, updated_at, attempt_id, worker_id, "
    "lease_expires_at, started_at, claim_token) "
    "SELECT k, 'default', 'default', 't', '{}', 0, s, 'succeeded', 1, 1, 3, 1, 1, 60, 30, '', "
    "'default/t:' || k, s, s + random() * interval '2 seconds', k, 'w', s, s, k "
    "FROM (SELECT k, %(now)s::timestamptz - (k::float8 / %(n)s) * interval '1 hour' AS s "
    "FROM generate_series(1, %(n)s) AS k) AS g"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=DEFAULT_PG_URL, help="a PostgreSQL server (any db)")
    parser.add_argument(
        "--database", default=None, help="its name (default: bench_samples_cost_<pid>)"
    )
    parser.add_argument("--jobs", type=int, default=300_000)
    parser.add_argument("--limit", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--tag", default="")
    args = parser.parse_args()

    servers = Servers(pg_url=args.url)
    url = servers.create("postgres", args.database or f"bench_samples_cost_{os.getpid()}").url
    try:
        store = open_store(url)
        try:
            store.migrate()
            now = datetime.now(UTC)
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(FILL, {"now": now, "n": args.jobs})
                conn.execute("VACUUM ANALYZE duetime_jobs_done")
            times = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                samples = store.attempt_samples(None, now - timedelta(hours=1), args.limit)
                times.append((time.perf_counter() - t0) * 1000)
        finally:
            store.close()
    finally:
        servers.drop_all()
    figures = {
        "tag": args.tag,
        "jobs": args.jobs,
        "limit": args.limit,
        "samples": len(samples),
        "ms_median": round(statistics.median(times), 1),
        "ms_min": round(min(times), 1),
        "ms_max": round(max(times), 1),
    }
    print(json.dumps(figures))  # noqa: T201 - the script's output


if __name__ == "__main__":
    main()
