"""`duetime schedules backfill`: run the ticks of a past range, in chunks of at most 500 ticks,
each one transaction, paced one run a second across the whole range."""

from __future__ import annotations

import argparse
import json
import logging
from datetime import datetime, timedelta
from typing import Any

from duetime.cli.support import Progress, flag_values, instant, make_app, out
from duetime.client import App
from duetime.core.schedules import CATCH_UP_PACE, Plan, TickOutcome, plan_backfill
from duetime.logs import log_event

log = logging.getLogger("duetime.cli")

BACKFILL_CHUNK = 500  # ticks per transaction of `schedules backfill`


def add_parser(actions: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register `backfill` on the `schedules` subcommands."""
    p = actions.add_parser("backfill", parents=parents, help="run the ticks of a past range")
    p.add_argument("name", help="the schedule's name")
    p.add_argument(
        "--from",
        dest="start",
        type=instant,
        required=True,
        help="first tick of the range, ISO 8601 with offset (inclusive)",
    )
    p.add_argument(
        "--to",
        dest="end",
        type=instant,
        required=True,
        help="last tick of the range, ISO 8601 with offset (inclusive, not in the future)",
    )
    p.add_argument("--json", action="store_true", help="print the counts and job ids as JSON")
    p.set_defaults(func=cmd_backfill)


def cmd_backfill(args: argparse.Namespace) -> int:
    app = make_app(args)
    first, last = args.start, args.end
    schedule = app.get_schedule(args.name)
    # the whole range, planned but not stored: refuses a bad range (or one of more than 10,000
    # ticks) before anything is stored, and lists the ticks to split into chunks
    now = app.clock.now()
    with flag_values(args):  # an empty range, one in the future, or too many ticks
        whole = plan_backfill(schedule, [], first, last, now)
    fires = sorted({t.nominal_at for t in whole.ticks})
    not_run = {t.nominal_at for t in whole.ticks if t.outcome is TickOutcome.DST_SKIPPED}
    chunks = backfill_chunks(fires, first, last, BACKFILL_CHUNK)
    created_ids: list[int] = []
    existing = skipped = done = runs = 0
    with Progress(len(fires), "ticks", enabled=not args.json and len(chunks) > 1) as bar:
        for start, end, ticks in chunks:
            plan = _backfill_chunk(app, args.name, start, end, now + runs * CATCH_UP_PACE)
            created_ids += plan.created_job_ids
            existing += len(plan.new_jobs) - len(plan.created_job_ids)
            skipped += sum(1 for t in plan.ticks if not t.creates_job)
            runs += sum(1 for at in ticks if at not in not_run)
            done += len(ticks)
            bar.update(done)
    created = len(created_ids)
    if args.json:
        summary = {"enqueued": created, "existing": existing, "skipped": skipped}
        out(json.dumps({**summary, "job_ids": created_ids}))
    else:
        out(
            f"backfill: {created} new occurrences, {existing} ticks had one already, "
            f"{skipped} skipped (overlap policy or DST gap)"
        )
    return 0


def backfill_chunks(
    fires: list[datetime], first: datetime, last: datetime, size: int
) -> list[tuple[datetime, datetime, list[datetime]]]:
    """Split [first, last] into ranges of at most `size` fires (one more for the last chunk),
    each range inclusive, back to back, and never empty (a range needs end > start)."""
    groups = [fires[i : i + size] for i in range(0, len(fires), size)] or [[]]
    if len(groups) > 1 and groups[-1][0] == last:  # a lone last tick at `last` joins the rest
        lone = groups.pop()
        groups[-1] = groups[-1] + lone
    chunks = []
    for k, group in enumerate(groups):
        start = first if k == 0 else group[0]
        end = last if k == len(groups) - 1 else groups[k + 1][0] - timedelta(microseconds=1)
        chunks.append((start, end, group))
    return chunks


def _backfill_chunk(
    app: App, name: str, start: datetime, end: datetime, pace_from: datetime
) -> Plan:
    """One chunk in one transaction, as App.backfill_schedule does it, except that its runs
    are paced from `pace_from` (the start plus one second per run of the earlier chunks): the
    whole backfill is paced as one would be, one run a second."""
    plan = app.store.apply_schedule(
        app.tenant,
        name,
        app.clock.now(),
        lambda s, active: plan_backfill(s, active, start, end, pace_from),
    )
    log_event(
        log, "schedule.backfilled", schedule=name, jobs=len(plan.new_jobs), ticks=len(plan.ticks)
    )
    return plan
