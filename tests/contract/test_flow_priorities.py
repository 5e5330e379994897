"""Priorities without starvation on every dialect (docs/flow-control.md, "Priorities"): under
a flood of high-priority jobs, each lower priority class keeps its share of a saturated
worker's claims; no slot is left unused; each class goes in its own order.

The policy that keeps those shares and turns is the runtime's (runtime/fairness.py): the store
keeps none, so these claims go through a ClaimFairness, as a worker's slots do, over each
dialect's store."""

from __future__ import annotations

from collections import Counter

import pytest

from duetime.core.clock import ManualClock
from duetime.core.flow.rotation import TENANT_PROBES, TenantRotation
from duetime.core.flow.share import PriorityShare
from duetime.runtime.fairness import ClaimFairness
from duetime.store.base import ClaimPlan, Store
from jobhelpers import enqueue


@pytest.fixture
def fair() -> ClaimFairness:
    """One worker's claim policy, at the default priority share."""
    return ClaimFairness()


def claim(
    fair: ClaimFairness, store: Store, clock: ManualClock, limit: int
) -> list[tuple[int, int]]:
    claims = fair.claim(store, worker_id="w", queues=None, limit=limit, now=clock.now()).claims
    return [(c.job.id, c.job.priority) for c in claims]


def test_each_lower_class_keeps_its_share_under_a_high_priority_flood(
    store: Store, clock: ManualClock, fair: ClaimFairness
) -> None:
    low = [enqueue(store, clock, priority=0).id for _ in range(10)]
    mid = [enqueue(store, clock, priority=5).id for _ in range(10)]
    high = [enqueue(store, clock, priority=10).id for _ in range(60)]
    fair.set_share(0.1)
    taken: list[tuple[int, int]] = []
    for _ in range(5):
        got = claim(fair, store, clock, 10)
        assert len(got) == 10  # no slot left unused
        assert Counter(p for _, p in got) == {10: 8, 5: 1, 0: 1}  # 10% each lower class
        taken += got
    for cls, ids in ((0, low), (5, mid), (10, high)):  # each class in its own order
        assert [i for i, p in taken if p == cls] == ids[: len([1 for _, p in taken if p == cls])]


def test_a_share_of_zero_claims_in_strict_priority_order(
    store: Store, clock: ManualClock, fair: ClaimFairness
) -> None:
    for _ in range(5):
        enqueue(store, clock, priority=0)
    for _ in range(20):
        enqueue(store, clock, priority=1)
    fair.set_share(0)
    for _ in range(2):
        assert {p for _, p in claim(fair, store, clock, 10)} == {1}


def test_one_class_due_fills_every_slot(
    store: Store, clock: ManualClock, fair: ClaimFairness
) -> None:
    ids = [enqueue(store, clock, priority=3).id for _ in range(25)]
    got = [i for _ in range(3) for i, _ in claim(fair, store, clock, 10)]
    assert got == ids  # claim order, nothing skipped


def test_a_small_share_reserves_a_slot_every_few_claims(
    store: Store, clock: ManualClock, fair: ClaimFairness
) -> None:
    for _ in range(5):
        enqueue(store, clock, priority=-1)
    for _ in range(40):
        enqueue(store, clock, priority=0)
    fair.set_share(0.25)  # limit 2: a slot every other claim
    lows = [sum(1 for _, p in claim(fair, store, clock, 2) if p == -1) for _ in range(6)]
    assert lows == [0, 1, 0, 1, 0, 1]


def test_the_share_holds_in_a_controlled_claim(
    store: Store, clock: ManualClock, fair: ClaimFairness
) -> None:
    store.set_queue("other", clock.now(), paused=True)  # a control: the controlled claim
    for _ in range(5):
        enqueue(store, clock, priority=0)
    for _ in range(30):
        enqueue(store, clock, priority=9)
    fair.set_share(0.2)
    got = claim(fair, store, clock, 10)
    assert Counter(p for _, p in got) == {9: 8, 0: 2}


def test_a_lower_class_of_another_queue_is_not_taken(
    store: Store, clock: ManualClock, fair: ClaimFairness
) -> None:
    for _ in range(5):
        enqueue(store, clock, priority=0, queue="elsewhere")
    for _ in range(30):
        enqueue(store, clock, priority=9, queue="q")
    fair.set_share(0.2)
    got = fair.claim(store, worker_id="w", queues=["q"], limit=10, now=clock.now()).claims
    assert [c.job.queue for c in got] == ["q"] * 10


# -- tenant fairness (docs/flow-control.md, "Tenant fairness") ---------------------------------


