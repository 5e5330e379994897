"""`duetime serve`: the REST API, dashboard and /metrics over HTTP (uvicorn)."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from duetime import logs
from duetime.cli.support import make_app
from duetime.core.errors import ConfigurationError

log = logging.getLogger("duetime.cli")


def add_parsers(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "serve", parents=parents, help="serve the REST API (/v1), dashboard (/) and /metrics"
    )
    p.add_argument(
        "--app",
        help="module:attribute of your duetime.App: its task defaults apply, and enqueues of "
        "tasks it does not register or args their handlers cannot take are refused (422)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (8000)")
    p.add_argument(
        "--no-auth",
        action="store_true",
        help="no tokens: every request acts as admin of --tenant (loopback hosts only)",
    )
    p.add_argument(
        "--secure-cookies",
        action="store_true",
        help="mark the dashboard session cookie Secure (when served behind HTTPS)",
    )
    p.add_argument(
        "--max-body-bytes",
        type=int,
        default=2 * 1024 * 1024,
        help="refuse request bodies over this size with 413 (2 MiB)",
    )
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--log-format", default="text", choices=["text", "json"])
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from duetime.server import ServerSettings, create_app
    from duetime.server.auth import is_loopback

    if args.no_auth and not is_loopback(args.host):
        raise ConfigurationError(
            f"--no-auth is refused on {args.host}: it would give anyone who reaches the port "
            "admin rights; listen on 127.0.0.1 or use tokens (`duetime tokens create`)"
        )
    logs.configure(args.log_level, args.log_format)
    app = make_app(args)
    app.pool_timeout = 5.0  # in an outage, answer 503 within seconds instead of hanging
    settings = ServerSettings(
        auth=not args.no_auth,
        tenant=args.tenant,
        max_body_bytes=args.max_body_bytes,
        secure_cookies=args.secure_cookies,
    )
    asgi = create_app(app, settings)
    log.info(
        "serving on http://%s:%s (dashboard /, API /v1, docs /docs, metrics /metrics)%s",
        args.host,
        args.port,
        "" if settings.auth else " WITHOUT AUTH",
    )
    try:
        uvicorn.run(asgi, host=args.host, port=args.port, log_config=None, access_log=False)
    finally:
        app.close()
    return 0
