"""The store contract: every test runs against SQLite and PostgreSQL alike."""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from duetime.core.clock import ManualClock
from duetime.core.errors import (
    IdempotencyConflict,
    IllegalTransition,
    InvalidRequest,
    JobNotFound,
    SchemaError,
    StoreUnavailable,
)
from duetime.core.limits import LimitSettings
from duetime.core.models import Claim, JobFilter, Lease, Outcome
from duetime.core.requests import TaskDefaults
from duetime.core.retry import ErrorCategory
from duetime.core.states import TRANSITIONS, AttemptStatus, Event, JobStatus
from duetime.store.base import Store
from duetime.store.rows import CLAIMED_COLUMNS, claims_from_rows, claims_from_values
from duetime.store.sql import claim as claim_module
from jobhelpers import claim_one, enqueue, job_in, new
from kit import DialectKit

ALL_STATUSES = list(JobStatus)


# -- schema -------------------------------------------------------------------------------------


def test_migrate_is_idempotent_and_schema_current(store: Store) -> None:
    assert store.migrate() == []
    assert store.schema_version() >= 1
    store.check_schema()


def test_store_refuses_a_newer_schema(store: Store, kit: DialectKit, store_url: str) -> None:
    kit.execute(
        store_url,
        "INSERT INTO duetime_migrations (version, name, applied_at) VALUES (?, ?, ?)",
        (999, "x", kit.instant(datetime(2026, 1, 1, tzinfo=UTC))),
    )
    with pytest.raises(SchemaError, match="newer than this duetime knows"):
        store.check_schema()
    with pytest.raises(SchemaError, match="upgrade duetime"):
        store.migrate()


def test_store_asks_for_migrate_when_behind(store: Store, kit: DialectKit, store_url: str) -> None:
    kit.execute(store_url, "DELETE FROM duetime_migrations")
    with pytest.raises(SchemaError, match="run `duetime migrate`"):
        store.check_schema()


# -- enqueue ------------------------------------------------------------------------------------


def test_enqueue_stores_every_field(store: Store, clock: ManualClock) -> None:
    due = clock.now() + timedelta(minutes=5)
    job = enqueue(
        store,
        clock,
        task="email.send",
        args={"to": "a@example.com", "n": [1, 2]},
        at=due,
        queue="mail",
        priority=7,
        max_attempts=3,
        deadline=due + timedelta(hours=1),
        key="order-1",
    )
    loaded = store.get_job(job.id)
    assert loaded == job
    assert (job.task, job.queue, job.priority, job.max_attempts) == ("email.send", "mail", 7, 3)
    assert job.args == {"to": "a@example.com", "n": [1, 2]}
    assert job.due_at == due and job.deadline_at == due + timedelta(hours=1)
    assert job.status is JobStatus.SCHEDULED
    assert (job.attempts, job.generation, job.version) == (0, 0, 1)
    assert job.idempotency_key == "order-1" and job.business_key == "default/email.send:order-1"
    assert job.created_at == clock.now() and job.due_at.tzinfo is not None


def test_same_key_same_request_returns_the_original(store: Store, clock: ManualClock) -> None:
    first = store.enqueue([new(clock, key="k", args={"a": 1})], clock.now())[0]
    clock.advance(3)
    again = store.enqueue([new(clock, key="k", args={"a": 1})], clock.now())[0]
    assert first.created and not again.created
    assert again.job.id == first.job.id


def test_same_key_different_request_is_refused_and_stores_nothing(
    store: Store, clock: ManualClock
) -> None:
    store.enqueue([new(clock, key="k", args={"a": 1})], clock.now())
    with pytest.raises(IdempotencyConflict, match="different request"):
        store.enqueue([new(clock, key="k", args={"a": 2})], clock.now())
    assert len(store.list_jobs(JobFilter())) == 1


def test_keys_are_per_tenant(store: Store, clock: ManualClock) -> None:
    a = store.enqueue([new(clock, key="k", tenant="a")], clock.now())[0]
    b = store.enqueue([new(clock, key="k", tenant="b")], clock.now())[0]
    assert a.created and b.created and a.job.id != b.job.id


