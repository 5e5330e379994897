"""`duetime jobs list|show|result|cancel|replay|reschedule|resolve`: inspect and steer jobs.

`jobs result` exits 0 when the job succeeded (printing its result), EXIT_FAILED (3) when it
ended dead, cancelled or expired, EXIT_NOT_FINISHED (4) when it had not ended by the end of
the wait (docs/cli.md)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from duetime.cli.support import (
    IGNORE_BACKLOG,
    _positive_int,
    an_id,
    duration,
    flag_values,
    instant,
    make_app,
    out,
    seconds,
    table,
)
from duetime.core.dependencies import MAX_RELATIVES_SHOWN
from duetime.core.errors import JobFailed, ResultTimeout
from duetime.core.models import Job, Relative, attempt_to_json, page_of
from duetime.core.states import JobStatus

JSON_PAGE = 'print {"items": [...], "next_cursor": ...}'
EXIT_FAILED = 3  # `jobs result`: the job ended dead, cancelled or expired (no result)
EXIT_NOT_FINISHED = 4  # `jobs result`: the job had not ended by the end of the wait


def add_parsers(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    jobs = sub.add_parser("jobs", help="inspect and steer jobs").add_subparsers(
        dest="jobs_command", required=True, metavar="ACTION"
    )
    p = jobs.add_parser("list", parents=parents, help="list jobs, newest first")
    p.add_argument("--status", choices=[str(s) for s in JobStatus], help="only jobs in this status")
    p.add_argument("--task", help="only jobs of this task")
    p.add_argument("--queue", help="only jobs of this queue")
    p.add_argument("--limit", type=_positive_int, default=50, help="at most this many (50)")
    p.add_argument("--cursor", type=an_id, help="show jobs older than this id (next_cursor)")
    p.add_argument(
        "--due-after", type=instant, help="only jobs due at or after this instant (ISO 8601)"
    )
    p.add_argument(
        "--due-before", type=instant, help="only jobs due before this instant (ISO 8601)"
    )
    p.add_argument("--json", action="store_true", help=JSON_PAGE)
    p.set_defaults(func=cmd_jobs_list)
    p = jobs.add_parser(
        "result",
        parents=parents,
        help="print a succeeded job's result (exit 3: it failed for good; 4: not finished)",
    )
    p.add_argument("id", type=an_id, help="the job's id")
    p.add_argument(
        "--wait",
        type=seconds,
        default=0.0,
        metavar="SECONDS",
        help="wait up to this long for the job to end (30, 30s, 5m; default: look once)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help='print {"id", "status", "result", "progress", ...} whatever the outcome',
    )
    p.set_defaults(func=cmd_jobs_result)
    for name, func, help_text in [
        ("show", cmd_jobs_show, "show a job with its attempts"),
        ("cancel", cmd_jobs_cancel, "cancel a job (or ask a running one to stop)"),
        ("replay", cmd_jobs_replay, "run a dead, cancelled or expired job again"),
        ("reschedule", cmd_jobs_reschedule, "move a scheduled job's due time"),
        ("resolve", cmd_jobs_resolve, "settle a parked job: --done or --run-again"),
    ]:
        p = jobs.add_parser(name, parents=parents, help=help_text)
        p.add_argument("id", type=an_id, help="the job's id")
        if name == "replay":
            p.add_argument("--ignore-backlog", action="store_true", help=IGNORE_BACKLOG)
        if name == "reschedule":
            when = p.add_mutually_exclusive_group(required=True)
            when.add_argument("--at", type=instant, help="new due time, ISO 8601 with offset")
            when.add_argument(
                "--in", dest="delay", type=duration, help="due after a delay from now, e.g. 5m"
            )
        if name == "resolve":
            how = p.add_mutually_exclusive_group(required=True)
            how.add_argument("--done", action="store_true", help="the effect happened")
            how.add_argument("--run-again", action="store_true", help="run the job again now")
        p.add_argument("--json", action="store_true", help="print the job as JSON")
        p.set_defaults(func=func)


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
    # the time (the database's clock, read on demand) only for a dispatched job's age
    shows_age = not args.json and any(j.dispatched_at is not None for j in jobs)
    now = app.clock.now() if shows_age else None
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
                _list_status(j, now),
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
    app = make_app(args)
    job = app.get_job(args.id)
    unserved = app.unserved(job)  # a scheduled job: judges the nodes by the database's clock
    # the time (read on demand) only for a dispatched job's age
    now = app.clock.now() if not args.json and job.dispatched_at is not None else None
    print_job(job, args.json, unserved=unserved, now=now)
    return 0


def cmd_jobs_result(args: argparse.Namespace) -> int:
    app = make_app(args)
    try:
        value = app.result(args.id, timeout=args.wait)
    except JobFailed as exc:
        return _result_out(args, exc.job, str(exc), EXIT_FAILED)
    except ResultTimeout as exc:
        return _result_out(args, app.get_job(args.id), str(exc), EXIT_NOT_FINISHED)
    if args.json:
        return _result_out(args, app.get_job(args.id), None, 0)
    out(json.dumps(value, indent=2, ensure_ascii=False))
    return 0


def _result_out(args: argparse.Namespace, job: Job, error: str | None, code: int) -> int:
    """`jobs result`'s answer: with --json one document on stdout whatever the outcome, else
    the reason on stderr (one line); `code` is the exit status."""
    if args.json:
        document = {
            "id": job.id,
            "status": str(job.status),
            "result": job.result,
            "progress": job.progress,
            "progress_message": job.progress_message,
            "error": error,
        }
        out(json.dumps(document, indent=2, ensure_ascii=False))
    elif error is not None:
        sys.stderr.write(f"duetime: {error}\n")
    return code


def cmd_jobs_cancel(args: argparse.Namespace) -> int:
    job = make_app(args).cancel(args.id)
    _moved(job, args.json)
    return 0


def cmd_jobs_reschedule(args: argparse.Namespace) -> int:
    app = make_app(args)
    with flag_values(args):  # e.g. a due time past the job's deadline
        job = app.reschedule(args.id, args.at or app.clock.now() + args.delay)
    _moved(job, args.json)
    return 0


def cmd_jobs_resolve(args: argparse.Namespace) -> int:
    job = make_app(args).resolve(args.id, done=args.done)
    _moved(job, args.json)
    return 0


def cmd_jobs_replay(args: argparse.Namespace) -> int:
    job = make_app(args).replay(args.id, ignore_backlog=args.ignore_backlog)
    _moved(job, args.json)
    return 0


def _moved(job: Job, as_json: bool) -> None:
    if as_json:
        out(json.dumps(job.to_json(), indent=2))
    else:
        out(f"job {job.id} is {job.status} (due {job.due_at.isoformat()}, version {job.version})")


def print_job(
    job: Job, as_json: bool, *, unserved: str | None = None, now: datetime | None = None
) -> None:
    if as_json:
        out(json.dumps({**job.to_json(), "unserved": unserved}, indent=2))
        return
    fields = [
        ("id", job.id),
        ("task", job.task),
        ("status", _status(job, unserved, now)),
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
        ("sequence", _sequence(job)),
        ("unique_until", job.unique_until.isoformat() if job.unique_until else "-"),
        ("created_at", job.created_at.isoformat()),
        ("updated_at", job.updated_at.isoformat()),
        *_progress_fields(job),
    ]
    if job.parents or job.on_parent_failure:
        fields.append(("parents", _relatives(job.parents)))
        fields.append(("on_parent_failure", job.on_parent_failure or "-"))
    if job.children:
        more = " (the first shown)" if len(job.children) >= MAX_RELATIVES_SHOWN else ""
        fields.append(("children", _relatives(job.children) + more))
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


def _progress_fields(job: Job) -> list[tuple[str, Any]]:
    """`jobs show`'s progress and result lines, for a job that has them."""
    fields: list[tuple[str, Any]] = []
    if job.progress is not None:
        message = f" {job.progress_message}" if job.progress_message else ""
        at = f" (at {job.progress_at.isoformat()})" if job.progress_at else ""
        fields.append(("progress", f"{job.progress:.0%}{message}{at}"))
    if job.result is not None:
        text = json.dumps(job.result, ensure_ascii=False)
        cut = f"... ({len(text)} characters; `duetime jobs result {job.id}`)"
        fields.append(("result", text if len(text) <= 200 else text[:200] + cut))
    return fields


