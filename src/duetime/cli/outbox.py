"""`duetime relay` (dispatch outbox-mode queues through the broker) and `duetime outbox status`."""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
from typing import Any

from duetime import logs
from duetime.cli.support import (
    add_clock_warning_flag,
    add_log_flags,
    add_loop_flag,
    checked,
    make_app,
    out,
    port,
    positive_float,
    seconds,
    table,
)
from duetime.core.outbox import check_window


def broker_url_flag(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--broker-url",
        default=os.environ.get("DUETIME_BROKER_URL"),
        metavar="URL",
        help=f"RabbitMQ to {what}, e.g. amqp://guest:guest@127.0.0.1:5672/ "
        "(default: $DUETIME_BROKER_URL)",
    )


def add_parsers(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "relay",
        parents=parents,
        help="dispatch due jobs of outbox-mode queues and publish them to the broker",
    )
    broker_url_flag(p, "publish to")
    p.add_argument(
        "--rate",
        type=positive_float,
        metavar="PER_SECOND",
        help="publish at most this many messages a second (default: as fast as confirmed)",
    )
    p.add_argument(
        "--dispatch-lease",
        type=seconds,
        default=300.0,
        help="how long a published attempt may wait in the broker for a worker before the "
        "reaper retries it (default 300s)",
    )
    p.add_argument(
        "--metrics-port",
        type=port,
        metavar="PORT",
        help="serve the relay's Prometheus metrics on this port (default: not served)",
    )
    p.add_argument(
        "--metrics-host", default="127.0.0.1", metavar="HOST", help="address to serve metrics on"
    )
    add_clock_warning_flag(p)
    add_loop_flag(p)
    add_log_flags(p)
    p.set_defaults(func=cmd_relay)

    outbox = sub.add_parser("outbox", help="the transactional outbox: status").add_subparsers(
        dest="outbox_command", required=True, metavar="ACTION"
    )
    p = outbox.add_parser(
        "status",
        parents=parents,
        help="unpublished events (backlog), the oldest one's age, the publish rate",
    )
    p.add_argument(
        "--window",
        type=checked(check_window),
        default=60.0,
        help="the publish rate's window: 1s to 1d (default 60s)",
    )
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(func=cmd_status)


def cmd_relay(args: argparse.Namespace) -> int:
    from duetime.runtime import metrics as relay_metrics
    from duetime.runtime.node import Node, NodeHeartbeat, event_loop_factory, run_until_signalled
    from duetime.runtime.outbox.broker import require
    from duetime.runtime.outbox.relay import relay_node, relay_services
    from duetime.runtime.service import BlockingCalls
    from duetime.runtime.worker import default_worker_id

    if not args.broker_url:
        args.usage_error("give the broker: --broker-url URL or DUETIME_BROKER_URL")
    event_loop_factory(args.loop)  # --loop uvloop where it is not installed fails now
    require()
    logs.configure(args.log_level, args.log_format)
    app = make_app(args, create=True, long_running=True)
    figures = relay_metrics.WorkerMetrics()
    exporter = None
    if args.metrics_port is not None:
        exporter = relay_metrics.serve(figures, args.metrics_port, args.metrics_host)
    calls = BlockingCalls(4)
    relay_id = f"relay:{default_worker_id()}"
    # registered as a node (duetime nodes), heartbeated, marked stopped when it stops
    registry = NodeHeartbeat(
        app.store,
        app.clock,
        calls,
        functools.partial(relay_node, relay_id, app.clock),
        clock_warning=args.clock_warning,
        metrics=figures,
    )
    relaying = relay_services(
        app.store,
        app.clock,
        calls,
        args.broker_url,
        relay_id=relay_id,
        rate=args.rate,
        dispatch_lease=args.dispatch_lease,
        metrics=figures,
    )
    services = [registry, *relaying]

    async def main(stop: asyncio.Event) -> None:
        await Node(services).run(stop)

    try:
        run_until_signalled(main, grace=10.0, loop=args.loop)
    finally:
        calls.close()
        if exporter is not None:
            exporter.stop()
        app.close()
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    app = make_app(args)
    figures = app.outbox_status(args.window)
    if args.json:
        out(json.dumps(figures.to_json(), indent=2))
        return 0
    age = figures.oldest_unpublished_age_seconds
    out(f"backlog          {figures.backlog} unpublished event(s)")
    out(f"oldest           {'-' if age is None else f'{age:.1f}s'}")
    out(f"publish rate     {figures.publish_rate:.2f}/s over {figures.window_seconds:g}s")
    waited = figures.oldest_dispatched_age_seconds
    out(
        f"dispatched       {figures.dispatched} waiting for a worker"
        + ("" if waited is None else f", the oldest for {waited:.1f}s")
    )
    queues = figures.to_json()["queues"]
    assert isinstance(queues, list)
    if queues:
        out()
        table(
            [
                (
                    q["queue"],
                    q["backlog"],
                    "-"
                    if q["oldest_unpublished_age_seconds"] is None
                    else f"{q['oldest_unpublished_age_seconds']:.1f}s",
                    q["published"],
                    q["dispatched"],
                )
                for q in queues
            ],
            [
                "queue",
                "backlog",
                "oldest",
                f"published ({figures.window_seconds:g}s)",
                "dispatched",
            ],
        )
    return 0
