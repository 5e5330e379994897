"""What limits per dependency cost the claim path: drain N no-op jobs with W worker processes
(10 slots each) on one store, in three modes measured in the same run:

- off: no limit exists (the claim statement of old, the fast path);
- other: a limit exists on a key these jobs do not carry (every claim takes the limited path);
- carried: the jobs carry a key whose limits never bind (concurrency 10,000, 1,000,000/s).

    python -m bench.limits_cost --url postgresql://postgres@127.0.0.1:5432/dbname --jobs 5000

Prints jobs per second per mode (the median of --runs). The database is emptied between runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.limits_app import register
from duetime import App
from duetime.core.limits import LimitSettings, parse_rate
from duetime.core.models import JobFilter
from duetime.core.states import JobStatus

HERE = Path(__file__).resolve().parent


def drain(url: str, mode: str, jobs: int, workers: int) -> float:
    app = App(url)
    register(app)  # so the jobs carry the task's limit keys
    try:
        app.migrate()
        for status in app.limits():
            app.delete_limit(status.settings.key)
        if mode == "other":
            app.set_limit("unrelated", concurrency=5)
        if mode == "carried":
            app.store.set_limit(
                LimitSettings("dep", rate=parse_rate("1000000/s"), concurrency=10_000),
                app.clock.now(),
            )
        task = "cost.limited" if mode == "carried" else "cost.free"
        app.enqueue_many(task, [{"i": i} for i in range(jobs)])
        env = {**os.environ, "PYTHONPATH": f"{HERE.parent}:{HERE}", "DUETIME_DATABASE_URL": url}
        command = [
            str(Path(sys.executable).with_name("duetime")),
            "worker",
            "--app",
            "limits_app:app",
            "--concurrency",
            "10",
            "--log-level",
            "WARNING",
            "--no-planner",
            "--poll-interval",
            "0.05s",
        ]
        started = time.monotonic()
        procs = [subprocess.Popen(command, env=env) for _ in range(workers)]
        try:
            while True:
                counts = {c.status: c.count for c in app.store.job_counts(None) if c.count}
                left = sum(n for s, n in counts.items() if s != JobStatus.SUCCEEDED)
                if left == 0:
                    break
                time.sleep(0.05)
            elapsed = time.monotonic() - started
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(30)
        done = app.store.list_jobs(JobFilter(task=task, status=JobStatus.SUCCEEDED, limit=1))
        assert done, "nothing ran"
        app.store.prune(app.clock.now().replace(year=2100), jobs * 2)
        return jobs / elapsed
    finally:
        app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="an empty (or throwaway) database")
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[float]] = {"off": [], "other": [], "carried": []}
    for _ in range(args.runs):
        for mode in results:  # interleaved: the machine's load falls on every mode alike
            results[mode].append(drain(args.url, mode, args.jobs, args.workers))
    for mode, rates in results.items():
        runs = ", ".join(f"{r:.0f}" for r in rates)
        sys.stdout.write(f"{mode:8} {statistics.median(rates):8.0f} jobs/s  (runs: {runs})\n")


if __name__ == "__main__":
    main()
