"""`duetime nodes`: the worker nodes a store knows of: live, dead or stopped, what they hold,
and how far each one's clock is off the database's.

Liveness is judged on the database's time: each node writes last_seen_at on its clock
corrected by the database's, and this command reads the database's clock when it opens it."""

from __future__ import annotations

import argparse
import json
from typing import Any

from duetime.cli.support import make_app, out, seconds, table
from duetime.core.clock import CLOCK_OFFSET_WARNING
from duetime.core.models import Node


def add_parsers(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("nodes", parents=parents, help="worker nodes: live, dead, stopped")
    p.add_argument(
        "--dead-after", type=seconds, default=30.0, help="silence after which a node is dead"
    )
    p.add_argument(
        "--clock-warning",
        type=seconds,
        default=CLOCK_OFFSET_WARNING,
        metavar="DURATION",
        help="mark a node whose clock is off the database's by more than this (default 1s)",
    )
    p.add_argument("--all", action="store_true", help="include stopped nodes")
    p.add_argument("--json", action="store_true", help="print the nodes as JSON")
    p.set_defaults(func=cmd_nodes)


def cmd_nodes(args: argparse.Namespace) -> int:
    app = make_app(args)  # opened: its clock is the database's
    listed = app.store.list_nodes()
    now = app.clock.now()
    nodes = [n for n in listed if args.all or n.state(now, args.dead_after) != "stopped"]
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
                _tasks(n.tasks),
                _clock(n, args.clock_warning),
            )
        )
    headers = [
        "node",
        "state",
        "last seen",
        "queues",
        "conc",
        "duties",
        "holding (jobs)",
        "tasks",
        "clock",
    ]
    table(rows, headers)
    return 0


def _tasks(tasks: tuple[str, ...] | None) -> str:
    """The tasks a node serves, the first few by name (? when it did not say)."""
    if tasks is None:
        return "?"
    shown = ",".join(tasks[:3]) + (f" +{len(tasks) - 3}" if len(tasks) > 3 else "")
    return f"{len(tasks)}: {shown}" if tasks else "0"


def _clock(node: Node, warning: float) -> str:
    """How far the node's clock is ahead of the database's (+30.0s; -2.5s: behind), marked
    with "!" past `warning` seconds; - when it did not measure (an injected clock)."""
    if node.clock_offset is None:
        return "-"
    mark = " !" if node.clock_skewed(warning) else ""
    digits = 1 if abs(node.clock_offset) >= 0.1 else 3
    return f"{node.clock_offset:+.{digits}f}s{mark}"
