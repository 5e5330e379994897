"""`duetime queues`: each queue's settings (dispatch mode, pause, concurrency, max backlog,
weight) with its backlog, running and waiting counts (docs/outbox.md, docs/flow-control.md)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from duetime.cli.support import (
    checked,
    flag_values,
    limit_flag,
    make_app,
    out,
    table,
    waited,
    when,
)
from duetime.core.flow.parsers import KEEP, parse_weight
from duetime.core.flow.records import QueueFlow
from duetime.core.outbox import Dispatch, QueueSettings


def add_parsers(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    queues = sub.add_parser(
        "queues", help="queues and their settings: list, pause, resume, set"
    ).add_subparsers(dest="queues_command", required=True, metavar="ACTION")
    p = queues.add_parser(
        "list",
        parents=parents,
        help="every queue with settings or jobs: its settings, backlog, running and waiting counts",
    )
    p.add_argument("--json", action="store_true", help="print the queues as JSON")
    p.set_defaults(func=cmd_list)

    for action, text in (
        ("pause", "start no more jobs of a queue (enqueues still accepted; running ones finish)"),
        ("resume", "start a paused queue's jobs again"),
    ):
        p = queues.add_parser(action, parents=parents, help=text)
        p.add_argument("name", help="the queue's name")
        p.add_argument("--json", action="store_true", help="print the queue's settings as JSON")
        p.set_defaults(func=cmd_pause if action == "pause" else cmd_resume)

    p = queues.add_parser("set", parents=parents, help="change a queue's settings")
    p.add_argument("name", help="the queue's name")
    p.add_argument(
        "--dispatch",
        choices=[str(d) for d in Dispatch],
        help="direct: workers claim its jobs from the database (the default); outbox: "
        "`duetime relay` sends them through the broker (docs/outbox.md)",
    )
    p.add_argument(
        "--concurrency",
        type=limit_flag,
        default=KEEP,
        metavar="N",
        help="at most N of its attempts run at once, over every worker (none: no limit)",
    )
    p.add_argument(
        "--max-backlog",
        type=limit_flag,
        default=KEEP,
        metavar="N",
        help="refuse enqueues past N waiting jobs (none: no limit)",
    )
    p.add_argument(
        "--weight",
        type=checked(parse_weight),
        metavar="W",
        help="its share of a claim against other queues with due jobs (default 1)",
    )
    p.add_argument("--json", action="store_true", help="print the queue's settings as JSON")
    p.set_defaults(func=cmd_set)


def cmd_list(args: argparse.Namespace) -> int:
    app = make_app(args)
    flows = app.queue_flows()
    figures = app.outbox_status()
    backlog = {q.queue: q.backlog for q in figures.queues}
    if args.json:
        rows = [{**f.to_json(), "outbox_backlog": backlog.get(f.settings.queue, 0)} for f in flows]
        out(json.dumps(rows, indent=2))
        return 0
    table([_row(f, backlog.get(f.settings.queue, 0)) for f in flows], HEADERS)
    return 0


HEADERS = [
    "queue",
    "dispatch",
    "state",
    "concurrency",
    "max backlog",
    "weight",
    "backlog",
    "running",
    "waiting",
    "waited",
    "outbox backlog",
    "changed",
]


def _row(f: QueueFlow, outbox_backlog: int) -> list[object]:
    q = f.settings
    return [
        q.queue,
        q.dispatch,
        "paused" if q.paused else "active",
        "-" if q.concurrency is None else q.concurrency,
        "-" if q.max_backlog is None else q.max_backlog,
        f"{q.weight:g}",
        f.counts.backlog,
        f.counts.running,
        f.counts.waiting,
        waited(f.counts),
        outbox_backlog,
        when(q.updated_at),
    ]


def cmd_pause(args: argparse.Namespace) -> int:
    return _show(args, make_app(args).pause_queue(args.name))


def cmd_resume(args: argparse.Namespace) -> int:
    return _show(args, make_app(args).resume_queue(args.name))


def cmd_set(args: argparse.Namespace) -> int:
    if (
        args.dispatch is None
        and args.concurrency is KEEP
        and args.max_backlog is KEEP
        and args.weight is None
    ):
        args.usage_error(
            "say what to set: --dispatch outbox|direct, --concurrency N, --max-backlog N "
            "or --weight W"
        )
    app = make_app(args)
    with flag_values(args):
        settings = app.set_queue(
            args.name,
            dispatch=args.dispatch,
            concurrency=args.concurrency,
            max_backlog=args.max_backlog,
            weight=args.weight,
        )
    if not args.json and args.concurrency is KEEP and args.max_backlog is KEEP and not args.weight:
        out(f"queue {settings.queue}: dispatch {settings.dispatch}")  # as it always said
        return 0
    return _show(args, settings)


def _show(args: argparse.Namespace, q: QueueSettings) -> int:
    if args.json:
        out(json.dumps(q.to_json(), indent=2))
        return 0
    limits = ", ".join(
        f"{name} {'-' if value is None else value}"
        for name, value in (("concurrency", q.concurrency), ("max backlog", q.max_backlog))
    )
    state = "paused" if q.paused else "active"
    out(f"queue {q.queue}: {state}, dispatch {q.dispatch}, {limits}, weight {q.weight:g}")
    return 0
