"""Limits per dependency: the pure rules (no I/O; time is passed in).
Past 400 lines because a key's settings, their checks and the bucket, budget and breaker
arithmetic over them are one concept, read together.

A limit key names a dependency several tasks call ("payments-api"). A task declares the keys it
calls (`@app.task(limits=[...])`); every job of it carries them. Per key an operator sets:

- a token bucket (`rate` per period, `burst`): each start of a job carrying the key takes one
  token; the bucket refills continuously at `rate` and holds at most `burst` tokens, so over any
  window of w seconds at most burst + rate_per_second * w attempts start;
- a concurrency cap: at most `concurrency` attempts of jobs carrying the key hold an unexpired
  lease at any instant;
- a pause (`paused_until`), set by a handler's `Retry(after=..., dependency=True)`: nothing
  carrying the key starts before that instant.

A job carrying several keys starts only when every one of them allows it. The store keeps the
bucket's state (tokens, refilled_at) on the limit's row and applies these rules in the claim's
transaction (store/sql/limits.py); docs/flow-control.md describes them for users.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from duetime.core.durations import parse_duration
from duetime.core.errors import InvalidRequest

KEY_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,99}")
MAX_KEYS_PER_TASK = 10
PERIODS = {"s": 1.0, "m": 60.0, "h": 3600.0}
# the bounds of a key's settings (docs/flow-control.md, "Bounds")
MIN_RATE_COUNT = 0.001  # starts per period
MAX_RATE_COUNT = 1_000_000
MAX_COUNT = 1_000_000  # burst and concurrency: whole numbers from 1 to this
_RATE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*/\s*([A-Za-z]+)\s*")


def check_limit_key(key: object) -> str:
    """A limit key as stored, or InvalidRequest saying what a key may hold."""
    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
        raise InvalidRequest(
            f"limit key {key!r} is not valid; use 1 to 100 letters, digits and . _ : / - "
            "(starting with a letter or digit), e.g. payments-api"
        )
    return key


def check_limit_keys(keys: Iterable[str] | None) -> tuple[str, ...]:
    """A task's limit keys: each valid, sorted, without repeats."""
    if keys is None:
        return ()
    if isinstance(keys, str):
        raise InvalidRequest(f"limits must be a list of keys, e.g. limits=[{keys!r}]")
    found = tuple(sorted({check_limit_key(k) for k in keys}))
    if len(found) > MAX_KEYS_PER_TASK:
        raise InvalidRequest(
            f"a task may carry at most {MAX_KEYS_PER_TASK} limit keys, got {len(found)}"
        )
    return found


def limits_text(keys: Iterable[str]) -> str | None:
    """The job column's value: a JSON array of the keys, sorted (NULL when there are none).
    Keys hold no quote or backslash, so '"key"' occurs in the text exactly when the job
    carries that key: what the claim's SQL looks for."""
    found = sorted(keys)
    return json.dumps(found, separators=(",", ":")) if found else None


def quoted(key: str) -> str:
    """How a key appears in the job column's text (see limits_text)."""
    return f'"{key}"'


@dataclass(frozen=True)
class Rate:
    """`count` starts per `period` seconds."""

    count: float
    period: float

    @property
    def per_second(self) -> float:
        return self.count / self.period

    def __str__(self) -> str:
        unit = next(u for u, s in PERIODS.items() if s == self.period)
        return f"{self.count:g}/{unit}"


def parse_rate(text: str) -> Rate:
    """'5/s', '100/m' or '1000/h' (a whole or decimal number, positive)."""
    match = _RATE.fullmatch(str(text))
    if match is None or match.group(2) not in PERIODS:
        raise InvalidRequest(
            f"rate {text!r} is not valid; write N/s, N/m or N/h, e.g. 5/s or 100/m"
        )
    return check_rate(Rate(float(match.group(1)), PERIODS[match.group(2)]), text)


def check_rate(rate: Rate, text: object = None) -> Rate:
    """A rate of MIN_RATE_COUNT to MAX_RATE_COUNT starts per second, minute or hour."""
    if rate.period not in PERIODS.values() or not MIN_RATE_COUNT <= rate.count <= MAX_RATE_COUNT:
        raise InvalidRequest(
            f"rate {text if text is not None else str(rate)!r} must be from "
            f"{MIN_RATE_COUNT:g} to {MAX_RATE_COUNT} per period (N/s, N/m or N/h)"
        )
    return rate


