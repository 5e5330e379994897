"""The maths of priorities without starvation (core/flow.PriorityShare), over an in-memory
claim that reads as the store does: each lower class keeps its share of saturated claims, no
slot is left unused, each class goes in its own order."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.core.errors import InvalidRequest
from duetime.core.flow import PRIORITY_IDLE, PriorityShare, Ranked, check_share


class Due:
    """Due jobs in claim order (priority desc, id), claimed as a store claims them."""

    def __init__(self, jobs: list[Ranked]) -> None:
        self.jobs = sorted(jobs, key=lambda j: (-j.priority, j.id))
        self.reads = 0

    def read(self, below: int, n: int) -> list[Ranked]:
        self.reads += 1
        return [j for j in self.jobs if j.priority < below][:n]

    def claim(self, share: PriorityShare, limit: int) -> list[Ranked]:
        per_class = share.reserve(limit)
        lower = share.walk(self.read, per_class, limit) if per_class else []
        taken = {j.id for j in lower}
        rest = [j for j in self.jobs if j.id not in taken][: limit - len(lower)]
        got = lower + rest
        gone = {j.id for j in got}
        self.jobs = [j for j in self.jobs if j.id not in gone]
        share.claimed(limit, len(got))
        return got


def flood(sizes: dict[int, int]) -> list[Ranked]:
    jobs, n = [], 0
    for priority, size in sizes.items():
        for _ in range(size):
            n += 1
            jobs.append(Ranked(n, priority))
    return jobs


@settings(max_examples=200, deadline=None)
@given(
    classes=st.lists(st.integers(-5, 5), min_size=1, max_size=4, unique=True),
    limit=st.integers(1, 12),
    share=st.sampled_from([0.02, 0.05, 0.1, 0.2, 0.25]),
    claims=st.integers(1, 60),
)
def test_each_lower_class_keeps_its_share(
    classes: list[int], limit: int, share: float, claims: int
) -> None:
    due = Due(flood({p: claims * limit + 1 for p in classes}))  # saturated throughout
    ps = PriorityShare(share)
    taken: list[Ranked] = []
    for _ in range(claims):
        got = due.claim(ps, limit)
        assert len(got) == limit  # no slot left unused
        taken += got
    total = claims * limit
    counts = Counter(j.priority for j in taken)
    top = max(classes)
    lower = [p for p in classes if p != top]
    for p in lower:
        if share * len(lower) <= 1:
            # the credit comes a claim at a time: at most one claim's worth (and one slot)
            # behind the exact share
            assert counts[p] >= share * total - share * limit - 1, (p, counts)
    if share * len(lower) < 1:
        assert counts[top] >= total * (1 - share * len(lower)) - len(lower) - limit
    for p in classes:  # each class in its own order
        ids = [j.id for j in taken if j.priority == p]
        assert ids == sorted(ids)


def test_one_class_reads_nothing_more_most_of_the_time() -> None:
    due = Due(flood({0: 10_000}))
    ps = PriorityShare(0.1)
    for _ in range(10 * (PRIORITY_IDLE + 1)):
        assert len(due.claim(ps, 10)) == 10
    # a walk (two reads: the highest class, then nothing below it) once per PRIORITY_IDLE + 1
    assert due.reads == 2 * 10


def test_one_class_keeps_claim_order() -> None:
    due = Due(flood({3: 100}))
    ps = PriorityShare(0.5)
    got = [j.id for _ in range(10) for j in due.claim(ps, 10)]
    assert got == list(range(1, 101))


def test_a_lower_class_arriving_is_served_within_the_idle_claims() -> None:
    due = Due(flood({9: 1000}))
    ps = PriorityShare(0.1)
    due.claim(ps, 10)  # found no lower class: idle
    due.jobs.append(Ranked(5000, 0))
    due.jobs.sort(key=lambda j: (-j.priority, j.id))
    waited = 0
    while all(j.id != 5000 for j in due.claim(ps, 10)):
        waited += 1
    assert waited <= PRIORITY_IDLE


def test_no_saturation_drops_the_credit() -> None:
    due = Due(flood({1: 3, 0: 2}))
    ps = PriorityShare(0.1)
    assert len(due.claim(ps, 10)) == 5  # everything due taken
    assert ps.credit == 0.0


def test_more_classes_than_slots_take_turns() -> None:
    due = Due(flood({p: 100 for p in range(6)}))
    ps = PriorityShare(0.2)  # limit 5: one slot per lower class per claim, 5 lower classes
    seen: Counter[int] = Counter()
    for _ in range(10):
        seen.update(j.priority for j in due.claim(ps, 5))
    assert all(seen[p] >= 5 for p in range(5)), seen


@pytest.mark.parametrize("bad", [-0.1, 1, 1.5, True, "0.1"])
def test_a_share_is_a_fraction_below_one(bad: object) -> None:
    with pytest.raises(InvalidRequest, match="priority share"):
        check_share(bad)  # type: ignore[arg-type]
