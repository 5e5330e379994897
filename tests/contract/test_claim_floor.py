"""A claim's floor (ClaimPlan.floor, core/claim_floor.py, docs/performance.md "The claim's
floor"): on PostgreSQL the plain claim leaves out the jobs due before it, in the claim of
every queue and in the claim of named queues; the other dialects take no floor and walk from
the start. Every dialect says whether the plain claim ran (Claimed.plain), which alone lets a
worker raise its floor. A worker on PostgreSQL still runs a job made due before its floor: at
once when a wake-up names its instant, after its timer's next look below the floor
(Store.earliest_due, with the plain claim's filters) when none does."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import timedelta

import pytest

import duetime
from duetime.core.claim_floor import FLOOR_CHECK_EVERY
from duetime.core.clock import ManualClock
from duetime.core.flow.rotation import TenantRotation
from duetime.core.flow.share import PriorityShare
from duetime.core.models import Wakeup
from duetime.runtime.worker import Worker
from duetime.store.base import Claimed, ClaimPlan, Store
from jobhelpers import enqueue, until
from kit import DialectKit


def claim(
    store: Store, clock: ManualClock, plan: ClaimPlan, queues: list[str] | None = None
) -> Claimed:
    return store.claim_planned(plan, worker_id="w", queues=queues, limit=10, now=clock.now())


@pytest.mark.parametrize("queues", [None, ["mail"]], ids=["every queue", "named queues"])
def test_the_plain_claim_walks_from_its_floor_on_postgresql(
    store: Store, clock: ManualClock, kit: DialectKit, queues: list[str] | None
) -> None:
    now = clock.now()
    old = enqueue(store, clock, at=now - timedelta(seconds=60), queue="mail", args={"i": 1})
    recent = enqueue(store, clock, at=now - timedelta(seconds=1), queue="mail", args={"i": 2})
    got = claim(store, clock, ClaimPlan(floor=now - timedelta(seconds=10)), queues)
    assert got.plain
    taken = {c.job.id for c in got.claims}
    if kit.name == "postgres":
        assert taken == {recent.id}
        rest = claim(store, clock, ClaimPlan(), queues)  # from the start: the old one
        assert [c.job.id for c in rest.claims] == [old.id] and rest.plain
    else:  # no floor here: the whole walk
        assert taken == {old.id, recent.id}


def test_a_claim_under_flow_control_is_not_plain(store: Store, clock: ManualClock) -> None:
    """Caps may hold due jobs back: such a claim, short of its limit, says nothing of what is
    left due, so it must not raise a floor."""
    for i in range(3):
        enqueue(store, clock, queue="mail", args={"i": i})
    store.set_queue("mail", clock.now(), concurrency=1)
    got = claim(store, clock, ClaimPlan(floor=clock.now() - timedelta(seconds=10)))
    assert len(got.claims) == 1 and not got.plain


@pytest.mark.parametrize(
    "change", ["resume", "queue cap", "tenant cap"], ids=["resume", "queue cap", "tenant cap"]
)
def test_a_change_that_lets_held_jobs_start_names_the_earliest_due_one(
    make_store: Callable[[], Store], kit: DialectKit, clock: ManualClock, change: str
) -> None:
    """A resume or a new concurrency cap may let jobs start that were due long ago, below a
    worker's floor: its wake-up names the earliest due instant, which lowers the floor."""
    store = make_store()
    minute_ago = clock.now() - timedelta(seconds=60)
    enqueue(store, clock, queue="mail", at=minute_ago)
    enqueue(store, clock, queue="mail", args={"i": 2})
    store.set_queue("mail", clock.now(), paused=True)
    listener = store.listen()
    if kit.wakeups == "none":
        assert listener is None  # workers poll, and keep no floor
        return
    assert listener is not None
    try:
        listener.wait(0.05)  # whatever the setup sent
        other = make_store()  # another process, as far as the database can tell
        if change == "resume":
            other.set_queue("mail", clock.now(), paused=False)
        elif change == "queue cap":
            other.set_queue("mail", clock.now(), concurrency=5)
        else:
            other.set_tenant("default", clock.now(), concurrency=5)
        heard = listener.wait(10)
        assert heard
        if kit.wakeups == "due":
            assert [w.due_at for w in heard] == [minute_ago]
    finally:
        listener.close()


