"""CorrectedClock: a local clock set by the database's, on fake clocks.

The local clock is a ManualClock; the "database" is another clock a fixed number of seconds
off it, read in a round trip that moves the local clock (the read lands somewhere inside it).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from duetime.core.clock import ClockReading, CorrectedClock, ManualClock


class Database:
    """A reference clock `behind` seconds behind the local one (negative: ahead of it)."""

    def __init__(self, local: ManualClock, behind: float) -> None:
        self.local = local
        self.behind = timedelta(seconds=behind)

    def true_now(self) -> datetime:
        return self.local.now() - self.behind

    def reader(self, rtt: float = 0.002, at: float = 0.5) -> Callable[[], datetime]:
        """A read taking `rtt` seconds of local time, the database reading its clock at
        fraction `at` of it (0: as the query arrives, 1: just before the answer leaves)."""

        def read() -> datetime:
            self.local.advance(rtt * at)
            value = self.true_now()
            self.local.advance(rtt * (1 - at))
            return value

        return read


@pytest.mark.parametrize("behind", [30.0, -30.0, 0.0, 0.25])
@pytest.mark.parametrize("at", [0.0, 0.5, 1.0])
def test_the_corrected_time_never_passes_the_databases_and_lags_it_by_at_most_the_round_trip(
    behind: float, at: float
) -> None:
    local = ManualClock()
    db = Database(local, behind)
    clock = CorrectedClock(local)
    clock.measure(db.reader(rtt=0.004, at=at))
    for step in (0.0, 0.3, 5.0, 59.0):
        local.advance(step)
        corrected = clock.now()
        lag = (db.true_now() - corrected).total_seconds()
        assert 0.0 <= lag <= 0.004 + 1e-9, (step, lag)
    assert clock.offset == pytest.approx(behind, abs=0.0041)
    assert clock.offset is not None and clock.offset >= behind  # the upper bound of "ahead"


def test_the_reading_of_the_smallest_round_trip_is_the_one_used() -> None:
    local = ManualClock()
    db = Database(local, 30.0)
    clock = CorrectedClock(local)
    for rtt in (0.200, 0.010, 0.100):
        clock.measure(db.reader(rtt=rtt, at=0.0))
    assert clock.reading is not None and clock.reading.round_trip == pytest.approx(0.010)
    lag = (db.true_now() - clock.now()).total_seconds()
    assert lag == pytest.approx(0.010)  # read as the query arrived: the bound is off by the trip


def test_only_the_last_few_readings_are_kept() -> None:
    local = ManualClock()
    db = Database(local, 5.0)
    clock = CorrectedClock(local, keep=3)
    clock.measure(db.reader(rtt=0.001))
    for _ in range(3):  # the best reading ages out after three more
        local.advance(5)
        clock.measure(db.reader(rtt=0.050))
    assert clock.reading is not None and clock.reading.round_trip == pytest.approx(0.050)


def test_a_stepped_local_clock_drops_the_readings_taken_before_the_step() -> None:
    local = ManualClock()
    db = Database(local, 0.0)
    clock = CorrectedClock(local)
    clock.measure(db.reader(rtt=0.001))
    local.advance(5)
    db.behind = timedelta(seconds=30)  # the local clock jumped 30 s ahead (the database did not)
    clock.measure(db.reader(rtt=0.080))  # a worse trip, but true
    assert clock.offset == pytest.approx(30.0, abs=0.081)
    assert 0 <= (db.true_now() - clock.now()).total_seconds() <= 0.081


def test_a_reading_during_which_the_local_clock_went_back_is_ignored() -> None:
    local = ManualClock()
    clock = CorrectedClock(local)
    clock.measure(lambda: local.now() - timedelta(seconds=2))
    backwards = ClockReading(
        before=local.now(), reference=local.now(), after=local.now() - timedelta(seconds=1)
    )
    assert clock.record(backwards) is clock.reading
    assert clock.offset == pytest.approx(2.0)


def test_before_any_reading_it_tells_the_local_time_and_is_stale() -> None:
    local = ManualClock()
    clock = CorrectedClock(local)
    assert clock.now() == local.now()
    assert clock.offset is None and clock.reading is None and clock.stale()


def test_a_database_on_this_clock_sqlite_corrects_nothing_and_is_never_stale() -> None:
    local = ManualClock()
    clock = CorrectedClock(local)
    assert clock.measure(lambda: None) is None
    local.advance(3600)
    assert clock.now() == local.now() and clock.offset == 0.0 and not clock.stale()


def test_a_reading_goes_stale_after_a_minute() -> None:
    local = ManualClock()
    clock = CorrectedClock(local)
    clock.measure(lambda: local.now())
    local.advance(59)
    assert not clock.stale()
    local.advance(2)
    assert clock.stale() and not clock.stale(max_age=120)


def test_readings_agree_when_their_ranges_overlap() -> None:
    t = ManualClock().now()
    one = ClockReading(t, t - timedelta(seconds=10), t + timedelta(milliseconds=4))
    near = ClockReading(t, t - timedelta(seconds=10.003), t + timedelta(milliseconds=1))
    far = ClockReading(t, t - timedelta(seconds=10.5), t + timedelta(milliseconds=1))
    assert one.agrees(near) and near.agrees(one)
    assert not one.agrees(far) and not far.agrees(one)


# -- a reading deferred to the first now() (the CLI's one-shot commands) --------------------------


def test_a_deferred_reading_is_taken_at_the_first_now_and_only_then() -> None:
    local = ManualClock()
    db = Database(local, 30.0)
    reads: list[datetime] = []

    def read() -> datetime:
        reads.append(local.now())
        return db.reader(rtt=0.002)()

    clock = CorrectedClock(local)
    clock.defer(read)
    assert reads == [] and clock.deferred and clock.offset is None
    assert not clock.stale()  # an App must not read it again before it was asked the time
    first = clock.now()
    assert len(reads) == 1 and not clock.deferred
    assert 0.0 <= (db.true_now() - first).total_seconds() <= 0.002 + 1e-9  # corrected at once
    clock.now()
    local.advance(10)
    clock.now()
    assert len(reads) == 1  # one reading, later now()s use it
    assert clock.offset == pytest.approx(30.0, abs=0.0021)


def test_a_deferred_reading_that_fails_is_tried_again_at_the_next_now() -> None:
    local = ManualClock()
    db = Database(local, -5.0)
    answers: list[Callable[[], datetime]] = []

    def read() -> datetime:
        if not answers:
            answers.append(db.reader())
            raise ConnectionError("the database did not answer")
        return answers[0]()

    clock = CorrectedClock(local)
    clock.defer(read)
    with pytest.raises(ConnectionError):
        clock.now()
    assert clock.deferred and clock.offset is None
    clock.now()
    assert not clock.deferred and clock.offset == pytest.approx(-5.0, abs=0.0021)


def test_measuring_takes_the_place_of_a_deferred_reading() -> None:
    local = ManualClock()
    db = Database(local, 2.0)
    clock = CorrectedClock(local)
    clock.defer(lambda: pytest.fail("the deferred reading must not be taken"))
    clock.measure(db.reader())
    assert not clock.deferred
    clock.now()
