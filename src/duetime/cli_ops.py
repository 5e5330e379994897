"""Operator commands of the CLI (a public contract): `duetime tokens ...`, `duetime stats`,
`duetime dlq list|replay`, and `duetime enqueue --from-file` (bulk enqueue from JSON lines).

Results go to stdout (tables, or JSON with --json); progress bars and prompts go to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from duetime import operators
from duetime.cli_support import Progress, make_app, out, table
from duetime.client import App
from duetime.core.errors import ConfigurationError, DuetimeError, InvalidRequest
from duetime.core.models import Attempt, Job, NewJob, attempt_to_json, page_of
from duetime.core.requests import TaskDefaults, build_new_job
from duetime.core.states import JobStatus
from duetime.core.stats import Stats
from duetime.core.tokens import ApiToken, Role

DEFAULT_BATCH = 500  # jobs per transaction of `enqueue --from-file` (the JSON-lines form)
MAX_BAD_LINES_SHOWN = 10

# the fields of one line of `enqueue --from-file` without TASK, and their aliases (REST names)
LINE_FIELDS = (
    "task",
    "args",
    "key",
    "queue",
    "priority",
    "at",
    "delay",
    "deadline",
    "max_attempts",
    "business_key",
)
LINE_ALIASES = {"due_at": "at", "delay_seconds": "delay", "deadline_at": "deadline"}


def add_parsers(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register `tokens`, `stats` and `dlq` on the top-level subparsers."""
    tokens = sub.add_parser("tokens", help="API tokens: create, list, revoke").add_subparsers(
        dest="tokens_command", required=True, metavar="ACTION"
    )
    p = tokens.add_parser(
        "create", parents=parents, help="create an API token for --tenant (shown once)"
    )
    p.add_argument("--role", required=True, choices=[str(r) for r in Role])
    p.add_argument("--name", default="", help="a label for the token, e.g. ci-deploy")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_tokens_create)

    p = tokens.add_parser("list", parents=parents, help="tokens of --tenant (no secrets)")
    p.add_argument("--all", action="store_true", help="tokens of every tenant")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_tokens_list)

    p = tokens.add_parser("revoke", parents=parents, help="revoke a token by id")
    p.add_argument("id", type=int)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_tokens_revoke)

    p = sub.add_parser(
        "stats", parents=parents, help="jobs by status and queue, overdue age, lag, throughput"
    )
    p.add_argument("--all", action="store_true", help="figures over every tenant")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_stats)

    dlq = sub.add_parser("dlq", help="dead jobs: list and replay").add_subparsers(
        dest="dlq_command", required=True, metavar="ACTION"
    )
    p = dlq.add_parser("list", parents=parents, help="dead jobs with their last error")
    p.add_argument("--task")
    p.add_argument("--queue")
    p.add_argument("--limit", type=positive_int, default=50)
    p.add_argument("--cursor", type=int, help="show jobs older than this id (next_cursor)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_dlq_list)

    p = dlq.add_parser(
        "replay", parents=parents, help="replay dead jobs: ids, or all matching a filter"
    )
    p.add_argument("ids", nargs="*", type=int, metavar="ID", help="dead jobs to replay")
    p.add_argument("--task", help="replay every dead job of this task")
    p.add_argument("--queue", help="replay every dead job of this queue")
    p.add_argument("--all", action="store_true", help="replay every dead job of the tenant")
    p.add_argument("--per-second", type=positive_float, help="at most this many replays a second")
    p.add_argument("--yes", action="store_true", help="do not ask before a filter replay")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_dlq_replay, usage_error=p.error)


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number above 0, got {text}")
    return value


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


# -- tokens -------------------------------------------------------------------------------------


