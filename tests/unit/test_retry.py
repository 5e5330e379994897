"""Failure classification and capped, fully jittered exponential backoff."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from duetime.core.retry import (
    ErrorCategory,
    Failure,
    PermanentError,
    Retry,
    RetryPolicy,
    classify,
    decide,
)
from duetime.core.states import Event

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


@given(
    attempt=st.integers(min_value=1, max_value=10_000),
    base=st.floats(min_value=0.001, max_value=100),
    extra=st.floats(min_value=0, max_value=10_000),
    seed=st.integers(),
)
def test_backoff_is_within_zero_and_the_capped_exponential(
    attempt: int, base: float, extra: float, seed: int
) -> None:
    policy = RetryPolicy(base=base, cap=base + extra)
    delay = policy.backoff(attempt, random.Random(seed))
    assert 0 <= delay <= min(policy.cap, base * 2.0 ** min(attempt - 1, 62))


def test_backoff_grows_then_caps_on_average() -> None:
    policy = RetryPolicy(base=1, cap=60)
    rng = random.Random(7)
    means = [sum(policy.backoff(n, rng) for _ in range(4000)) / 4000 for n in (1, 3, 5, 9)]
    assert means[0] == pytest.approx(0.5, rel=0.1)
    assert means[1] == pytest.approx(2.0, rel=0.1)
    assert means[2] == pytest.approx(8.0, rel=0.1)
    assert means[3] == pytest.approx(30.0, rel=0.1)  # capped at 60, so the mean is 30


def test_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="positive"):
        RetryPolicy(base=0)
    with pytest.raises(ValueError, match="cap"):
        RetryPolicy(base=10, cap=5)
    with pytest.raises(ValueError, match="negative"):
        Retry(after=-1)


def _raise(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_classification() -> None:
    policy = RetryPolicy(permanent=(KeyError,))
    assert classify(_raise(ValueError("x")), policy).category is ErrorCategory.RETRYABLE
    assert classify(_raise(PermanentError("bad")), policy).category is ErrorCategory.PERMANENT
    assert classify(_raise(KeyError("k")), policy).category is ErrorCategory.PERMANENT
    assert classify(_raise(TimeoutError()), policy).category is ErrorCategory.TIMEOUT
    limited = classify(_raise(Retry(after=timedelta(seconds=90), reason="429")), policy)
    assert limited.category is ErrorCategory.RATE_LIMITED
    assert limited.retry_after == 90 and limited.message == "429"
    failure = classify(_raise(ValueError("boom")), policy)
    assert failure.message == "ValueError: boom"
    assert failure.traceback is not None and "Traceback" in failure.traceback


def test_decide_retries_with_backoff_until_attempts_run_out() -> None:
    policy = RetryPolicy(base=2, cap=100)
    failure = Failure(ErrorCategory.RETRYABLE, "x")
    rng = random.Random(1)
    retry = decide(failure, attempts=2, max_attempts=3, policy=policy, now=NOW, rng=rng)
    assert retry.event is Event.RETRY
    assert retry.due_at is not None and NOW <= retry.due_at <= NOW + timedelta(seconds=4)
    last = decide(failure, attempts=3, max_attempts=3, policy=policy, now=NOW, rng=rng)
    assert last.event is Event.GIVE_UP and last.due_at is None


def test_decide_honours_retry_after_exactly_and_gives_up_on_permanent() -> None:
    policy = RetryPolicy()
    rng = random.Random(1)
    limited = Failure(ErrorCategory.RATE_LIMITED, "429", retry_after=37.5)
    decision = decide(limited, attempts=1, max_attempts=5, policy=policy, now=NOW, rng=rng)
    assert decision == decide(limited, attempts=1, max_attempts=5, policy=policy, now=NOW, rng=rng)
    assert decision.due_at == NOW + timedelta(seconds=37.5)
    permanent = Failure(ErrorCategory.PERMANENT, "no")
    assert decide(permanent, attempts=1, max_attempts=5, policy=policy, now=NOW, rng=rng).event is (
        Event.GIVE_UP
    )


def test_retry_after_an_http_date_or_instant_is_decided_with_the_injected_clock() -> None:
    http = classify(
        _raise(Retry(after="Sun, 01 Mar 2026 09:02:00 GMT", reason="429")), RetryPolicy()
    )
    assert http.category is ErrorCategory.RATE_LIMITED
    rng = random.Random(1)
    decision = decide(http, attempts=1, max_attempts=5, policy=RetryPolicy(), now=NOW, rng=rng)
    assert decision.due_at == NOW + timedelta(minutes=2)
    past = classify(_raise(Retry(after=NOW - timedelta(hours=1))), RetryPolicy())
    late = decide(past, attempts=1, max_attempts=5, policy=RetryPolicy(), now=NOW, rng=rng)
    assert late.due_at == NOW  # never in the past


@pytest.mark.parametrize("after", ["nan", "inf", -1, "soon", "Mon, 99 Foo 2026"])
def test_retry_refuses_nonsense(after: object) -> None:
    with pytest.raises(ValueError):
        Retry(after=after)  # type: ignore[arg-type]
