"""Unique within a window (docs/workflows.md, "Unique within a window"), on every dialect: a
second enqueue of a task with equal args (or the same unique_key) within the first job's
window, whatever that job's state, returns the first job (created=False); after the window a
new job is made; racing enqueues make one job."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from duetime.core.clock import ManualClock
from duetime.core.errors import InvalidRequest
from duetime.core.models import Enqueued, Outcome
from duetime.core.requests import TaskDefaults, build_new_job
from duetime.core.states import Event, JobStatus
from duetime.store.base import Store
from jobhelpers import claim_one, new, race


def submit(store: Store, clock: ManualClock, args: dict[str, object], **kw: object) -> Enqueued:
    return store.enqueue([new(clock, args=args, **kw)], clock.now())[0]


def test_a_second_enqueue_within_the_window_returns_the_first(
    store: Store, clock: ManualClock
) -> None:
    first = submit(store, clock, {"a": 1, "b": [1, 2]}, unique_for="10m")
    assert first.created and first.job.unique_until == clock.now() + timedelta(minutes=10)
    clock.advance(599)
    again = submit(store, clock, {"b": [1, 2], "a": 1}, unique_for="10m")  # equal args
    assert (again.created, again.job.id) == (False, first.job.id)
    other = submit(store, clock, {"a": 2, "b": [1, 2]}, unique_for="10m")
    assert other.created
    elsewhere = submit(store, clock, {"a": 1, "b": [1, 2]}, unique_for="10m", task="u")
    assert elsewhere.created  # another task
    tenant = submit(store, clock, {"a": 1, "b": [1, 2]}, unique_for="10m", tenant="t2")
    assert tenant.created  # another tenant


def test_the_window_counts_from_the_first_job_whatever_its_state(
    store: Store, clock: ManualClock
) -> None:
    first = submit(store, clock, {"a": 1}, unique_for=60)
    _job, lease = claim_one(store, clock)
    assert store.finish(lease, Outcome(Event.SUCCEED), clock.now())
    clock.advance(30)
    again = submit(store, clock, {"a": 1}, unique_for=60)
    assert (again.created, again.job.id, again.job.status) == (
        False,
        first.job.id,
        JobStatus.SUCCEEDED,
    )
    clock.advance(30)  # the window of the first job is over
    fresh = submit(store, clock, {"a": 1}, unique_for=60)
    assert fresh.created and fresh.job.id != first.job.id
    old = store.get_job(first.job.id)
    assert old is not None and old.unique_key is None  # its key went to the new job
    assert submit(store, clock, {"a": 1}, unique_for=60).job.id == fresh.job.id


def test_an_explicit_unique_key_stands_for_the_args(store: Store, clock: ManualClock) -> None:
    first = submit(store, clock, {"a": 1}, unique_for="1h", unique_key="report-2026-12")
    again = submit(store, clock, {"a": 2}, unique_for="1h", unique_key="report-2026-12")
    assert (again.created, again.job.id) == (False, first.job.id)
    assert submit(store, clock, {"a": 1}, unique_for="1h").created  # by args: another


def test_a_task_default_window_and_a_batch(store: Store, clock: ManualClock) -> None:
    defaults = TaskDefaults(unique_for_seconds=60)
    jobs = [new(clock, args={"n": n % 2}, defaults=defaults) for n in range(4)]
    made = store.enqueue(jobs, clock.now())
    assert [r.created for r in made] == [True, True, False, False]
    assert made[2].job.id == made[0].job.id


def test_bounds_and_mixing_with_an_idempotency_key(clock: ManualClock) -> None:
    with pytest.raises(InvalidRequest, match="from 1s to 366d"):
        new(clock, unique_for="0s")
    with pytest.raises(InvalidRequest, match="from 1s to 366d"):
        new(clock, unique_for="367d")
    with pytest.raises(InvalidRequest, match="not both"):
        new(clock, unique_for="1m", key="k")
    with pytest.raises(InvalidRequest, match="needs a window"):
        new(clock, unique_key="k")
    # a task's default window does not apply to a keyed (idempotent) enqueue
    keyed = build_new_job(
        "t",
        {},
        now=clock.now(),
        tenant="default",
        defaults=TaskDefaults(unique_for_seconds=60),
        key="k",
    )
    assert keyed.unique_key is None


def test_fifty_racing_enqueues_make_one_job(
    make_store: Callable[[], Store], clock: ManualClock
) -> None:
    stores = [make_store() for _ in range(5)]
    results = race(50, lambda n: submit(stores[n % 5], clock, {"invoice": 42}, unique_for="10m"))
    assert len(results) == 50
    assert sum(r.created for r in results) == 1
    assert len({r.job.id for r in results}) == 1
