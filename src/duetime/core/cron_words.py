"""A cron expression in plain words, for the common shapes people write.

`describe_cron("0 9 * * 1-5")` is "at 09:00 on Monday to Friday". Shapes it does not know
(steps inside ranges, a day of the month together with a weekday, seconds other than 0, ...)
give None, and the caller shows the expression itself. Pure: no clock, no I/O.
"""

from __future__ import annotations

import re

from duetime.core.cron import DAYS, MACROS, MONTHS

_DAY_NAMES = {name[:3].lower(): i for i, name in enumerate(DAYS)}
_MONTH_NAMES = {name[:3].lower(): i + 1 for i, name in enumerate(MONTHS)}
_NUMBER = re.compile(r"\d{1,2}")


def describe_cron(expr: str) -> str | None:
    """The expression in plain words, or None when its shape is not a common one."""
    text = " ".join(expr.split())
    text = MACROS.get(text.lower(), text)
    fields = text.split()
    if len(fields) == 6:  # seconds first: only a whole minute reads plainly
        if fields[0] != "0":
            return None
        fields = fields[1:]
    if len(fields) != 5:
        return None
    minute, hour, dom, month, dow = fields
    when = _time_of_day(minute, hour)
    if when is None:
        return None
    days = _days(dom, month, dow)
    if days is None:
        return None
    if days == "every day" and when.startswith("every"):
        return when
    return f"{when} {days}"


def _time_of_day(minute: str, hour: str) -> str | None:
    if minute == "*" and hour == "*":
        return "every minute"
    step = _step(minute)
    if step is not None and hour == "*":
        return f"every {step} minutes"
    minutes = _values(minute, 0, 59, {})
    if minutes is None:
        return None
    if hour == "*":
        listed = _join([f":{m:02d}" for m in minutes])
        return f"every hour at {listed}"
    hour_step = _step(hour)
    if hour_step is not None and len(minutes) == 1:
        return f"every {hour_step} hours at :{minutes[0]:02d}"
    hours = _values(hour, 0, 23, {})
    if hours is not None and "-" in hour and "," not in hour and len(minutes) == 1:
        at = minutes[0]
        return f"every hour from {hours[0]:02d}:{at:02d} to {hours[-1]:02d}:{at:02d}"
    if hours is None or len(hours) * len(minutes) > 6:
        return None
    times = [f"{h:02d}:{m:02d}" for h in hours for m in minutes]
    return f"at {_join(times)}"


def _days(dom: str, month: str, dow: str) -> str | None:
    """The days part ("every day", "on Monday to Friday", ...); None when it is not plain."""
    if dom != "*" and dow != "*":
        return None  # cron fires when either matches: too subtle for one phrase
    in_months = ""
    if month != "*":
        months = _range_words(month, 1, 12, _MONTH_NAMES, MONTHS, offset=1)
        if months is None:
            return None
        in_months = f" in {months}"
    if dow != "*":
        days = _range_words(dow, 0, 7, _DAY_NAMES, (*DAYS, "Sunday"), offset=0)
        return None if days is None else f"on {days}{in_months}"
    if dom != "*":
        dates = _values(dom, 1, 31, {})
        if dates is None:
            return None
        if len(dates) == 1 and _NUMBER.fullmatch(month):
            return f"on {dates[0]} {MONTHS[int(month) - 1]}"
        listed = _join([_ordinal(d) for d in dates])
        if month != "*":
            return f"on the {listed}{in_months}"
        return f"on the {listed} of every month"
    return f"every day{in_months}" if month != "*" else "every day"


def _range_words(
    field: str, low: int, high: int, names: dict[str, int], words: tuple[str, ...], offset: int
) -> str | None:
    """A day-of-week or month field: "Monday to Friday", "January and July"."""
    parts = []
    for part in field.split(","):
        first, dash, last = part.partition("-")
        a = _number(first, low, high, names)
        if a is None:
            return None
        if dash:
            b = _number(last, low, high, names)
            if b is None or b <= a:
                return None
            parts.append(f"{words[a - offset]} to {words[b - offset]}")
        else:
            parts.append(words[a - offset])
    return _join(parts)


def _values(field: str, low: int, high: int, names: dict[str, int]) -> list[int] | None:
    """The numbers a field of single values and short ranges names, or None."""
    found: list[int] = []
    for part in field.split(","):
        first, dash, last = part.partition("-")
        a = _number(first, low, high, names)
        if a is None:
            return None
        b = _number(last, low, high, names) if dash else a
        if b is None or b < a:
            return None
        found.extend(range(a, b + 1))
    return sorted(set(found)) if found else None


def _number(text: str, low: int, high: int, names: dict[str, int]) -> int | None:
    if text.lower() in names:
        return names[text.lower()]
    if not _NUMBER.fullmatch(text):
        return None
    value = int(text)
    return value if low <= value <= high else None


def _step(field: str) -> int | None:
    """N for '*/N' (N above 1), else None."""
    if not field.startswith("*/"):
        return None
    value = field[2:]
    return int(value) if value.isdigit() and 1 < int(value) < 1000 else None


def _ordinal(n: int) -> str:
    suffix = "th" if 11 <= n % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]