def check_fraction(value: object, what: str) -> float:
    """A fraction strictly between 0 and 1, inclusive of 1 (e.g. --retry-budget 0.2): a
    number, or text as the CLI and the dashboard give it (a boolean is not a number)."""
    number = math.nan
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            pass
    elif isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    if not (0 < number <= 1):
        raise InvalidRequest(
            f"{what} must be a fraction above 0 and at most 1 (e.g. 0.2), got {value!r}"
        )
    return number


def check_cooldown(value: object) -> float:
    """A breaker's cool-down in seconds: seconds (30, 2.5) or a duration ('30s', '2m'), from
    MIN_COOLDOWN_SECONDS to MAX_COOLDOWN_SECONDS."""
    try:
        seconds = parse_duration(value, "breaker cool-down").total_seconds()  # type: ignore[arg-type]
    except InvalidRequest:  # not a duration: refused below with the bounds
        seconds = math.nan
    if not MIN_COOLDOWN_SECONDS <= seconds <= MAX_COOLDOWN_SECONDS:
        raise InvalidRequest(
            f"breaker cool-down must be a duration from 1s to 1d, e.g. 30s or 2m (off: the "
            f"default of {COOLDOWN_SECONDS:g}s), got {value!r}"
        )
    return seconds


def check_count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
        raise InvalidRequest(f"{what} must be a whole number from 1 to {MAX_COUNT}, got {value!r}")
    return value


@dataclass(frozen=True)
class LimitSettings:
    """What an operator set for one key; None: that control is off."""

    key: str
    rate: Rate | None = None
    burst: int | None = None
    concurrency: int | None = None
    retry_budget: float | None = None
    breaker_threshold: float | None = None
    breaker_cooldown: float | None = None  # seconds; None: COOLDOWN_SECONDS

    @property
    def breaker_cooldown_seconds(self) -> float:
        """How long the breaker, once open, holds every job carrying the key before its probe."""
        return COOLDOWN_SECONDS if self.breaker_cooldown is None else self.breaker_cooldown

    @property
    def bucket_size(self) -> float | None:
        """The bucket's capacity: `burst`, by default one second's worth of rate (at least 1)."""
        if self.rate is None:
            return None
        if self.burst is not None:
            return float(self.burst)
        return float(max(1, math.ceil(self.rate.per_second)))


# "Recent", for retry budgets and breakers: a sliding window of WINDOW_SECONDS, estimated
# from two fixed buckets (the current one, and the one before weighted by how much of it
# still lies in the window), so the counts live on the limit's row.
WINDOW_SECONDS = 60.0
MIN_OUTCOMES = 10  # a breaker opens only on at least this many recent outcomes
MIN_RETRIES = 10  # a retry budget always allows this many retries per window
COOLDOWN_SECONDS = 30.0  # how long an open breaker holds everything before its probe, by default
MIN_COOLDOWN_SECONDS = 1.0  # the bounds of a key's own cool-down (breaker_cooldown)
MAX_COOLDOWN_SECONDS = 86400.0

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"


@dataclass(frozen=True)
class Counts:
    """What happened in one bucket of the window, for one key."""

    starts: int = 0  # attempts started
    retries: int = 0  # of which retries (the job had an attempt before in this budget)
    failures: int = 0  # attempts ended failed (retried or given up)
    successes: int = 0

    def plus(self, other: Counts) -> Counts:
        return Counts(
            self.starts + other.starts,
            self.retries + other.retries,
            self.failures + other.failures,
            self.successes + other.successes,
        )


@dataclass(frozen=True)
class LimitState:
    """What the store keeps per key beside the settings."""

    tokens: float | None = None  # None: a full bucket (never taken from)
    refilled_at: datetime | None = None
    paused_until: datetime | None = None
    window_at: datetime | None = None  # the start of the current bucket
    current: Counts = Counts()
    previous: Counts = Counts()
    breaker: str = CLOSED
    breaker_until: datetime | None = None  # when open: the end of the cool-down


