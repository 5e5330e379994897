"""`duetime limits`: limits per dependency (rate, burst, concurrency per limit key)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from duetime.cli.support import LIMIT_HEADERS as HEADERS
from duetime.cli.support import flag_values, limit_row, make_app, out, table


def add_parsers(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    limits = sub.add_parser(
        "limits", help="limits per dependency: list, set, delete (docs/flow-control.md)"
    ).add_subparsers(dest="limits_command", required=True, metavar="ACTION")
    p = limits.add_parser(
        "list", parents=parents, help="every limit key: settings, running, waiting, tokens"
    )
    p.add_argument("--json", action="store_true", help="print the limits as JSON")
    p.set_defaults(func=cmd_list)

    p = limits.add_parser(
        "set", parents=parents, help="create or change a key's limits (others stay as they are)"
    )
    p.add_argument("key", help="the limit key, as tasks name it: @app.task(limits=[KEY])")
    p.add_argument("--rate", help="starts per second, minute or hour: N/s, N/m or N/h; off")
    p.add_argument(
        "--burst", help="tokens the bucket holds (default: one second of rate, at least 1); off"
    )
    p.add_argument("--concurrency", help="attempts that may run at once, across every worker; off")
    p.add_argument(
        "--retry-budget",
        help="a fraction of recent attempts retries may use (e.g. 0.2); off",
    )
    p.add_argument(
        "--breaker-threshold",
        help="the fraction of recent attempts failing that opens the breaker (e.g. 0.5); off",
    )
    p.add_argument(
        "--breaker-cooldown",
        metavar="DURATION",
        help="how long an open breaker holds the key's jobs before one probe: 1s to 1d "
        "(e.g. 10s, 2m; default 30s); off for the default",
    )
    p.add_argument("--json", action="store_true", help="print the key's limits as JSON")
    p.set_defaults(func=cmd_set)

    p = limits.add_parser("delete", parents=parents, help="delete a key's limits")
    p.add_argument("key", help="the limit key")
    p.set_defaults(func=cmd_delete)


def cmd_list(args: argparse.Namespace) -> int:
    app = make_app(args)
    found = app.limits()
    now = app.clock.now()
    if args.json:
        out(json.dumps([s.to_json(now) for s in found], indent=2))
        return 0
    table([limit_row(s, now) for s in found], HEADERS)
    return 0


def cmd_set(args: argparse.Namespace) -> int:
    options = {
        "rate": args.rate,
        "burst": args.burst,
        "concurrency": args.concurrency,
        "retry_budget": args.retry_budget,
        "breaker_threshold": args.breaker_threshold,
        "breaker_cooldown": args.breaker_cooldown,
    }
    if all(v is None for v in options.values()):
        args.usage_error(
            "say what to set: --rate, --burst, --concurrency, --retry-budget, "
            "--breaker-threshold or --breaker-cooldown"
        )
    app = make_app(args)
    with flag_values(args):
        status = app.set_limit(args.key, **options)
    if args.json:
        out(json.dumps(status.to_json(app.clock.now()), indent=2))
    else:
        table([limit_row(status, app.clock.now())], HEADERS)
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    app = make_app(args)
    app.delete_limit(args.key)
    out(f"limit {args.key}: deleted")
    return 0
