"""`duetime queues`: each queue's settings (its dispatch mode: direct or outbox)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from duetime.cli.support import flag_values, make_app, out, table, when
from duetime.core.outbox import Dispatch


def add_parsers(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    queues = sub.add_parser("queues", help="queues and their settings: list, set").add_subparsers(
        dest="queues_command", required=True, metavar="ACTION"
    )
    p = queues.add_parser(
        "list", parents=parents, help="every queue with settings or jobs, and its settings"
    )
    p.add_argument("--json", action="store_true", help="print the queues as JSON")
    p.set_defaults(func=cmd_list)

    p = queues.add_parser("set", parents=parents, help="change a queue's settings")
    p.add_argument("name", help="the queue's name")
    p.add_argument(
        "--dispatch",
        choices=[str(d) for d in Dispatch],
        help="direct: workers claim its jobs from the database (the default); outbox: "
        "`duetime relay` sends them through the broker (docs/outbox.md)",
    )
    p.add_argument("--json", action="store_true", help="print the queue's settings as JSON")
    p.set_defaults(func=cmd_set)


def cmd_list(args: argparse.Namespace) -> int:
    app = make_app(args)
    queues = app.queues()
    figures = app.outbox_status()
    backlog = {q.queue: q.backlog for q in figures.queues}
    if args.json:
        rows = [{**q.to_json(), "outbox_backlog": backlog.get(q.queue, 0)} for q in queues]
        out(json.dumps(rows, indent=2))
        return 0
    table(
        [(q.queue, q.dispatch, backlog.get(q.queue, 0), when(q.updated_at)) for q in queues],
        ["queue", "dispatch", "outbox backlog", "changed"],
    )
    return 0


def cmd_set(args: argparse.Namespace) -> int:
    if args.dispatch is None:
        args.usage_error("say what to set: --dispatch outbox|direct")
    app = make_app(args)
    with flag_values(args):
        settings = app.set_queue(args.name, dispatch=args.dispatch)
    if args.json:
        out(json.dumps(settings.to_json(), indent=2))
    else:
        out(f"queue {settings.queue}: dispatch {settings.dispatch}")
    return 0
