"""`duetime nodes`: the worker nodes a store knows of: live, dead or stopped, and what they hold."""

from __future__ import annotations

import argparse
import json
from typing import Any

from duetime.cli.support import make_app, out, seconds, table


def add_parsers(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("nodes", parents=parents, help="worker nodes: live, dead, stopped")
    p.add_argument(
        "--dead-after", type=seconds, default=30.0, help="silence after which a node is dead"
    )
    p.add_argument("--all", action="store_true", help="include stopped nodes")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_nodes)


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
                _tasks(n.tasks),
            )
        )
    headers = ["node", "state", "last seen", "queues", "conc", "duties", "holding (jobs)", "tasks"]
    table(rows, headers)
    return 0


def _tasks(tasks: tuple[str, ...] | None) -> str:
    """The tasks a node serves, the first few by name (? when it did not say)."""
    if tasks is None:
        return "?"
    shown = ",".join(tasks[:3]) + (f" +{len(tasks) - 3}" if len(tasks) > 3 else "")
    return f"{len(tasks)}: {shown}" if tasks else "0"
