"""When a key that allows no start allows one again (core/limits.next_start): what a worker
waits for instead of its poll interval (docs/flow-control.md, issue 20 section 2)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from duetime.core.limits import (
    HALF_OPEN,
    OPEN,
    LimitSettings,
    LimitState,
    allowance,
    next_start,
    parse_rate,
    take,
)

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


RATE = LimitSettings("api", rate=parse_rate("5/s"), burst=1)


def test_a_bucket_emptied_allows_a_start_when_its_next_token_is_whole() -> None:
    state = take(RATE, LimitState(), 1, at(0))
    found = next_start(RATE, state, 0, at(0))
    assert found is not None and at(0.2) <= found <= at(0.2) + timedelta(milliseconds=2)
    assert allowance(RATE, state, 0, found) == 1  # not a microsecond short of the token
    assert allowance(RATE, state, 0, found - timedelta(milliseconds=5)) == 0
    # half a token left: the other half
    later = next_start(RATE, state, 0, at(0.1))
    assert later is not None and abs((later - at(0.2)).total_seconds()) <= 0.002


def test_none_when_a_start_is_allowed_or_only_an_attempts_end_frees_one() -> None:
    assert next_start(RATE, LimitState(), 0, at(0)) is None  # a token is there
    capped = LimitSettings("api", rate=parse_rate("5/s"), burst=1, concurrency=2)
    emptied = take(capped, LimitState(), 1, at(0))
    assert next_start(capped, emptied, 2, at(0)) is None  # full: an attempt's end frees it
    assert next_start(capped, emptied, 1, at(0)) is not None
    assert next_start(LimitSettings("api", concurrency=1), LimitState(), 1, at(0)) is None
    probing = LimitState(breaker=HALF_OPEN)
    breaker = LimitSettings("api", breaker_threshold=0.5)
    assert next_start(breaker, probing, 1, at(0)) is None  # the probe runs


def test_a_pause_and_a_breakers_cool_down_end_at_their_instants() -> None:
    plain = LimitSettings("api", concurrency=10)
    assert next_start(plain, LimitState(paused_until=at(3)), 0, at(1)) == at(3)
    breaker = LimitSettings("api", breaker_threshold=0.5)
    cooling = LimitState(breaker=OPEN, breaker_until=at(30))
    assert next_start(breaker, cooling, 0, at(1)) == at(30)
    # paused past a bucket's refill: the later of both
    emptied = take(RATE, LimitState(paused_until=at(2)), 1, at(0))
    assert next_start(RATE, emptied, 0, at(0)) == at(2)