def test_batch_enqueue_is_all_or_nothing(store: Store, clock: ManualClock) -> None:
    store.enqueue([new(clock, key="taken", args={"a": 1})], clock.now())
    batch = [new(clock, args={"i": i}) for i in range(5)] + [new(clock, key="taken", args={"a": 9})]
    with pytest.raises(IdempotencyConflict):
        store.enqueue(batch, clock.now())
    assert len(store.list_jobs(JobFilter())) == 1


def test_fifty_concurrent_enqueues_with_one_key_create_one_job(
    make_store: Callable[[], Store], clock: ManualClock
) -> None:
    stores = [make_store() for _ in range(50)]
    barrier = threading.Barrier(50)
    results: list[tuple[int, bool]] = []
    errors: list[BaseException] = []

    def go(s: Store) -> None:
        try:
            barrier.wait()
            r = s.enqueue([new(clock, key="same", args={"x": 1})], clock.now())[0]
            results.append((r.job.id, r.created))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(results) == 50
    assert len({job_id for job_id, _ in results}) == 1
    assert sum(created for _, created in results) == 1
    assert len(stores[0].list_jobs(JobFilter())) == 1


# -- claim --------------------------------------------------------------------------------------


def test_claim_never_takes_a_job_before_its_due_time(store: Store, clock: ManualClock) -> None:
    job = enqueue(store, clock, delay=60)
    clock.advance(59.999)
    assert store.claim(worker_id="w", queues=None, limit=10, now=clock.now()) == []
    clock.advance(0.001)
    claims = store.claim(worker_id="w", queues=None, limit=10, now=clock.now())
    assert [c.job.id for c in claims] == [job.id]


def test_claim_orders_by_priority_then_due_time_then_id(store: Store, clock: ManualClock) -> None:
    start = clock.now()
    low_old = enqueue(store, clock, priority=0, at=start - timedelta(seconds=30))
    high_new = enqueue(store, clock, priority=5, at=start - timedelta(seconds=1))
    high_old = enqueue(store, clock, priority=5, at=start - timedelta(seconds=10))
    low_same_a = enqueue(store, clock, priority=0, at=start)
    low_same_b = enqueue(store, clock, priority=0, at=start)
    claims = store.claim(worker_id="w", queues=None, limit=4, now=clock.now())
    assert [c.job.id for c in claims] == [high_old.id, high_new.id, low_old.id, low_same_a.id]
    rest = store.claim(worker_id="w", queues=None, limit=4, now=clock.now())
    assert [c.job.id for c in rest] == [low_same_b.id]


def test_a_claim_takes_the_due_jobs_of_every_priority_class_and_none_due_later(
    store: Store, clock: ManualClock
) -> None:
    """Several priority classes (negative ones too), each with jobs due later than now around
    its due ones, and a limit above the due jobs' count: the claim takes every due job, by
    priority then due time, and none due later (SQLite's and MariaDB/MySQL's pick is given the
    classes, Claimer.due_classes); a class first seen after a claim is taken by the next."""
    start = clock.now()
    due = []
    for priority in (7, 0, -3, -1000, 1000):
        enqueue(store, clock, priority=priority, at=start + timedelta(seconds=5))
        due.append(enqueue(store, clock, priority=priority, at=start - timedelta(seconds=1)))
        enqueue(store, clock, priority=priority, at=start + timedelta(days=1))
    claims = store.claim(worker_id="w", queues=None, limit=100, now=clock.now())
    expected = sorted(due, key=lambda j: (-j.priority, j.id))
    assert [c.job.id for c in claims] == [j.id for j in expected]
    late = enqueue(store, clock, priority=3, at=start)
    named = store.claim(worker_id="w", queues=["default"], limit=100, now=clock.now())
    assert [c.job.id for c in named] == [late.id]
    assert store.claim(worker_id="w", queues=None, limit=100, now=clock.now()) == []
    clock.advance(5)
    later = store.claim(worker_id="w", queues=["default", "other"], limit=100, now=clock.now())
    assert [c.job.priority for c in later] == [1000, 7, 0, -3, -1000]


def test_claim_filters_by_queue(store: Store, clock: ManualClock) -> None:
    mail = enqueue(store, clock, queue="mail")
    enqueue(store, clock, queue="reports")
    claims = store.claim(worker_id="w", queues=["mail", "other"], limit=10, now=clock.now())
    assert [c.job.id for c in claims] == [mail.id]


