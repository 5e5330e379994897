"""Where a worker's claims start their walk of the due jobs (core/claim_floor.ClaimFloor): a
floor only after a plain claim that took every due job, lowered or dropped by wake-ups of
earlier work or by what the timer's look below it found, never raised by a claim that a
wake-up overtook. The model below checks the one promise that matters: no due job is left
below the floor for longer than the interval of the looks below it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.core.claim_floor import ClaimFloor

T0 = datetime(2026, 6, 1, 9, tzinfo=UTC)
MARGIN = timedelta(seconds=2)
EVERY = timedelta(seconds=5)  # the model's looks below the floor (the timer's: FLOOR_CHECK_EVERY)


def s(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def floor() -> ClaimFloor:
    return ClaimFloor(margin=MARGIN)


def test_no_floor_until_a_plain_claim_takes_every_due_job() -> None:
    f = floor()
    assert f.start(s(0)) is None
    f.claimed(10, 10, plain=True)  # saturated: more may be due
    assert f.start(s(1)) is None
    f.claimed(10, 3, plain=False)  # a controlled claim: caps may have held due jobs back
    assert f.start(s(2)) is None
    f.claimed(10, 3, plain=True)
    assert f.start(s(3)) == s(2) - MARGIN


def test_a_claim_that_was_not_plain_leaves_the_floor() -> None:
    """A fairness detour or a claim under flow control walks from the start and says nothing
    of what it left due: the floor stays where the last plain claim put it."""
    f = floor()
    f.start(s(0))
    f.claimed(10, 0, plain=True)
    assert f.start(s(1)) == s(0) - MARGIN
    f.claimed(10, 2, plain=False)
    assert f.start(s(2)) == s(0) - MARGIN


def test_the_floor_follows_the_claims_that_took_every_due_job_and_stays_under_saturation() -> None:
    f = floor()
    f.start(s(0))
    f.claimed(10, 0, plain=True)
    assert f.start(s(1)) == s(0) - MARGIN
    f.claimed(10, 4, plain=True)
    assert f.start(s(2)) == s(1) - MARGIN
    f.claimed(10, 10, plain=True)  # saturated: the floor stays where it was
    assert f.start(s(3)) == s(1) - MARGIN


def test_the_claims_keep_their_floor_however_long_it_stands() -> None:
    """No claim walks from the first entry while a floor is known: the timer looks below it
    (runtime/timer.py) and lowers it through heard()."""
    f = floor()
    f.start(s(0))
    f.claimed(10, 0, plain=True)
    for second in range(1, 60):
        assert f.start(s(second)) == s(second - 1) - MARGIN
        f.claimed(10, 0, plain=True)
    f.heard(s(-30))  # the timer's look found a job due 30 s ago below the floor
    assert f.start(s(60)) == s(-30)


def test_a_wake_up_of_earlier_work_lowers_the_floor_and_one_without_an_instant_drops_it() -> None:
    f = floor()
    f.start(s(10))
    f.claimed(10, 0, plain=True)
    f.heard(s(9))  # later than the floor: nothing to do
    assert f.start(s(11)) == s(8)
    f.claimed(10, 10, plain=True)
    f.heard(s(-3600))  # a child released, due an hour ago
    assert f.start(s(12)) == s(-3600)
    f.claimed(10, 10, plain=True)
    f.heard(None)  # something changed, no instant said
    assert f.start(s(13)) is None


def test_a_claim_overtaken_by_a_wake_up_of_earlier_work_does_not_raise_the_floor() -> None:
    f = floor()
    f.start(s(10))
    f.claimed(10, 0, plain=True)
    assert f.start(s(11)) == s(8)
    # while that claim runs, a job due at 5 s commits (it read the table before)
    f.heard(s(5))
    f.claimed(10, 0, plain=True)
    assert f.start(s(12)) == s(5)  # not 11 - 2: the job at 5 s is still looked for
    f.claimed(10, 1, plain=True)  # took it
    assert f.start(s(13)) == s(10)


def test_a_wake_up_during_a_walk_from_the_start_keeps_it_from_setting_a_floor() -> None:
    f = floor()
    assert f.start(s(10)) is None
    f.heard(s(1))  # committed after that walk read the table
    f.claimed(10, 0, plain=True)
    assert f.start(s(11)) is None


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="margin"):
        ClaimFloor(margin=timedelta(seconds=-1))


# A model: jobs commit at some instant with some due instant (earlier than their commit
# when a child is released or a long transaction commits), each telling the floor by a
# wake-up unless `silent` (a lost wake-up). A claim every 100 ms takes every due job it can
# see: committed, due at or after its floor. Every EVERY the timer looks below the floor
# (Store.earliest_due up to it) and hands what it found to heard(). No job may wait past
# its due instant longer than that interval plus a claim's period, and a job that woke the
# floor is taken by the first claim after it committed.
jobs_strategy = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=300),  # commits at, in tenths of a second
        st.integers(min_value=-600, max_value=40),  # due at, relative to its commit (tenths)
        st.booleans(),  # its wake-up was lost
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(jobs=jobs_strategy, limit=st.integers(min_value=1, max_value=5))
def test_no_due_job_stays_below_the_floor_past_a_look_below_it(
    jobs: list[tuple[int, int, bool]], limit: int
) -> None:
    f = floor()
    waiting = [(T0 + c * timedelta(seconds=0.1), d * timedelta(seconds=0.1), q) for c, d, q in jobs]
    taken: dict[int, datetime] = {}
    for tick in range(0, 500):
        now = s(tick / 10)
        for committed, due_in, silent in waiting:
            if committed == now and not silent:
                f.heard(committed + due_in)
        if tick % round(EVERY / timedelta(seconds=0.1)) == 0 and f.floor is not None:
            below = [
                committed + due_in
                for i, (committed, due_in, _) in enumerate(waiting)
                if i not in taken and committed <= now and committed + due_in <= f.floor
            ]
            if below:
                f.heard(min(below))
        at = f.start(now)
        due = [
            i
            for i, (committed, due_in, _) in enumerate(waiting)
            if i not in taken
            and committed <= now
            and committed + due_in <= now
            and (at is None or committed + due_in >= at)
        ]
        due.sort(key=lambda i: waiting[i][0] + waiting[i][1])
        for i in due[:limit]:
            taken[i] = now
        f.claimed(limit, len(due[:limit]), plain=True)
    for i, (committed, due_in, silent) in enumerate(waiting):
        ready = max(committed, committed + due_in)
        assert i in taken, (i, waiting[i])
        bound = EVERY + timedelta(seconds=0.1) if silent else timedelta(seconds=0)
        # a claim takes `limit` jobs: others due at once wait for their turn, one claim each
        bound += timedelta(seconds=0.1) * len(waiting)
        assert taken[i] - ready <= bound, (i, waiting[i], taken[i])
