"""A replay is admitted like an enqueue (issue 20, section 3; docs/flow-control.md): past its
queue's or tenant's max_backlog it raises BacklogFull and changes nothing, unless the
operator overrides the bound with ignore_backlog. On every dialect."""

from __future__ import annotations

import pytest

from duetime.core.clock import ManualClock
from duetime.core.errors import BacklogFull, IllegalTransition
from duetime.core.states import Event, JobStatus
from duetime.store.base import Store
from jobhelpers import job_in


def test_a_replay_past_a_queues_max_backlog_is_refused_unless_overridden(
    store: Store, clock: ManualClock
) -> None:
    dead, _ = job_in(store, clock, JobStatus.DEAD)
    store.set_queue("default", clock.now(), max_backlog=0)
    with pytest.raises(BacklogFull) as refused:
        store.transition(dead.id, Event.REPLAY, clock.now())
    assert (refused.value.kind, refused.value.name, refused.value.backlog) == (
        "queue",
        "default",
        0,
    )
    assert "max backlog of 0" in str(refused.value)
    kept = store.get_job(dead.id)
    assert kept is not None and (kept.status, kept.version) == (JobStatus.DEAD, dead.version)
    replayed = store.transition(dead.id, Event.REPLAY, clock.now(), ignore_backlog=True)
    assert replayed.status is JobStatus.SCHEDULED


def test_a_replay_past_a_tenants_max_backlog_is_refused(store: Store, clock: ManualClock) -> None:
    cancelled, _ = job_in(store, clock, JobStatus.CANCELLED)
    expired, _ = job_in(store, clock, JobStatus.EXPIRED)
    store.set_tenant("default", clock.now(), max_backlog=1)
    store.transition(cancelled.id, Event.REPLAY, clock.now())  # the backlog goes 0 -> 1
    with pytest.raises(BacklogFull) as refused:
        store.transition(expired.id, Event.REPLAY, clock.now())
    assert (refused.value.kind, refused.value.backlog, refused.value.limit) == ("tenant", 1, 1)
    kept = store.get_job(expired.id)
    assert kept is not None and kept.status is JobStatus.EXPIRED
    store.set_tenant("default", clock.now(), max_backlog=2)
    assert store.transition(expired.id, Event.REPLAY, clock.now()).status is JobStatus.SCHEDULED


def test_other_moves_are_not_bounded(store: Store, clock: ManualClock) -> None:
    """Rescheduling keeps a job in the backlog and cancelling takes it out: neither adds to
    it, and a move the status forbids is refused as such, not as a full backlog."""
    scheduled, _ = job_in(store, clock, JobStatus.SCHEDULED)
    store.set_queue("default", clock.now(), max_backlog=0)
    moved = store.transition(
        scheduled.id, Event.RESCHEDULE, clock.now(), due_at=clock.now().replace(year=2027)
    )
    assert moved.status is JobStatus.SCHEDULED
    with pytest.raises(IllegalTransition):
        store.transition(scheduled.id, Event.REPLAY, clock.now())
    assert store.transition(scheduled.id, Event.CANCEL, clock.now()).status is (JobStatus.CANCELLED)
