"""An enqueue script to profile (docs/performance.md): N jobs of the bench task into a store,
one call each (`--mode single`) or through enqueue_many (`--mode bulk`).

    PYTHONPATH=bench:. .venv/bin/python bench/profile_enqueue.py --url URL --jobs 2000

For PostgreSQL and MariaDB the database must exist and be migrated (`duetime migrate`).
"""

from __future__ import annotations

import argparse
import logging
import time

from bench.bench_app import TASK, app
from bench.common import chunks, payloads

log = logging.getLogger("bench.profile")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--url", required=True, help="database URL, e.g. sqlite:///prof.db")
    p.add_argument("--jobs", type=int, default=2000)
    p.add_argument("--mode", choices=["single", "bulk"], default="single")
    p.add_argument("--batch", type=int, default=1000, help="jobs per enqueue_many call")
    args = p.parse_args()
    # duetime's own INFO lines (one per job) stay off, as in the benchmark's workers
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    log.setLevel(logging.INFO)
    app.database_url = args.url
    app.store  # noqa: B018 - open the store before the loop
    t0, cpu0 = time.perf_counter(), time.process_time()
    if args.mode == "single":
        for a in payloads(args.jobs):
            app.enqueue(TASK, a)
    else:
        for offset, size in chunks(args.jobs, args.batch):
            app.enqueue_many(TASK, payloads(size, offset))
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    log.info(
        "%d jobs (%s) in %.2f s: %.0f jobs/s, %.1f us of this process's CPU per job",
        args.jobs,
        args.mode,
        seconds,
        args.jobs / seconds,
        cpu / args.jobs * 1e6,
    )
    app.close()


if __name__ == "__main__":
    main()
