"""`duetime schedules ...`: the schedule commands of the CLI (a public contract); `backfill`
is in duetime.cli.backfill."""

from __future__ import annotations

import argparse
import json
from datetime import UTC
from typing import Any

from duetime.cli import backfill
from duetime.cli.support import (
    _positive_int,
    duration,
    flag_values,
    instant,
    json_object,
    make_app,
    out,
    table,
)
from duetime.core.clock import SystemClock
from duetime.core.recurrence import DstFold, DstGap, Fire, zone
from duetime.core.schedule_spec import Misfire, Overlap, build_spec, preview
from duetime.core.schedules import Schedule

NAME = "the schedule's name"
JSON_SCHEDULE = "print the schedule as JSON"
DST_GAP = "a local time that does not exist: shift or skip"
DST_FOLD = "a local time that happens twice: first, second or both"


def add_parsers(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    schedules = sub.add_parser("schedules", help="recurring schedules").add_subparsers(
        dest="schedules_command", required=True, metavar="ACTION"
    )
    with_app = argparse.ArgumentParser(add_help=False)
    with_app.add_argument("--app", help="module:attribute of your duetime.App (task defaults)")

    p = schedules.add_parser("add", parents=[*parents, with_app], help="create a schedule")
    p.add_argument("name", help=NAME)
    p.add_argument("--task", required=True, help="the task each occurrence runs")
    _definition_flags(p, required=True)
    p.add_argument("--json", action="store_true", help=JSON_SCHEDULE)
    p.set_defaults(func=cmd_add)

    p = schedules.add_parser("update", parents=[*parents, with_app], help="change a schedule")
    p.add_argument("name", help=NAME)
    p.add_argument("--task", help="the task each occurrence runs")
    _definition_flags(p, required=False)
    p.add_argument("--json", action="store_true", help=JSON_SCHEDULE)
    p.set_defaults(func=cmd_update)

    p = schedules.add_parser("list", parents=parents, help="schedules with last and next run")
    p.add_argument("--json", action="store_true", help="print the schedules as JSON")
    p.set_defaults(func=cmd_list)

    for action, func, text in [
        ("show", cmd_show, "a schedule with its recent ticks"),
        ("pause", cmd_pause, "stop generating ticks"),
        ("resume", cmd_resume, "generate again; missed ticks meet the misfire policy"),
        ("delete", cmd_delete, "delete a schedule (unstarted occurrences are cancelled)"),
        ("trigger", cmd_trigger, "run one occurrence now"),
    ]:
        p = schedules.add_parser(action, parents=parents, help=text)
        p.add_argument("name", help=NAME)
        p.add_argument("--json", action="store_true", help="print the result as JSON")
        p.set_defaults(func=func)

    p = schedules.add_parser("history", parents=parents, help="what became of each tick")
    p.add_argument("name", help=NAME)
    p.add_argument("--limit", type=_positive_int, default=50, help="at most this many ticks (50)")
    p.add_argument("--json", action="store_true", help="print the ticks as JSON")
    p.set_defaults(func=cmd_history)

    backfill.add_parser(schedules, parents)

    p = schedules.add_parser(
        "preview", parents=parents, help="next fire times of a schedule or of an unsaved rule"
    )
    p.add_argument("name", nargs="?", help="a saved schedule (or give --cron/--every and --tz)")
    trigger = p.add_mutually_exclusive_group()
    trigger.add_argument("--cron", help="cron expression of an unsaved rule")
    trigger.add_argument("--every", type=duration, help="interval of an unsaved rule, e.g. 15m")
    p.add_argument("--tz", help="IANA time zone of an unsaved rule")
    p.add_argument("--dst-gap", choices=[str(v) for v in DstGap], help=DST_GAP + " (default shift)")
    p.add_argument(
        "--dst-fold", choices=[str(v) for v in DstFold], help=DST_FOLD + " (default first)"
    )
    p.add_argument("--start", type=instant, help="start bound of an unsaved rule (anchors --every)")
    p.add_argument("--after", type=instant, help="list fires after this instant (default: now)")
    p.add_argument("--count", type=int, default=10, help="how many fires, 1 to 10000 (10)")
    p.add_argument("--json", action="store_true", help="print a list of local ISO 8601 times")
    p.set_defaults(func=cmd_preview)


def _definition_flags(p: argparse.ArgumentParser, *, required: bool) -> None:
    trigger = p.add_mutually_exclusive_group(required=required)
    trigger.add_argument("--cron", help="cron expression: 5 fields, 6 with seconds, or @daily")
    trigger.add_argument("--every", type=duration, help="fixed interval in absolute time, e.g. 15m")
    p.add_argument("--tz", required=required, help="IANA time zone, e.g. Europe/London or UTC")
    p.add_argument("--args", type=json_object, help="the occurrences' arguments as a JSON object")
    p.add_argument(
        "--misfire",
        choices=[str(v) for v in Misfire],
        help="what happens to ticks that came while no planner ran (default coalesce)",
    )
    p.add_argument(
        "--catchup-window",
        type=duration,
        help="ticks older than this never run (default 1d)",
    )
    p.add_argument(
        "--overlap",
        choices=[str(v) for v in Overlap],
        help="what a tick does while the previous occurrence still runs (default allow)",
    )
    p.add_argument("--dst-gap", choices=[str(v) for v in DstGap], help=DST_GAP + " (default shift)")
    p.add_argument(
        "--dst-fold", choices=[str(v) for v in DstFold], help=DST_FOLD + " (default first)"
    )
    p.add_argument("--start", type=instant, help="first possible tick, ISO 8601 (anchors --every)")
    p.add_argument("--end", type=instant, help="last possible tick, ISO 8601")
    p.add_argument(
        "--jitter", type=duration, help="random delay per occurrence, up to this, e.g. 30s"
    )
    p.add_argument(
        "--late-after",
        help="a tick handled this long after its time is late, e.g. 5m; 'default': late once "
        "the next tick is due (the default)",
    )


def definition_options(args: argparse.Namespace) -> dict[str, Any]:
    """The flags given on the command line, as add_schedule/update_schedule keywords."""
    mapping = {
        "cron": args.cron,
        "every": args.every,
        "timezone": args.tz,
        "misfire": args.misfire,
        "catchup_window": args.catchup_window,
        "overlap": args.overlap,
        "dst_gap": args.dst_gap,
        "dst_fold": args.dst_fold,
        "start": args.start,
        "end": args.end,
        "jitter": args.jitter,
        "late_after": args.late_after,
    }
    options = {k: v for k, v in mapping.items() if v is not None}
    if options.get("late_after") == "default":
        options["late_after"] = None
    if args.args is not None:
        options["args"] = args.args
    return options


def fires_json(fires: list[Fire], tz_name: str) -> list[str]:
    tz = zone(tz_name)
    return [f.at.astimezone(tz).isoformat() for f in fires]


def fires_rows(fires: list[Fire], tz_name: str) -> list[tuple[Any, ...]]:
    tz = zone(tz_name)
    rows = []
    for f in fires:
        note = "" if f.kind == "normal" else str(f.kind)
        rows.append((f.at.astimezone(tz).isoformat(), f.at.astimezone(UTC).isoformat(), note))
    return rows


def preview_unsaved(args: argparse.Namespace, now: Any) -> tuple[list[Fire], str]:
    if not args.tz:
        args.usage_error("preview of an unsaved rule needs --tz (an IANA zone name)")
    spec = build_spec(
        "preview",
        "preview",
        timezone=args.tz,
        cron=args.cron,
        every=args.every,
        dst_gap=args.dst_gap or DstGap.SHIFT,
        dst_fold=args.dst_fold or DstFold.FIRST,
        start=args.start,
    )
    after = args.after or now
    anchor = spec.start_at or after  # without --start, an interval counts from --after
    return preview(spec, anchor, after, args.count), args.tz  # strictly after, as for a saved one


def late_after_text(seconds: float | None) -> str:
    return "the next tick's time (default)" if seconds is None else f"{seconds:g}s"


def _next_run(s: Schedule, tz: Any, with_utc: bool = False) -> str:
    if s.paused:
        return "paused"
    at = s.next_run_at
    if at is None:
        return "none (ended)"
    local = at.astimezone(tz).isoformat()
    return f"{local} / {at.astimezone(UTC).isoformat()}" if with_utc else local


def schedule_row(s: Schedule, last: Any) -> tuple[Any, ...]:
    trigger = s.spec.cron if s.spec.cron else f"every {s.spec.every_seconds:g}s"
    tz = zone(s.spec.timezone)
    nxt = _next_run(s, tz)
    last_run = last.attempt_history[0].started_at.isoformat() if last else "-"
    outcome = str(last.status) if last else "-"
    return (s.name, s.spec.task, trigger, s.spec.timezone, nxt, last_run, outcome)


# -- commands -----------------------------------------------------------------------------------


def cmd_add(args: argparse.Namespace) -> int:
    app = make_app(args, create=True)
    options = definition_options(args)
    with flag_values(args):
        schedule = app.add_schedule(args.name, task=args.task, **options)
    _print_schedule(app, schedule, args.json)
    return 0


def cmd_update(args: argparse.Namespace) -> int:
    changes = definition_options(args)
    if args.task:
        changes["task"] = args.task
    if not changes:
        args.usage_error("nothing to change: give at least one option, e.g. --cron")
    app = make_app(args)
    with flag_values(args):
        schedule = app.update_schedule(args.name, **changes)
    _print_schedule(app, schedule, args.json)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    app = make_app(args)
    schedules = app.list_schedules()
    lasts = {s.name: app.store.latest_run(s.id) for s in schedules}
    if args.json:
        items = []
        for s in schedules:
            last = lasts[s.name]
            items.append(
                {
                    **s.to_json(),
                    "last_run": last.attempt_history[0].started_at.isoformat() if last else None,
                    "last_outcome": str(last.status) if last else None,
                    "last_job_id": last.id if last else None,
                }
            )
        out(json.dumps(items, indent=2))
        return 0
    table(
        [schedule_row(s, lasts[s.name]) for s in schedules],
        ["name", "task", "trigger", "zone", "next run (local)", "last run (UTC)", "last outcome"],
    )
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    app = make_app(args)
    _print_schedule(app, app.get_schedule(args.name), args.json, history=10)
    return 0


def cmd_pause(args: argparse.Namespace) -> int:
    app = make_app(args)
    _print_schedule(app, app.pause_schedule(args.name), args.json)
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    app = make_app(args)
    _print_schedule(app, app.resume_schedule(args.name), args.json)
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    make_app(args).delete_schedule(args.name)
    out(json.dumps({"deleted": args.name}) if args.json else f"deleted schedule {args.name}")
    return 0


def cmd_trigger(args: argparse.Namespace) -> int:
    job = make_app(args).trigger_schedule(args.name)
    out(json.dumps(job.to_json(), indent=2) if args.json else str(job.id))
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    app = make_app(args)
    ticks = app.schedule_history(args.name, limit=args.limit)
    if args.json:
        out(json.dumps([t.to_json() for t in ticks], indent=2))
        return 0
    table(
        [
            (
                t.nominal_at.isoformat(),
                t.outcome,
                t.origin,
                t.job_id or "-",
                t.job_status or "-",
                t.started_at.isoformat() if t.started_at else "-",
                t.detail,
            )
            for t in ticks
        ],
        ["nominal (UTC)", "outcome", "origin", "job", "job status", "started", "why"],
    )
    return 0


def cmd_preview(args: argparse.Namespace) -> int:
    if args.name:
        if args.cron or args.every or args.tz:
            args.usage_error(
                "give a schedule name or an unsaved rule (--cron/--every with --tz), not both"
            )
        app = make_app(args)
        schedule = app.get_schedule(args.name)
        with flag_values(args):
            fires = app.preview_schedule(args.name, args.count, after=args.after)
        tz_name = schedule.spec.timezone
    elif args.cron or args.every:  # needs no database
        with flag_values(args):
            fires, tz_name = preview_unsaved(args, SystemClock().now())
    else:
        args.usage_error("preview needs a schedule name, or --cron/--every with --tz")
    if args.json:
        out(json.dumps(fires_json(fires, tz_name)))
    else:
        table(fires_rows(fires, tz_name), [f"local ({tz_name})", "UTC", "note"])
    return 0


def _print_schedule(app: Any, s: Schedule, as_json: bool, history: int = 0) -> None:
    if as_json:
        data = s.to_json()
        if history:
            data["history"] = [t.to_json() for t in app.schedule_history(s.name, limit=history)]
        out(json.dumps(data, indent=2))
        return
    spec = s.spec
    tz = zone(spec.timezone)
    fields = [
        ("name", s.name),
        ("task", spec.task),
        ("trigger", spec.cron or f"every {spec.every_seconds:g}s"),
        ("timezone", spec.timezone),
        ("args", json.dumps(spec.args)),
        ("state", "paused" if s.paused else "active"),
        ("next run", _next_run(s, tz, with_utc=True)),
        ("misfire", f"{spec.misfire} (catch-up window {spec.catchup_window_seconds:g}s)"),
        ("late after", late_after_text(spec.late_after_seconds)),
        ("overlap", spec.overlap),
        ("dst", f"gap={spec.dst_gap} fold={spec.dst_fold}"),
        (
            "bounds",
            f"{spec.start_at.isoformat() if spec.start_at else '-'} .. "
            f"{spec.end_at.isoformat() if spec.end_at else '-'}",
        ),
        ("jitter", f"{spec.jitter_seconds:g}s"),
        ("version", s.version),
    ]
    width = max(len(k) for k, _ in fields)
    for key, value in fields:
        out(f"{key.ljust(width)}  {value}")
    if history:
        ticks = app.schedule_history(s.name, limit=history)
        if ticks:
            out()
            table(
                [(t.nominal_at.isoformat(), t.outcome, t.job_id or "-", t.detail) for t in ticks],
                ["recent ticks (UTC)", "outcome", "job", "why"],
            )
