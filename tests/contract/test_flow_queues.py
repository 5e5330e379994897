"""Flow control of queues and tenants on every dialect (docs/flow-control.md): pause,
cluster-wide concurrency caps, weights, and admission control by max_backlog."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import pytest

from duetime.admin.flow import queue_flows, tenant_flows
from duetime.core.clock import ManualClock
from duetime.core.errors import BacklogFull, InvalidRequest
from duetime.core.flow.records import FlowCounts
from duetime.core.models import Outcome
from duetime.core.states import AttemptStatus, Event, JobStatus
from duetime.runtime.fairness import ClaimFairness
from duetime.store.base import Store
from jobhelpers import enqueue, job_in, new


def claim_all(store: Store, clock: ManualClock, limit: int = 50, **kw: object) -> list[int]:
    claims = store.claim(worker_id="w", queues=None, limit=limit, now=clock.now(), **kw)  # type: ignore[arg-type]
    return [c.job.id for c in claims]


def test_settings_default_and_keep_what_is_not_given(store: Store, clock: ManualClock) -> None:
    q = store.set_queue("q", clock.now(), concurrency=3, max_backlog=10, weight=2)
    assert (q.paused, q.concurrency, q.max_backlog, q.weight) == (False, 3, 10, 2.0)
    q = store.set_queue("q", clock.now(), paused=True)
    assert (q.paused, q.concurrency, q.max_backlog, q.weight) == (True, 3, 10, 2.0)
    q = store.set_queue("q", clock.now(), concurrency=None, paused=False)  # None: no limit
    assert (q.paused, q.concurrency, q.max_backlog) == (False, None, 10)
    assert store.tenant_settings() == []
    t = store.set_tenant("acme", clock.now(), concurrency=2, weight=0.5)
    assert (t.tenant, t.concurrency, t.max_backlog, t.weight) == ("acme", 2, None, 0.5)
    t = store.set_tenant("acme", clock.now(), max_backlog=0)
    assert (t.concurrency, t.max_backlog, t.weight) == (2, 0, 0.5)
    assert [s.tenant for s in store.tenant_settings()] == ["acme"]


def test_a_paused_queue_keeps_accepting_and_starts_nothing(
    store: Store, clock: ManualClock
) -> None:
    store.set_queue("held", clock.now(), paused=True)
    held = [enqueue(store, clock, queue="held") for _ in range(3)]
    other = enqueue(store, clock, queue="other")
    for queues in (None, ["held"], ["held", "other"]):
        claims = store.claim(worker_id="w", queues=queues, limit=10, now=clock.now())
        assert {c.job.id for c in claims} <= {other.id}
    store.set_queue("held", clock.now(), paused=False)
    assert sorted(claim_all(store, clock)) == sorted(j.id for j in held)


def test_a_pause_lets_running_attempts_finish(store: Store, clock: ManualClock) -> None:
    job = enqueue(store, clock, queue="q")
    [claim] = store.claim(worker_id="w", queues=None, limit=1, now=clock.now())
    store.set_queue("q", clock.now(), paused=True)
    assert store.finish(claim.lease, Outcome(Event.SUCCEED), clock.now())
    assert store.get_job(job.id).status is JobStatus.SUCCEEDED  # type: ignore[union-attr]


def test_a_queue_cap_counts_running_attempts_across_claims(
    store: Store, clock: ManualClock
) -> None:
    store.set_queue("q", clock.now(), concurrency=3)
    for _ in range(10):
        enqueue(store, clock, queue="q")
    free = [enqueue(store, clock, queue="free").id for _ in range(2)]
    first = store.claim(worker_id="a", queues=None, limit=2, now=clock.now())
    second = store.claim(worker_id="b", queues=None, limit=10, now=clock.now())
    in_q = [c for c in first + second if c.job.queue == "q"]
    assert len(in_q) == 3
    assert set(free) <= {c.job.id for c in first + second}  # an uncapped queue is not held back
    assert claim_all(store, clock) == []
    store.finish(in_q[0].lease, Outcome(Event.SUCCEED), clock.now())  # a slot comes back
    assert len(claim_all(store, clock)) == 1
    assert claim_all(store, clock) == []


def test_a_crashed_workers_slots_come_back_when_its_leases_are_reaped(
    store: Store, clock: ManualClock
) -> None:
    store.set_queue("q", clock.now(), concurrency=1)
    enqueue(store, clock, queue="q", defaults=_lease(30))
    enqueue(store, clock, queue="q", defaults=_lease(30))
    [claim] = store.claim(worker_id="dead", queues=None, limit=5, now=clock.now())
    clock.advance(31)  # the worker died: its lease ended, nobody renewed it
    assert claim_all(store, clock) == []  # until the reaper ends the attempt
    [expired] = store.expired_leases(clock.now(), 10)
    assert expired.lease == claim.lease
    lost = Outcome(Event.RETRY, due_at=clock.now(), attempt_status=AttemptStatus.LOST)
    assert store.finish(expired.lease, lost, clock.now(), only_if_expired=True)
    assert len(claim_all(store, clock)) == 1


def _lease(seconds: float) -> object:
    from duetime.core.requests import TaskDefaults

    return TaskDefaults(lease_seconds=seconds)


def test_a_tenant_cap_holds_across_queues(store: Store, clock: ManualClock) -> None:
    store.set_tenant("big", clock.now(), concurrency=2)
    for queue in ("a", "b", "c"):
        for _ in range(3):
            enqueue(store, clock, queue=queue, tenant="big")
    small = [enqueue(store, clock, queue="a", tenant="small").id for _ in range(3)]
    claims = store.claim(worker_id="w", queues=None, limit=20, now=clock.now())
    tenants = Counter(c.job.tenant for c in claims)
    assert tenants == {"big": 2, "small": 3}
    assert set(small) <= {c.job.id for c in claims}


def test_a_cap_of_zero_starts_nothing(store: Store, clock: ManualClock) -> None:
    store.set_queue("q", clock.now(), concurrency=0)
    enqueue(store, clock, queue="q")
    assert claim_all(store, clock) == []


def test_weights_split_a_claim_between_queues(store: Store, clock: ManualClock) -> None:
    store.set_queue("heavy", clock.now(), weight=3)
    for _ in range(20):
        enqueue(store, clock, queue="light")  # earlier: first in claim order
    for _ in range(20):
        enqueue(store, clock, queue="heavy")
    claims = store.claim(worker_id="w", queues=None, limit=8, now=clock.now())
    assert Counter(c.job.queue for c in claims) == {"heavy": 6, "light": 2}


def test_weights_split_a_claim_between_tenants(store: Store, clock: ManualClock) -> None:
    store.set_tenant("small", clock.now(), weight=1)  # a row of default weight
    for _ in range(10):
        enqueue(store, clock, tenant="flood")
    small = [enqueue(store, clock, tenant="small").id for _ in range(3)]
    # tenants at the default weight take turns too (docs/flow-control.md, "Tenant fairness"):
    # the turns of a worker's claims, kept by its claim policy (runtime/fairness.py)
    fair = ClaimFairness()
    first = fair.claim(store, worker_id="w", queues=None, limit=2, now=clock.now()).claims
    assert {c.job.id for c in first} & set(small) == {small[0]}
    store.set_tenant("flood", clock.now(), weight=2)
    claims = fair.claim(store, worker_id="w", queues=None, limit=6, now=clock.now()).claims
    assert Counter(c.job.tenant for c in claims) == {"flood": 4, "small": 2}


def test_enqueue_past_a_queues_max_backlog_is_refused_and_stores_nothing(
    store: Store, clock: ManualClock
) -> None:
    store.set_queue("q", clock.now(), max_backlog=3)
    for _ in range(3):
        enqueue(store, clock, queue="q")
    with pytest.raises(BacklogFull) as refused:
        enqueue(store, clock, queue="q")
    assert (refused.value.kind, refused.value.name, refused.value.backlog) == ("queue", "q", 3)
    assert "max backlog of 3" in str(refused.value)
    batch = [new(clock, queue="other"), new(clock, queue="q")]
    with pytest.raises(BacklogFull):
        store.enqueue(batch, clock.now())  # all or nothing
    assert Counter(j.queue for j in store.list_jobs(_all())) == {"q": 3}
    claim_all(store, clock, limit=1)  # a started job leaves the backlog
    enqueue(store, clock, queue="q")


def test_enqueue_past_a_tenants_max_backlog_is_refused(store: Store, clock: ManualClock) -> None:
    store.set_tenant("acme", clock.now(), max_backlog=2)
    store.enqueue([new(clock, tenant="acme", queue=q) for q in ("a", "b")], clock.now())
    with pytest.raises(BacklogFull) as refused:
        enqueue(store, clock, tenant="acme", queue="c")
    assert refused.value.kind == "tenant" and refused.value.retry_after > 0
    enqueue(store, clock, tenant="other", queue="c")
    with pytest.raises(BacklogFull):  # a batch over the bound is refused as a whole
        store.set_tenant("fresh", clock.now(), max_backlog=2)
        store.enqueue([new(clock, tenant="fresh") for _ in range(3)], clock.now())
    assert [j for j in store.list_jobs(_all()) if j.tenant == "fresh"] == []


def test_flow_counts_give_backlog_and_running(store: Store, clock: ManualClock) -> None:
    for _ in range(3):
        enqueue(store, clock, queue="q", tenant="t")
    claim_all(store, clock, limit=1)
    counts = {(q, t): (c.backlog, c.running) for q, t, c in store.flow_counts(clock.now())}
    assert counts == {("q", "t"): (2, 1)}


@dataclass
class _Backend:
    store: Store
    clock: ManualClock


def test_flow_counts_give_the_due_jobs_not_started_and_their_wait(
    store: Store, clock: ManualClock
) -> None:
    """waiting: the backlog's jobs due and not started (status scheduled, due_at <= now);
    waiting_seconds: now minus the oldest one's due_at, 0 when none. A job not yet due, a
    running one and a schedule's occurrence buffered behind another (status waiting) are not
    waiting. Per queue and tenant, and summed (the longest wait) per queue and per tenant."""
    job_in(store, clock, JobStatus.WAITING)  # queue default, tenant default
    start = clock.now()
    enqueue(store, clock, queue="a", tenant="x")  # due at start
    enqueue(store, clock, queue="a", tenant="x", delay=60)  # due at start + 60
    clock.advance(10)
    enqueue(store, clock, queue="a", tenant="y")  # due at start + 10
    running = enqueue(store, clock, queue="b", tenant="x")
    [claim] = store.claim(worker_id="w", queues=["b"], limit=1, now=clock.now())
    assert claim.job.id == running.id
    enqueue(store, clock, queue="b", tenant="y", delay=5)  # due at start + 15
    clock.set(start + timedelta(seconds=30))

    def figures(c: FlowCounts) -> tuple[int, int, int, float]:
        return (c.backlog, c.running, c.waiting, round(c.waiting_seconds, 3))

    counts = {(q, t): figures(c) for q, t, c in store.flow_counts(clock.now())}
    assert counts == {
        ("a", "x"): (2, 0, 1, 30.0),
        ("a", "y"): (1, 0, 1, 20.0),
        ("b", "x"): (0, 1, 0, 0.0),
        ("b", "y"): (1, 0, 1, 15.0),
        ("default", "default"): (1, 0, 0, 0.0),
    }
    app = _Backend(store, clock)
    queues = {f.settings.queue: figures(f.counts) for f in queue_flows(app, None)}
    assert queues == {
        "a": (3, 0, 2, 30.0),
        "b": (1, 1, 1, 15.0),
        "default": (1, 0, 0, 0.0),
    }
    tenants = {f.settings.tenant: figures(f.counts) for f in tenant_flows(app, None)}
    assert tenants == {"x": (2, 1, 1, 30.0), "y": (2, 0, 2, 20.0), "default": (1, 0, 0, 0.0)}
    [y_only] = [f for f in queue_flows(app, "y") if f.settings.queue == "a"]
    assert figures(y_only.counts) == (1, 0, 1, 20.0)  # a tenant's own jobs only
    as_json = y_only.to_json()
    assert (as_json["backlog"], as_json["waiting"], as_json["waiting_seconds"]) == (1, 1, 20.0)
    clock.advance(40)  # the job due at start + 60 is due now, and waits from then
    counts = {(q, t): figures(c) for q, t, c in store.flow_counts(clock.now())}
    assert counts[("a", "x")] == (2, 0, 2, 70.0)
    claim_all(store, clock)  # every due job started: nothing waits
    for _, _, c in store.flow_counts(clock.now()):
        assert (c.waiting, c.waiting_seconds) == (0, 0.0)


def _all() -> object:
    from duetime.core.models import JobFilter

    return JobFilter(limit=1000)


def test_another_process_sees_a_pause_within_the_controls_ttl(
    make_store: Callable[[], Store], clock: ManualClock
) -> None:
    """A store keeps its copy of the control rows CONTROLS_SECONDS: a pause made elsewhere
    stops its claims once that copy is older (docs/flow-control.md). It does before that
    too: the claims check the queue's row itself (test_pause_paths.py)."""
    from duetime.core.flow.records import CONTROLS_SECONDS
    from duetime.store.sql import SQLStore

    operator, other = make_store(), make_store()
    assert isinstance(other, SQLStore)
    ticks = [time.monotonic()]  # the worker's caches' clock, moved by hand
    worker = SQLStore(other.driver, monotonic=lambda: ticks[0])
    for _ in range(3):
        enqueue(operator, clock, queue="q")
    assert len(worker.claim(worker_id="w", queues=None, limit=1, now=clock.now())) == 1
    operator.set_queue("q", clock.now(), paused=True)
    assert operator.claim(worker_id="o", queues=None, limit=5, now=clock.now()) == []  # at once
    ticks[0] += CONTROLS_SECONDS + 0.01
    assert worker.claim(worker_id="w", queues=None, limit=5, now=clock.now()) == []
    operator.set_queue("q", clock.now(), paused=False)
    ticks[0] += CONTROLS_SECONDS + 0.01
    assert len(worker.claim(worker_id="w", queues=None, limit=5, now=clock.now())) == 2