def refilled(settings: LimitSettings, state: LimitState, now: datetime) -> float | None:
    """The bucket's tokens at `now` (None when the key has no rate). Time going backwards
    (another node's clock) adds nothing."""
    size = settings.bucket_size
    if size is None or settings.rate is None:
        return None
    if state.tokens is None or state.refilled_at is None:
        return size
    elapsed = max(0.0, (now - state.refilled_at).total_seconds())
    return min(size, state.tokens + elapsed * settings.rate.per_second)


# a token counts as whole when this close to 1: floating refills must not lose a start
_EPSILON = 1e-9


def allowance(
    settings: LimitSettings, state: LimitState, running: int, now: datetime
) -> int | None:
    """How many attempts of jobs carrying the key may start at `now` (None: no bound)."""
    if state.paused_until is not None and now < state.paused_until:
        return 0
    allowed: int | None = None
    if settings.concurrency is not None:
        allowed = max(0, settings.concurrency - running)
    tokens = refilled(settings, state, now)
    if tokens is not None:
        whole = max(0, math.floor(tokens + _EPSILON))
        allowed = whole if allowed is None else min(allowed, whole)
    return allowed


# next_start looks this much past a token's exact instant: the stored instants are whole
# microseconds, so the exact one could fall a hair short of a whole token
_NEXT_MARGIN = timedelta(milliseconds=1)


def next_start(
    settings: LimitSettings, state: LimitState, running: int, now: datetime
) -> datetime | None:
    """When a key that allows no start at `now` allows one again, if that instant is known:
    the end of its pause, of its breaker's cool-down, and its bucket's next whole token,
    whichever comes last. None when it allows a start now, or when only an attempt's end can
    free one (its concurrency is full, or its half-open breaker's probe runs)."""
    allowed = allowance(settings, state, running, now)
    breaker = breaker_allowance(settings, state, running, now)
    if (allowed is None or allowed > 0) and (breaker is None or breaker > 0):
        return None
    if settings.concurrency is not None and running >= settings.concurrency:
        return None
    at = now
    if state.paused_until is not None and state.paused_until > at:
        at = state.paused_until
    if breaker == 0:
        if state.breaker != OPEN or state.breaker_until is None or state.breaker_until <= now:
            return None  # half-open: its probe must end first
        at = max(at, state.breaker_until)
    tokens = refilled(settings, state, at)
    if tokens is not None and settings.rate is not None and tokens + _EPSILON < 1:
        wait = (1 - tokens) / settings.rate.per_second
        at += timedelta(seconds=wait) + _NEXT_MARGIN
    return at if at > now else None


def take(settings: LimitSettings, state: LimitState, count: int, now: datetime) -> LimitState:
    """The state after `count` starts at `now` (each takes a token when the key has a rate)."""
    tokens = refilled(settings, state, now)
    if tokens is None:
        return state
    # refilled_at never moves back: a claim that computed its `now` before another claim's
    # (and waited for the limit's row lock) must not make the next refill count time twice
    at = now if state.refilled_at is None else max(now, state.refilled_at)
    return replace(state, tokens=max(0.0, tokens - count), refilled_at=at)


def paused(state: LimitState, until: datetime) -> LimitState:
    """A pause until `until`, never shortening one already longer."""
    if state.paused_until is not None and state.paused_until >= until:
        return state
    return replace(state, paused_until=until)


