"""The rules of limits per dependency (core/limits.py), with a manual clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.core.errors import InvalidRequest
from duetime.core.limits import (
    CLOSED,
    COOLDOWN_SECONDS,
    HALF_OPEN,
    MIN_RETRIES,
    OPEN,
    LimitSettings,
    LimitState,
    Rate,
    after_claim,
    after_outcomes,
    allowance,
    breaker_allowance,
    check_limit_keys,
    check_settings,
    limits_text,
    parse_rate,
    paused,
    recent,
    retry_allowance,
    take,
    updated_settings,
)

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("text", "rate"),
    [
        ("5/s", Rate(5, 1)),
        ("100/m", Rate(100, 60)),
        ("1000/h", Rate(1000, 3600)),
        (" 2.5 / s ", Rate(2.5, 1)),
    ],
)
def test_rates_parse(text: str, rate: Rate) -> None:
    assert parse_rate(text) == rate


@pytest.mark.parametrize("text", ["5/x", "5", "/s", "0/s", "-1/s", "five/s", "5/sec", ""])
def test_bad_rates_say_how_to_write_one(text: str) -> None:
    with pytest.raises(InvalidRequest, match=r"N/s|more than 0"):
        parse_rate(text)


def test_rate_text_round_trips() -> None:
    assert str(parse_rate("100/m")) == "100/m"
    assert str(parse_rate("2.5/s")) == "2.5/s"


def test_keys_are_checked_sorted_and_deduplicated() -> None:
    assert check_limit_keys(["b", "a", "b"]) == ("a", "b")
    assert limits_text(("a", "b")) == '["a","b"]'
    assert limits_text(()) is None
    for bad in ['a"b', "", "a b", "-a", "x" * 101]:
        with pytest.raises(InvalidRequest, match="limit key"):
            check_limit_keys([bad])
    with pytest.raises(InvalidRequest, match="list of keys"):
        check_limit_keys("payments-api")  # type: ignore[arg-type]


def test_default_bucket_is_one_seconds_worth() -> None:
    assert LimitSettings("k", rate=parse_rate("10/s")).bucket_size == 10
    assert LimitSettings("k", rate=parse_rate("10/m")).bucket_size == 1
    assert LimitSettings("k", rate=parse_rate("10/s"), burst=3).bucket_size == 3


def test_bucket_refills_at_the_rate_up_to_burst() -> None:
    s = LimitSettings("k", rate=parse_rate("2/s"), burst=4)
    state = LimitState()
    assert allowance(s, state, 0, at(0)) == 4
    state = take(s, state, 4, at(0))
    assert allowance(s, state, 0, at(0)) == 0
    assert allowance(s, state, 0, at(0.49)) == 0
    assert allowance(s, state, 0, at(0.5)) == 1
    assert allowance(s, state, 0, at(100)) == 4
    assert allowance(s, state, 0, at(-5)) == 0  # a clock behind the last refill adds nothing


def test_concurrency_and_bucket_together() -> None:
    s = LimitSettings("k", rate=parse_rate("10/s"), concurrency=3)
    assert allowance(s, LimitState(), 1, at(0)) == 2
    assert allowance(s, LimitState(), 5, at(0)) == 0
    assert allowance(LimitSettings("k"), LimitState(), 50, at(0)) is None


def test_a_pause_holds_everything_and_never_shortens() -> None:
    s = LimitSettings("k", concurrency=3)
    state = paused(LimitState(), at(30))
    assert allowance(s, state, 0, at(29.9)) == 0
    assert allowance(s, state, 0, at(30)) == 3
    assert paused(state, at(10)).paused_until == at(30)
    assert paused(state, at(40)).paused_until == at(40)


def test_settings_update_and_off() -> None:
    s = updated_settings(None, "api", rate="5/s", burst="10", concurrency=3)
    assert (s.rate, s.burst, s.concurrency) == (Rate(5, 1), 10, 3)
    s = updated_settings(s, "api", concurrency="off", retry_budget="0.2")
    assert (s.concurrency, s.retry_budget, s.burst) == (None, 0.2, 10)
    with pytest.raises(InvalidRequest, match="needs a rate"):
        updated_settings(s, "api", rate="off")
    for bad in (
        {"concurrency": "0"},
        {"burst": "x"},
        {"retry_budget": "1.5"},
        {"breaker_threshold": "0"},
    ):
        with pytest.raises(InvalidRequest):
            updated_settings(None, "api", **bad)


@settings(max_examples=300, deadline=None)
@given(
    count=st.integers(min_value=1, max_value=50),
    period=st.sampled_from([1.0, 60.0]),
    burst=st.integers(min_value=1, max_value=20),
    steps=st.lists(
        st.tuples(st.floats(min_value=0, max_value=5), st.integers(min_value=0, max_value=30)),
        min_size=1,
        max_size=60,
    ),
)
def test_starts_never_exceed_burst_plus_rate_times_window(
    count: int, period: float, burst: int, steps: list[tuple[float, int]]
) -> None:
    """Claims at arbitrary instants, each taking what it wants up to what the bucket allows:
    over every window [a, b] the starts are at most burst + rate * (b - a)."""
    s = LimitSettings("k", rate=Rate(count, period), burst=burst)
    state = LimitState()
    now = 0.0
    starts: list[tuple[float, int]] = []
    for gap, want in steps:
        now += gap
        allowed = allowance(s, state, 0, at(now))
        assert allowed is not None
        n = min(want, allowed)
        state = take(s, state, n, at(now))
        if n:
            starts.append((now, n))
    rate = count / period
    for i, (a, _) in enumerate(starts):
        total = 0
        for b, n in starts[i:]:
            total += n
            assert total <= burst + rate * (b - a) + 1e-6


def test_a_late_claim_never_moves_the_refill_back() -> None:
    s = LimitSettings("k", rate=parse_rate("1/s"), burst=1)
    state = take(s, LimitState(), 1, at(10))
    late = take(s, state, 0, at(9))  # a claim whose `now` was read before the other's
    assert late.refilled_at == at(10)
    assert allowance(s, late, 0, at(10.5)) == 0


# -- retry budgets and breakers ----------------------------------------------------------------


def counted(state: LimitState, s: LimitSettings, now: datetime, fails: int, oks: int) -> LimitState:
    return after_outcomes(s, state, fails, oks, now)


def test_the_window_slides_over_two_buckets() -> None:
    state = after_claim(LimitState(), 10, 4, at(0))
    assert recent(state, at(30)) == (10, 4, 0, 0)
    state = after_claim(state, 0, 0, at(60))  # a new bucket: the old one weighs what remains
    assert recent(state, at(90)) == (5, 2, 0, 0)
    assert recent(state, at(200)) == (0, 0, 0, 0)


def test_retry_budget_share_and_floor() -> None:
    s = LimitSettings("k", retry_budget=0.2)
    assert retry_allowance(s, LimitState(), at(0)) == MIN_RETRIES
    busy = after_claim(LimitState(), 100, 10, at(0))
    # R + n <= 0.2 (A + n): n <= (20 - 10) / 0.8
    assert retry_allowance(s, busy, at(1)) == 12
    spent = after_claim(LimitState(), 20, 20, at(0))
    assert retry_allowance(s, spent, at(1)) == 0
    assert retry_allowance(LimitSettings("k"), spent, at(1)) is None


def test_breaker_opens_cools_down_probes_and_closes() -> None:
    s = LimitSettings("k", breaker_threshold=0.5)
    state = counted(LimitState(), s, at(0), 4, 4)
    assert state.breaker == CLOSED  # 8 outcomes: too few to judge
    state = counted(state, s, at(1), 0, 1)
    assert state.breaker == CLOSED  # a success never opens it
    state = counted(state, s, at(2), 1, 0)  # 5 of 10 failed: the threshold
    assert (state.breaker, state.breaker_until) == (OPEN, at(2 + COOLDOWN_SECONDS))
    assert breaker_allowance(s, state, 0, at(31.9)) == 0
    assert breaker_allowance(s, state, 0, at(32)) == 1  # the probe
    assert breaker_allowance(s, state, 1, at(32)) == 0  # one at a time
    state = after_claim(state, 1, 0, at(32))
    assert state.breaker == HALF_OPEN
    assert breaker_allowance(s, state, 1, at(33)) == 0
    again = counted(state, s, at(33), 1, 0)  # the probe failed: open for another cool-down
    assert (again.breaker, again.breaker_until) == (OPEN, at(33 + COOLDOWN_SECONDS))
    closed = counted(state, s, at(33), 0, 1)  # it succeeded: closed, the window starts afresh
    assert (closed.breaker, recent(closed, at(33))) == (CLOSED, (0, 0, 0, 0))
    assert breaker_allowance(s, closed, 5, at(33)) is None


def test_an_open_breaker_holds_for_the_keys_own_cooldown() -> None:
    s = LimitSettings("k", breaker_threshold=0.5, breaker_cooldown=5)
    state = counted(LimitState(), s, at(2), 10, 0)
    assert (state.breaker, state.breaker_until) == (OPEN, at(7))
    assert breaker_allowance(s, state, 0, at(6.9)) == 0
    assert breaker_allowance(s, state, 0, at(7)) == 1  # the probe, 5 s after it opened
    state = after_claim(state, 1, 0, at(7))
    again = counted(state, s, at(8), 1, 0)  # the probe failed: open for the same cool-down
    assert (again.breaker, again.breaker_until) == (OPEN, at(13))


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (45, 45.0),
        (2.5, 2.5),
        ("10s", 10.0),
        ("2m", 120.0),
        ("1m30s", 90.0),
        ("1", 1.0),
        ("1d", 86400.0),
        (timedelta(minutes=5), 300.0),
    ],
)
def test_breaker_cooldown_is_seconds_or_a_duration(value: object, seconds: float) -> None:
    s = updated_settings(None, "api", breaker_threshold=0.5, breaker_cooldown=value)
    assert (s.breaker_cooldown, s.breaker_cooldown_seconds) == (seconds, seconds)


def test_breaker_cooldown_defaults_and_off_returns_to_the_default() -> None:
    s = updated_settings(None, "api", breaker_threshold=0.5)
    assert (s.breaker_cooldown, s.breaker_cooldown_seconds) == (None, COOLDOWN_SECONDS)
    s = updated_settings(s, "api", breaker_cooldown="2m")
    assert updated_settings(s, "api", retry_budget=0.2).breaker_cooldown == 120  # None: kept
    s = updated_settings(s, "api", breaker_cooldown=" OFF ")
    assert (s.breaker_cooldown, s.breaker_cooldown_seconds) == (None, COOLDOWN_SECONDS)
    assert s.breaker_threshold == 0.5


@pytest.mark.parametrize(
    "bad", [0, 0.5, "0.9s", "500ms", 86401, "1d1s", "2w", -5, "-1m", "soon", "", True, [30]]
)
def test_breaker_cooldown_out_of_bounds_is_refused_in_one_line(bad: object) -> None:
    with pytest.raises(InvalidRequest) as refused:
        updated_settings(None, "api", breaker_cooldown=bad)
    message = str(refused.value)
    assert message.startswith("breaker cool-down must be a duration from 1s to 1d, e.g. 30s")
    assert "off: the default of 30s" in message and "\n" not in message
    assert message.endswith(f"got {bad!r}")


def test_below_the_threshold_the_breaker_stays_closed() -> None:
    s = LimitSettings("k", breaker_threshold=0.5)
    state = counted(LimitState(), s, at(0), 4, 6)
    state = counted(state, s, at(1), 0, 0)
    assert counted(state, s, at(1), 1, 0).breaker == CLOSED  # 5 of 11


@pytest.mark.parametrize(
    "change",
    [
        {"retry_budget": True},
        {"breaker_threshold": True},
        {"concurrency": True},
        {"burst": "99999999999999999999", "rate": "5/s"},
        {"rate": "100000000000000000000000000000000000000/s"},
        {"rate": "0.00000001/s"},
        {"rate": Rate(1e38, 1.0)},
        {"breaker_cooldown": -1e300},
        {"breaker_cooldown": "-99999999999999"},
    ],
)
def test_limit_settings_refuse_booleans_and_out_of_range_values(change: dict[str, object]) -> None:
    with pytest.raises(InvalidRequest):
        updated_settings(None, "k", **change)  # type: ignore[arg-type]


def test_every_store_checks_limit_settings_before_writing() -> None:
    with pytest.raises(InvalidRequest, match="rate"):
        check_settings(LimitSettings("k", rate=Rate(1e38, 1.0)))
    with pytest.raises(InvalidRequest, match="concurrency"):
        check_settings(LimitSettings("k", concurrency=2**63))
    assert check_settings(LimitSettings("k", rate=Rate(5, 1.0))).rate == Rate(5, 1.0)