@pytest.mark.parametrize("served", [1, 2, 4, 5], ids=lambda n: f"{n} queues")
def test_a_claim_of_named_queues_takes_theirs_in_claim_order_up_to_its_limit(
    store: Store, clock: ManualClock, served: int
) -> None:
    """Named queues (PostgreSQL reads up to 4 through each queue's index, more by a filter:
    claim_queues): the jobs of those queues only, the best across them by priority and due
    time, never more than the limit, each once (a queue named twice counts once)."""
    start = clock.now()
    names = [f"q{i}" for i in range(6)]
    jobs = {
        name: [
            enqueue(store, clock, queue=name, priority=p, at=start - timedelta(seconds=s))
            for p, s in ((0, 50 + i), (3, 10 + i), (0, 5 + i))
        ]
        for i, name in enumerate(names)
    }
    queues = names[:served] + names[:1]  # the first named twice
    expected = sorted(
        (job for name in names[:served] for job in jobs[name]),
        key=lambda j: (-j.priority, j.due_at, j.id),
    )
    limit = 2 * served
    claims = store.claim(worker_id="w", queues=queues, limit=limit, now=clock.now())
    assert [c.job.id for c in claims] == [j.id for j in expected[:limit]]
    rest = store.claim(worker_id="w", queues=queues, limit=100, now=clock.now())
    assert [c.job.id for c in rest] == [j.id for j in expected[limit:]]
    assert store.claim(worker_id="w", queues=queues, limit=100, now=clock.now()) == []


def test_claim_starts_an_attempt_with_the_next_generation_and_a_lease(
    store: Store, clock: ManualClock
) -> None:
    enqueue(store, clock)
    claim = store.claim(worker_id="w7", queues=None, limit=1, now=clock.now())[0]
    assert claim.job.status is JobStatus.RUNNING
    assert (claim.job.generation, claim.job.attempts) == (1, 1)
    assert claim.attempt.generation == 1 and claim.attempt.worker_id == "w7"
    assert claim.attempt.status is AttemptStatus.RUNNING
    assert claim.attempt.lease_expires_at == clock.now() + timedelta(seconds=30)
    assert claim.attempt.started_at == clock.now()


