"""What a fleet of idle workers costs PostgreSQL beside a transaction held open
(docs/performance.md, "The reaper's turn"): into a fresh database, N jobs are enqueued,
claimed and finished while another connection holds a transaction open, so every index entry
those jobs left stays (as under the pressure workload's hold); then K `duetime worker`
processes run with nothing to do, and the backends of the database are measured for a while:
their CPU (/proc/<pid>/stat), the buffers they read (pg_stat_database) and the transactions
they committed, each per second.

Compare trees by giving each its source folder (another tree's duetime first on PYTHONPATH);
the runs alternate tree by tree for each K:

    git archive main --prefix=base/ | tar -x -C /tmp
    .venv/bin/python -m bench.fleet_idle --workers 1,4,8 --src main=/tmp/base/src,branch=src
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from bench.dbs import DEFAULT_PG_URL, _with_path
from bench.procs import stop_processes
from bench.store_costs import backend_cpu

ROOT = Path(__file__).resolve().parent.parent
BATCH = 2_500


def fill(url: str, jobs: int) -> None:
    """`jobs` no-op jobs enqueued, claimed and finished (in this process's duetime)."""
    from duetime.core.models import Outcome
    from duetime.core.requests import TaskDefaults, build_new_job
    from duetime.core.states import Event
    from duetime.store import open_store

    store = open_store(url)
    store.migrate()
    done = Outcome(Event.SUCCEED)
    left = jobs
    while left > 0:
        now = datetime.now(UTC)
        n = min(BATCH, left)
        store.enqueue(
            [
                build_new_job(
                    "bench.noop", {"i": 0}, now=now, tenant="default", defaults=TaskDefaults()
                )
                for _ in range(n)
            ],
            now,
        )
        while claims := store.claim(worker_id="fill", queues=None, limit=500, now=now):
            store.finish_many([(c.lease, done) for c in claims], now)
        left -= n
    store.close()


def one_run(admin_url: str, src: str, workers: int, jobs: int, seconds: float, hold: bool) -> dict:
    """One tree at one K, in a database of its own."""
    name = f"fleet_{os.getpid()}_{int(time.time() * 1000)}"
    admin = psycopg.connect(admin_url, autocommit=True)
    admin.execute(f'CREATE DATABASE "{name}"')
    url = _with_path(admin_url, name)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([src, str(ROOT / "bench"), str(ROOT)])
    env["DUETIME_DATABASE_URL"] = url
    held = None
    procs: list[subprocess.Popen[bytes]] = []
    try:
        subprocess.run(
            [str(ROOT / ".venv/bin/duetime"), "migrate"], env=env, check=True, capture_output=True
        )
        if hold:
            held = psycopg.connect(url)
            held.execute("SELECT txid_current()")
        code = f"from bench.fleet_idle import fill; fill({url!r}, {jobs})"
        subprocess.run([sys.executable, "-c", code], env=env, check=True)
        argv = [
            str(ROOT / ".venv/bin/duetime"),
            "worker",
            "--app",
            "bench_app:app",
            "--concurrency",
            "1",
            "--log-level",
            "WARNING",
        ]
        procs = [subprocess.Popen(argv, env=env, cwd=ROOT) for _ in range(workers)]
        time.sleep(8)  # started, registered, their first passes done

        def sample() -> tuple[float, int, int]:
            cpu = backend_cpu(admin, name)
            blocks, commits = admin.execute(
                "SELECT blks_hit + blks_read, xact_commit FROM pg_stat_database WHERE datname = %s",
                (name,),
            ).fetchone()
            return cpu, int(blocks), int(commits)

        admin.execute("SELECT pg_stat_clear_snapshot()")
        c0, b0, x0 = sample()
        t0 = time.monotonic()
        time.sleep(seconds)
        admin.execute("SELECT pg_stat_clear_snapshot()")
        c1, b1, x1 = sample()
        spent = time.monotonic() - t0
        return {
            "workers": workers,
            "cpu_per_s": round((c1 - c0) / spent, 4),
            "blocks_per_s": round((b1 - b0) / spent),
            "commits_per_s": round((x1 - x0) / spent, 1),
        }
    finally:
        stop_processes(procs, "duetime")
        if held is not None:
            held.close()
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=DEFAULT_PG_URL, help="PostgreSQL admin URL")
    parser.add_argument("--workers", default="1,4,8", help="K values")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--no-hold", action="store_true", help="no transaction held open")
    parser.add_argument("--src", default=f"this={ROOT / 'src'}", help="tag=folder,...")
    args = parser.parse_args()
    trees = dict(item.split("=", 1) for item in args.src.split(","))
    for k in [int(x) for x in args.workers.split(",")]:
        for tag, src in trees.items():
            got = one_run(args.url, src, k, args.jobs, args.seconds, not args.no_hold)
            print(json.dumps({"tree": tag, **got}), flush=True)  # noqa: T201 - the output


if __name__ == "__main__":
    main()