def test_a_worker_runs_jobs_made_due_before_its_floor(
    kit: DialectKit, store: Store, store_url: str, clock: ManualClock
) -> None:
    """The worker's floor (PostgreSQL) rises with its claims that took every due job. A job
    then written due a minute ago runs at once when its wake-up is heard (the store's
    notification of its instant: a released child, a long enqueue's commit), and after the
    timer's next look below the floor when it is not (a lost wake-up, a claim of another
    worker rolled back): the claims themselves do not walk from the start while they keep
    a floor. Elsewhere there is no floor: the next claim finds it."""
    app = duetime.App(store_url, clock=clock)
    ran: list[int] = []

    @app.task(name="t")
    async def t(i: int) -> None:
        ran.append(i)

    worker = Worker(app, concurrency=2, poll_interval=0.05, planner=False, retention=None)
    floor = worker.slots.fairness.floor
    assert (floor is not None) == (kit.name == "postgres")
    deaf = False  # the slots hear no wake-up: as if the feed lost them
    hear = worker.slots.heard

    def heard(wakeups: Sequence[Wakeup]) -> None:
        if not deaf:
            hear(wakeups)

    worker.slots.heard = heard  # type: ignore[method-assign]

    def risen() -> bool:  # a claim took every due job since the clock moved
        return floor is None or floor.floor == clock.now() - floor.margin

    async def scenario() -> None:
        nonlocal deaf
        stop = asyncio.Event()
        running = asyncio.create_task(worker.run(stop))
        try:
            enqueue(app.store, clock, task="t", args={"i": 0})
            await until(lambda: ran == [0])
            clock.advance(10)
            await until(risen)
            minute_ago = clock.now() - timedelta(seconds=60)
            enqueue(app.store, clock, task="t", args={"i": 1}, at=minute_ago)
            await until(lambda: ran == [0, 1])  # its wake-up lowered the floor
            await until(risen)
            for _ in range(2):  # a whole pass of the timer at this instant: a look, if due
                await worker.timer.passes.wait()
            deaf = True
            enqueue(app.store, clock, task="t", args={"i": 2}, at=minute_ago)
            if floor is not None:
                await asyncio.sleep(1.5)  # ten claims from the floor, a refill: not found
                assert ran == [0, 1]
                clock.advance(FLOOR_CHECK_EVERY.total_seconds())  # the timer looks below
            await until(lambda: ran == [0, 1, 2])
        finally:
            stop.set()
            await asyncio.wait_for(running, 30)

    try:
        asyncio.run(scenario())
    finally:
        app.close()


def test_the_earliest_due_job_a_claim_may_take_below_an_instant(
    store: Store, clock: ManualClock
) -> None:
    """Store.earliest_due (the timer's look below a floor): the earliest due instant at or
    before `until` among the jobs the plain claim of those queues and tasks may take, from
    every priority class; not a job of another queue or task, one past its deadline at
    `until`, one running, or one due after `until`."""
    now = clock.now()
    until_ = now - timedelta(seconds=10)
    assert store.earliest_due(until_, None, None) is None
    enqueue(store, clock, at=now - timedelta(seconds=5), queue="mail")  # after until
    assert store.earliest_due(until_, None, None) is None
    low = enqueue(store, clock, at=now - timedelta(seconds=30), queue="mail", priority=-5)
    high = enqueue(store, clock, at=now - timedelta(seconds=20), queue="mail", priority=5)
    other_task = enqueue(store, clock, at=now - timedelta(seconds=90), task="other", queue="mail")
    elsewhere = enqueue(store, clock, at=now - timedelta(seconds=80), queue="reports")
    assert store.earliest_due(until_, ["mail"], ["t"]) == low.due_at
    assert store.earliest_due(until_, None, ["t"]) == elsewhere.due_at
    assert store.earliest_due(until_, ["mail"], None) == other_task.due_at
    assert store.earliest_due(until_, ["mail"], ["missing"]) is None
    assert store.earliest_due(high.due_at, ["mail"], ["t"]) == low.due_at
    assert store.earliest_due(low.due_at - timedelta(seconds=1), ["mail"], ["t"]) is None
    # a deadline that has passed by `until`: the claim would not take it
    late = enqueue(
        store,
        clock,
        at=now - timedelta(seconds=50),
        queue="late",
        deadline=now + timedelta(seconds=5),
    )
    assert store.earliest_due(now + timedelta(seconds=4), ["late"], ["t"]) == late.due_at
    assert store.earliest_due(now + timedelta(seconds=6), ["late"], ["t"]) is None
    at_until = enqueue(store, clock, at=until_, queue="edge")  # at `until` itself: counts
    assert store.earliest_due(until_, ["edge"], ["t"]) == at_until.due_at
    got = claim(store, clock, ClaimPlan(), ["edge"])  # a running job is due no more
    assert [c.job.id for c in got.claims] == [at_until.id]
    assert store.earliest_due(until_, ["edge"], ["t"]) is None


