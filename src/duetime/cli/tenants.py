"""`duetime tenants`: each tenant's flow settings (concurrency, max backlog, weight) with its
backlog, running and waiting counts (docs/flow-control.md)."""

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
from duetime.core.flow.records import TenantFlow


def add_parsers(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    tenants = sub.add_parser("tenants", help="tenants' flow settings: list, set").add_subparsers(
        dest="tenants_command", required=True, metavar="ACTION"
    )
    p = tenants.add_parser(
        "list",
        parents=parents,
        help="every tenant with settings or jobs: its settings, backlog, running and waiting "
        "counts",
    )
    p.add_argument("--json", action="store_true", help="print the tenants as JSON")
    p.set_defaults(func=cmd_list)

    p = tenants.add_parser("set", parents=parents, help="change a tenant's flow settings")
    p.add_argument("name", help="the tenant's name")
    p.add_argument(
        "--concurrency",
        type=limit_flag,
        default=KEEP,
        metavar="N",
        help="at most N of its attempts run at once, over every queue and worker (none: no limit)",
    )
    p.add_argument(
        "--max-backlog",
        type=limit_flag,
        default=KEEP,
        metavar="N",
        help="refuse its enqueues past N waiting jobs (none: no limit)",
    )
    p.add_argument(
        "--weight",
        type=checked(parse_weight),
        metavar="W",
        help="its share of a claim against other tenants with due jobs (default 1)",
    )
    p.add_argument("--json", action="store_true", help="print the tenant's settings as JSON")
    p.set_defaults(func=cmd_set)


def cmd_list(args: argparse.Namespace) -> int:
    flows = make_app(args).tenant_flows()
    if args.json:
        out(json.dumps([f.to_json() for f in flows], indent=2))
        return 0
    table(
        [_row(f) for f in flows],
        [
            "tenant",
            "concurrency",
            "max backlog",
            "weight",
            "backlog",
            "running",
            "waiting",
            "waited",
            "changed",
        ],
    )
    return 0


def _row(f: TenantFlow) -> list[object]:
    t = f.settings
    return [
        t.tenant,
        "-" if t.concurrency is None else t.concurrency,
        "-" if t.max_backlog is None else t.max_backlog,
        f"{t.weight:g}",
        f.counts.backlog,
        f.counts.running,
        f.counts.waiting,
        waited(f.counts),
        when(t.updated_at),
    ]


def cmd_set(args: argparse.Namespace) -> int:
    if args.concurrency is KEEP and args.max_backlog is KEEP and args.weight is None:
        args.usage_error("say what to set: --concurrency N, --max-backlog N or --weight W")
    app = make_app(args)
    with flag_values(args):
        t = app.set_tenant(
            args.name,
            concurrency=args.concurrency,
            max_backlog=args.max_backlog,
            weight=args.weight,
        )
    if args.json:
        out(json.dumps(t.to_json(), indent=2))
    else:
        concurrency = "-" if t.concurrency is None else t.concurrency
        backlog = "-" if t.max_backlog is None else t.max_backlog
        out(
            f"tenant {t.tenant}: concurrency {concurrency}, max backlog {backlog}, "
            f"weight {t.weight:g}"
        )
    return 0
