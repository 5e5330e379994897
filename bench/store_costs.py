"""What a claim and a finish cost, from the store layer alone (docs/performance.md, "One
statement per finish batch"): a fresh PostgreSQL database, N no-op jobs enqueued, then claims
of LIMIT jobs, each followed (`--mode finish`) by the finish of its jobs in one batch, until
none is left; `--mode looks`: claims alone, each making a saturated worker's fairness looks
(a lower priority class, other tenants: docs/flow-control.md), as every ninth claim of a
drain does (docs/performance.md, "A claim whose fairness looks find nothing is the plain
claim"). Prints one JSON line: the client's CPU and wall time per job of the finishes,
the database's CPU (the backends of the test database, /proc/<pid>/stat) and the wall time per
job of the whole loop, and per claim.

Compare two trees by alternating them run by run (another tree's duetime on PYTHONPATH):

    for r in 1 2 3; do
        PYTHONPATH=/tmp/main/src:. .venv/bin/python -m bench.store_costs --tag main
        PYTHONPATH=src:. .venv/bin/python -m bench.store_costs --tag branch
    done
"""

from __future__ import annotations

import argparse
import json
import os
import time
from datetime import UTC, datetime

import psycopg

from bench.dbs import DEFAULT_PG_URL, _with_path


def backend_cpu(admin: psycopg.Connection[tuple[object, ...]], db: str) -> float:
    """Seconds of CPU the backends connected to `db` have used (utime + stime)."""
    total = 0
    for (pid,) in admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", (db,)
    ):
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--admin-url", default=DEFAULT_PG_URL)
    p.add_argument("--jobs", type=int, default=20000)
    p.add_argument("--limit", type=int, default=100, help="jobs per claim (and per finish)")
    p.add_argument("--mode", choices=["finish", "claim", "looks"], default="finish")
    p.add_argument("--tag", default="", help="a name for the tree under test, echoed")
    p.add_argument(
        "--then",
        action="append",
        default=[],
        help="SQL run on the test database after its migration (an experiment's change of "
        "the schema, e.g. an index or a constraint dropped); repeatable",
    )
    args = p.parse_args()

    import duetime
    from duetime.core.flow.rotation import TenantRotation
    from duetime.core.flow.share import PriorityShare
    from duetime.core.models import Outcome
    from duetime.core.states import Event
    from duetime.store.base import ClaimPlan

    db = f"duetime_store_costs_{os.getpid()}"
    admin = psycopg.connect(args.admin_url, autocommit=True)
    admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    admin.execute(f'CREATE DATABASE "{db}"')
    app = duetime.App(_with_path(args.admin_url, db))

    @app.task(name="noop")
    def noop(i: int) -> None:
        """Never run: the jobs are claimed and finished by this script."""

    try:
        app.migrate()
        if args.then:
            with psycopg.connect(_with_path(args.admin_url, db), autocommit=True) as conn:
                for sql in args.then:
                    conn.execute(sql)
        store = app.store
        for first in range(0, args.jobs, 1000):
            count = min(1000, args.jobs - first)
            app.enqueue_many("noop", [{"i": i} for i in range(first, first + count)])
        finish_wall = finish_cpu = 0.0
        jobs = claims = 0
        db_cpu, started = backend_cpu(admin, db), time.perf_counter()
        while True:
            plan = ClaimPlan()  # the plain claim's (Store.claim)
            if args.mode == "looks":  # a fresh policy looks at once
                plan = ClaimPlan(
                    per_class=max(1, args.limit // 10),
                    priorities=PriorityShare(),
                    rotation=TenantRotation(),
                )
            got = store.claim_planned(
                plan, worker_id="w", queues=None, limit=args.limit, now=datetime.now(UTC)
            ).claims
            if not got:
                break
            claims += 1
            jobs += len(got)
            if args.mode == "finish":
                items = [(c.lease, Outcome(Event.SUCCEED)) for c in got]
                t0, c0 = time.perf_counter(), time.process_time()
                store.finish_many(items, datetime.now(UTC))
                finish_wall += time.perf_counter() - t0
                finish_cpu += time.process_time() - c0
        wall, db_cpu = time.perf_counter() - started, backend_cpu(admin, db) - db_cpu
        figures = {
            "tag": args.tag,
            "mode": args.mode,
            "limit": args.limit,
            "jobs": jobs,
            "claims": claims,
            "db_cpu_us_per_job": round(db_cpu / jobs * 1e6, 1),
            "db_cpu_us_per_claim": round(db_cpu / claims * 1e6),
            "wall_us_per_job": round(wall / jobs * 1e6, 1),
            "wall_us_per_claim": round(wall / claims * 1e6),
            "then": args.then,
        }
        if args.mode == "finish":
            figures["finish_client_cpu_us_per_job"] = round(finish_cpu / jobs * 1e6, 1)
            figures["finish_wall_us_per_job"] = round(finish_wall / jobs * 1e6, 1)
        print(json.dumps(figures))  # noqa: T201 - the script's output
    finally:
        app.close()
        admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        admin.close()


if __name__ == "__main__":
    main()
