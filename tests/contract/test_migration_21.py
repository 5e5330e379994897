"""Migration 21 (docs/tracing.md), on every dialect: the nullable trace_context columns of
jobs and outbox events. A database at the schema before it migrates; then a job enqueued
with a context (alone, with a key, in a batch) keeps it through its claim, and through the
outbox's dispatch and the relay's take, and one enqueued without stores none and runs as
before."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

import schemas
from duetime.core.clock import ManualClock
from duetime.core.models import Outcome
from duetime.core.outbox import Dispatch
from duetime.core.requests import build_new_jobs
from duetime.core.states import Event, JobStatus
from duetime.store.base import Store
from jobhelpers import claim_one, new
from kit import DialectKit

CONTEXT = json.dumps({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})


@pytest.fixture
def before_21(kit: DialectKit, tmp_path: Path) -> Iterator[Store]:
    """A store on a database of the schema before migration 21."""
    with schemas.store_before(kit, tmp_path, 21) as (store, _url):
        yield store


def test_a_store_before_migration_21_migrates_and_keeps_trace_contexts(
    before_21: Store, clock: ManualClock
) -> None:
    store = before_21
    assert store.migrate() == [21, 27]  # 27 builds on 21 (tests/schemas.py)
    plain = store.enqueue([new(clock, "plain")], clock.now())[0].job
    traced = store.enqueue([replace(new(clock, "traced"), trace_context=CONTEXT)], clock.now())
    assert plain.trace_context is None and traced[0].job.trace_context == CONTEXT
    keyed = replace(new(clock, "keyed", key="k-1"), trace_context=CONTEXT)
    again = store.enqueue(
        [keyed, replace(new(clock, "keyed", key="k-2"), trace_context=None)], clock.now()
    )
    template = replace(new(clock, "batch"), trace_context=CONTEXT)
    batch = store.enqueue(build_new_jobs(template, [{"n": 1}, {"n": 2}]), clock.now())
    expected = {
        plain.id: None,
        traced[0].job.id: CONTEXT,
        again[0].job.id: CONTEXT,
        again[1].job.id: None,
        batch[0].job.id: CONTEXT,
        batch[1].job.id: CONTEXT,
    }
    for job_id, context in expected.items():
        stored = store.get_job(job_id)
        assert stored is not None and stored.trace_context == context
    seen = {}
    for _ in expected:
        job, lease = claim_one(store, clock)
        seen[job.id] = job.trace_context
        store.finish(lease, Outcome(Event.SUCCEED), clock.now())
    assert seen == expected
    finished = store.get_job(plain.id)
    assert finished is not None and finished.status is JobStatus.SUCCEEDED


def test_an_outbox_event_carries_its_jobs_trace_context(
    before_21: Store, clock: ManualClock
) -> None:
    store = before_21
    store.migrate()
    store.set_queue("broker", clock.now(), dispatch=Dispatch.OUTBOX)
    traced = replace(new(clock, "send", queue="broker"), trace_context=CONTEXT)
    plain = new(clock, "send", queue="broker")
    ids = [r.job.id for r in store.enqueue([traced, plain], clock.now())]
    events = store.dispatch_outbox(clock.now(), 10, lease_seconds=300)
    assert {e.job_id: e.trace_context for e in events} == {ids[0]: CONTEXT, ids[1]: None}
    taken = store.take_events("r1", clock.now(), clock.now() + timedelta(seconds=30), 10)
    assert {e.job_id: e.trace_context for e in taken} == {ids[0]: CONTEXT, ids[1]: None}
