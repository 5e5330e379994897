"""`duetime tokens create|list|revoke`: API tokens of a tenant (the secret is shown once)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from duetime.cli.support import an_id, make_app, out, seconds, table, when
from duetime.client import App
from duetime.core.tokens import ApiToken, Role


def add_parsers(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    tokens = sub.add_parser("tokens", help="API tokens: create, list, revoke").add_subparsers(
        dest="tokens_command", required=True, metavar="ACTION"
    )
    p = tokens.add_parser(
        "create", parents=parents, help="create an API token for --tenant (shown once)"
    )
    p.add_argument(
        "--role",
        required=True,
        choices=[str(r) for r in Role],
        help="read (sees), write (also changes) or admin (also bulk replays, every tenant)",
    )
    p.add_argument("--name", default="", help="a label for the token, e.g. ci-deploy")
    p.add_argument(
        "--expires-in",
        type=expiry,
        default=None,
        metavar="DURATION",
        help="refuse the token this long from now, e.g. 30d, 12h (default: never)",
    )
    p.add_argument("--json", action="store_true", help="print the token and its secret as JSON")
    p.set_defaults(func=cmd_tokens_create)

    p = tokens.add_parser("list", parents=parents, help="tokens of --tenant (no secrets)")
    p.add_argument("--all", action="store_true", help="tokens of every tenant")
    p.add_argument("--json", action="store_true", help="print the tokens as JSON")
    p.set_defaults(func=cmd_tokens_list)

    p = tokens.add_parser("revoke", parents=parents, help="revoke a token by id")
    p.add_argument("id", type=an_id, help="the token's id (tokens list)")
    p.add_argument("--json", action="store_true", help="print the token as JSON")
    p.set_defaults(func=cmd_tokens_revoke)


def expiry(text: str) -> float:
    """--expires-in: a duration in the future (30d, 12h, 90m)."""
    value = seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be more than 0, such as 30d or 12h")
    return value


def cmd_tokens_create(args: argparse.Namespace) -> int:
    app = make_app(args, create=True)
    token, secret = app.create_token(args.role, name=args.name, expires_in=args.expires_in)
    if args.json:
        out(json.dumps({**token.to_json(), "secret": secret}, indent=2))
        return 0
    fields = [
        ("secret", secret),
        ("id", token.id),
        ("tenant", token.tenant),
        ("role", token.role),
        ("name", token.name or "-"),
        ("prefix", token.prefix),
        ("expires", f"{when(token.expires_at)} UTC" if token.expires_at else "never"),
    ]
    width = max(len(k) for k, _ in fields)
    for key, value in fields:
        out(f"{key.ljust(width)}  {value}")
    out()
    out("Copy the secret now: it is stored hashed and cannot be shown again.")
    return 0


def cmd_tokens_list(args: argparse.Namespace) -> int:
    app = make_app(args)
    tokens = app.store.list_tokens(None) if args.all else app.list_tokens()
    now = app.clock.now()
    if args.json:
        out(json.dumps([{**t.to_json(), "state": t.state(now)} for t in tokens], indent=2))
        return 0
    table(
        [
            (
                t.id,
                t.tenant,
                t.role,
                t.name or "-",
                t.prefix + "...",
                when(t.created_at),
                when(t.last_used_at),
                when(t.expires_at) if t.expires_at else "never",
                when(t.revoked_at) if t.revoked_at else t.state(now),
            )
            for t in tokens
        ],
        [
            "id",
            "tenant",
            "role",
            "name",
            "prefix",
            "created (UTC)",
            "last used",
            "expires",
            "revoked",
        ],
    )
    return 0


def cmd_tokens_revoke(args: argparse.Namespace) -> int:
    app = make_app(args)
    before = _find_token(app, args.id)
    token = app.revoke_token(args.id)
    if args.json:
        out(json.dumps(token.to_json(), indent=2))
        return 0
    what = f"token {token.id} (tenant {token.tenant}, role {token.role}, prefix {token.prefix})"
    if before is not None and before.revoked_at is not None:
        out(f"{what} was already revoked at {when(token.revoked_at)} UTC")
    else:
        out(f"revoked {what}")
    return 0


def _find_token(app: App, token_id: int) -> ApiToken | None:
    return next((t for t in app.store.list_tokens(None) if t.id == token_id), None)