def cmd_tokens_create(args: argparse.Namespace) -> int:
    app = make_app(args)
    token, secret = app.create_token(args.role, name=args.name)
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
    if args.json:
        out(json.dumps([t.to_json() for t in tokens], indent=2))
        return 0
    table(
        [
            (
                t.id,
                t.tenant,
                t.role,
                t.name or "-",
                t.prefix + "...",
                _when(t.created_at),
                _when(t.last_used_at),
                _when(t.revoked_at) if t.revoked_at else "active",
            )
            for t in tokens
        ],
        ["id", "tenant", "role", "name", "prefix", "created (UTC)", "last used", "revoked"],
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
        out(f"{what} was already revoked at {_when(token.revoked_at)} UTC")
    else:
        out(f"revoked {what}")
    return 0


def _find_token(app: App, token_id: int) -> ApiToken | None:
    return next((t for t in app.store.list_tokens(None) if t.id == token_id), None)


# -- stats --------------------------------------------------------------------------------------


def cmd_stats(args: argparse.Namespace) -> int:
    app = make_app(args)
    figures = operators.stats(app, None) if args.all else app.stats()
    if args.json:
        out(json.dumps(figures.to_json(), indent=2))
        return 0
    print_stats(figures)
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
        else f"oldest overdue job: due {_age(overdue)} ago and not started yet"
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


def _age(seconds: float) -> str:
    """12.3s, 5m 07s, 3h 02m, 4d 06h."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    for unit, size, sub, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60)):
        if whole >= size:
            return f"{whole // size}{unit} {whole % size // sub_size:02d}{sub}"
    return f"{whole // 60}m {whole % 60:02d}s"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}s"


# -- dead letters -------------------------------------------------------------------------------


def cmd_dlq_list(args: argparse.Namespace) -> int:
    app = make_app(args)
    found = app.list_jobs(
        status=JobStatus.DEAD,
        task=args.task,
        queue=args.queue,
        before_id=args.cursor,
        limit=args.limit + 1,  # one more than shown: whether a next page exists
        with_attempts=True,
    )
    jobs, next_cursor = page_of(found, args.limit)
    if args.json:
        items = []
        for job in jobs:
            item = job.to_json()
            del item["attempt_history"]
            last = _last_attempt(job)
            item["last_attempt"] = attempt_to_json(last) if last else None
            items.append(item)
        out(json.dumps({"items": items, "next_cursor": next_cursor}, indent=2))
        return 0
    table(
        [
            (
                j.id,
                j.task,
                j.queue,
                f"{j.attempts}/{j.max_attempts}",
                _when(j.updated_at),
                _error_text(_last_attempt(j)),
            )
            for j in jobs
        ],
        ["id", "task", "queue", "attempts", "died (UTC)", "last error"],
    )
    if next_cursor is not None:
        out(f"next cursor: {next_cursor}")
    return 0


def _last_attempt(job: Job) -> Attempt | None:
    return job.attempt_history[-1] if job.attempt_history else None


def _error_text(attempt: Attempt | None, limit: int = 100) -> str:
    if attempt is None:
        return "-"
    text = str(attempt.error_category or attempt.status)
    if attempt.error_message:
        text += ": " + " ".join(attempt.error_message.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def cmd_dlq_replay(args: argparse.Namespace) -> int:
    has_filter = bool(args.task or args.queue or args.all)
    if args.ids and has_filter:
        args.usage_error("give job ids or a filter (--task, --queue, --all), not both")
    if not args.ids and not has_filter:
        args.usage_error(
            "give the ids of dead jobs, or a filter (--task, --queue); "
            "replaying every dead job of the tenant needs --all"
        )
    app = make_app(args)
    if args.ids:
        ids = list(dict.fromkeys(args.ids))  # each once, in the order given
    else:
        ids = operators.dead_job_ids(app, app.tenant, task=args.task, queue=args.queue)
        if ids and not args.yes:
            _confirm(f"{len(ids)} dead job{'s' if len(ids) != 1 else ''}")
    with Progress(len(ids), "jobs", enabled=bool(ids) and not args.json) as bar:
        report = app.replay_dead(
            ids, per_second=args.per_second, progress=lambda done, _total: bar.update(done)
        )
    if args.json:
        out(json.dumps(report.to_json(), indent=2))
    elif not ids:
        out("no dead jobs match")
    else:
        out(f"replayed {len(report.replayed)} of {report.matched} jobs")
        for job_id, why in report.skipped:
            out(f"skipped job {job_id}: {why}")
    return 1 if report.skipped else 0


def _confirm(what: str) -> None:
    """Ask on the terminal; without one, refuse (scripts pass --yes)."""
    if not sys.stdin.isatty():
        raise ConfigurationError(
            f"replaying {what} needs --yes (there is no terminal to ask on); nothing replayed"
        )
    sys.stderr.write(f"replay {what}? [y/N] ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise ConfigurationError("nothing replayed: not confirmed")


# -- enqueue --from-file ------------------------------------------------------------------------


def enqueue_file(args: argparse.Namespace) -> int:
    """`duetime enqueue [TASK] --from-file FILE`: validate every line, then store in batches.

    With TASK, each line is the args of one job of TASK and the whole file is one transaction
    (unless --batch is given). Without TASK, each line is a job: {"task": ..., "args": ...,
    "key": ..., ...}, stored in transactions of --batch lines. The flags --at/--in/--queue/
    --priority/--max-attempts/--deadline are defaults that a line's own fields override.
    """
    if args.key:
        raise ConfigurationError(
            "--key applies to one job; it cannot be used with --from-file "
            '(give each line its own "key" instead)'
        )
    app = make_app(args)
    source = "stdin" if args.from_file == "-" else args.from_file
    lines = read_lines(args.from_file)
    now = app.clock.now()
    jobs, numbers = validate_lines(app, args, lines, now, source)
    size = args.batch or (len(jobs) if args.task else DEFAULT_BATCH) or 1
    ids: list[int] = []
    created = 0
    with Progress(len(jobs), "jobs", enabled=not args.json and len(jobs) > size) as bar:
        for start in range(0, len(jobs), size):
            batch = jobs[start : start + size]
            try:
                results = app.store.enqueue(batch, app.clock.now())
            except DuetimeError as exc:
                if start == 0:
                    raise
                first, last = numbers[start], numbers[start + len(batch) - 1]
                where = f"line {first}" if first == last else f"lines {first}-{last}"
                raise DuetimeError(
                    f"{exc} (in {where} of {source}: not stored; the {start} jobs of the lines "
                    "before were stored)"
                ) from exc
            ids.extend(r.job.id for r in results)
            created += sum(1 for r in results if r.created)
            bar.update(len(ids))
    deduplicated = len(ids) - created
    if args.task:  # the TASK form prints what it always printed
        out(json.dumps(ids) if args.json else f"enqueued {len(ids)} jobs")
    elif args.json:
        out(json.dumps({"created": created, "deduplicated": deduplicated, "ids": ids}))
    else:
        out(
            f"enqueued {len(ids)} jobs: {created} created, {deduplicated} deduplicated "
            "(idempotency key used before)"
        )
    return 0


def read_lines(path: str) -> list[str]:
    """The lines of a file (`-`: stdin). Only \\n ends a line: JSON text may hold U+2028."""
    if path == "-":
        text = sys.stdin.read()
    else:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigurationError(
                f"cannot read --from-file {path}: {exc.strerror or exc}"
            ) from None
        except UnicodeDecodeError:
            raise ConfigurationError(f"--from-file {path} is not UTF-8 text") from None
    lines = text.split("\n")
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def validate_lines(
    app: App, args: argparse.Namespace, lines: Sequence[str], now: datetime, source: str
) -> tuple[list[NewJob], list[int]]:
    """Every non-blank line as a NewJob (and its line number), or refuse the whole file."""
    jobs: list[NewJob] = []
    numbers: list[int] = []
    bad: list[str] = []
    keys: dict[str, tuple[int, str]] = {}  # idempotency key -> (line, request hash)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            job = parse_line(app, args, line, now)
            if job.idempotency_key is not None:
                seen = keys.setdefault(job.idempotency_key, (number, job.request_hash))
                if seen[1] != job.request_hash:
                    raise InvalidRequest(
                        f"idempotency key {job.idempotency_key!r} is used on line {seen[0]} "
                        "with a different request"
                    )
        except DuetimeError as exc:
            bad.append(f"line {number}: {exc}")
            continue
        jobs.append(job)
        numbers.append(number)
    if bad:
        shown = "; ".join(bad[:MAX_BAD_LINES_SHOWN])
        extra = len(bad) - MAX_BAD_LINES_SHOWN
        more = f"; and {extra} more" if extra > 0 else ""
        plural = "s" if len(bad) != 1 else ""
        raise ConfigurationError(
            f"{source}: {len(bad)} bad line{plural}, nothing was stored: {shown}{more}"
        )
    return jobs, numbers


def parse_line(app: App, args: argparse.Namespace, line: str, now: datetime) -> NewJob:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidRequest(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(value, dict):
        what = "the job's args" if args.task else 'a job like {"task": "t", "args": {}}'
        raise InvalidRequest(f"must be a JSON object: {what}")
    flags: dict[str, Any] = {
        "at": args.at,
        "delay": args.delay,
        "queue": args.queue,
        "priority": args.priority,
        "max_attempts": args.max_attempts,
        "deadline": args.deadline,
    }
    if args.task:
        task, job_args, options = args.task, value, flags
    else:
        options = _line_options(value)
        if "task" not in options:
            raise InvalidRequest('has no "task"')
        task = options.pop("task")
        job_args = options.pop("args", None)
        if "at" in options or "delay" in options:  # the line's own due time wins
            flags.pop("at")
            flags.pop("delay")
        options = {**flags, **options}
    registered = app.tasks.get(task) if isinstance(task, str) else None
    return build_new_job(
        task,
        job_args,
        now=now,
        tenant=app.tenant,
        defaults=registered.defaults if registered else TaskDefaults(),
        max_payload_bytes=app.max_payload_bytes,
        **options,
    )


def _line_options(value: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(k for k in value if k not in LINE_FIELDS and k not in LINE_ALIASES)
    if unknown:
        raise InvalidRequest(
            f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
            f"a line may have {', '.join(LINE_FIELDS)} (or due_at, delay_seconds, deadline_at)"
        )
    options: dict[str, Any] = {}
    for key, item in value.items():
        name = LINE_ALIASES.get(key, key)
        if name in options:
            raise InvalidRequest(f"give {name!r} or its alias {key!r}, not both")
        if item is not None or name in ("task", "args"):
            options[name] = item
    return options
