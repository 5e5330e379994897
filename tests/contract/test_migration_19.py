"""Migration 19 (docs/workflows.md: sequences and unique windows), on every dialect: a store
of the schema before it, with jobs in it, migrates; its jobs read as before (no sequence, no
unique key) and run; sequences and unique windows then work."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import schemas
from duetime.core.clock import ManualClock
from duetime.core.models import Outcome
from duetime.core.requests import TaskDefaults, build_new_jobs
from duetime.core.states import Event, JobStatus
from duetime.store.base import Store
from jobhelpers import claim_one, enqueue, new
from kit import DialectKit


@pytest.fixture
def before_19(kit: DialectKit, tmp_path: Path) -> Iterator[Store]:
    """A store on a database of the schema before migration 19."""
    with schemas.store_before(kit, tmp_path, 19) as (store, _url):
        yield store


def test_a_store_before_19_migrates_and_works(before_19: Store, clock: ManualClock) -> None:
    store = before_19
    # jobs written at the previous schema (a batch's insert names no column of migration 19)
    batch = build_new_jobs(new(clock), [{"n": n} for n in range(3)])
    old = [r.job for r in store.enqueue(batch, clock.now())]
    assert store.migrate() == [19, 27]  # 27 builds on 19 (tests/schemas.py)
    for job in old:
        found = store.get_job(job.id)
        assert found is not None and found.status is JobStatus.SCHEDULED
        assert (found.sequence_key, found.unique_key, found.sequence_ahead) == (None, None, None)
    job, lease = claim_one(store, clock)
    assert job.id == old[0].id
    assert store.finish(lease, Outcome(Event.SUCCEED), clock.now())
    seq = TaskDefaults(sequence="{k}")
    first = enqueue(store, clock, args={"k": "x"}, defaults=seq)
    second = enqueue(store, clock, args={"k": "x"}, defaults=seq)
    assert (first.status, second.status) == (JobStatus.SCHEDULED, JobStatus.WAITING)
    made = store.enqueue([new(clock, args={"a": 1}, unique_for="1m")], clock.now())[0]
    again = store.enqueue([new(clock, args={"a": 1}, unique_for="1m")], clock.now())[0]
    assert made.created and not again.created and again.job.id == made.job.id
