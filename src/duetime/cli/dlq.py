"""`duetime dlq list|replay`: dead jobs with their last error, and replaying them (paced)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from duetime.admin.replay import dead_job_ids
from duetime.cli.support import (
    IGNORE_BACKLOG,
    Progress,
    an_id,
    make_app,
    out,
    positive_float,
    positive_int,
    table,
    when,
)
from duetime.core.errors import ConfigurationError
from duetime.core.models import Attempt, Job, attempt_to_json, page_of
from duetime.core.states import JobStatus


def add_parsers(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    dlq = sub.add_parser("dlq", help="dead jobs: list and replay").add_subparsers(
        dest="dlq_command", required=True, metavar="ACTION"
    )
    p = dlq.add_parser("list", parents=parents, help="dead jobs with their last error")
    p.add_argument("--task", help="only dead jobs of this task")
    p.add_argument("--queue", help="only dead jobs of this queue")
    p.add_argument("--limit", type=positive_int, default=50, help="at most this many (50)")
    p.add_argument("--cursor", type=an_id, help="show jobs older than this id (next_cursor)")
    p.add_argument("--json", action="store_true", help='print {"items": [...], "next_cursor": ...}')
    p.set_defaults(func=cmd_dlq_list)

    p = dlq.add_parser(
        "replay", parents=parents, help="replay dead jobs: ids, or all matching a filter"
    )
    p.add_argument("ids", nargs="*", type=an_id, metavar="ID", help="dead jobs to replay")
    p.add_argument("--task", help="replay every dead job of this task")
    p.add_argument("--queue", help="replay every dead job of this queue")
    p.add_argument("--all", action="store_true", help="replay every dead job of the tenant")
    p.add_argument("--per-second", type=positive_float, help="at most this many replays a second")
    p.add_argument("--yes", action="store_true", help="do not ask before a filter replay")
    p.add_argument("--ignore-backlog", action="store_true", help=IGNORE_BACKLOG)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_dlq_replay, usage_error=p.error)


def cmd_dlq_list(args: argparse.Namespace) -> int:
    app = make_app(args)
    found = app.list_jobs(
        status=JobStatus.DEAD,
        task=args.task,
        queue=args.queue,
        before_id=args.cursor,
        limit=args.limit + 1,  # one more than shown: whether a next page exists
        with_attempts=True,
    )
    jobs, next_cursor = page_of(found, args.limit)
    if args.json:
        items = []
        for job in jobs:
            item = job.to_json()
            del item["attempt_history"]
            last = _last_attempt(job)
            item["last_attempt"] = attempt_to_json(last) if last else None
            items.append(item)
        out(json.dumps({"items": items, "next_cursor": next_cursor}, indent=2))
        return 0
    table(
        [
            (
                j.id,
                j.task,
                j.queue,
                f"{j.attempts}/{j.max_attempts}",
                when(j.updated_at),
                _error_text(_last_attempt(j)),
            )
            for j in jobs
        ],
        ["id", "task", "queue", "attempts", "died (UTC)", "last error"],
    )
    if next_cursor is not None:
        out(f"next cursor: {next_cursor}")
    return 0


def _last_attempt(job: Job) -> Attempt | None:
    return job.attempt_history[-1] if job.attempt_history else None


def _error_text(attempt: Attempt | None, limit: int = 100) -> str:
    if attempt is None:
        return "-"
    text = str(attempt.error_category or attempt.status)
    if attempt.error_message:
        text += ": " + " ".join(attempt.error_message.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def cmd_dlq_replay(args: argparse.Namespace) -> int:
    has_filter = bool(args.task or args.queue or args.all)
    if args.ids and has_filter:
        args.usage_error("give job ids or a filter (--task, --queue, --all), not both")
    if not args.ids and not has_filter:
        args.usage_error(
            "give the ids of dead jobs, or a filter (--task, --queue); "
            "replaying every dead job of the tenant needs --all"
        )
    app = make_app(args)
    if args.ids:
        ids = list(dict.fromkeys(args.ids))  # each once, in the order given
    else:
        ids = dead_job_ids(app, app.tenant, task=args.task, queue=args.queue)
        if ids and not args.yes:
            _confirm(f"{len(ids)} dead job{'s' if len(ids) != 1 else ''}")
    with Progress(len(ids), "jobs", enabled=bool(ids) and not args.json) as bar:
        report = app.replay_dead(
            ids,
            per_second=args.per_second,
            progress=lambda done, _total: bar.update(done),
            ignore_backlog=args.ignore_backlog,
        )
    if args.json:
        out(json.dumps(report.to_json(), indent=2))
    elif not ids:
        out("no dead jobs match")
    else:
        out(f"replayed {len(report.replayed)} of {report.matched} jobs")
        for job_id, why in report.skipped:
            out(f"skipped job {job_id}: {why}")
        if report.stopped is not None:
            out(f"stopped: {report.stopped}")
    return 1 if report.skipped else 0


def _confirm(what: str) -> None:
    """Ask on the terminal; without one, refuse (scripts pass --yes)."""
    if not sys.stdin.isatty():
        raise ConfigurationError(
            f"replaying {what} needs --yes (there is no terminal to ask on); nothing replayed"
        )
    sys.stderr.write(f"replay {what}? [y/N] ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise ConfigurationError("nothing replayed: not confirmed")
