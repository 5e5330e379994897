"""CPU per job of one duetime worker draining no-op jobs on PostgreSQL (docs/performance.md,
"A drain profiled"): the worker's CPU and its PostgreSQL backends' CPU per job, in us.

    PYTHONPATH=bench:. .venv/bin/python bench/cpu_per_job.py --jobs 20000 --runs 3

Each run: a fresh database, migrated; one `duetime worker --app bench_app:app --concurrency C`
started on it and left to settle (its start, the imports, is not counted); then N no-op jobs
enqueued in one transaction and drained. Counted from just before the enqueue until every job
has succeeded: the worker's utime + stime (/proc/<pid>/stat), and those of the PostgreSQL
backends of its connections (found by their application_name in pg_stat_activity). The drain's
wall time is its attempts' first start to last finish. The machine may be shared: CPU per job
is the figure to compare, wall time is not; the load average is printed beside it.

`--profile PREFIX` also attaches py-spy (`py-spy` beside this Python, else on PATH) to the
worker of each run for the drain, twice: every thread (PREFIX-C-RUN.all.txt) and only the
thread holding the GIL (.gil.txt), in py-spy's raw (collapsed stacks) format;
`--top FILE` prints a raw profile's top frames, by own samples and by samples under them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg

from bench.bench_app import TASK, app
from bench.common import payloads
from bench.dbs import DEFAULT_PG_URL, _with_path
from bench.procs import pause_probe

APP_NAME = "duetime-cpu-bench"  # the worker's connections, as pg_stat_activity names them
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of a process (None once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICK  # fields 14 and 15 of proc(5)


def backends(probe: psycopg.Connection[Any], db: str) -> dict[int, float]:
    """The CPU seconds so far of each backend of the worker's connections."""
    pids = [
        r[0]
        for r in probe.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name = %s",
            (db, APP_NAME),
        ).fetchall()
    ]
    found = {pid: cpu_seconds(pid) for pid in pids}
    return {pid: s for pid, s in found.items() if s is not None}


