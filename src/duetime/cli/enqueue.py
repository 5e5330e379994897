"""`duetime enqueue`: create a job, or many from a JSON-lines file (`--from-file`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from duetime.cli.support import (
    Progress,
    _positive_int,
    duration,
    flag_values,
    instant,
    json_object,
    make_app,
    out,
)
from duetime.client import App
from duetime.core.dependencies import OnParentFailure
from duetime.core.errors import (
    ArgsMismatch,
    ConfigurationError,
    DuetimeError,
    InvalidRequest,
    UnknownTask,
)
from duetime.core.models import NewJob
from duetime.core.requests import TaskDefaults, build_new_job, check_nesting, parse_id

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
    "depends_on",
    "on_parent_failure",
    "sequence",
    "unique_for",
    "unique_key",
)
LINE_ALIASES = {"due_at": "at", "delay_seconds": "delay", "deadline_at": "deadline"}


def add_parsers(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    with_app = argparse.ArgumentParser(add_help=False)
    with_app.add_argument(
        "--app", help="module:attribute of your duetime.App, e.g. myproj.jobs:app"
    )
    p = sub.add_parser("enqueue", parents=[*parents, with_app], help="create a job")
    p.add_argument("task", nargs="?", help="task name (optional with --from-file)")
    p.add_argument("--args", type=json_object, help="the job's arguments as a JSON object")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--at", type=instant, help="due time, ISO 8601 with offset")
    when.add_argument(
        "--in", dest="delay", type=duration, help="due after a delay, e.g. 30s, 5m, 1h30m"
    )
    p.add_argument("--key", help="idempotency key: the same key returns the same job")
    p.add_argument(
        "--business-key", help="the key handlers send downstream (default: derived from --key)"
    )
    p.add_argument("--queue", help="queue (default: the task's with --app, else 'default')")
    p.add_argument("--priority", type=int, help="higher runs first (default 0; -1000 to 1000)")
    p.add_argument(
        "--max-attempts",
        type=_positive_int,
        help="attempt budget, 1 to 1000 (default: the task's with --app, else 10)",
    )
    p.add_argument(
        "--deadline", type=instant, help="expire the job if not started by then (ISO 8601)"
    )
    p.add_argument(
        "--depends-on",
        metavar="ID[,ID...]",
        type=job_ids,
        help="wait (blocked) until these jobs end; it runs when all succeeded",
    )
    p.add_argument(
        "--on-parent-failure",
        choices=[str(p) for p in OnParentFailure],
        help="when a parent ends dead, cancelled or expired: cancel this job and its "
        "descendants (the default), or run it once every parent has ended",
    )
    p.add_argument(
        "--sequence",
        metavar="KEY",
        help="run after every job enqueued before it in sequence KEY (default: the task's "
        "sequence template with --app)",
    )
    p.add_argument(
        "--unique-for",
        metavar="DURATION",
        help="1s to 366d: if a job of TASK with equal args was created within this window, "
        "print its id instead of making one",
    )
    p.add_argument(
        "--unique-key",
        metavar="KEY",
        help="with --unique-for: compare this key instead of the args",
    )
    p.add_argument(
        "--from-file",
        metavar="FILE",
        help="one job per line of a JSON-lines file (- for stdin): a job object, or with TASK "
        "the args",
    )
    p.add_argument("--batch", type=_positive_int, help="--from-file: jobs per transaction (500)")
    p.add_argument("--json", action="store_true", help="print the whole job as JSON")
    p.set_defaults(func=cmd_enqueue, usage_error=p.error)


def cmd_enqueue(args: argparse.Namespace) -> int:
    if args.from_file:
        return enqueue_file(args)
    if not args.task:
        args.usage_error("the following arguments are required: task (or --from-file FILE)")
    app = make_app(args, create=True)
    with flag_values(args):
        try:
            result = app.submit(
                args.task,
                args.args,
                at=args.at,
                delay=args.delay,
                key=args.key,
                queue=args.queue,
                priority=args.priority,
                max_attempts=args.max_attempts,
                deadline=args.deadline,
                business_key=args.business_key,
                depends_on=args.depends_on,
                on_parent_failure=args.on_parent_failure,
                sequence=args.sequence,
                unique_for=args.unique_for,
                unique_key=args.unique_key,
            )
        except (UnknownTask, ArgsMismatch) as exc:  # known from --app: exit 2, one line
            sys.stderr.write(f"duetime: error: {exc}\n")
            return 2
    job = result.job
    if not result.created and job.unique_key is not None and args.key is None:
        sys.stderr.write(
            f"duetime: job {job.id} was created within the unique window; no new job\n"
        )
    if args.json:
        out(json.dumps(job.to_json(), indent=2))
    else:
        out(str(job.id))
    return 0


def job_ids(text: str) -> list[int]:
    """--depends-on: job ids separated by commas."""
    try:
        return [parse_id(part, "a job id of --depends-on") for part in text.split(",")]
    except InvalidRequest as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# -- enqueue --from-file ------------------------------------------------------------------------


def enqueue_file(args: argparse.Namespace) -> int:
    """`duetime enqueue [TASK] --from-file FILE`: validate every line, then store in batches.

    With TASK, each line is the args of one job of TASK and the whole file is one transaction
    (unless --batch is given). Without TASK, each line is a job: {"task": ..., "args": ...,
    "key": ..., ...}, stored in transactions of --batch lines. The flags --at/--in/--queue/
    --priority/--max-attempts/--deadline are defaults that a line's own fields override.
    """
    if args.key:
        args.usage_error(
            "--key applies to one job; it cannot be used with --from-file "
            '(give each line its own "key" instead)'
        )
    app = make_app(args, create=True)
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
            "(idempotency key used before, or within a unique window)"
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
        check_nesting(line)
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
        "depends_on": args.depends_on,
        "on_parent_failure": args.on_parent_failure,
        "sequence": args.sequence,
        "unique_for": args.unique_for,
        "unique_key": args.unique_key,
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
    job = build_new_job(
        task,
        job_args,
        now=now,
        tenant=app.tenant,
        defaults=registered.defaults if registered else TaskDefaults(),
        max_payload_bytes=app.max_payload_bytes,
        **options,
    )
    app.check_args(job.task, job.args)  # with --app: its tasks and their signatures
    return job


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
