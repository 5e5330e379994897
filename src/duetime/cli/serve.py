"""`duetime serve`: the REST API, dashboard and /metrics over HTTP (uvicorn)."""

from __future__ import annotations

import argparse
import errno
import logging
import socket
from typing import Any

from duetime import logs
from duetime.cli.support import _positive_int, add_log_flags, make_app, port
from duetime.core.errors import ConfigurationError

log = logging.getLogger("duetime.cli")

# the packages of the `server` extra (and what they bring), as Python names them
SERVER_PACKAGES = frozenset(
    {
        "fastapi",
        "starlette",
        "pydantic",
        "pydantic_core",
        "uvicorn",
        "jinja2",
        "multipart",
        "python_multipart",
    }
)


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
    p.add_argument("--port", type=port, default=8000, help="port to listen on (8000)")
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
        type=_positive_int,
        default=2 * 1024 * 1024,
        help="refuse request bodies over this size with 413 (2 MiB)",
    )
    add_log_flags(p)
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from duetime.server import ServerSettings, create_app
        from duetime.server.auth import is_loopback
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in SERVER_PACKAGES:
            raise
        raise ConfigurationError(
            f"duetime serve needs the web server packages ({exc.name} is not installed): "
            "pip install 'duetime[server]'"
        ) from exc

    if args.no_auth and not is_loopback(args.host):
        raise ConfigurationError(
            f"--no-auth is refused on {args.host}: it would give anyone who reaches the port "
            "admin rights; listen on 127.0.0.1 or use tokens (`duetime tokens create`)"
        )
    sockets = listen(args.host, args.port)  # a taken port is one clear error, before anything
    try:
        logs.configure(args.log_level, args.log_format)
        app = make_app(args, create=True, long_running=True)
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
            f"[{args.host}]" if ":" in args.host else args.host,  # an IPv6 address
            sockets[0].getsockname()[1],
            "" if settings.auth else " WITHOUT AUTH",
        )
        try:
            config = uvicorn.Config(asgi, log_config=None, access_log=False)
            uvicorn.Server(config).run(sockets=sockets)
        finally:
            app.close()
    finally:
        for sock in sockets:
            sock.close()
    return 0


def listen(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to `port` on every address `host` names (as uvicorn would bind them), or
    a ConfigurationError that says why not: a port another program holds, an unknown host."""
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigurationError(
            f"cannot listen on --host {host}: {exc.strerror}; give an address of this machine, "
            "e.g. 127.0.0.1 or 0.0.0.0"
        ) from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in addresses:
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((*address[:1], port, *address[2:]))
            port = sock.getsockname()[1]  # --port 0: the port the first address was given
    except OSError as exc:
        for sock in sockets:
            sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigurationError(
                f"port {port} on {host} is taken: another program listens there; stop it or "
                "choose another --port"
            ) from None
        raise ConfigurationError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; check --host and --port"
        ) from None
    return sockets