def tenants_of(fair: ClaimFairness, store: Store, clock: ManualClock, limit: int) -> list[str]:
    claims = fair.claim(store, worker_id="w", queues=None, limit=limit, now=clock.now()).claims
    return [c.job.tenant for c in claims]


def test_a_small_tenant_at_the_default_weight_takes_turns_with_a_flood(
    store: Store, clock: ManualClock, fair: ClaimFairness
) -> None:
    for _ in range(60):
        enqueue(store, clock, tenant="flood")
    clock.advance(1)
    small = [enqueue(store, clock, tenant="small").id for _ in range(5)]
    claims = fair.claim(store, worker_id="w", queues=None, limit=4, now=clock.now()).claims
    assert Counter(c.job.tenant for c in claims) == {"flood": 2, "small": 2}
    assert [c.job.id for c in claims if c.job.tenant == "small"] == small[:2]


def test_claims_of_one_slot_alternate_between_tenants(
    store: Store, clock: ManualClock, fair: ClaimFairness
) -> None:
    for _ in range(30):
        enqueue(store, clock, tenant="a")
    for _ in range(30):
        enqueue(store, clock, tenant="b")
    got = [t for _ in range(8) for t in tenants_of(fair, store, clock, 1)]
    assert got == ["a", "b"] * 4


def test_the_rotation_is_weighted(store: Store, clock: ManualClock, fair: ClaimFairness) -> None:
    store.set_tenant("small", clock.now(), weight=3)
    for _ in range(60):
        enqueue(store, clock, tenant="flood")
    for _ in range(30):
        enqueue(store, clock, tenant="small")
    got = Counter(t for _ in range(4) for t in tenants_of(fair, store, clock, 4))
    assert got == {"small": 12, "flood": 4}


def test_one_tenant_claims_in_order(store: Store, clock: ManualClock, fair: ClaimFairness) -> None:
    ids = [enqueue(store, clock, tenant="only").id for _ in range(40)]
    got = [
        c.job.id
        for _ in range(10)
        for c in fair.claim(store, worker_id="w", queues=None, limit=4, now=clock.now()).claims
    ]
    assert got == ids


# -- what a claim's looks cost (docs/flow-control.md, "What it costs") --------------------------


@pytest.mark.parametrize("due", ["one class and one tenant", "a lower class", "another tenant"])
def test_a_claim_whose_looks_find_nothing_to_share_is_the_plain_claim(
    store: Store, clock: ManualClock, due: str
) -> None:
    """A saturated claim's fairness looks (the lower classes' reserved slots, the tenants'
    turns) come first in its transaction: when they find one class and one tenant due, the
    claim runs the plain claim's statement (Claimed.plain: its floor may rise) and takes the
    jobs in claim order; a lower class or a second tenant due makes it the controlled pick,
    which takes them in their turn. A look that finds nothing rests the next claims."""
    flood = [enqueue(store, clock, priority=5, tenant="a").id for _ in range(20)]
    other = None
    if due == "a lower class":
        other = enqueue(store, clock, priority=0, tenant="a").id
    elif due == "another tenant":
        other = enqueue(store, clock, priority=5, tenant="b").id
    plan = ClaimPlan(per_class=1, priorities=PriorityShare(0.1), rotation=TenantRotation())
    got = store.claim_planned(plan, worker_id="w", queues=None, limit=4, now=clock.now())
    taken = [c.job.id for c in got.claims]
    if other is None:
        assert got.plain and taken == flood[:4]
    else:
        assert not got.plain and other in taken and len(taken) == 4
    # a look that found nothing rests the next claims; one that found something does not
    assert plan.priorities is not None and plan.rotation is not None
    assert plan.priorities.rest.left == (8 if due != "a lower class" else 0)
    assert plan.rotation.rest.left == (8 if due != "another tenant" else 0)


def test_the_pick_takes_turns_over_the_tenants_its_look_found(
    store: Store, clock: ManualClock
) -> None:
    """The looks made before the pick are the pick's: it takes turns over the tenants its
    look found and does not look again (a second look would move the rotation on, and start
    over from the first tenant)."""
    names = [f"t{i}" for i in range(TENANT_PROBES + 2)]  # a look stops at the 8th it finds
    for name in names:
        enqueue(store, clock, tenant=name)
    rotation = TenantRotation()
    rotation.after = names[1]  # where the last look stopped: this one finds t2 to t9
    got = store.claim_planned(
        ClaimPlan(rotation=rotation), worker_id="w", queues=None, limit=4, now=clock.now()
    )
    assert not got.plain
    assert [c.job.tenant for c in got.claims] == names[2:6]
    assert rotation.after == names[TENANT_PROBES + 1]