@dataclass(frozen=True)
class LimitStatus:
    """One key as `duetime limits list` shows it: its settings, state and figures at `now`."""

    settings: LimitSettings
    state: LimitState
    updated_at: datetime
    running: int  # attempts of jobs carrying the key holding an unexpired lease
    waiting: int  # due scheduled jobs carrying the key (held back by it or only not yet taken)
    tokens: float | None  # the bucket at now (None: no rate)
    oldest_due_at: datetime | None = None  # of the waiting jobs

    def to_json(self, now: datetime) -> dict[str, object]:
        s = self.settings
        paused = self.state.paused_until
        return {
            "key": s.key,
            "rate": str(s.rate) if s.rate is not None else None,
            "burst": s.burst,
            "bucket_size": s.bucket_size,
            "concurrency": s.concurrency,
            "retry_budget": s.retry_budget,
            "breaker_threshold": s.breaker_threshold,
            "breaker_cooldown_seconds": s.breaker_cooldown_seconds,
            "running": self.running,
            "waiting": self.waiting,
            "waiting_seconds": max(0.0, (now - self.oldest_due_at).total_seconds())
            if self.oldest_due_at is not None
            else 0.0,
            "tokens": round(self.tokens, 3) if self.tokens is not None else None,
            "paused_until": paused.isoformat() if paused is not None and paused > now else None,
            "breaker": self.breaker(now),
            "breaker_until": self.state.breaker_until.isoformat()
            if self.breaker(now) == OPEN and self.state.breaker_until is not None
            else None,
            "recent": self.recent_json(now),
            "retries_allowed": retry_allowance(s, self.state, now),
            "updated_at": self.updated_at.isoformat(),
        }

    def breaker(self, now: datetime) -> str | None:
        """closed, open or half_open (an open breaker past its cool-down lets its probe
        through: half_open); None when the key has no breaker."""
        if self.settings.breaker_threshold is None:
            return None
        st = self.state
        if st.breaker == OPEN and (st.breaker_until is None or now >= st.breaker_until):
            return HALF_OPEN
        return st.breaker

    def recent_json(self, now: datetime) -> dict[str, float]:
        """The last WINDOW_SECONDS, estimated: starts, retries, failures, successes."""
        starts, retries, failures, successes = recent(self.state, now)
        return {
            "window_seconds": WINDOW_SECONDS,
            "starts": round(starts, 1),
            "retries": round(retries, 1),
            "failures": round(failures, 1),
            "successes": round(successes, 1),
        }


OFF = "off"  # a setting's value that switches that control off


def check_settings(s: LimitSettings) -> LimitSettings:
    """A key's settings within their bounds (what every store checks before it writes)."""
    check_limit_key(s.key)
    if s.rate is not None:
        check_rate(s.rate)
    for count, what in ((s.burst, "burst"), (s.concurrency, "concurrency")):
        if count is not None:
            check_count(count, what)
    for fraction, what in (
        (s.retry_budget, "retry budget"),
        (s.breaker_threshold, "breaker threshold"),
    ):
        if fraction is not None:
            check_fraction(fraction, what)
    if s.breaker_cooldown is not None:
        check_cooldown(s.breaker_cooldown)
    return s


def _count_value(value: object, what: str) -> int:
    if isinstance(value, str):
        digits = value.strip()
        try:
            if not (digits.isascii() and digits.isdigit()) or len(digits) > 12:
                raise ValueError(value)
            value = int(digits)
        except ValueError:
            raise InvalidRequest(
                f"{what} must be a whole number from 1 to {MAX_COUNT} or off, got {value!r}"
            ) from None
    return check_count(value, what)


def updated_settings(
    current: LimitSettings | None,
    key: str,
    *,
    rate: object = None,
    burst: object = None,
    concurrency: object = None,
    retry_budget: object = None,
    breaker_threshold: object = None,
    breaker_cooldown: object = None,
) -> LimitSettings:
    """The key's settings after a change: each option given replaces the current one ("off"
    switches that control off; None leaves it as it is)."""
    s = current or LimitSettings(check_limit_key(key))

    def given(value: object) -> bool:
        return value is not None

    def off(value: object) -> bool:
        return isinstance(value, str) and value.strip().lower() == OFF

    if given(rate):
        s = replace(
            s,
            rate=None
            if off(rate)
            else check_rate(rate)
            if isinstance(rate, Rate)
            else parse_rate(str(rate)),
        )
    if given(burst):
        s = replace(s, burst=None if off(burst) else _count_value(burst, "burst"))
    if given(concurrency):
        s = replace(
            s, concurrency=None if off(concurrency) else _count_value(concurrency, "concurrency")
        )
    if given(retry_budget):
        s = replace(
            s,
            retry_budget=None
            if off(retry_budget)
            else check_fraction(retry_budget, "retry budget"),
        )
    if given(breaker_threshold):
        s = replace(
            s,
            breaker_threshold=None
            if off(breaker_threshold)
            else check_fraction(breaker_threshold, "breaker threshold"),
        )
    if given(breaker_cooldown):
        s = replace(
            s, breaker_cooldown=None if off(breaker_cooldown) else check_cooldown(breaker_cooldown)
        )
    if s.burst is not None and s.rate is None:
        raise InvalidRequest(f"limit {key!r}: a burst needs a rate; give --rate N/s too")
    return s


