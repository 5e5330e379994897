"""`make demo`: duetime's main job on the embedded SQLite default, watched as it happens.

Enqueues a handful of jobs, starts two worker processes, prints every transition as it is
recorded in the store, and ends with a summary once every job has reached a final state.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from duetime.core.models import Job

HERE = Path(__file__).resolve().parent
# the dashboard needs the web server packages (the `server` extra); the demo runs without them
SERVER_INSTALLED = all(importlib.util.find_spec(name) for name in ("fastapi", "uvicorn", "jinja2"))
NO_SERVER = "the web server packages are not installed: pip install 'duetime[server]'"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def main() -> int:
    folder = Path(tempfile.mkdtemp(prefix="duetime-demo-"))
    url = f"sqlite:///{folder / 'demo.db'}"
    os.environ["DUETIME_DATABASE_URL"] = url
    sys.path.insert(0, str(HERE))
    from demo_app import app

    print(f"duetime demo: database {folder / 'demo.db'} (embedded SQLite)\n")
    jobs = [
        app.enqueue("demo.flaky", {"order": "A-1001"}),
        app.enqueue("demo.doomed", {"report": "q3-sales"}),
        app.enqueue("demo.rate_limited", {"user": 42}),
        app.enqueue("demo.reminder", {"text": "stand-up in 5 minutes"}, delay="3s"),
        app.enqueue("demo.invalid", {"email": "bob@"}),
        app.enqueue("demo.reminder", {"text": "never sent"}, delay="1m"),
    ]
    app.cancel(jobs[-1].id)
    for job in jobs:
        print(f"enqueued job {job.id} {job.task} {job.args} due {job.due_at:%H:%M:%S}")
    # a recurring schedule: every 2 seconds, in a real time zone, ending after 7 seconds
    pulse = app.add_schedule(
        "demo.pulse",
        task="demo.reminder",
        cron="*/2 * * * * *",
        timezone="Europe/London",
        args={"text": "pulse"},
        end=app.clock.now() + timedelta(seconds=7),
    )
    print(
        f"schedule {pulse.name}: cron '{pulse.spec.cron}' in {pulse.spec.timezone}, "
        f"first tick {pulse.next_fire_at:%H:%M:%S}, ends {pulse.spec.end_at:%H:%M:%S}\n"
    )

    env = {**os.environ, "PYTHONPATH": str(HERE)}
    # the dashboard and API on this database, with an admin token for the demo's tenant
    server = None
    if SERVER_INSTALLED:
        port = free_port()
        _, secret = app.create_token("admin", name="demo")
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "duetime.cli",
                "serve",
                "--app",
                "demo_app:app",
                "--port",
                str(port),
                "--log-level",
                "WARNING",
            ],
            env=env,
            stderr=open(folder / "serve.log", "w"),
        )
        dashboard = f"http://127.0.0.1:{port}/"
        print(f"dashboard: {dashboard}  (log in with the token {secret})")
        print(f"API:       curl -H 'Authorization: Bearer {secret}' {dashboard}v1/stats\n")
    else:
        print(f"dashboard: not served, {NO_SERVER}\n")
    command = [
        sys.executable,
        "-m",
        "duetime.cli",
        "worker",
        "--app",
        "demo_app:app",
        "--concurrency",
        "4",
        "--poll-interval",
        "0.1s",
        "--grace",
        "5s",
    ]
    workers = [
        subprocess.Popen(command, env=env, stderr=open(folder / f"worker{i}.log", "w"))
        for i in range(2)
    ]
    started = time.monotonic()
    seen: dict[tuple[int, int, str], None] = {}
    try:
        while True:
            occurrences = app.list_jobs(task="demo.reminder")
            known = {j.id for j in jobs}
            jobs += [j for j in sorted(occurrences, key=lambda j: j.id) if j.id not in known]
            current = [app.get_job(j.id) for j in jobs]
            for job in current:
                report(job, seen, started)
            ended = app.get_schedule("demo.pulse").next_fire_at is None
            if ended and all(j.terminal for j in current):
                break
            if time.monotonic() - started > 60:
                print("demo: jobs did not finish within 60 s; see the worker logs in", folder)
                return 1
            time.sleep(0.1)
    finally:
        for w in workers:
            w.send_signal(signal.SIGTERM)
        for w in workers:
            w.wait(timeout=30)

    summary(current)
    print("\nschedule demo.pulse, tick by tick:")
    for tick in reversed(app.schedule_history("demo.pulse")):
        print(
            f"  {tick.nominal_at:%H:%M:%S} UTC  {tick.outcome:<9} job {tick.job_id}  "
            f"{tick.job_status or ''}  {tick.detail}"
        )
    print(f"\nworker logs: {folder}/worker0.log, worker1.log")
    if server is not None:
        print(f"\ndashboard: {dashboard}  token: {secret}")
        if sys.stdin.isatty():
            try:
                input("the dashboard stays up until you press Enter (or Ctrl-C) ")
            except (EOFError, KeyboardInterrupt):
                pass
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    expected = {
        "demo.flaky": "succeeded",
        "demo.doomed": "dead",
        "demo.rate_limited": "succeeded",
        "demo.invalid": "dead",
    }
    ok = all(expected.get(j.task, str(j.status)) == j.status for j in current)
    return 0 if ok else 1


def report(job: Job, seen: dict[tuple[int, int, str], None], started: float) -> None:
    clock = f"+{time.monotonic() - started:5.1f}s"
    if (job.id, 0, "new") not in seen and job.schedule_name:
        seen[(job.id, 0, "new")] = None
        print(
            f"{clock}  job {job.id} {job.task:<18} occurrence of {job.schedule_name} for tick "
            f"{job.nominal_at:%H:%M:%S}"
        )
    for a in job.attempt_history:
        if (job.id, a.generation, "start") not in seen:
            seen[(job.id, a.generation, "start")] = None
            print(
                f"{clock}  job {job.id} {job.task:<18} attempt {a.generation} started "
                f"on {a.worker_id} (fencing token {a.generation})"
            )
        if a.finished_at and (job.id, a.generation, "end") not in seen:
            seen[(job.id, a.generation, "end")] = None
            detail = f": {a.error_category} - {a.error_message}" if a.error_category else ""
            print(f"{clock}  job {job.id} {job.task:<18} attempt {a.generation} {a.status}{detail}")
    key = (job.id, job.version * 1000 + len(job.attempt_history), str(job.status))
    if key not in seen:
        seen[key] = None
        when = f" (next try at {job.due_at:%H:%M:%S})" if job.status == "scheduled" else ""
        print(f"{clock}  job {job.id} {job.task:<18} -> {job.status}{when}")


def summary(jobs: list[Job]) -> None:
    print("\nsummary")
    print(f"{'job':>4}  {'task':<18} {'status':<10} attempts  last error")
    for j in jobs:
        last = next((a for a in reversed(j.attempt_history) if a.error_message), None)
        error = f"{last.error_category}: {last.error_message}" if last else ""
        print(f"{j.id:>4}  {j.task:<18} {j.status:<10} {len(j.attempt_history):>8}  {error[:70]}")


if __name__ == "__main__":
    sys.exit(main())