@pytest.mark.parametrize("detour", ["queue cap", "priority share", "tenant rotation"])
def test_a_controlled_claim_walks_from_its_floor_on_postgresql(
    store: Store, clock: ManualClock, kit: DialectKit, detour: str
) -> None:
    """A claim under flow control or making a fairness detour reads its candidates from the
    floor too (their seeks of the classes, their walks, the tenants' seek): under a
    transaction held open, a walk from each class's first entry stepped over every job
    claimed since it began. Such a claim still never raises the floor (it is not plain: here
    each detour has something to act on, a cap, a lower class or a second tenant)."""
    now = clock.now()
    old, recent = now - timedelta(seconds=60), now - timedelta(seconds=1)
    jobs = []
    for i, (tenant, priority) in enumerate([("a", 5), ("b", 0)]):
        for at in (old, recent):
            jobs.append(
                enqueue(
                    store,
                    clock,
                    at=at,
                    tenant=tenant,
                    priority=priority,
                    args={"i": i, "at": str(at)},
                )
            )
    plan = ClaimPlan(floor=now - timedelta(seconds=10))
    if detour == "queue cap":
        store.set_queue("default", now, concurrency=10)
    elif detour == "priority share":
        plan = ClaimPlan(per_class=1, priorities=PriorityShare(0.1), floor=plan.floor)
    else:
        plan = ClaimPlan(rotation=TenantRotation(), floor=plan.floor)
    got = claim(store, clock, plan)
    assert not got.plain
    taken = {c.job.id for c in got.claims}
    if kit.name == "postgres":
        assert taken == {j.id for j in jobs if j.due_at == recent}
        rest = claim(store, clock, ClaimPlan(), None)  # from the start: the old ones
        assert {c.job.id for c in rest.claims} == {j.id for j in jobs if j.due_at == old}
    else:
        assert taken == {j.id for j in jobs}


@pytest.mark.parametrize("path", ["plain", "named queues", "queue cap"])
def test_a_claim_finds_the_classes_it_has_not_seen_above_below_and_between(
    store: Store, clock: ManualClock, path: str
) -> None:
    """A claim names the priority classes of the jobs it started lately to its seeks of the
    classes (Claimer.known_classes, the part floored_classes on PostgreSQL): those it takes as
    they are, and it seeks only between them. A class it has not seen, above, below or
    between those, or past the most it remembers, is still found, and the jobs start in
    claim order."""
    now = clock.now()
    queues = ["default", "other"] if path == "named queues" else None  # (claim_queues)
    if path == "queue cap":  # every claim a controlled one (claim_candidates)
        store.set_queue("default", now, concurrency=1_000)
    plan = ClaimPlan(floor=now - timedelta(seconds=10))
    for i, priority in enumerate((0, 5)):
        enqueue(store, clock, priority=priority, args={"seen": i})
    assert {c.job.priority for c in claim(store, clock, plan, queues).claims} == {0, 5}
    fresh = [9, 5, 3, 0, -2]  # above, known, between, known, below
    for i, priority in enumerate(fresh):
        enqueue(store, clock, priority=priority, args={"fresh": i})
    got = claim(store, clock, plan, queues)
    assert [c.job.priority for c in got.claims] == fresh
    many = list(range(20, 8, -1))  # twelve classes more: more than a claimer remembers
    for i, priority in enumerate(many):
        enqueue(store, clock, priority=priority, args={"many": i})
    got = store.claim_planned(plan, worker_id="w", queues=queues, limit=100, now=clock.now())
    assert [c.job.priority for c in got.claims] == many
    for i, priority in enumerate((-2, 14, 30, 0)):  # one it remembers, three it does not
        enqueue(store, clock, priority=priority, args={"last": i})
    got = claim(store, clock, plan, queues)
    assert [c.job.priority for c in got.claims] == [30, 14, 0, -2]