# -- retry budgets and circuit breakers ----------------------------------------------------------


def rolled(state: LimitState, now: datetime) -> LimitState:
    """The state with its window buckets moved on to `now`."""
    if state.window_at is None:
        return replace(state, window_at=now)
    elapsed = (now - state.window_at).total_seconds()
    if elapsed < WINDOW_SECONDS:
        return state
    if elapsed < 2 * WINDOW_SECONDS:
        return replace(
            state,
            window_at=state.window_at + timedelta(seconds=WINDOW_SECONDS),
            previous=state.current,
            current=Counts(),
        )
    return replace(state, window_at=now, previous=Counts(), current=Counts())


def recent(state: LimitState, now: datetime) -> tuple[float, float, float, float]:
    """(starts, retries, failures, successes) over the last WINDOW_SECONDS, estimated."""
    s = rolled(state, now)
    assert s.window_at is not None
    into = min(1.0, max(0.0, (now - s.window_at).total_seconds() / WINDOW_SECONDS))
    weight = 1.0 - into
    c, p = s.current, s.previous
    return (
        c.starts + p.starts * weight,
        c.retries + p.retries * weight,
        c.failures + p.failures * weight,
        c.successes + p.successes * weight,
    )


def retry_allowance(settings: LimitSettings, state: LimitState, now: datetime) -> int | None:
    """How many retries of jobs carrying the key may start now (None: no budget).

    Retries may be at most `retry_budget` of the recent starts (each retry itself a start),
    and never fewer than MIN_RETRIES per window: with A recent starts of which R retries, n
    more retries may start while R + n <= max(MIN_RETRIES, budget * (A + n)).
    """
    budget = settings.retry_budget
    if budget is None or budget >= 1:
        return None
    starts, retries, _, _ = recent(state, now)
    by_share = (budget * starts - retries) / (1 - budget)
    return max(0, math.floor(max(MIN_RETRIES - retries, by_share) + _EPSILON))


def breaker_allowance(
    settings: LimitSettings, state: LimitState, running: int, now: datetime
) -> int | None:
    """What the breaker lets start: None when closed (no bound); 0 while open during the
    cool-down; after it (half-open) one probe, when no attempt of the key is running."""
    if settings.breaker_threshold is None or state.breaker == CLOSED:
        return None
    if state.breaker == OPEN and state.breaker_until is not None and now < state.breaker_until:
        return 0
    return 1 if running == 0 else 0


def after_claim(state: LimitState, starts: int, retries: int, now: datetime) -> LimitState:
    """Count what a claim started; an open breaker past its cool-down is now half-open (the
    probe started)."""
    s = rolled(state, now)
    s = replace(s, current=s.current.plus(Counts(starts=starts, retries=retries)))
    if starts and s.breaker == OPEN and (s.breaker_until is None or now >= s.breaker_until):
        s = replace(s, breaker=HALF_OPEN)
    return s


def after_outcomes(
    settings: LimitSettings, state: LimitState, failures: int, successes: int, now: datetime
) -> LimitState:
    """Count ended attempts and move the breaker: half-open, a success closes it (the window
    starts afresh) and a failure opens it again; closed, it opens when at least MIN_OUTCOMES
    recent outcomes failed at breaker_threshold or more. It opens for the key's cool-down
    (breaker_cooldown, by default COOLDOWN_SECONDS)."""
    s = rolled(state, now)
    s = replace(s, current=s.current.plus(Counts(failures=failures, successes=successes)))
    threshold = settings.breaker_threshold
    if threshold is None:
        return replace(s, breaker=CLOSED, breaker_until=None) if s.breaker != CLOSED else s
    cooldown = now + timedelta(seconds=settings.breaker_cooldown_seconds)
    if s.breaker == HALF_OPEN:
        if successes:
            return replace(
                s,
                breaker=CLOSED,
                breaker_until=None,
                window_at=now,
                current=Counts(),
                previous=Counts(),
            )
        if failures:
            return replace(s, breaker=OPEN, breaker_until=cooldown)
        return s
    if s.breaker == CLOSED and failures:
        _, _, failed, succeeded = recent(s, now)
        total = failed + succeeded
        if total >= MIN_OUTCOMES and failed / total >= threshold:
            return replace(s, breaker=OPEN, breaker_until=cooldown)
    return s
