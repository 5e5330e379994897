"""`duetime stats`: jobs by status and queue, oldest overdue age, lag and throughput, and the
queues and tenants with flow settings (backlog, running, waiting, limits)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from duetime.admin import figures as admin_figures
from duetime.cli.support import LIMIT_HEADERS, age, limit_row, make_app, out, table, waited
from duetime.core.outbox import QueueSettings
from duetime.core.states import JobStatus
from duetime.core.stats import Stats


def add_parsers(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "stats", parents=parents, help="jobs by status and queue, overdue age, lag, throughput"
    )
    p.add_argument("--all", action="store_true", help="figures over every tenant")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(func=cmd_stats)


def cmd_stats(args: argparse.Namespace) -> int:
    app = make_app(args)
    figures = admin_figures.stats(app, None) if args.all else app.stats()
    limits = app.limits()  # cluster-wide, like the limits themselves
    now = app.clock.now()
    if args.json:
        body = figures.to_json()
        if limits:
            body["limits"] = [s.to_json(now) for s in limits]
        out(json.dumps(body, indent=2))
        return 0
    print_stats(figures)
    if limits:
        out()
        table([limit_row(s, now) for s in limits], LIMIT_HEADERS)
    return 0


def print_stats(figures: Stats) -> None:
    by_queue = figures.by_queue()
    by_status = figures.by_status()
    queues = sorted(by_queue)
    rows = [
        (status, by_status.get(str(status), 0), *(by_queue[q].get(str(status), 0) for q in queues))
        for status in JobStatus
    ]
    rows.append(("total", sum(by_status.values()), *(sum(by_queue[q].values()) for q in queues)))
    table(rows, ["status", "all queues", *queues])
    out()
    overdue = figures.oldest_overdue_seconds
    out(
        "oldest overdue job: none"
        if overdue is None
        else f"oldest overdue job: due {age(overdue)} ago and not started yet"
    )
    out()
    table(
        [
            (
                f"last {w.minutes}m",
                w.started,
                w.succeeded,
                w.failed,
                f"{w.throughput_per_second:.4f}",
                _seconds(w.lag_p50),
                _seconds(w.lag_p95),
                _seconds(w.lag_p99),
            )
            for w in figures.windows
        ],
        ["window", "started", "succeeded", "failed", "done/s", "lag p50", "lag p95", "lag p99"],
    )
    if figures.sample_limit_hit:
        out()
        out(f"(figures from the newest {figures.sampled} attempts of the last hour only)")
    print_flow(figures)


def print_flow(figures: Stats) -> None:
    """Queues and tenants with flow settings (docs/flow-control.md): none, nothing printed."""
    queues = [q for q in figures.queues if _controlled(q.settings)]
    tenants = [t for t in figures.tenants if t.settings.updated_at is not None]
    if queues:
        out()
        table(
            [
                (
                    q.settings.queue,
                    "paused" if q.settings.paused else "active",
                    q.counts.backlog,
                    q.counts.running,
                    q.counts.waiting,
                    waited(q.counts),
                    _limit(q.settings.concurrency),
                    _limit(q.settings.max_backlog),
                    f"{q.settings.weight:g}",
                )
                for q in queues
            ],
            [
                "queue",
                "state",
                "backlog",
                "running",
                "waiting",
                "waited",
                "concurrency",
                "max backlog",
                "weight",
            ],
        )
    if tenants:
        out()
        table(
            [
                (
                    t.settings.tenant,
                    t.counts.backlog,
                    t.counts.running,
                    t.counts.waiting,
                    waited(t.counts),
                    _limit(t.settings.concurrency),
                    _limit(t.settings.max_backlog),
                    f"{t.settings.weight:g}",
                )
                for t in tenants
            ],
            [
                "tenant",
                "backlog",
                "running",
                "waiting",
                "waited",
                "concurrency",
                "max backlog",
                "weight",
            ],
        )


def _controlled(q: QueueSettings) -> bool:
    return q.paused or q.concurrency is not None or q.max_backlog is not None or q.weight != 1


def _limit(value: int | None) -> str:
    return "-" if value is None else str(value)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}s"
