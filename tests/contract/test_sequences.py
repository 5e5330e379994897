"""Sequences (docs/workflows.md, "Sequences"), on every dialect: jobs of one sequence key run
one at a time in the order they were enqueued, whoever claims them; a retry keeps its place;
a job that ends (succeeded, dead, cancelled, expired) lets the next run, unless the task holds
its sequence on a death (sequence_on_dead="hold"); a replayed job rejoins its sequence; an
empty sequence leaves no row behind."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest

from duetime.core.clock import ManualClock
from duetime.core.errors import IllegalTransition, InvalidRequest
from duetime.core.models import Job, Lease, Outcome
from duetime.core.requests import TaskDefaults
from duetime.core.retry import ErrorCategory
from duetime.core.states import Event, JobStatus
from duetime.store.base import Store
from duetime.store.sql import shared
from jobhelpers import enqueue, new, race
from kit import DialectKit

SEQ = TaskDefaults(sequence="{account}")
HOLD = TaskDefaults(sequence="{account}", sequence_on_dead="hold")


def status(store: Store, job: Job) -> JobStatus:
    found = store.get_job(job.id)
    assert found is not None
    return found.status


def claim_all(store: Store, clock: ManualClock, worker: str = "w") -> list[tuple[Job, Lease]]:
    return [
        (c.job, c.lease)
        for c in store.claim(worker_id=worker, queues=None, limit=100, now=clock.now())
    ]


def sequence_rows(kit: DialectKit, store_url: str) -> int:
    return int(kit.execute(store_url, "SELECT COUNT(*) FROM duetime_sequences")[0][0])


def test_a_sequence_runs_one_job_at_a_time_in_enqueue_order(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    jobs = [enqueue(store, clock, args={"account": "a", "n": i}, defaults=SEQ) for i in range(3)]
    other = enqueue(store, clock, args={"account": "b", "n": 0}, defaults=SEQ)
    plain = enqueue(store, clock, args={"n": 9})
    assert [j.status for j in jobs] == [JobStatus.SCHEDULED] + [JobStatus.WAITING] * 2
    assert jobs[0].sequence_key == "a" and plain.sequence_key is None
    ran: list[int] = []
    for _ in range(3):
        claimed = claim_all(store, clock)
        ours = [(j, lease) for j, lease in claimed if j.sequence_key == "a"]
        assert len(ours) == 1, "never two jobs of a sequence at once"
        for _job, lease in claimed:
            assert store.finish(lease, Outcome(Event.SUCCEED), clock.now())
        ran.append(ours[0][0].id)
        assert {j.id for j, _ in claimed} - {ours[0][0].id} <= {other.id, plain.id}
    assert ran == [j.id for j in jobs]
    assert status(store, jobs[2]) is JobStatus.SUCCEEDED
    assert sequence_rows(kit, store_url) == 0  # an empty sequence costs no row


def test_claims_of_several_workers_never_hold_two_of_one_sequence(
    make_store: Any, clock: ManualClock
) -> None:
    stores = [make_store() for _ in range(3)]
    jobs = [
        enqueue(stores[0], clock, args={"account": "a", "n": i}, defaults=SEQ) for i in range(6)
    ]
    order: list[int] = []
    running: set[int] = set()
    lock = threading.Lock()
    overlaps: list[set[int]] = []

    def work(store: Store, name: str) -> None:
        # until every job ran, not a number of claims: a claim that finds nothing is quick
        # (no claim runs when nothing is scheduled), and a worker that spent its claims early
        # left the next job to workers that had stopped (CI on MariaDB: 2 of 6 ran)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            claimed = claim_all(store, clock, name)
            for job, lease in claimed:
                with lock:
                    running.add(job.id)
                    if len(running) > 1:
                        overlaps.append(set(running))
                    order.append(job.id)
                    running.discard(job.id)
                assert store.finish(lease, Outcome(Event.SUCCEED), clock.now())
            if len(order) == len(jobs):
                return

    threads = [threading.Thread(target=work, args=(s, f"w{i}")) for i, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not overlaps
    assert order == [j.id for j in jobs]


def test_a_retry_keeps_its_place(store: Store, clock: ManualClock) -> None:
    first = enqueue(store, clock, args={"account": "a"}, defaults=SEQ)
    second = enqueue(store, clock, args={"account": "a"}, defaults=SEQ)
    [(job, lease)] = claim_all(store, clock)
    assert job.id == first.id
    retry = Outcome(Event.RETRY, due_at=clock.now() + timedelta(seconds=5))
    assert store.finish(lease, retry, clock.now())
    assert claim_all(store, clock) == []  # the head is scheduled for its retry: nothing runs
    assert status(store, second) is JobStatus.WAITING
    clock.advance(6)
    [(job, lease)] = claim_all(store, clock)
    assert job.id == first.id
    assert store.finish(lease, Outcome(Event.SUCCEED), clock.now())
    [(job, _lease)] = claim_all(store, clock)
    assert job.id == second.id


def test_a_dead_job_lets_the_next_run_and_a_replay_rejoins(
    store: Store, clock: ManualClock
) -> None:
    jobs = [enqueue(store, clock, args={"account": "a", "n": i}, defaults=SEQ) for i in range(3)]
    [(job, lease)] = claim_all(store, clock)
    dead = Outcome(Event.GIVE_UP, error_category=ErrorCategory.PERMANENT)
    assert store.finish(lease, dead, clock.now())
    assert status(store, jobs[0]) is JobStatus.DEAD
    [(job, lease)] = claim_all(store, clock)
    assert job.id == jobs[1].id
    # replayed while the second runs: it waits, and runs before the third (its old place)
    replayed = store.transition(jobs[0].id, Event.REPLAY, clock.now())
    assert replayed.status is JobStatus.WAITING
    assert store.finish(lease, Outcome(Event.SUCCEED), clock.now())
    [(job, lease)] = claim_all(store, clock)
    assert job.id == jobs[0].id
    assert store.finish(lease, Outcome(Event.SUCCEED), clock.now())
    [(job, _lease)] = claim_all(store, clock)
    assert job.id == jobs[2].id


def test_hold_keeps_the_sequence_until_the_dead_job_is_replayed_or_cancelled(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    jobs = [enqueue(store, clock, args={"account": "a", "n": i}, defaults=HOLD) for i in range(3)]
    dead = Outcome(Event.GIVE_UP, error_category=ErrorCategory.PERMANENT)
    [(_job, lease)] = claim_all(store, clock)
    assert store.finish(lease, dead, clock.now())
    assert claim_all(store, clock) == []  # held
    later = enqueue(store, clock, args={"account": "a", "n": 3}, defaults=HOLD)
    assert later.status is JobStatus.WAITING
    # a replay runs the dead job again, first
    assert store.transition(jobs[0].id, Event.REPLAY, clock.now()).status is JobStatus.SCHEDULED
    [(job, lease)] = claim_all(store, clock)
    assert job.id == jobs[0].id
    assert store.finish(lease, dead, clock.now())
    assert claim_all(store, clock) == []
    # cancelling the dead job dismisses it: the next runs
    assert store.transition(jobs[0].id, Event.CANCEL, clock.now()).status is JobStatus.CANCELLED
    [(job, _lease)] = claim_all(store, clock)
    assert job.id == jobs[1].id
    assert sequence_rows(kit, store_url) == 1


def test_only_a_dead_job_that_holds_its_sequence_can_be_cancelled(
    store: Store, clock: ManualClock
) -> None:
    dead = Outcome(Event.GIVE_UP, error_category=ErrorCategory.PERMANENT)
    for defaults in (SEQ, TaskDefaults()):  # releasing its sequence, or in none
        job = enqueue(store, clock, args={"account": "z"}, defaults=defaults)
        [(_job, lease)] = claim_all(store, clock)
        assert store.finish(lease, dead, clock.now())
        with pytest.raises(IllegalTransition):
            store.transition(job.id, Event.CANCEL, clock.now())
        assert status(store, job) is JobStatus.DEAD


def test_cancelling_the_head_or_a_waiting_job(store: Store, clock: ManualClock) -> None:
    jobs = [enqueue(store, clock, args={"account": "a", "n": i}, defaults=SEQ) for i in range(3)]
    # a waiting job cancelled: the head still holds the sequence
    assert store.transition(jobs[1].id, Event.CANCEL, clock.now()).status is JobStatus.CANCELLED
    assert status(store, jobs[2]) is JobStatus.WAITING
    # the head cancelled before it started: the next (the third) is released
    assert store.transition(jobs[0].id, Event.CANCEL, clock.now()).status is JobStatus.CANCELLED
    assert status(store, jobs[2]) is JobStatus.SCHEDULED


def test_a_running_head_cancelled_releases_when_it_stops(store: Store, clock: ManualClock) -> None:
    jobs = [enqueue(store, clock, args={"account": "a", "n": i}, defaults=SEQ) for i in range(2)]
    [(_job, lease)] = claim_all(store, clock)
    asked = store.transition(jobs[0].id, Event.CANCEL, clock.now())
    assert asked.status is JobStatus.CANCEL_REQUESTED
    assert status(store, jobs[1]) is JobStatus.WAITING
    assert store.finish(lease, Outcome(Event.STOP), clock.now())
    assert status(store, jobs[1]) is JobStatus.SCHEDULED


def test_an_expired_head_releases_the_next(store: Store, clock: ManualClock) -> None:
    first = enqueue(
        store, clock, args={"account": "a"}, defaults=SEQ, deadline=clock.now() + timedelta(1)
    )
    second = enqueue(store, clock, args={"account": "a"}, defaults=SEQ)
    clock.advance(86400 + 1)
    assert store.expire_overdue(clock.now(), 100) == 1
    assert status(store, first) is JobStatus.EXPIRED
    assert status(store, second) is JobStatus.SCHEDULED


def test_a_lost_attempt_reaped_to_dead_releases_the_next(store: Store, clock: ManualClock) -> None:
    jobs = [enqueue(store, clock, args={"account": "a", "n": i}, defaults=SEQ) for i in range(2)]
    [(_job, lease)] = claim_all(store, clock)
    clock.advance(31)  # past the lease
    lost = Outcome(Event.GIVE_UP, error_category=ErrorCategory.LEASE_EXPIRED)
    assert store.finish(lease, lost, clock.now(), only_if_expired=True)
    assert status(store, jobs[1]) is JobStatus.SCHEDULED


def test_a_parked_head_holds_until_resolved(store: Store, clock: ManualClock) -> None:
    jobs = [enqueue(store, clock, args={"account": "a", "n": i}, defaults=SEQ) for i in range(2)]
    [(_job, lease)] = claim_all(store, clock)
    assert store.finish(lease, Outcome(Event.PARK), clock.now())
    assert status(store, jobs[1]) is JobStatus.WAITING
    store.transition(jobs[0].id, Event.RESOLVE_DONE, clock.now())
    assert status(store, jobs[1]) is JobStatus.SCHEDULED


def test_a_batch_keeps_its_order_and_mixes_with_plain_jobs(
    store: Store, clock: ManualClock
) -> None:
    batch = [
        new(clock, args={"account": "a", "n": 0}, defaults=SEQ),
        new(clock, args={"n": 1}),
        new(clock, args={"account": "a", "n": 2}, defaults=SEQ),
        new(clock, args={"account": "b", "n": 3}, defaults=SEQ),
    ]
    made = [r.job for r in store.enqueue(batch, clock.now())]
    assert [j.status for j in made] == [
        JobStatus.SCHEDULED,
        JobStatus.SCHEDULED,
        JobStatus.WAITING,
        JobStatus.SCHEDULED,
    ]
    assert [j.id for j in made] == sorted(j.id for j in made)


def test_position_in_the_sequence(store: Store, clock: ManualClock) -> None:
    jobs = [enqueue(store, clock, args={"account": "a", "n": i}, defaults=SEQ) for i in range(3)]
    ahead = []
    for j in jobs:
        found = store.get_job(j.id)
        assert found is not None
        ahead.append(found.sequence_ahead)
    assert ahead == [0, 1, 2]
    assert jobs[0].to_json()["sequence"] == "a"


def test_a_template_naming_a_missing_argument_is_refused(clock: ManualClock) -> None:
    with pytest.raises(InvalidRequest, match="no argument 'account'"):
        new(clock, args={"n": 1}, defaults=SEQ)
    # a key given at enqueue needs no template
    assert new(clock, args={"n": 1}, sequence="k").sequence_key == "k"
    # the template's values: a string as it is, anything else as its JSON text
    assert new(clock, args={"account": 7}, defaults=SEQ).sequence_key == "7"


def test_racing_enqueues_into_an_empty_sequence_start_one_job(
    make_store: Any, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    stores = [make_store() for _ in range(4)]
    made = race(
        20,
        lambda n: enqueue(stores[n % 4], clock, args={"account": "a", "n": n}, defaults=SEQ),
    )
    started = [j for j in made if j.status is JobStatus.SCHEDULED]
    assert len(made) == 20 and len(started) == 1
    assert started[0].id == min(j.id for j in made)  # the first in line
    assert sequence_rows(kit, store_url) == 1


def test_the_app_puts_a_tasks_jobs_in_their_sequence(
    store: Store, store_url: str, clock: ManualClock
) -> None:
    import duetime
    from duetime.core.errors import ConfigurationError

    app = duetime.App(store_url, clock=clock)
    try:

        @app.task(name="post", sequence="ledger-{account_id}", unique_for="1m")
        def post(account_id: int, amount: int) -> None:
            pass

        first = post.defer(account_id=1, amount=5)
        second = app.submit("post", {"account_id": 1, "amount": 6})
        again = app.submit("post", {"account_id": 1, "amount": 5})
        assert (first.sequence_key, first.status) == ("ledger-1", JobStatus.SCHEDULED)
        assert (second.created, second.job.status) == (True, JobStatus.WAITING)
        assert (again.created, again.job.id) == (False, first.id)
        batch = app.enqueue_many("post", [{"account_id": 2, "amount": n} for n in range(3)])
        assert [j.status for j in batch] == [JobStatus.SCHEDULED] + [JobStatus.WAITING] * 2
        own = app.enqueue("post", {"account_id": 3, "amount": 1}, sequence="manual")
        assert own.sequence_key == "manual"
        with pytest.raises(InvalidRequest, match="no argument 'account_id'"):
            app.enqueue("post", {"amount": 1})
        assert app.get_job(second.job.id).sequence_ahead == 1
        with pytest.raises(ConfigurationError, match="sequence_on_dead"):
            app.task(lambda: None, name="bad", sequence="{x}", sequence_on_dead="skip")
        with pytest.raises(ConfigurationError, match="may name arguments only"):
            app.task(lambda: None, name="bad2", sequence="{x.y}")
    finally:
        app.close()


def test_a_finish_in_the_handlers_transaction_releases_the_next(
    store: Store, clock: ManualClock
) -> None:
    jobs = [enqueue(store, clock, args={"account": "a", "n": i}, defaults=SEQ) for i in range(2)]
    [(_job, lease)] = claim_all(store, clock)
    assert status(store, jobs[1]) is JobStatus.WAITING
    with store.completion(lease, Outcome(Event.SUCCEED), clock.now):
        pass  # the handler's own writes would go here
    assert status(store, jobs[1]) is JobStatus.SCHEDULED


def test_enqueues_racing_finishes_keep_one_at_a_time_and_the_order(
    make_store: Any, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    """Producers enqueue into one sequence while workers claim and finish its jobs: a job
    enqueued as its predecessor ends is released by that end or starts at once, never both,
    never lost; the jobs run in id order, one at a time."""
    producers = [make_store() for _ in range(2)]
    workers = [make_store() for _ in range(2)]
    total = 24
    made: list[int] = []
    ran: list[int] = []
    overlaps: list[tuple[int, JobStatus]] = []
    lock = threading.Lock()

    def act(n: int) -> None:
        if n < 2:  # a producer: half of the jobs each
            for i in range(total // 2):
                args = {"account": "a", "p": n, "i": i}
                job = enqueue(producers[n], clock, args=args, defaults=SEQ)
                with lock:
                    made.append(job.id)
            return
        store = workers[n - 2]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with lock:
                if len(ran) == total:
                    return
            claimed = claim_all(store, clock, f"w{n}")
            assert len(claimed) <= 1
            for job, lease in claimed:
                with lock:
                    before = ran[-1] if ran else None
                    ran.append(job.id)
                if before is not None:  # the job before it had ended when it was claimed
                    found = store.get_job(before)
                    assert found is not None
                    if not found.terminal:
                        overlaps.append((before, found.status))
                assert store.finish(lease, Outcome(Event.SUCCEED), clock.now())

    race(4, act)
    assert not overlaps
    assert sorted(made) == ran
    assert sequence_rows(kit, store_url) == 0


def test_batches_naming_sequences_in_different_orders_do_not_deadlock(
    make_store: Any, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch locks its sequences' rows in key order, whatever the order of its jobs: two
    batches naming the same keys in opposite orders take turns instead of each holding a
    row the other waits for (a deadlock the database breaks by failing one of them, which
    the store would run again: here it runs each transaction once, so a deadlock fails)."""
    monkeypatch.setattr(shared, "CONFLICT_TRIES", 1)
    stores = [make_store() for _ in range(6)]
    keys = [f"k{i}" for i in range(6)]

    def batch(n: int) -> int:
        order = keys if n % 2 == 0 else keys[::-1]
        jobs = [new(clock, args={"account": k, "n": n}, defaults=SEQ) for k in order]
        return len(stores[n % 6].enqueue(jobs, clock.now()))

    for _ in range(5):
        assert sum(race(6, batch)) == 36  # raises the StoreConflict of a deadlock
