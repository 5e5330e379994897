"""Writes that reach a job in the history table (docs/history-plan.md, step 4): the pruner
deletes ended jobs from both tables with their attempts, links and outbox events; a late
report lands on a success kept on a history row; an operator's replay or dismissal brings
the job back to the jobs table and moves it there, and every other move of a job in history
is refused as before. Nothing moves jobs yet, so these tests move them by hand
(tests/history.py), on every dialect."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dependents import dependents, orphans, rows_of
from duetime.core.clock import ManualClock
from duetime.core.errors import IllegalTransition, JobNotFound
from duetime.core.models import Outcome
from duetime.core.requests import TaskDefaults
from duetime.core.retry import ErrorCategory
from duetime.core.states import Event, JobStatus
from duetime.store.base import Store
from history import move, table_of
from jobhelpers import claim_one, enqueue, job_in
from kit import DialectKit

HOT, DONE = "duetime_jobs", "duetime_jobs_done"
GIVE_UP = Outcome(Event.GIVE_UP, error_category=ErrorCategory.PERMANENT)


def test_pruning_deletes_from_both_tables_with_each_jobs_dependents(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    ids = dependents(store, clock)  # five succeeded jobs with every kind of dependent row
    clock.advance(60)
    cutoff = clock.now()
    clock.advance(1)
    kept = dependents(store, clock, "daily")
    kept_counts = {i: rows_of(kit, store_url, i) for i in kept.values()}
    moved = [ids["retried"], ids["child"], ids["occurrence"]]
    move(kit, store_url, [*moved, kept["retried"], kept["parent"]])

    # the jobs table first, then the history table for as many as the limit leaves
    assert store.prune(cutoff, 3) == 3
    assert [table_of(kit, store_url, i) for i in ids.values()].count(None) == 3
    assert store.prune(cutoff, 100) == 2
    assert store.prune(cutoff, 100) == 0

    for job_id in ids.values():
        assert table_of(kit, store_url, job_id) is None
        assert set(rows_of(kit, store_url, job_id).values()) == {0}
    assert {i: rows_of(kit, store_url, i) for i in kept.values()} == kept_counts
    assert orphans(kit, store_url) == {}
    ticks = kit.execute(store_url, "SELECT COUNT(*) FROM duetime_ticks WHERE job_id IS NULL")
    assert ticks == [(1,)]  # the pruned occurrence's tick stays, detached


def test_a_late_report_lands_on_a_success_in_history(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    enqueue(store, clock)
    job, lease = claim_one(store, clock)
    assert store.finish(lease, Outcome(Event.SUCCEED), clock.now())
    move(kit, store_url, [job.id])
    clock.advance(5)

    assert not store.finish(lease, Outcome(Event.SUCCEED), clock.now())  # fenced

    got = store.get_job(job.id)
    assert got is not None and table_of(kit, store_url, job.id) == DONE
    (attempt,) = got.attempt_history
    assert attempt.late_outcome == "succeeded" and attempt.late_reported_at == clock.now()


def test_a_replay_brings_an_ended_job_back_from_history(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    dead = enqueue(store, clock, business_key="invoice:7")
    _, lease = claim_one(store, clock)
    assert store.finish(lease, GIVE_UP, clock.now())
    expired = job_in(store, clock, JobStatus.EXPIRED)[0]
    cancelled = job_in(store, clock, JobStatus.CANCELLED)[0]
    move(kit, store_url, [dead.id, expired.id, cancelled.id])

    for job in (dead, expired, cancelled):
        replayed = store.transition(job.id, Event.REPLAY, clock.now())
        assert replayed.status is JobStatus.SCHEDULED and replayed.attempts == 0
        assert table_of(kit, store_url, job.id) == HOT
    assert store.get_job(expired.id).deadline_at is None  # type: ignore[union-attr]
    claimed, lease = claim_one(store, clock)
    assert claimed.id == dead.id and claimed.business_key == "invoice:7"
    assert store.finish(lease, Outcome(Event.SUCCEED), clock.now())
    got = store.get_job(dead.id)
    assert got is not None
    assert [a.status.value for a in got.attempt_history] == ["failed", "succeeded"]


def test_a_cancel_dismisses_a_dead_job_in_history_that_holds_its_sequence(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    hold = TaskDefaults(sequence="{account}", sequence_on_dead="hold")
    first = enqueue(store, clock, args={"account": "a", "n": 0}, defaults=hold)
    second = enqueue(store, clock, args={"account": "a", "n": 1}, defaults=hold)
    _, lease = claim_one(store, clock)
    assert store.finish(lease, GIVE_UP, clock.now())
    move(kit, store_url, [first.id])
    assert store.claim(worker_id="w", queues=None, limit=10, now=clock.now()) == []  # held

    dismissed = store.transition(first.id, Event.CANCEL, clock.now())

    assert dismissed.status is JobStatus.CANCELLED
    claimed, _ = claim_one(store, clock)
    assert claimed.id == second.id


def test_other_moves_of_a_job_in_history_are_refused_and_leave_it_there(
    store: Store, clock: ManualClock, kit: DialectKit, store_url: str
) -> None:
    done = job_in(store, clock, JobStatus.SUCCEEDED)[0]
    dead = job_in(store, clock, JobStatus.DEAD)[0]  # in no sequence: a cancel is refused
    move(kit, store_url, [done.id, dead.id])

    for job_id, event in (
        (done.id, Event.CANCEL),
        (done.id, Event.REPLAY),
        (dead.id, Event.CANCEL),
    ):
        with pytest.raises(IllegalTransition):
            store.transition(job_id, event, clock.now())
    with pytest.raises(JobNotFound):
        store.transition(dead.id, Event.REPLAY, clock.now(), tenant="other")
    with pytest.raises(IllegalTransition):  # a reschedule takes a job that has not started
        store.transition(dead.id, Event.RESCHEDULE, clock.now(), due_at=clock.now())
    assert [table_of(kit, store_url, i) for i in (done.id, dead.id)] == [DONE, DONE]
    clock.advance(timedelta(seconds=1))
    assert store.get_job(dead.id).status is JobStatus.DEAD  # type: ignore[union-attr]