def _relatives(found: Sequence[Relative]) -> str:
    """Parents or children as `12 (succeeded), 13 (running)`."""
    return ", ".join(f"{r.id} ({r.status})" for r in found) or "-"


def _sequence(job: Job) -> str:
    """A job's sequence and, while it has not ended, how many of its jobs are ahead of it."""
    if job.sequence_key is None:
        return "-"
    hold = ", holds it if dead" if job.sequence_hold else ""
    if job.sequence_ahead is None:
        return f"{job.sequence_key}{hold}"
    return f"{job.sequence_key} ({job.sequence_ahead} ahead{hold})"


def _status(job: Job, unserved: str | None, now: datetime | None = None) -> str:
    """The status, with why a job waits (no worker serves it) or why it expired, or that it
    waits in the broker (dispatched, no worker accepted it yet)."""
    if job.dispatched_at is not None:
        age = f" for {_age(job.dispatched_seconds(now))}" if now is not None else ""
        return (
            f"{job.status}: dispatched, waiting in the broker{age} (since "
            f"{job.dispatched_at.isoformat()}); no worker accepted it yet"
        )
    if unserved is not None:
        return f"{job.status}: {unserved}"
    if job.status is JobStatus.BLOCKED:
        return f"{job.status}: waits for its parents to end"
    if job.cancel_reason is not None:
        return f"{job.status}: {job.cancel_reason}"
    if job.status is JobStatus.EXPIRED and job.deadline_at is not None:
        return f"{job.status}: not started by its deadline {job.deadline_at.isoformat()}"
    return str(job.status)


def _list_status(job: Job, now: datetime | None) -> str:
    """The list's status column: a dispatched job's sub-state and age beside its status (`now`
    is given whenever a job is dispatched)."""
    if job.dispatched_at is None or now is None:
        return str(job.status)
    return f"{job.status} (dispatched {_age(job.dispatched_seconds(now))})"


def _occurrence(job: Job) -> str:
    if not (job.schedule_name and job.nominal_at):
        return "-"
    return f"{job.schedule_name} (tick {job.nominal_at.isoformat()}, {job.origin})"


def _age(seconds: float | None) -> str:
    """A short age: 12s, 3m05s, 2h01m."""
    whole = int(seconds or 0)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def _short(value: Any) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")
