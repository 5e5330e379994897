"""The SQL store's one cache (store/sql/cache.py): a value trusted for its seconds on the
injected monotonic clock, counted from the instant its read began."""

from __future__ import annotations

from duetime.store.sql.cache import TtlCache


def test_a_value_is_fresh_for_its_seconds_from_the_read() -> None:
    ticks = [100.0]
    cache: TtlCache[list[str]] = TtlCache(1.0, lambda: ticks[0])
    assert cache.fresh() is None
    read_at = cache.now()
    ticks[0] += 0.25  # the read took this long
    assert cache.put(["a"], read_at) == ["a"]
    ticks[0] += 0.5
    assert cache.fresh() == ["a"]
    ticks[0] += 0.25  # a second after the read began
    assert cache.fresh() is None


def test_a_cleared_value_is_read_again() -> None:
    cache: TtlCache[int] = TtlCache(60.0, lambda: 0.0)
    cache.put(1, 0.0)
    cache.clear()
    assert cache.fresh() is None
