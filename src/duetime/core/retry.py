"""Failure classification and capped, fully jittered exponential backoff."""

from __future__ import annotations

import math
import random
import traceback as tb
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from enum import StrEnum

from duetime.core.states import Event


class Retry(Exception):
    """Raise from a handler to run the job again after exactly `after` seconds.

    Use it for rate limits: `raise Retry(after=resp.headers["Retry-After"], reason="429")`:
    seconds (a number, a numeric string or a timedelta), an HTTP date such as
    "Wed, 21 Oct 2026 07:28:00 GMT", or an aware datetime.
    The attempt still counts towards max_attempts.

    With `dependency=True` the whole dependency is pushed back, not only this job: every limit
    key of the job's task (`@app.task(limits=[...])`) is paused until the same instant, so no
    job carrying one of them starts before it (docs/flow-control.md).
    """

    def __init__(
        self,
        after: float | str | timedelta | datetime,
        reason: str = "retry requested",
        *,
        dependency: bool = False,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.dependency = dependency
        self.at: datetime | None = None  # an absolute instant (datetime or HTTP-date given)
        self.after = 0.0
        if isinstance(after, datetime):
            if after.tzinfo is None:
                raise ValueError("Retry(after=datetime) needs an aware datetime")
            self.at = after
            return
        if isinstance(after, timedelta):
            seconds = after.total_seconds()
        else:
            try:
                seconds = float(after)
            except ValueError:  # Retry-After also comes as an HTTP date
                try:
                    self.at = parsedate_to_datetime(str(after))
                except (TypeError, ValueError):
                    raise ValueError(
                        f"Retry(after={after!r}) is neither seconds nor an HTTP date"
                    ) from None
                return
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"Retry(after=...) must be finite and not negative, got {seconds}")
        self.after = seconds


class PermanentError(Exception):
    """Raise from a handler when running again cannot help: the job goes dead at once."""


class ErrorCategory(StrEnum):
    """How a failed attempt was classified, which decides what happens next (docs/retries.md)."""

    RETRYABLE = "retryable"  # unexpected exception
    RATE_LIMITED = "rate_limited"  # Retry(after=...) raised
    PERMANENT = "permanent"  # PermanentError or a configured permanent exception type
    TIMEOUT = "timeout"  # the attempt ran past its timeout
    LEASE_EXPIRED = "lease_expired"  # the worker stopped renewing its lease (crash, pause)
    INTERRUPTED = "interrupted"  # the worker shut down before the handler finished
    CANCELLED = "cancelled"  # the handler stopped because cancellation was requested
    RECONCILED = "reconciled"  # a note: the reconcile hook confirmed a lost attempt's effect
    UNKNOWN_OUTCOME = "unknown_outcome"  # the reconcile hook could not tell: parked
    RECONCILE_FAILED = "reconcile_failed"  # the reconcile hook raised


@dataclass(frozen=True)
class RetryPolicy:
    """Per-task retry settings. Delay before retry n is uniform(0, min(cap, base * 2**(n-1)))."""

    base: float = 10.0
    cap: float = 3600.0
    permanent: tuple[type[BaseException], ...] = ()

    def __post_init__(self) -> None:
        if self.base <= 0 or self.cap <= 0:
            raise ValueError("RetryPolicy base and cap must be positive seconds")
        if self.cap < self.base:
            raise ValueError(f"RetryPolicy cap ({self.cap}) must be >= base ({self.base})")

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Seconds to wait after the `attempt`-th failed attempt (1-based), full jitter."""
        exponent = min(max(attempt - 1, 0), 62)
        ceiling = min(self.cap, self.base * (2.0**exponent))
        return rng.uniform(0.0, ceiling)


@dataclass(frozen=True)
class Failure:
    category: ErrorCategory
    message: str
    traceback: str | None = None
    retry_after: float | None = None  # set for RATE_LIMITED: honoured exactly
    retry_at: datetime | None = None  # RATE_LIMITED with an absolute instant


def classify(exc: BaseException, policy: RetryPolicy) -> Failure:
    """Turn a handler's exception into a classified failure."""
    text = "".join(tb.format_exception(exc))
    message = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, Retry):
        return Failure(
            ErrorCategory.RATE_LIMITED, exc.reason, text, retry_after=exc.after, retry_at=exc.at
        )
    if isinstance(exc, PermanentError) or (policy.permanent and isinstance(exc, policy.permanent)):
        return Failure(ErrorCategory.PERMANENT, message, text)
    if isinstance(exc, TimeoutError):
        return Failure(ErrorCategory.TIMEOUT, message, text)
    return Failure(ErrorCategory.RETRYABLE, message, text)


@dataclass(frozen=True)
class Decision:
    event: Event  # RETRY or GIVE_UP
    due_at: datetime | None  # when RETRY


def decide(
    failure: Failure,
    *,
    attempts: int,
    max_attempts: int,
    policy: RetryPolicy,
    now: datetime,
    rng: random.Random,
) -> Decision:
    """What happens to the job after a failed attempt: retry at some instant, or give up."""
    if failure.category is ErrorCategory.PERMANENT or attempts >= max_attempts:
        return Decision(Event.GIVE_UP, None)
    if failure.retry_at is not None:
        return Decision(Event.RETRY, max(now, failure.retry_at.astimezone(now.tzinfo)))
    if failure.retry_after is not None:
        return Decision(Event.RETRY, now + timedelta(seconds=failure.retry_after))
    return Decision(Event.RETRY, now + timedelta(seconds=policy.backoff(attempts, rng)))