def test_every_claim_path_gives_the_job_and_attempt_as_the_store_holds_them(
    store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim reads back only part of its attempt's row (store/rows.py claims_from_rows): the
    rest must be what the store holds, whichever statement started it: claim_queues, claim,
    then claim_chosen through the limited pick (a limit exists) and the controlled one (a
    capped queue). Each returns the columns CLAIMED_COLUMNS names (the shared part
    claimed_columns), no more, in that order (a plain claim's rows are read by position:
    claims_from_values)."""
    returned: list[tuple[str, ...]] = []

    def noted(rows: Any, *args: Any) -> list[Claim]:
        rows = list(rows)
        returned.extend(tuple(row.keys()) for row in rows)
        return claims_from_rows(rows, *args)

    def noted_values(names: Any, rows: Any, *args: Any) -> list[Claim]:
        rows = list(rows)
        returned.extend(tuple(names) for _ in rows)
        return claims_from_values(names, rows, *args)

    monkeypatch.setattr(claim_module, "claims_from_rows", noted)
    monkeypatch.setattr(claim_module, "claims_from_values", noted_values)
    run: list[str] = []  # the claim statements each claim ran, by name
    statements = store.driver.statements  # type: ignore[attr-defined]

    def named(name: str) -> tuple[str, ...]:
        if name.startswith("claim"):
            run.append(name)
        return statements(name)  # type: ignore[no-any-return]

    monkeypatch.setattr(store.driver, "statements", named)  # type: ignore[attr-defined]
    enqueue(store, clock, queue="named")
    enqueue(store, clock, queue="plain", args={"x": 1}, priority=2)
    clock.advance(0.25)
    claims = store.claim(worker_id="wn", queues=["named", "other"], limit=5, now=clock.now())
    claims += store.claim(worker_id="wp", queues=None, limit=5, now=clock.now())
    store.set_limit(LimitSettings("api", concurrency=5), clock.now())
    enqueue(store, clock, queue="keyed", defaults=TaskDefaults(limits=("api",)))
    claims += store.claim(worker_id="wk", queues=None, limit=5, now=clock.now())
    store.set_queue("capped", clock.now(), concurrency=5)
    enqueue(store, clock, queue="capped", deadline=clock.now() + timedelta(hours=1))
    claims += store.claim(worker_id="wc", queues=None, limit=5, now=clock.now())
    assert [(c.job.queue, c.attempt.worker_id) for c in claims] == [
        ("named", "wn"),
        ("plain", "wp"),
        ("keyed", "wk"),
        ("capped", "wc"),
    ]
    # the paths the docstring names, each as its statements show it
    assert run == [
        "claim_queues",
        "claim",
        "claim_pick_limited",
        "claim_chosen",
        "claim_candidates",
        "claim_chosen",
    ]
    assert returned == [CLAIMED_COLUMNS] * 4
    for claim in claims:
        held = store.get_job(claim.job.id)
        assert held is not None
        assert claim.job == held  # every field (the attempt history is not compared)
        [attempt] = held.attempt_history
        assert claim.attempt == dataclasses.replace(attempt, epoch=claim.attempt.epoch)
        assert claim.attempt.started_at == clock.now() == claim.job.updated_at


@pytest.mark.parametrize("queues", [None, ["q-ü"]], ids=["all-queues", "named-queue"])
def test_a_claim_reads_every_value_of_a_job_as_a_read_of_it_does(
    store: Store, clock: ManualClock, queues: list[str] | None
) -> None:
    """The claim's rows are read in their own way where a dialect can (PostgreSQL: in binary,
    their JSON parsed from text), by both claim statements (all queues, named queues): jobs
    with the optional values an enqueue can set (an idempotency key, a business key, a
    deadline, a timeout, a sequence, a unique window) and args of every JSON kind, text
    outside ASCII among them, come out of the claim as a read of the running jobs gives
    them, value for value and type for type, their attempts too."""
    args = {
        "name": 'Zoë 日本 🎉 "quoted" \\ back',
        "n": -7,
        "big": 2**62,
        "x": 0.1,
        "ok": True,
        "none": None,
        "list": [1, "two", {"three": [3.5]}],
    }
    keyed = enqueue(
        store,
        clock,
        args=args,
        queue="q-ü",
        key="idem-é",
        business_key="order-ü-42",
        priority=-3,
        max_attempts=7,
        deadline=clock.now() + timedelta(hours=2, microseconds=123457),
        defaults=TaskDefaults(timeout_seconds=12.5, lease_seconds=33.25),
    )
    windowed = enqueue(
        store,
        clock,
        args={"k": "ß"},
        queue="q-ü",
        sequence="seq-ø",
        unique_for="10m",
        unique_key="once-ñ",
    )
    clock.advance(0.000001)
    claims = store.claim(worker_id="w-ß", queues=queues, limit=5, now=clock.now())
    assert sorted(c.job.id for c in claims) == sorted([keyed.id, windowed.id])
    for claim in claims:
        held = store.get_job(claim.job.id)
        assert held is not None
        # a read counts the jobs ahead of a job in its sequence; a claim leaves that out
        held = dataclasses.replace(held, sequence_ahead=None)
        assert claim.job == held
        for field in dataclasses.fields(claim.job):
            value, read = getattr(claim.job, field.name), getattr(held, field.name)
            assert type(value) is type(read), field.name
        [attempt] = held.attempt_history
        assert claim.attempt == dataclasses.replace(attempt, epoch=claim.attempt.epoch)
        assert claim.attempt.worker_id == "w-ß"
    job = next(c.job for c in claims if c.job.id == keyed.id)
    assert job.args == args
    assert {k: type(v) for k, v in job.args.items()} == {k: type(v) for k, v in args.items()}
    assert (job.timeout_seconds, job.lease_seconds) == (12.5, 33.25)
    assert job.deadline_at == keyed.deadline_at and job.idempotency_key == "idem-é"
    other = next(c.job for c in claims if c.job.id == windowed.id)
    assert (other.sequence_key, other.unique_until) == ("seq-ø", windowed.unique_until)
    assert other.unique_key is not None and other.unique_until is not None


def test_claim_skips_jobs_past_their_deadline(store: Store, clock: ManualClock) -> None:
    enqueue(store, clock, deadline=clock.now() + timedelta(seconds=5))
    clock.advance(5)
    assert store.claim(worker_id="w", queues=None, limit=10, now=clock.now()) == []


def test_concurrent_claimers_never_share_a_job(
    make_store: Callable[[], Store], clock: ManualClock
) -> None:
    first = make_store()
    first.enqueue([new(clock, args={"i": i}) for i in range(300)], clock.now())
    stores = [make_store() for _ in range(6)]
    taken: list[list[int]] = [[] for _ in stores]

    def drain(i: int) -> None:
        while batch := stores[i].claim(worker_id=f"w{i}", queues=None, limit=7, now=clock.now()):
            taken[i].extend(c.job.id for c in batch)

    threads = [threading.Thread(target=drain, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [job_id for part in taken for job_id in part]
    assert len(every) == 300 and len(set(every)) == 300


# -- heartbeats, finishing, fencing -----------------------------------------------------------


def test_heartbeat_renews_a_held_lease(store: Store, clock: ManualClock) -> None:
    enqueue(store, clock)
    _, lease = claim_one(store, clock)
    clock.advance(20)
    [state] = store.heartbeat([lease], clock.now())
    assert state.held and not state.cancel_requested
    assert state.lease_expires_at == clock.now() + timedelta(seconds=30)
    job = store.get_job(lease.job_id)
    assert job is not None and job.attempt_history[0].lease_expires_at == state.lease_expires_at


def test_heartbeat_reports_cancellation_and_lost_leases(store: Store, clock: ManualClock) -> None:
    enqueue(store, clock)
    job, lease = claim_one(store, clock)
    store.transition(job.id, Event.CANCEL, clock.now())
    [state] = store.heartbeat([lease], clock.now())
    assert state.held and state.cancel_requested
    stale = Lease(lease.job_id, lease.attempt_id, lease.generation + 1)
    [gone] = store.heartbeat([stale], clock.now())
    assert not gone.held


@pytest.mark.parametrize(
    ("event", "start", "end"),
    [
        (Event.SUCCEED, JobStatus.RUNNING, JobStatus.SUCCEEDED),
        (Event.RETRY, JobStatus.RUNNING, JobStatus.SCHEDULED),
        (Event.GIVE_UP, JobStatus.RUNNING, JobStatus.DEAD),
        (Event.SUCCEED, JobStatus.CANCEL_REQUESTED, JobStatus.SUCCEEDED),
        (Event.RETRY, JobStatus.CANCEL_REQUESTED, JobStatus.CANCELLED),
        (Event.GIVE_UP, JobStatus.CANCEL_REQUESTED, JobStatus.CANCELLED),
        (Event.STOP, JobStatus.CANCEL_REQUESTED, JobStatus.CANCELLED),
    ],
)
def test_finish_moves_the_job(
    store: Store, clock: ManualClock, event: Event, start: JobStatus, end: JobStatus
) -> None:
    job, lease = job_in(store, clock, start)
    assert lease is not None
    clock.advance(2)
    retry_at = clock.now() + timedelta(seconds=42)
    outcome = Outcome(
        event,
        due_at=retry_at if event is Event.RETRY else None,
        error_category=None if event is Event.SUCCEED else ErrorCategory.RETRYABLE,
        error_message=None if event is Event.SUCCEED else "ValueError: boom",
        error_traceback=None if event is Event.SUCCEED else "Traceback ...",
    )
    assert store.finish(lease, outcome, clock.now())
    after = store.get_job(job.id)
    assert after is not None and after.status is end
    attempt = after.attempt_history[-1]
    assert attempt.finished_at == clock.now()
    if event is Event.SUCCEED:
        assert attempt.status is AttemptStatus.SUCCEEDED
    elif event is Event.STOP:
        assert attempt.status is AttemptStatus.CANCELLED
    else:
        assert attempt.status is AttemptStatus.FAILED
        assert attempt.error_message == "ValueError: boom"
        assert attempt.error_traceback == "Traceback ..."
    if end is JobStatus.SCHEDULED:
        assert after.due_at == retry_at


@pytest.mark.parametrize("status", ALL_STATUSES)
@pytest.mark.parametrize(
    "event", [Event.SUCCEED, Event.RETRY, Event.GIVE_UP, Event.STOP, Event.PARK]
)
def test_finish_is_refused_unless_the_job_is_held(
    store: Store, clock: ManualClock, status: JobStatus, event: Event
) -> None:
    job, lease = job_in(store, clock, status)
    lease = lease or Lease(job.id, 0, job.generation)
    applied = store.finish(lease, Outcome(event, due_at=clock.now()), clock.now())
    after = store.get_job(job.id)
    assert after is not None
    assert applied == (status in TRANSITIONS[event])
    if not applied:
        assert after.status is status


def test_a_stale_worker_cannot_overwrite_the_newer_attempt(
    store: Store, clock: ManualClock
) -> None:
    enqueue(store, clock)
    job, old = claim_one(store, clock, worker="paused")
    clock.advance(31)
    [expired] = store.expired_leases(clock.now(), 10)
    assert expired.lease == old
    assert store.finish(
        old,
        Outcome(
            Event.RETRY,
            due_at=clock.now(),
            error_category=ErrorCategory.LEASE_EXPIRED,
            attempt_status=AttemptStatus.LOST,
        ),
        clock.now(),
        only_if_expired=True,
    )
    _, new_lease = claim_one(store, clock, worker="fresh")
    assert new_lease.generation == old.generation + 1
    # the paused worker wakes up and reports success: fenced out
    assert not store.finish(old, Outcome(Event.SUCCEED), clock.now())
    assert not store.heartbeat([old], clock.now())[0].held
    current = store.get_job(job.id)
    assert current is not None and current.status is JobStatus.RUNNING
    assert current.generation == new_lease.generation
    lost = current.attempt_history[0]
    assert lost.status is AttemptStatus.LOST
    assert lost.error_category is ErrorCategory.LEASE_EXPIRED
    assert lost.late_outcome == "succeeded" and lost.late_reported_at == clock.now()
    # the fresh worker's real outcome is the one that counts
    assert store.finish(new_lease, Outcome(Event.SUCCEED), clock.now())
    done = store.get_job(job.id)
    assert done is not None and done.status is JobStatus.SUCCEEDED


def test_reaping_is_refused_when_the_lease_was_renewed(store: Store, clock: ManualClock) -> None:
    enqueue(store, clock)
    job, lease = claim_one(store, clock)
    clock.advance(31)
    [expired] = store.expired_leases(clock.now(), 10)
    store.heartbeat([lease], clock.now())  # renewed between the scan and the reap
    assert not store.finish(
        expired.lease, Outcome(Event.RETRY, due_at=clock.now()), clock.now(), only_if_expired=True
    )
    after = store.get_job(job.id)
    assert after is not None and after.status is JobStatus.RUNNING
    assert after.attempt_history[0].late_outcome is None


def test_expired_leases_lists_only_lapsed_running_attempts(
    store: Store, clock: ManualClock
) -> None:
    enqueue(store, clock, args={"i": 1})
    enqueue(store, clock, args={"i": 2})
    _, first = claim_one(store, clock)
    clock.advance(10)
    _, second = claim_one(store, clock)
    clock.advance(20)
    assert [e.lease for e in store.expired_leases(clock.now(), 10)] == [first]
    clock.advance(10)
    found = store.expired_leases(clock.now(), 10)
    assert [e.lease for e in found] == [first, second]
    assert found[0].job_status is JobStatus.RUNNING and found[0].attempts == 1


def test_expire_overdue_only_touches_scheduled_jobs_past_deadline(
    store: Store, clock: ManualClock
) -> None:
    soon = enqueue(store, clock, deadline=clock.now() + timedelta(seconds=5))
    later = enqueue(store, clock, deadline=clock.now() + timedelta(seconds=50))
    running = enqueue(store, clock, deadline=clock.now() + timedelta(seconds=5), priority=9)
    claim_one(store, clock)
    clock.advance(6)
    assert store.expire_overdue(clock.now(), 100) == 1
    statuses = {j.id: j.status for j in store.list_jobs(JobFilter())}
    assert statuses == {
        soon.id: JobStatus.EXPIRED,
        later.id: JobStatus.SCHEDULED,
        running.id: JobStatus.RUNNING,
    }


# -- operators' moves ---------------------------------------------------------------------------


@pytest.mark.parametrize("status", ALL_STATUSES)
@pytest.mark.parametrize(
    "event",
    [Event.CANCEL, Event.RESCHEDULE, Event.REPLAY, Event.RESOLVE_DONE, Event.RESOLVE_RETRY],
)
def test_every_operator_move_from_every_status(
    store: Store, clock: ManualClock, status: JobStatus, event: Event
) -> None:
    job, _ = job_in(store, clock, status)
    target = TRANSITIONS[event].get(status)
    due = clock.now() + timedelta(minutes=1) if event is Event.RESCHEDULE else None
    if target is None:
        with pytest.raises(IllegalTransition, match=f"it is {status}"):
            store.transition(job.id, event, clock.now(), due_at=due)
        after = store.get_job(job.id)
        assert after is not None and after.status is status and after.version == job.version
    else:
        moved = store.transition(job.id, event, clock.now(), due_at=due)
        assert moved.status is target and moved.version == job.version + 1


def test_reschedule_moves_due_time_and_bumps_version(store: Store, clock: ManualClock) -> None:
    job = enqueue(store, clock)
    later = clock.now() + timedelta(hours=2)
    moved = store.transition(job.id, Event.RESCHEDULE, clock.now(), due_at=later)
    assert moved.due_at == later and moved.version == 2
    assert store.claim(worker_id="w", queues=None, limit=1, now=clock.now()) == []


def test_reschedule_past_the_deadline_is_refused(store: Store, clock: ManualClock) -> None:
    job = enqueue(store, clock, deadline=clock.now() + timedelta(minutes=10))
    with pytest.raises(InvalidRequest, match="deadline"):
        store.transition(
            job.id, Event.RESCHEDULE, clock.now(), due_at=clock.now() + timedelta(minutes=11)
        )


def test_replay_gives_a_dead_job_a_new_attempt_with_the_same_business_key(
    store: Store, clock: ManualClock
) -> None:
    job, _ = job_in(store, clock, JobStatus.DEAD)
    replayed = store.transition(job.id, Event.REPLAY, clock.now())
    assert replayed.status is JobStatus.SCHEDULED and replayed.attempts == 0
    assert replayed.business_key == job.business_key and replayed.generation == job.generation
    again, lease = claim_one(store, clock)
    assert again.id == job.id and lease.generation == job.generation + 1
    full = store.get_job(job.id)
    assert full is not None and [a.generation for a in full.attempt_history] == [1, 2]


def test_replay_of_an_expired_job_drops_the_past_deadline(store: Store, clock: ManualClock) -> None:
    job, _ = job_in(store, clock, JobStatus.EXPIRED)
    replayed = store.transition(job.id, Event.REPLAY, clock.now())
    assert replayed.deadline_at is None
    assert claim_one(store, clock)[0].id == job.id


def test_unknown_jobs_and_other_tenants_jobs_are_not_found(
    store: Store, clock: ManualClock
) -> None:
    job = enqueue(store, clock, tenant="acme")
    assert store.get_job(job.id, tenant="globex") is None
    assert store.get_job(job.id, tenant="acme") is not None
    with pytest.raises(JobNotFound):
        store.transition(job.id, Event.CANCEL, clock.now(), tenant="globex")
    with pytest.raises(JobNotFound):
        store.transition(10_000, Event.CANCEL, clock.now())
    current = store.get_job(job.id)
    assert current is not None and current.status is JobStatus.SCHEDULED


# -- listing ------------------------------------------------------------------------------------


def test_list_jobs_filters_and_pages_newest_first(store: Store, clock: ManualClock) -> None:
    ids = [enqueue(store, clock, task="a" if i % 2 else "b", args={"i": i}).id for i in range(7)]
    claim_one(store, clock)
    page1 = store.list_jobs(JobFilter(limit=3))
    assert [j.id for j in page1] == ids[::-1][:3]
    page2 = store.list_jobs(JobFilter(limit=3, before_id=page1[-1].id))
    assert [j.id for j in page2] == ids[::-1][3:6]
    assert {j.task for j in store.list_jobs(JobFilter(task="a"))} == {"a"}
    assert [j.id for j in store.list_jobs(JobFilter(status=JobStatus.RUNNING))] == [ids[0]]
    assert store.list_jobs(JobFilter(tenant="nobody")) == []


def test_list_jobs_finds_jobs_by_business_key_idempotency_key_and_args_text(
    store: Store, clock: ManualClock
) -> None:
    keyed = enqueue(store, clock, key="order-42", args={"customer": "Cus_1042", "n": 1})
    billed = enqueue(store, clock, business_key="invoice:7", args={"note": "100% off_x!"})
    enqueue(store, clock, args={"customer": "cus_2000"})
    found = store.list_jobs(JobFilter(idempotency_key="order-42"))
    assert [j.id for j in found] == [keyed.id]
    assert [j.id for j in store.list_jobs(JobFilter(business_key="invoice:7"))] == [billed.id]
    assert [j.id for j in store.list_jobs(JobFilter(args_text="cus_1042"))] == [keyed.id]
    # the text is found as typed: %, _ and ! are no wildcards
    assert [j.id for j in store.list_jobs(JobFilter(args_text="100% off_x!"))] == [billed.id]
    assert store.list_jobs(JobFilter(args_text="100%_off")) == []
    assert store.list_jobs(JobFilter(args_text="cus_1")) == [keyed]
    assert store.list_jobs(JobFilter(business_key="invoice:7", tenant="other")) == []


def test_list_jobs_loads_attempt_histories_in_one_listing(store: Store, clock: ManualClock) -> None:
    first = enqueue(store, clock, queue="a")
    second = enqueue(store, clock, queue="b")
    untouched = enqueue(store, clock, queue="c")
    for queue in ("a", "b"):
        claim = store.claim(worker_id="w", queues=[queue], limit=1, now=clock.now())[0]
        store.finish(claim.lease, Outcome(Event.RETRY, due_at=clock.now()), clock.now())
    claim = store.claim(worker_id="w", queues=["a"], limit=1, now=clock.now())[0]
    listed = {j.id: j for j in store.list_jobs(JobFilter(with_attempts=True))}
    assert listed == {j.id: store.get_job(j.id) for j in (first, second, untouched)}
    for job in listed.values():
        stored = store.get_job(job.id)
        assert stored is not None and job.attempt_history == stored.attempt_history
    assert [a.generation for a in listed[first.id].attempt_history] == [1, 2]
    assert listed[untouched.id].attempt_history == ()
    assert claim.attempt.id == listed[first.id].attempt_history[-1].id
    assert all(j.attempt_history == () for j in store.list_jobs(JobFilter()))


def test_a_busy_sqlite_file_is_reported_unavailable(tmp_path: Path) -> None:
    """SQLite only: another process holding the write lock past the busy timeout is
    StoreUnavailable (retrying later can help), not a driver error."""
    from duetime.store.sql.front import SQLStore
    from duetime.store.sqlite.driver import SQLiteDriver

    path = tmp_path / "busy.db"
    store = SQLStore(SQLiteDriver(path, busy_timeout=0.1))
    store.migrate()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreUnavailable, match="stayed locked"):
            store.expire_overdue(datetime(2026, 1, 1, tzinfo=UTC), 10)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        store.close()


def test_enqueueing_an_occurrence_that_exists_returns_the_original(
    store: Store, clock: ManualClock
) -> None:
    """An occurrence (schedule, nominal instant) given to enqueue again is not a second job."""
    from dataclasses import replace

    from duetime.core.schedule_spec import build_spec

    spec = build_spec("hourly", "t", timezone="UTC", cron="0 * * * *")
    schedule, _ = store.create_schedule(
        "default", spec, anchor_at=clock.now(), next_fire_at=None, now=clock.now()
    )
    occurrence = replace(new(clock), schedule_id=schedule.id, nominal_at=clock.now())
    [first] = store.enqueue([occurrence], clock.now())
    [again] = store.enqueue([occurrence], clock.now())
    assert first.created and not again.created and again.job.id == first.job.id
