"""Helpers shared by the CLI's command modules: loading the app, printing tables and JSON."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from duetime.client import App
from duetime.core.errors import ConfigurationError


def load_app(spec: str) -> App:
    """Import `module:attribute` (the working directory is importable) and return the App."""
    module_name, _, attr = spec.partition(":")
    if not module_name:
        raise ConfigurationError(f"--app {spec!r} is not of the form module:app")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(
            f"cannot import {module_name!r} for --app ({exc}); run from the folder that holds it "
            "or set PYTHONPATH"
        ) from None
    target: Any = module
    for part in (attr or "app").split("."):
        target = getattr(target, part, None)
        if target is None:
            raise ConfigurationError(f"{module_name!r} has no attribute {attr or 'app'!r}")
    if not isinstance(target, App):
        raise ConfigurationError(f"--app {spec!r} is a {type(target).__name__}, not a duetime.App")
    return target


def make_app(args: argparse.Namespace) -> App:
    app = load_app(args.app) if getattr(args, "app", None) else App(tenant=args.tenant)
    if args.database_url:
        app.database_url = args.database_url
    return app


def out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> None:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        out("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def json_object(text: str | None, what: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ConfigurationError(f"{what} must be a JSON object like '{{\"id\": 1}}'")
    return value
