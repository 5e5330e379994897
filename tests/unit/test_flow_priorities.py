"""The maths of priorities without starvation (core/flow/share.PriorityShare) and tenant fairness
(core/flow/rotation.TenantRotation), over in-memory claims that read as the store does: each lower
class and each tenant keeps its share of saturated claims, no slot is left unused, each class
and tenant goes in its own order."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.core.errors import InvalidRequest
from duetime.core.flow.choice import Candidate
from duetime.core.flow.rotation import (
    TENANT_IDLE,
    TENANT_IDLE_TIME,
    TENANT_PROBES,
    TenantRotation,
)
from duetime.core.flow.share import (
    PRIORITY_IDLE,
    PRIORITY_IDLE_TIME,
    PriorityShare,
    Ranked,
    check_share,
)

START = datetime(2026, 6, 1, tzinfo=UTC)


class Due:
    """Due jobs in claim order (priority desc, id), claimed as a store claims them."""

    def __init__(self, jobs: list[Ranked], every: timedelta = timedelta(seconds=1)) -> None:
        self.jobs = sorted(jobs, key=lambda j: (-j.priority, j.id))
        self.reads = 0
        self.now, self.every = START, every  # a claim each `every`

    def read(self, below: int, n: int) -> list[Ranked]:
        self.reads += 1
        return [j for j in self.jobs if j.priority < below][:n]

    def claim(self, share: PriorityShare, limit: int) -> list[Ranked]:
        self.now += self.every
        per_class = share.reserve(limit, self.now)
        lower = share.walk(self.read, per_class, limit) if per_class or share.owed else []
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


@settings(max_examples=500, deadline=None)
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
            # the credit comes a claim at a time, and slots a claim could not give are owed:
            # each class at most one claim's credit (and one slot) behind its exact share
            assert counts[p] >= share * total - share * limit - 1 - 1e-9, (p, counts)
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


def test_one_class_in_a_fast_drain_reads_nothing_more_within_the_idle_time() -> None:
    """Claims every 5 ms (a drain of short jobs): eight claims are 40 ms; after a walk that
    found no lower class, none looks again within PRIORITY_IDLE_TIME of it."""
    every = timedelta(milliseconds=5)
    due = Due(flood({0: 100_000}), every)
    ps = PriorityShare(0.1)
    claims = int(timedelta(seconds=2) / every)  # 400 claims
    for _ in range(claims):
        assert len(due.claim(ps, 10)) == 10
    looks = timedelta(seconds=2) / PRIORITY_IDLE_TIME  # 8: one a quarter second
    assert due.reads == 2 * looks


def test_a_lower_class_arriving_in_a_fast_drain_is_served_within_the_idle_time() -> None:
    every = timedelta(milliseconds=5)
    due = Due(flood({9: 100_000}), every)
    ps = PriorityShare(0.1)
    due.claim(ps, 10)  # found no lower class: idle
    looked = due.now
    due.jobs.append(Ranked(500_000, 0))
    due.jobs.sort(key=lambda j: (-j.priority, j.id))
    for _ in range(200):  # (a bound: the class is served within some 50 claims)
        if any(j.id == 500_000 for j in due.claim(ps, 10)):
            break
    else:
        pytest.fail("the lower class was never served")
    assert due.now - looked <= PRIORITY_IDLE_TIME + every


@pytest.mark.parametrize(
    "every", [timedelta(0), timedelta(hours=-1)], ids=["clock standing still", "clock set back"]
)
def test_a_clock_that_does_not_move_on_leaves_the_count_of_claims_to_rest(
    every: timedelta,
) -> None:
    """A clock that stands still (a test's) or is set back: the looks rest 8 claims, as the
    count alone says, not for ever or for as long as the step back."""
    due = Due(flood({0: 10_000}), every)
    ps = PriorityShare(0.1)
    tenants = Tenants({"only": 10_000}, every)
    rot = TenantRotation()
    for _ in range(10 * (PRIORITY_IDLE + 1)):
        due.claim(ps, 10)
        tenants.claim(rot, 10, {})
    assert due.reads == 2 * 10
    assert tenants.reads == 2 * (10 * (PRIORITY_IDLE + 1) // (TENANT_IDLE + 1))


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


def test_claims_that_take_every_due_job_read_no_class_below() -> None:
    """A claim that did not fill its slots took every due job, lower classes included: the
    claims after it reserve nothing and read nothing more until one fills its slots again."""
    due = Due(flood({1: 3, 0: 2}))
    ps = PriorityShare(0.1)
    assert len(due.claim(ps, 10)) == 5
    reads = due.reads
    for n in range(3 * (PRIORITY_IDLE + 1)):  # a trickle: a job or two due at each claim
        due.jobs += [Ranked(100 + 2 * n, 1), Ranked(101 + 2 * n, 0)]
        assert len(due.claim(ps, 10)) == 2
    assert due.reads == reads
    due.jobs += flood({1: 30, 0: 30})  # a burst: the share comes back from its second claim
    due.jobs = [Ranked(1000 + i, j.priority) for i, j in enumerate(due.jobs)]
    due.jobs.sort(key=lambda j: (-j.priority, j.id))
    first, second = due.claim(ps, 10), due.claim(ps, 10)
    assert [j.priority for j in first] == [1] * 10
    assert 0 in [j.priority for j in second]


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


# -- tenant fairness (TenantRotation) -----------------------------------------------------------


class Tenants:
    """Due jobs per tenant, claimed as the store's rotation claims them."""

    def __init__(self, sizes: dict[str, int], every: timedelta = timedelta(seconds=1)) -> None:
        self.lines = {t: [Candidate(i, "q", t) for i in range(n)] for t, n in sizes.items()}
        self.reads = 0
        self.now, self.every = START, every  # a claim each `every`

    def next_after(self, after: str) -> str | None:
        self.reads += 1
        return min((t for t, line in self.lines.items() if line and t > after), default=None)

    def claim(self, rot: TenantRotation, limit: int, weights: dict[str, float]) -> list[str]:
        self.now += self.every
        if rot.wanted(self.now):
            due = rot.due(self.next_after)
        else:
            due = []
        if due:
            got = rot.order({t: self.lines[t][:limit] for t in due}, weights, limit)
        else:  # claim order: the first tenant's (the flood's) jobs
            order = [c for t in sorted(self.lines) for c in self.lines[t]]
            got = order[:limit]
        for c in got:
            self.lines[c.tenant].remove(c)
        rot.claimed(limit, len(got))
        return [c.tenant for c in got]


@settings(max_examples=400, deadline=None)
@given(
    weights=st.lists(st.sampled_from([0.5, 1.0, 1.0, 2.0, 3.0]), min_size=2, max_size=6),
    limit=st.integers(1, 8),
    claims=st.integers(1, 40),
)
def test_tenants_with_due_work_get_their_weighted_share(
    weights: list[float], limit: int, claims: int
) -> None:
    names = [f"t{i}" for i in range(len(weights))]
    w = dict(zip(names, weights, strict=True))
    tenants = Tenants({t: claims * limit + 1 for t in names})  # every one saturated
    rot = TenantRotation()
    got: Counter[str] = Counter()
    for _ in range(claims):
        taken = tenants.claim(rot, limit, w)
        assert len(taken) == limit  # no slot left unused
        got.update(taken)
    total = claims * limit
    for t in names:  # within a slot of its weighted share, whatever the claims' sizes
        assert got[t] >= total * w[t] / sum(weights) - 1, (t, got)


def test_claims_of_one_slot_alternate() -> None:
    tenants = Tenants({"a": 100, "b": 100, "c": 100})
    rot = TenantRotation()
    got = [t for _ in range(9) for t in tenants.claim(rot, 1, {})]
    assert got == ["a", "b", "c"] * 3


def test_a_tenant_appearing_starts_level_with_the_others() -> None:
    tenants = Tenants({"a": 1000, "b": 1000})
    rot = TenantRotation()
    for _ in range(50):
        tenants.claim(rot, 4, {})
    tenants.lines["c"] = [Candidate(10_000 + i, "q", "c") for i in range(100)]
    got = Counter(t for _ in range(3) for t in tenants.claim(rot, 3, {}))
    assert got == {"a": 3, "b": 3, "c": 3}  # neither a burst nor a wait


def test_one_tenant_alone_is_looked_for_every_ninth_claim() -> None:
    tenants = Tenants({"only": 10_000})
    rot = TenantRotation()
    for _ in range(9 * (TENANT_IDLE + 1)):
        assert tenants.claim(rot, 10, {}) == ["only"] * 10
    assert tenants.reads == 2 * 9  # finds "only", then nothing after it


def test_one_tenant_alone_in_a_fast_drain_is_looked_for_once_in_the_idle_time() -> None:
    every = timedelta(milliseconds=5)
    tenants = Tenants({"only": 100_000}, every)
    rot = TenantRotation()
    for _ in range(int(timedelta(seconds=2) / every)):  # 400 claims
        assert tenants.claim(rot, 10, {}) == ["only"] * 10
    assert tenants.reads == 2 * (timedelta(seconds=2) / TENANT_IDLE_TIME)  # 8 looks


def test_a_tenant_appearing_in_a_fast_drain_gets_its_turn_within_the_idle_time() -> None:
    every = timedelta(milliseconds=5)
    tenants = Tenants({"a": 100_000}, every)
    rot = TenantRotation()
    tenants.claim(rot, 10, {})  # one tenant alone: idle
    looked = tenants.now
    tenants.lines["b"] = [Candidate(1_000_000 + i, "q", "b") for i in range(100)]
    for _ in range(200):  # (a bound: "b" gets its turn within some 50 claims)
        if "b" in tenants.claim(rot, 10, {}):
            break
    else:
        pytest.fail("the new tenant never got a turn")
    assert tenants.now - looked <= TENANT_IDLE_TIME + every


def test_more_tenants_than_probes_all_come_round() -> None:
    n = TENANT_PROBES * 3
    tenants = Tenants({f"t{i:02}": 100 for i in range(n)})
    rot = TenantRotation()
    seen = {t for _ in range(3) for t in tenants.claim(rot, TENANT_PROBES, {})}
    assert len(seen) == n
