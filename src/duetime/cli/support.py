"""Helpers shared by the CLI's command modules: loading the app, printing tables and JSON,
a progress bar, and the argparse types of numeric flags."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, NoReturn, TextIO, TypeVar

from duetime.client import App
from duetime.client.app import read_clock_on_demand
from duetime.core.clock import CLOCK_OFFSET_WARNING
from duetime.core.durations import parse_duration
from duetime.core.errors import ConfigurationError, InvalidRequest
from duetime.core.flow.parsers import parse_limit
from duetime.core.flow.records import FlowCounts
from duetime.core.limits import LimitStatus
from duetime.core.requests import check_nesting, parse_id, parse_instant
from duetime.store import missing_database, url_scheme

T = TypeVar("T")


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


def make_app(
    args: argparse.Namespace,
    *,
    create: bool = False,
    opened: bool | None = None,
    long_running: bool = False,
) -> App:
    """The App a command acts on: --app's, or a plain one of --tenant, on --database-url.

    Only the commands that store something new (`create=True`: migrate, enqueue, schedules
    add, tokens create, worker, serve) may create the database; the others refuse a database
    that does not exist rather than create an empty one (a mistyped SQLite path).

    `opened` (default: the commands that do not create) opens the database at once. The
    database's clock is read when the command first asks the time (read_clock_on_demand):
    every instant it then computes or judges (a delay, an age, a node's liveness) is the
    database's time, not this machine's (docs/guarantees.md), and a command that asks none
    (`jobs list`, `dlq list`) reads no clock. A `long_running` command (worker, serve, relay)
    reads it when the database is opened, as an App does."""
    app = load_app(args.app) if getattr(args, "app", None) else App(tenant=args.tenant)
    if not long_running:
        read_clock_on_demand(app)
    if args.database_url:
        app.database_url = args.database_url
    if not create:
        missing = missing_database(app.database_url)
        if missing:
            raise ConfigurationError(
                f"no duetime database at {app.database_url} ({missing}); check the URL "
                "(--database-url or DUETIME_DATABASE_URL), or create the database with "
                "`duetime migrate`"
            )
    if opened if opened is not None else not create:
        app.store  # noqa: B018 - opens the database
    return app


@contextmanager
def flag_values(args: argparse.Namespace) -> Iterator[None]:
    """Around the call that checks what the flags say (an enqueue, a schedule definition, a
    due time): a value duetime refuses there (InvalidRequest: out of range, a deadline before
    the due time, an unknown zone...) is a usage error, exit 2, like a value argparse refuses."""
    try:
        yield
    except InvalidRequest as exc:
        usage_error: Callable[[str], NoReturn] = args.usage_error
        usage_error(str(exc))


def out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> None:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        out("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def when(value: datetime | None) -> str:
    """An instant in a table cell, to the second (UTC), or - for none."""
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def age(seconds: float) -> str:
    """12.3s, 5m 07s, 3h 02m, 4d 06h."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    for unit, size, sub, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60)):
        if whole >= size:
            return f"{whole // size}{unit} {whole % size // sub_size:02d}{sub}"
    return f"{whole // 60}m {whole % 60:02d}s"


def waited(counts: FlowCounts) -> str:
    """How long a queue's or tenant's oldest due job not started has waited, or - for none."""
    return age(counts.waiting_seconds) if counts.waiting else "-"


# -- argparse types: a bad value is a usage error (exit 2) found before anything is opened ------
# (argparse shows an ArgumentTypeError's message; for other errors it names the function in
# "invalid <name> value")


def json_object(text: str) -> dict[str, Any]:
    """--args: a JSON object (an empty value: {})."""
    if not text:
        return {}
    try:
        check_nesting(text)
        value = json.loads(text)
    except InvalidRequest as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object like '{\"id\": 1}'")
    return value


def database_url(text: str) -> str:
    """--database-url: a URL of a dialect duetime knows (whether it answers is found later);
    an empty value means the default, as it always did."""
    try:
        if text:
            url_scheme(text)
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def instant(text: str) -> datetime:
    """An instant flag (--at, --deadline, --start, ...): ISO 8601 with a UTC offset, in UTC."""
    try:
        return parse_instant(text, "value")
    except InvalidRequest as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def duration(text: str) -> timedelta:
    """A duration flag (--in, --every, --jitter, ...): 30s, 5m, 1h30m, or plain seconds."""
    try:
        return parse_duration(text, "value")
    except InvalidRequest as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0 to 65535, got {value}")
    return value


MAX_FLAG_INT = 2**31 - 1  # the largest count a flag takes (--limit, --concurrency, ...)


def positive_int(text: str) -> int:
    value = int(text)
    if not 1 <= value <= MAX_FLAG_INT:
        raise argparse.ArgumentTypeError(f"must be from 1 to {MAX_FLAG_INT}, got {value}")
    return value


def an_id(text: str) -> int:
    """A job's or a token's id, or a --cursor (next_cursor): 1 to 2**63 - 1."""
    try:
        return parse_id(text, "id")
    except InvalidRequest as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_int(text: str) -> int:
    """positive_int under the name the worker, enqueue and jobs flags have always shown in
    argparse's "invalid _positive_int value" errors."""
    return positive_int(text)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number above 0, got {text}")
    return value


def limit_flag(text: str) -> int | None:
    """--concurrency, --max-backlog: a whole number >= 0, or `none` for no limit."""
    try:
        return parse_limit(text, "value")
    except InvalidRequest as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def seconds(text: str) -> float:
    """A duration flag (30s, 5m, 1h30m, or plain seconds) in seconds."""
    return duration(text).total_seconds()


def checked(check: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse type from a core check (the one that the API and the dashboard use too):
    its InvalidRequest is a usage error, one line, exit 2."""

    def parse(text: str) -> T:
        try:
            return check(text)
        except InvalidRequest as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = check.__name__
    return parse


# -- progress -----------------------------------------------------------------------------------


class Progress:
    """A progress bar for long operations, on stderr (stdout stays for results).

    On a terminal it redraws `\r[#####...] 1234/5000 jobs 24%` as work advances and ends the
    line when done; otherwise it writes nothing but that final line. Disabled (`enabled=False`,
    e.g. with --json) it writes nothing at all. Use it as a context manager: leaving the block
    normally writes the final line, leaving it by an exception only ends a drawn line.
    """

    WIDTH = 20
    INTERVAL = 0.1  # seconds between redraws on a terminal

    def __init__(
        self, total: int, unit: str = "jobs", *, enabled: bool = True, stream: TextIO | None = None
    ) -> None:
        self.total = total
        self.unit = unit
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.tty = enabled and _isatty(self.stream)
        self.done = 0
        self._drawn = 0.0  # monotonic time of the last redraw (0: nothing drawn yet)
        self._shown = -1  # the `done` the terminal shows (-1: nothing)

    def render(self) -> str:
        total = max(self.total, 0)
        ratio = 1.0 if total == 0 else min(max(self.done / total, 0.0), 1.0)
        filled = int(ratio * self.WIDTH)
        bar = "#" * filled + "." * (self.WIDTH - filled)
        return f"[{bar}] {self.done}/{total} {self.unit} {int(ratio * 100)}%"

    def update(self, done: int) -> None:
        """Record that `done` items of `total` are finished (redrawn at most every 0.1 s)."""
        self.done = done
        if not self.tty:
            return
        now = time.monotonic()
        if self._drawn and now - self._drawn < self.INTERVAL and done < self.total:
            return
        self._drawn = now
        self._shown = done
        self.stream.write("\r" + self.render())
        self.stream.flush()

    def finish(self) -> None:
        if not self.enabled:
            return
        if not self.tty:
            line = self.render()
        elif self._shown == self.done:
            line = ""  # the terminal shows it already: only end the line
        else:
            line = "\r" + self.render()
        self.stream.write(line + "\n")
        self.stream.flush()
        self._drawn, self._shown = 0.0, -1

    def __enter__(self) -> Progress:
        self.update(self.done)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.finish()
        elif self.tty and self._drawn:
            self.stream.write("\n")  # the error message starts on a line of its own
            self.stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream
        return False


def add_log_flags(parser: argparse.ArgumentParser) -> None:
    """--log-level and --log-format of the long-running commands (worker, serve)."""
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="the least severe log lines shown (INFO)",
    )
    parser.add_argument(
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="log lines as text or as one JSON object each (text)",
    )


def add_loop_flag(parser: argparse.ArgumentParser) -> None:
    """--loop of the commands that run a node (worker, relay)."""
    from duetime.runtime.node import EVENT_LOOPS

    parser.add_argument(
        "--loop",
        choices=EVENT_LOOPS,
        default="auto",
        help="the event loop to run in: uvloop (less CPU per job), asyncio's own, or auto "
        "(default: uvloop where it is installed, as it is with duetime on Linux and macOS)",
    )


def add_clock_warning_flag(parser: argparse.ArgumentParser) -> None:
    """--clock-warning of the commands that run a node (worker, relay)."""
    parser.add_argument(
        "--clock-warning",
        type=_positive_seconds,
        default=CLOCK_OFFSET_WARNING,
        metavar="DURATION",
        help="warn (log, metric, duetime nodes) when this machine's clock is off the "
        "database's by more than this (default 1s; times are corrected either way)",
    )


def _positive_seconds(text: str) -> float:
    value = seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(
            f"must be a positive duration like 1s or 500ms, not {text!r}"
        )
    return value


# -- limits per dependency (`duetime limits list`, `duetime stats`) ---------------------------


def limit_row(s: LimitStatus, now: datetime) -> tuple[Any, ...]:
    c = s.settings
    return (
        c.key,
        str(c.rate) if c.rate is not None else "-",
        f"{c.bucket_size:g}" if c.bucket_size is not None else "-",
        c.concurrency if c.concurrency is not None else "-",
        s.running,
        s.waiting,
        f"{s.tokens:.2f}" if s.tokens is not None else "-",
        when(s.state.paused_until)
        if s.state.paused_until is not None and s.state.paused_until > now
        else "-",
        f"{c.retry_budget:g}" if c.retry_budget is not None else "-",
        s.breaker(now) or "-",
        f"{c.breaker_cooldown_seconds:g}s" if c.breaker_threshold is not None else "-",
    )


# a replay is admitted like an enqueue (docs/flow-control.md); the CLI may override that
IGNORE_BACKLOG = "replay even past the queue's or tenant's max backlog (refused otherwise)"

LIMIT_HEADERS = [
    "key",
    "rate",
    "burst",
    "concurrency",
    "running",
    "waiting",
    "tokens",
    "paused until",
    "retry budget",
    "breaker",
    "cool-down",
]