def say(line: str = "") -> None:
    """A line of the report, on stdout (it is the script's output, not a log)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def commits(probe: psycopg.Connection[Any], db: str) -> int:
    """Transactions committed on `db` so far (pg_stat_database, as of now)."""
    probe.execute("SELECT pg_stat_clear_snapshot()")
    row = probe.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (db,))
    return int(row.fetchone()[0])  # type: ignore[index]


# the enqueue of one run in another checkout's duetime (--src): N no-op jobs in one transaction
ENQUEUE = (
    "import os, sys; from bench.bench_app import TASK, app; from bench.common import payloads; "
    "app.database_url = os.environ['DUETIME_DATABASE_URL']; "
    "app.enqueue_many(TASK, payloads(int(sys.argv[1]))); app.close()"
)


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def one_run(
    args: argparse.Namespace, concurrency: int, run: int, variant: str = "", src: str = ""
) -> dict[str, Any]:
    db = f"cpu_bench_{os.getpid()}"
    admin = psycopg.connect(args.admin_url, autocommit=True)
    admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    admin.execute(f'CREATE DATABASE "{db}"')
    url = _with_path(args.admin_url, db)
    env = {**os.environ, "PYTHONPATH": "bench:.", "DUETIME_DATABASE_URL": url}
    duetime = str(Path(sys.executable).with_name("duetime"))
    if src:  # another checkout's duetime, ahead of this one's: its schema, its enqueue too
        env["PYTHONPATH"] = f"{src}:bench:."
    subprocess.run([duetime, "migrate"], env=env, check=True, capture_output=True)
    worker_env = {**env, "DUETIME_DATABASE_URL": f"{url}?application_name={APP_NAME}"}
    log_path = Path(args.logs) / f"worker-{variant}{concurrency}-{run}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log_file:
        worker = subprocess.Popen(
            [
                duetime,
                "worker",
                "--app",
                "bench_app:app",
                "--concurrency",
                str(concurrency),
                "--log-level",
                "WARNING",
            ],
            env=worker_env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    probe = psycopg.connect(url, autocommit=True)
    spies: list[subprocess.Popen[bytes]] = []
    try:
        deadline = time.monotonic() + 120
        while not probe.execute("SELECT count(*) FROM duetime_nodes").fetchone()[0]:  # type: ignore[index]
            if worker.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the worker did not start; see {log_path}")
            time.sleep(0.1)
        time.sleep(args.settle)  # its first claims, heartbeats and timer reads
        if args.profile:
            spies = start_spies(f"{args.profile}{variant}", worker.pid, concurrency, run)
        app.database_url = url
        jobs = payloads(args.jobs)
        load_before = load()
        worker_before = cpu_seconds(worker.pid) or 0.0
        backends_before = backends(probe, db)
        commits_before = commits(probe, db)
        if src:  # the other checkout's enqueue (this one's may not know its schema)
            subprocess.run([sys.executable, "-c", ENQUEUE, str(args.jobs)], env=env, check=True)
        else:
            app.enqueue_many(TASK, jobs)  # one transaction: every job due at its commit
        enqueued = time.monotonic()
        while True:
            # the count reads the whole jobs table: paced as make bench's probe is, so that
            # it does not take from the drain the CPU it measures (every 50 ms, it was about
            # a sixth of PostgreSQL's CPU in a drain of 200,000 jobs)
            t = time.time()
            left = probe.execute(
                "SELECT count(*) FROM duetime_jobs WHERE status <> 'succeeded'"
            ).fetchone()[0]  # type: ignore[index]
            took = time.time() - t
            if not left:
                break
            if worker.poll() is not None:
                raise SystemExit(f"the worker exited; see {log_path}")
            if time.monotonic() - enqueued > args.timeout:
                raise SystemExit(f"not drained in {args.timeout} s; see {log_path}")
            pause_probe(t, took, 0.05)
        worker_after = cpu_seconds(worker.pid) or 0.0
        backends_after = backends(probe, db)
        load_after = load()
        time.sleep(1.0)  # the backends report their commits when idle (up to a second later)
        commits_after = commits(probe, db)
        first, last, attempts = probe.execute(  # (a success stays on its job's row: 24)
            "SELECT min(started_at), max(finished_at), count(*) FROM duetime_all_attempts"
        ).fetchone()  # type: ignore[misc]
    finally:
        for spy in spies:
            spy.send_signal(signal.SIGINT)
        for spy in spies:
            spy.wait(timeout=60)
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
        probe.close()
        app.close()
        admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        admin.close()
    gone = sorted(set(backends_before) - set(backends_after))
    pg = sum(s - backends_before.get(pid, 0.0) for pid, s in backends_after.items())
    wall = (last - first).total_seconds()
    return {
        "variant": variant,
        "concurrency": concurrency,
        "run": run,
        "jobs": args.jobs,
        "attempts": attempts,
        "worker_us_per_job": round((worker_after - worker_before) / args.jobs * 1e6, 1),
        "postgres_us_per_job": round(pg / args.jobs * 1e6, 1),
        # transactions committed on the database per 1,000 jobs (the worker's, and the probe's
        # own polls: about 20 a second)
        "commits_per_1000_jobs": round((commits_after - commits_before) / args.jobs * 1000, 1),
        "backends": len(backends_after),
        "backends_gone": len(gone),  # their CPU since the start is not counted
        "wall_s": round(wall, 3),
        "jobs_per_s": round(args.jobs / wall) if wall > 0 else None,
        "load_before": load_before,
        "load_after": load_after,
    }


def start_spies(prefix: str, pid: int, concurrency: int, run: int) -> list[subprocess.Popen[bytes]]:
    """py-spy on the worker, every thread and GIL holder only, until sent SIGINT."""
    here = Path(sys.executable).with_name("py-spy")
    spy = str(here) if here.exists() else shutil.which("py-spy")
    if spy is None:
        raise SystemExit("py-spy not found: .venv/bin/pip install py-spy")
    common = [spy, "record", "--pid", str(pid), "--rate", "250", "--nonblocking"]
    common += ["--threads", "--format", "raw"]
    return [
        subprocess.Popen(
            [*common, *extra, "--output", f"{prefix}-{concurrency}-{run}.{name}.txt"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for name, extra in (("all", []), ("gil", ["--gil"]))
    ]


# frames that wait: the loop's select, a pool thread waiting for work, a lock or an event
IDLE = ("select ", "_worker ", "wait ", "acquire ")


def top(path: str, count: int, frames_of_note: Sequence[str] = ()) -> None:
    """The frames of a raw py-spy profile with the most samples: own (the frame on top of the
    stack) and inclusive (anywhere in it), as shares of the samples not waiting (IDLE); with
    `frames_of_note` (function names as py-spy gives them), only those, inclusive."""
    own: Counter[str] = Counter()
    under: Counter[str] = Counter()
    total = 0
    for line in Path(path).read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = [f.split(" (")[0] + " " + f.split("/")[-1].rstrip(")") for f in stack.split(";")]
        if frames[-1].startswith(IDLE):  # waiting, not computing (py-spy may miss that)
            continue
        samples = int(n)
        total += samples
        own[frames[-1]] += samples
        for frame in set(frames[1:]):  # not the thread's name
            under[frame] += samples
    say(f"{path}: {total} busy samples")
    if frames_of_note:
        say("-- inclusive, of note")
        for name in frames_of_note:
            n = sum(v for frame, v in under.items() if frame.startswith(name + " "))
            say(f"{100 * n / max(total, 1):5.1f}%  {name}")
        return
    for title, counter in (("own", own), ("inclusive", under)):
        say(f"-- {title}")
        for frame, n in counter.most_common(count):
            say(f"{100 * n / max(total, 1):5.1f}%  {frame}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--admin-url", default=DEFAULT_PG_URL)
    p.add_argument("--jobs", type=int, default=20000)
    p.add_argument("--concurrency", default="10,50")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--settle", type=float, default=2.0, help="seconds after the worker started")
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--logs", default="/tmp/duetime-cpu-bench")
    p.add_argument("--profile", help="py-spy raw profiles to PREFIX-C-RUN.{all,gil}.txt")
    p.add_argument("--top", help="print the top frames of a raw py-spy profile and exit")
    p.add_argument("--count", type=int, default=25, help="frames --top prints")
    p.add_argument("--frames", help="--top: only these functions' inclusive shares, FN,FN,...")
    p.add_argument("--json", help="append each run's figures to this file (JSON lines)")
    p.add_argument(
        "--src",
        default="",
        help="compare checkouts, alternating: NAME=SRC_DIR,... (the worker imports duetime from "
        "SRC_DIR; an empty SRC_DIR: this one's)",
    )
    args = p.parse_args()
    if args.top:
        top(args.top, args.count, args.frames.split(",") if args.frames else ())
        return
    levels = [int(c) for c in args.concurrency.split(",")]
    variants = [tuple(v.split("=", 1)) for v in args.src.split(",")] if args.src else [("", "")]
    results: list[dict[str, Any]] = []
    for run in range(1, args.runs + 1):
        for concurrency in levels:  # alternating: a busy spell of the machine hits each
            for variant, src in variants:
                r = one_run(args, concurrency, run, variant, src)
                results.append(r)
                say(json.dumps(r))
                if args.json:
                    with open(args.json, "a") as out:
                        out.write(json.dumps(r) + "\n")
    say("\nmedians (worker and PostgreSQL CPU in us per job)")
    say("variant     C  runs  worker  postgres  wall_s  jobs/s  load")
    for variant, _ in variants:
        for c in levels:
            mine = [r for r in results if r["concurrency"] == c and r["variant"] == variant]

            def med(key: str, rows: list[dict[str, Any]] = mine) -> float:
                return statistics.median(float(r[key]) for r in rows)

            say(
                f"{variant or '-':10s}{c:3d}  {len(mine):4d}  {med('worker_us_per_job'):6.1f}  "
                f"{med('postgres_us_per_job'):8.1f}  {med('wall_s'):6.2f}  "
                f"{med('jobs_per_s'):6.0f}  {med('load_before'):4.1f}"
            )


if __name__ == "__main__":
    main()
