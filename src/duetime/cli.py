"""The `duetime` command line: the composition root that parses flags and wires services.

Exit status: 0 on success, 2 on usage errors, 1 on any other error (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

from duetime import cli_ops, cli_schedules, cli_serve, logs
from duetime.cli_support import json_object, make_app, out, table
from duetime.client import App
from duetime.core.errors import StoreUnavailable
from duetime.core.models import Job, attempt_to_json, page_of
from duetime.core.requests import parse_duration
from duetime.core.states import JobStatus

log = logging.getLogger("duetime.cli")


# -- helpers ------------------------------------------------------------------------------------


def _short(value: Any) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def print_job(job: Job, as_json: bool) -> None:
    if as_json:
        out(json.dumps(job.to_json(), indent=2))
        return
    fields = [
        ("id", job.id),
        ("task", job.task),
        ("status", job.status),
        ("queue", job.queue),
        ("priority", job.priority),
        ("args", json.dumps(job.args)),
        ("due_at", job.due_at.isoformat()),
        ("deadline_at", job.deadline_at.isoformat() if job.deadline_at else "-"),
        ("attempts", f"{job.attempts}/{job.max_attempts} (generation {job.generation})"),
        ("version", job.version),
        ("business_key", job.business_key),
        ("schedule", _occurrence(job)),
        ("idempotency_key", job.idempotency_key or "-"),
        ("created_at", job.created_at.isoformat()),
        ("updated_at", job.updated_at.isoformat()),
    ]
    width = max(len(k) for k, _ in fields)
    for key, value in fields:
        out(f"{key.ljust(width)}  {value}")
    if job.attempt_history:
        out()
        table(
            [
                (
                    a["generation"],
                    a["status"],
                    a["worker_id"],
                    a["started_at"],
                    a["finished_at"] or "-",
                    a["lease_expires_at"],
                    (a["error_category"] or "")
                    + (f": {a['error_message']}" if a["error_message"] else "")
                    + (f" [late report: {a['late_outcome']}]" if a["late_outcome"] else ""),
                )
                for a in map(attempt_to_json, job.attempt_history)
            ],
            ["gen", "status", "worker", "started", "finished", "lease_expires", "error"],
        )


# -- commands -----------------------------------------------------------------------------------


def _occurrence(job: Job) -> str:
    if not (job.schedule_name and job.nominal_at):
        return "-"
    return f"{job.schedule_name} (tick {job.nominal_at.isoformat()}, {job.origin})"


def cmd_nodes(args: argparse.Namespace) -> int:
    app = make_app(args)
    now = app.clock.now()
    nodes = [
        n for n in app.store.list_nodes() if args.all or n.state(now, args.dead_after) != "stopped"
    ]
    if args.json:
        out(json.dumps([n.to_json(now, args.dead_after) for n in nodes], indent=2))
        return 0
    rows = []
    for n in nodes:
        held = ", ".join(map(str, n.holding[:8])) + (" ..." if len(n.holding) > 8 else "")
        age = int((now - n.last_seen_at).total_seconds())
        rows.append(
            (
                n.id,
                n.state(now, args.dead_after),
                f"{age}s ago",
                ",".join(n.queues) if n.queues else "*",
                n.concurrency,
                ",".join(n.duties),
                f"{len(n.holding)}: {held}" if n.holding else "0",
            )
        )
    table(rows, ["node", "state", "last seen", "queues", "conc", "duties", "holding (jobs)"])
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    app = make_app(args)
    applied = app.migrate()
    out(f"applied migrations {applied}" if applied else "schema is up to date")
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from duetime.runtime import metrics as worker_metrics
    from duetime.runtime.worker import Worker

    logs.configure(args.log_level, args.log_format)
    app = make_app(args)
    figures = worker_metrics.WorkerMetrics()
    exporter = None  # nothing listens without --metrics-port
    if args.metrics_port is not None:  # before waiting for the store: a busy port fails fast
        exporter = worker_metrics.serve(figures, args.metrics_port, args.metrics_host)
    _wait_for_store(app)
    queues = [q for item in args.queues or [] for q in item.split(",") if q]
    worker = Worker(
        app,
        queues=queues or None,
        concurrency=args.concurrency,
        poll_interval=args.poll_interval,
        grace=args.grace,
        reap_interval=args.reap_interval,
        plan_interval=args.plan_interval,
        planner=not args.no_planner,
        metrics=figures,
    )
    worker.serve()  # until SIGTERM or SIGINT; a second signal exits at once with status 1
    if exporter is not None:
        exporter.stop()
    if worker.abandoned_threads:
        log.warning(
            "%d handler thread(s) outlived the grace period; exiting", worker.abandoned_threads
        )
        logging.shutdown()
        os._exit(0)
    app.close()
    return 0


def _wait_for_store(app: App) -> None:
    """A worker started while its database is down waits for it (a bad URL fails at once)."""
    delay = 1.0
    # nothing runs yet, so a stop request while waiting simply ends the process cleanly
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        try:
            app.store  # noqa: B018 - opens and checks the store
            signal.signal(signal.SIGTERM, previous)
            return
        except StoreUnavailable as exc:
            log.warning("database unavailable (%s); retrying in %.0fs", exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, 30.0)


def cmd_enqueue(args: argparse.Namespace) -> int:
    if args.from_file:
        return cli_ops.enqueue_file(args)
    if not args.task:
        args.usage_error("the following arguments are required: task (or --from-file FILE)")
    app = make_app(args)
    job = app.enqueue(
        args.task,
        json_object(args.args, "--args"),
        at=args.at,
        delay=args.delay,
        key=args.key,
        queue=args.queue,
        priority=args.priority,
        max_attempts=args.max_attempts,
        deadline=args.deadline,
        business_key=args.business_key,
    )
    if args.json:
        out(json.dumps(job.to_json(), indent=2))
    else:
        out(str(job.id))
    return 0


def cmd_jobs_list(args: argparse.Namespace) -> int:
    app = make_app(args)
    found = app.list_jobs(
        status=args.status,
        task=args.task,
        queue=args.queue,
        before_id=args.cursor,
        due_after=args.due_after,
        due_before=args.due_before,
        limit=args.limit + 1,  # one more than shown: whether a next page exists
    )
    jobs, next_cursor = page_of(found, args.limit)
    if args.json:
        out(
            json.dumps({"items": [j.to_json() for j in jobs], "next_cursor": next_cursor}, indent=2)
        )
        return 0
    table(
        [
            (
                j.id,
                j.task,
                j.status,
                j.queue,
                j.priority,
                f"{j.attempts}/{j.max_attempts}",
                _short(j.due_at),
            )
            for j in jobs
        ],
        ["id", "task", "status", "queue", "prio", "attempts", "due_at (UTC)"],
    )
    if next_cursor is not None:
        out(f"next cursor: {next_cursor}")
    return 0


def cmd_jobs_show(args: argparse.Namespace) -> int:
    print_job(make_app(args).get_job(args.id), args.json)
    return 0


def cmd_jobs_cancel(args: argparse.Namespace) -> int:
    job = make_app(args).cancel(args.id)
    _moved(job, args.json)
    return 0


def cmd_jobs_reschedule(args: argparse.Namespace) -> int:
    job = make_app(args).reschedule(args.id, args.at)
    _moved(job, args.json)
    return 0


def cmd_jobs_resolve(args: argparse.Namespace) -> int:
    job = make_app(args).resolve(args.id, done=args.done)
    _moved(job, args.json)
    return 0


def cmd_jobs_replay(args: argparse.Namespace) -> int:
    job = make_app(args).replay(args.id)
    _moved(job, args.json)
    return 0


def _moved(job: Job, as_json: bool) -> None:
    if as_json:
        out(json.dumps(job.to_json(), indent=2))
    else:
        out(f"job {job.id} is {job.status} (due {job.due_at.isoformat()}, version {job.version})")


# -- parser -------------------------------------------------------------------------------------


def _common_options(defaults: bool) -> argparse.ArgumentParser:
    """--database-url and --tenant, accepted before and after the command.

    Only the top-level parser sets defaults: a subcommand's copy must not overwrite a value
    given before the command name.
    """
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument(
        "--database-url",
        default=None if defaults else argparse.SUPPRESS,
        help="database URL (default: $DUETIME_DATABASE_URL, else sqlite:///duetime.db)",
    )
    parser.add_argument(
        "--tenant",
        default="default" if defaults else argparse.SUPPRESS,
        help="tenant to act as (default: default)",
    )
    return parser


def build_parser() -> argparse.ArgumentParser:
    common = _common_options(defaults=False)
    with_app = argparse.ArgumentParser(add_help=False)
    with_app.add_argument(
        "--app", help="module:attribute of your duetime.App, e.g. myproj.jobs:app"
    )

    parser = argparse.ArgumentParser(
        prog="duetime",
        description="duetime: a durable, distributed job scheduler",
        parents=[_common_options(defaults=True)],
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("migrate", parents=[common], help="create or upgrade the database schema")
    p.set_defaults(func=cmd_migrate)

    p = sub.add_parser("worker", parents=[common], help="run a worker that executes due jobs")
    p.add_argument("--app", required=True, help="module:attribute of your duetime.App")
    p.add_argument(
        "--queues", nargs="+", metavar="QUEUE", help="queues to take jobs from (default: all)"
    )
    p.add_argument(
        "--concurrency", type=_positive_int, default=10, help="jobs run at once (default 10)"
    )
    p.add_argument(
        "--poll-interval", type=_seconds, default=0.5, help="idle poll interval, e.g. 0.5s"
    )
    p.add_argument(
        "--grace", type=_seconds, default=30.0, help="shutdown grace period (default 30s)"
    )
    p.add_argument(
        "--reap-interval", type=_seconds, default=5.0, help="how often to reap lapsed leases (5s)"
    )
    p.add_argument(
        "--plan-interval", type=_seconds, default=1.0, help="how often to plan schedules (1s)"
    )
    p.add_argument("--no-planner", action="store_true", help="do not plan schedules here")
    p.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve this worker's Prometheus metrics on this port (default: not served)",
    )
    p.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="address to serve metrics on (default 127.0.0.1; 0.0.0.0 for every interface)",
    )
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--log-format", default="text", choices=["text", "json"])
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("enqueue", parents=[common, with_app], help="create a job")
    p.add_argument("task", nargs="?", help="task name (optional with --from-file)")
    p.add_argument("--args", help="the job's arguments as a JSON object")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--at", help="due time, ISO 8601 with offset")
    when.add_argument("--in", dest="delay", help="due after a delay, e.g. 30s, 5m, 1h30m")
    p.add_argument("--key", help="idempotency key: the same key returns the same job")
    p.add_argument(
        "--business-key", help="the key handlers send downstream (default: derived from --key)"
    )
    p.add_argument("--queue")
    p.add_argument("--priority", type=int, help="higher runs first (default 0)")
    p.add_argument("--max-attempts", type=_positive_int)
    p.add_argument("--deadline", help="expire the job if not started by then (ISO 8601)")
    p.add_argument(
        "--from-file",
        metavar="FILE",
        help="one job per line of a JSON-lines file (- for stdin): a job object, or with TASK "
        "the args",
    )
    p.add_argument("--batch", type=_positive_int, help="--from-file: jobs per transaction (500)")
    p.add_argument("--json", action="store_true", help="print the whole job as JSON")
    p.set_defaults(func=cmd_enqueue, usage_error=p.error)

    jobs = sub.add_parser("jobs", help="inspect and steer jobs").add_subparsers(
        dest="jobs_command", required=True, metavar="ACTION"
    )
    p = jobs.add_parser("list", parents=[common], help="list jobs, newest first")
    p.add_argument("--status", choices=[str(s) for s in JobStatus])
    p.add_argument("--task")
    p.add_argument("--queue")
    p.add_argument("--limit", type=_positive_int, default=50)
    p.add_argument("--cursor", type=int, help="show jobs older than this id (next_cursor)")
    p.add_argument("--due-after", help="only jobs due at or after this instant (ISO 8601)")
    p.add_argument("--due-before", help="only jobs due before this instant (ISO 8601)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_jobs_list)
    for name, func, help_text in [
        ("show", cmd_jobs_show, "show a job with its attempts"),
        ("cancel", cmd_jobs_cancel, "cancel a job (or ask a running one to stop)"),
        ("replay", cmd_jobs_replay, "run a dead, cancelled or expired job again"),
        ("reschedule", cmd_jobs_reschedule, "move a scheduled job's due time"),
        ("resolve", cmd_jobs_resolve, "settle a parked job: --done or --run-again"),
    ]:
        p = jobs.add_parser(name, parents=[common], help=help_text)
        p.add_argument("id", type=int)
        if name == "reschedule":
            p.add_argument("--at", required=True, help="new due time, ISO 8601 with offset")
        if name == "resolve":
            how = p.add_mutually_exclusive_group(required=True)
            how.add_argument("--done", action="store_true", help="the effect happened")
            how.add_argument("--run-again", action="store_true", help="run the job again now")
        p.add_argument("--json", action="store_true")
        p.set_defaults(func=func)
    p = sub.add_parser("nodes", parents=[common], help="worker nodes: live, dead, stopped")
    p.add_argument(
        "--dead-after", type=_seconds, default=30.0, help="silence after which a node is dead"
    )
    p.add_argument("--all", action="store_true", help="include stopped nodes")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_nodes)

    cli_schedules.add_parsers(sub, [common])
    cli_ops.add_parsers(sub, [common])
    cli_serve.add_parser(sub, [common])
    return parser


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _seconds(text: str) -> float:
    try:
        return parse_duration(text).total_seconds()
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
        return result
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # one clear line; DUETIME_DEBUG=1 shows the traceback
        if os.environ.get("DUETIME_DEBUG"):
            raise
        message = str(exc) or type(exc).__name__
        sys.stderr.write(f"duetime: error: {message}\n")
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