def test_a_weighted_tenant_behind_a_flood_gets_its_share(store: Store, clock: ManualClock) -> None:
    """Its jobs lie behind more than a claim reads of another tenant's: still seen, and the
    claim's slots split by weight (docs/flow-control.md, "Tenants")."""
    for _ in range(60):
        enqueue(store, clock, tenant="flood")
    clock.advance(1)
    small = [enqueue(store, clock, tenant="small").id for _ in range(5)]
    store.set_tenant("small", clock.now(), weight=3)
    claims = store.claim(worker_id="w", queues=None, limit=4, now=clock.now())
    assert Counter(c.job.tenant for c in claims) == {"small": 3, "flood": 1}
    assert [c.job.id for c in claims if c.job.tenant == "small"] == small[:3]


def test_a_weighted_queue_behind_a_flood_gets_its_share(store: Store, clock: ManualClock) -> None:
    for _ in range(60):
        enqueue(store, clock, queue="bulk")
    clock.advance(1)
    for _ in range(5):
        enqueue(store, clock, queue="urgent")
    store.set_queue("urgent", clock.now(), weight=1.5)
    claims = store.claim(worker_id="w", queues=["bulk", "urgent"], limit=5, now=clock.now())
    assert Counter(c.job.queue for c in claims) == {"urgent": 3, "bulk": 2}


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("concurrency", 2**63),
        ("max_backlog", 2**63),
        ("concurrency", 10**9 + 1),
        ("concurrency", True),
        ("max_backlog", False),
        ("concurrency", "5"),
        ("weight", 5e-324),
        ("weight", 1e6),
        ("weight", float("nan")),
        ("weight", True),
    ],
)
def test_every_store_refuses_out_of_range_flow_settings(
    store: Store, clock: ManualClock, setting: str, value: object
) -> None:
    """The bounds of docs/flow-control.md hold in the store itself: 2**63 never reaches a
    BIGINT column (SQLite raised OverflowError, a 500 behind the API and the dashboard)."""
    for change in (store.set_queue, store.set_tenant):
        with pytest.raises(InvalidRequest, match=setting.replace("_", " ").split()[0]):
            change("q", clock.now(), **{setting: value})  # type: ignore[operator]
    assert store.queue_settings() == [] and store.tenant_settings() == []
