"""Bulk replay's pace (admin.replay.replay_many): at most per_second replays a second, each
at least 1/per_second after the one before, however long the reads before it took; on fake
time (no I/O, no sleeping)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from duetime.admin.replay import replay_many
from duetime.core.states import JobStatus


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.now += seconds


class FakeStore:
    """Dead jobs 1..n; reading a job takes `read_seconds[i]` of fake time (the i-th read)."""

    def __init__(self, time: FakeTime, read_seconds: list[float]) -> None:
        self.time = time
        self.read_seconds = list(read_seconds)
        self.replayed_at: list[float] = []

    def get_job(self, job_id: int, tenant: str | None = None) -> Any:
        self.time.now += self.read_seconds.pop(0) if self.read_seconds else 0.001
        return SimpleNamespace(id=job_id, status=JobStatus.DEAD)

    def transition(self, job_id: int, *_args: Any, **_kwargs: Any) -> Any:
        self.replayed_at.append(self.time.now)
        self.time.now += 0.002  # the write itself
        return SimpleNamespace(id=job_id)


@pytest.mark.parametrize(
    "reads",
    [
        [0.001] * 5,
        [0.050, 0.001, 0.001, 0.001, 0.001],  # a slow first read (a loaded machine, a cold pool)
        [0.001, 0.300, 0.001, 0.001, 0.001],  # a stall in the middle
        [0.120] * 5,  # reads slower than the pace: they set it
    ],
)
def test_each_replay_starts_at_least_an_interval_after_the_one_before(reads: list[float]) -> None:
    clock = FakeTime()
    store = FakeStore(clock, reads)
    app = SimpleNamespace(store=store, clock=SimpleNamespace(now=lambda: None))
    report = replay_many(
        app,  # type: ignore[arg-type]
        [1, 2, 3, 4, 5],
        tenant=None,
        per_second=10,
        sleep=clock.sleep,
        monotonic=clock.monotonic,
    )
    assert report.replayed == [1, 2, 3, 4, 5]
    gaps = [b - a for a, b in zip(store.replayed_at, store.replayed_at[1:], strict=False)]
    assert min(gaps) >= 0.1 - 1e-9, gaps  # never a burst to catch up
    assert store.replayed_at[-1] - store.replayed_at[0] >= 0.4 - 1e-9
    # and no slower than needed: a gap is the interval, or the read when that is longer
    for gap, read in zip(gaps, reads[1:], strict=True):
        assert gap <= max(0.1, read + 0.002) + 1e-9, (gap, read)


def test_a_job_refused_at_its_write_costs_no_interval() -> None:
    """A job whose replay is refused by the store (gone, no longer dead by then) is skipped
    and does not hold back the next replay."""
    from duetime.core.errors import InvalidRequest

    clock = FakeTime()
    store = FakeStore(clock, [])

    def transition(job_id: int, *_args: Any, **_kwargs: Any) -> Any:
        if job_id == 2:
            raise InvalidRequest("job 2 is running, not dead")
        store.replayed_at.append(clock.now)
        return SimpleNamespace(id=job_id)

    store.transition = transition  # type: ignore[method-assign]
    app = SimpleNamespace(store=store, clock=SimpleNamespace(now=lambda: None))
    report = replay_many(
        app,  # type: ignore[arg-type]
        [1, 2, 3],
        tenant=None,
        per_second=10,
        sleep=clock.sleep,
        monotonic=clock.monotonic,
    )
    assert report.replayed == [1, 3]
    assert [j for j, _ in report.skipped] == [2]
    gap = store.replayed_at[1] - store.replayed_at[0]
    assert 0.1 - 1e-9 <= gap <= 0.1 + 0.003, gap  # one interval for the two replays made
