"""The job state machine: every status, every event, and the one table of legal moves.

Stores apply a transition as one conditional write whose condition is "the job's current
status is a key of the event's row"; the new status is looked up in the same row. This table is
therefore the single source of truth for what may happen to a job, even under races.
"""

from __future__ import annotations

from enum import StrEnum


class JobStatus(StrEnum):
    """Where a job is in its life; docs/state-machine.md has every status and transition."""

    SCHEDULED = "scheduled"  # waiting for due_at (first run, or a retry after a failure)
    WAITING = "waiting"  # a schedule's occurrence buffered behind the one still running
    RUNNING = "running"  # held by exactly one attempt under a lease
    CANCEL_REQUESTED = "cancel_requested"  # running, and the handler has been asked to stop
    SUCCEEDED = "succeeded"
    DEAD = "dead"  # failed permanently or ran out of attempts; kept with its history
    CANCELLED = "cancelled"
    EXPIRED = "expired"  # not started before deadline_at
    PARKED = "parked"  # a lost attempt's outcome is unknown: an operator resolves it
    BLOCKED = "blocked"  # waits for its parent jobs to end (docs/workflows.md, "Dependencies")


class AttemptStatus(StrEnum):
    """How one attempt (one run of a job by one worker) ended, or that it is still running."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    LOST = "lost"  # its lease expired before it reported; outcome unknown
    CANCELLED = "cancelled"
    PARKED = "parked"  # its reconcile hook could not tell what the lost attempt did


class Event(StrEnum):
    CLAIM = "claim"
    SUCCEED = "succeed"
    RETRY = "retry"  # failed, will run again at a later due_at
    GIVE_UP = "give_up"  # failed for good: dead
    STOP = "stop"  # the handler stopped because cancellation was requested
    CANCEL = "cancel"
    RESCHEDULE = "reschedule"
    EXPIRE = "expire"
    REPLAY = "replay"
    RELEASE = "release"  # a waiting occurrence may run: its predecessor ended
    PARK = "park"  # reconcile answered unknown: wait for an operator
    RESOLVE_DONE = "resolve_done"  # an operator confirmed the effect happened
    RESOLVE_RETRY = "resolve_retry"  # an operator says: run it again
    # an attempt dispatched to the broker that no worker accepted yet is taken back (an
    # operator's move, or its queue switched to direct): it never started and does not count
    WITHDRAW = "withdraw"
    # a blocked job's parents have ended as its on_parent_failure asks: it is due
    UNBLOCK = "unblock"
    # an operator's cancel of a dead job that holds its sequence (sequence_on_dead="hold"):
    # the job is dismissed, and the sequence moves on (docs/workflows.md)
    DISMISS = "dismiss"


S = JobStatus

TRANSITIONS: dict[Event, dict[JobStatus, JobStatus]] = {
    Event.CLAIM: {S.SCHEDULED: S.RUNNING},
    Event.SUCCEED: {S.RUNNING: S.SUCCEEDED, S.CANCEL_REQUESTED: S.SUCCEEDED},
    Event.RETRY: {S.RUNNING: S.SCHEDULED, S.CANCEL_REQUESTED: S.CANCELLED},
    Event.GIVE_UP: {S.RUNNING: S.DEAD, S.CANCEL_REQUESTED: S.CANCELLED},
    Event.STOP: {S.CANCEL_REQUESTED: S.CANCELLED},
    # cancelling twice is harmless: the request stands, its first time is kept
    Event.CANCEL: {
        S.SCHEDULED: S.CANCELLED,
        S.WAITING: S.CANCELLED,
        S.RUNNING: S.CANCEL_REQUESTED,
        S.CANCEL_REQUESTED: S.CANCEL_REQUESTED,
        S.PARKED: S.CANCELLED,
        S.BLOCKED: S.CANCELLED,  # also what a parent's failure does to it (on_parent_failure)
    },
    Event.RESCHEDULE: {S.SCHEDULED: S.SCHEDULED},
    Event.EXPIRE: {S.SCHEDULED: S.EXPIRED},
    Event.REPLAY: {S.DEAD: S.SCHEDULED, S.CANCELLED: S.SCHEDULED, S.EXPIRED: S.SCHEDULED},
    Event.RELEASE: {S.WAITING: S.SCHEDULED},
    Event.PARK: {S.RUNNING: S.PARKED, S.CANCEL_REQUESTED: S.CANCELLED},
    Event.RESOLVE_DONE: {S.PARKED: S.SUCCEEDED},
    Event.RESOLVE_RETRY: {S.PARKED: S.SCHEDULED},
    # only while the job's attempt is held by the outbox (core/outbox.py, DISPATCH_HOLDER);
    # a cancel request then ends the job at once, as for a job that never started
    Event.WITHDRAW: {S.RUNNING: S.SCHEDULED, S.CANCEL_REQUESTED: S.CANCELLED},
    Event.UNBLOCK: {S.BLOCKED: S.SCHEDULED},
    Event.DISMISS: {S.DEAD: S.CANCELLED},
}

TERMINAL: frozenset[JobStatus] = frozenset({S.SUCCEEDED, S.DEAD, S.CANCELLED, S.EXPIRED})
HELD: frozenset[JobStatus] = frozenset({S.RUNNING, S.CANCEL_REQUESTED})
# an occurrence in one of these counts as "still running" for a schedule's overlap policy
ACTIVE: frozenset[JobStatus] = frozenset({S.SCHEDULED, S.RUNNING, S.CANCEL_REQUESTED})

# Events that end the attempt holding the job, and the status that attempt ends in.
ATTEMPT_END: dict[Event, AttemptStatus] = {
    Event.SUCCEED: AttemptStatus.SUCCEEDED,
    Event.RETRY: AttemptStatus.FAILED,
    Event.GIVE_UP: AttemptStatus.FAILED,
    Event.STOP: AttemptStatus.CANCELLED,
    Event.PARK: AttemptStatus.PARKED,
}


def withdrawn_for(event: Event) -> dict[JobStatus, JobStatus]:
    """The moves that withdraw a dispatched attempt first, so that an operator's `event`
    applies to its job as to a job still waiting (docs/outbox.md): rescheduling it, or
    cancelling it at once. Only from running: a standing cancel request is not turned into
    another move. Empty when `event` does not start from what the withdraw leads to."""
    return {
        source: target
        for source, target in TRANSITIONS[Event.WITHDRAW].items()
        if source is S.RUNNING and target in TRANSITIONS[event]
    }


def next_status(event: Event, current: JobStatus) -> JobStatus | None:
    """The status after `event` from `current`, or None when the move is illegal."""
    return TRANSITIONS[event].get(current)


def allowed_from(event: Event) -> list[str]:
    """The statuses `event` may start from, in a stable order."""
    return sorted(str(s) for s in TRANSITIONS[event])
