"""The dashboard's Jinja filters: instants, durations, rates and text as the pages show them."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

from markupsafe import Markup, escape

from duetime.core.models import Attempt, Job
from duetime.core.states import AttemptStatus


def rfc3339(value: datetime | None) -> str:
    """An instant as RFC 3339 UTC to the second: 2026-01-01T09:30:00Z."""
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def time_tag(value: datetime | None) -> Markup:
    """<time> with the UTC instant; dashboard.js puts the browser's local time in its title."""
    if value is None:
        return Markup('<span class="muted">—</span>')
    iso = value.astimezone(UTC).isoformat()
    return Markup('<time datetime="{0}" title="{1}">{1}</time>').format(iso, rfc3339(value))


def input_time(value: datetime | None) -> str:
    """An instant as a datetime-local input value, in UTC (the form says so)."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S") if value is not None else ""


def local_time(value: datetime | None, tz: str) -> str:
    """An instant in an IANA zone: 2026-01-01 10:30:00 CET +01:00."""
    if value is None:
        return "—"
    try:
        local = value.astimezone(ZoneInfo(tz))
    except (KeyError, ValueError):
        return rfc3339(value)
    offset = local.strftime("%z")
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()} {offset[:3]}:{offset[3:]}"


def duration(seconds: float | None) -> str:
    """A human duration; dashboard.js formats refreshed figures the same way."""
    if seconds is None:
        return "—"
    s = max(0.0, float(seconds))
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 60:
        return f"{s:.1f} s"
    whole = int(s)
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h {whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d {whole % 86400 // 3600:02d}h"


def rate(per_second: float) -> str:
    """A throughput: per second when at least one a second, else per minute."""
    if per_second >= 1:
        return f"{per_second:.1f}/s"
    return f"{per_second * 60:.1f}/min"


def every(seconds: float | None) -> str:
    """An interval rule's period: 90 s, 15 min, 2 h, 1 d."""
    if seconds is None:
        return "—"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)} {unit}"
    return f"{seconds:g} s"


def every_text(seconds: float) -> str:
    """An interval as the edit form takes it back: 90s, 15m, 2h, 1d."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def breakable(value: str) -> Markup:
    """Escaped text with line-break opportunities after dots, colons and slashes, so long
    dotted task names wrap between their parts rather than mid-word."""
    return Markup(re.sub(r"([./:])", r"\1<wbr>", str(escape(value))))


def last_error(job: Job) -> Attempt | None:
    """The newest attempt that recorded an error (for a dead job, why it died)."""
    failed = [a for a in job.attempt_history if a.error_category or a.error_message]
    return failed[-1] if failed else None


def attempt_duration(attempt: Attempt, now: datetime) -> float | None:
    """How long an attempt ran: to its end, or (still running) to now."""
    if attempt.finished_at is not None:
        return (attempt.finished_at - attempt.started_at).total_seconds()
    if attempt.status is AttemptStatus.RUNNING:
        return (now - attempt.started_at).total_seconds()
    return None


def attempt_dur(attempt: Attempt, now: datetime) -> str:
    """An attempt's duration as the job page shows it; a running one's so far ends in '…'."""
    seconds = attempt_duration(attempt, now)
    if seconds is None:
        return "—"
    return duration(seconds) + (" …" if attempt.finished_at is None else "")


def segment(value: str) -> str:
    """A name as one URL path segment: every '/', '%', '?', '#' and space escaped, so a queue
    named '../tenants/acme' links to its own route and not to another one (the routes take
    such names with a {name:name} parameter: server/paths.py)."""
    return quote(str(value), safe="")


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


# each filter under the name templates use
FILTERS = {
    "rfc3339": rfc3339,
    "ts": time_tag,
    "local": local_time,
    "inputtime": input_time,
    "dur": duration,
    "attempt_dur": attempt_dur,
    "rate": rate,
    "every_text": every_text,
    "wbr": breakable,
    "pretty": pretty_json,
    "segment": segment,
}
