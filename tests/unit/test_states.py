"""The transition table is the state machine: check its shape and the invariants we rely on."""

from __future__ import annotations

from duetime.core.states import (
    ATTEMPT_END,
    HELD,
    TERMINAL,
    TRANSITIONS,
    Event,
    JobStatus,
    allowed_from,
    next_status,
)


def test_terminal_statuses_only_leave_by_replay() -> None:
    for event, moves in TRANSITIONS.items():
        for source, target in moves.items():
            if source in TERMINAL:
                # or a dead job holding its sequence, dismissed (it stays terminal: the
                # sequence moves on, docs/workflows.md)
                dismissed = (event, source, target) == (
                    Event.DISMISS,
                    JobStatus.DEAD,
                    JobStatus.CANCELLED,
                )
                assert event is Event.REPLAY or dismissed, f"{event} leaves {source}"


def test_replay_restarts_every_terminal_status_but_success() -> None:
    assert set(TRANSITIONS[Event.REPLAY]) == TERMINAL - {JobStatus.SUCCEEDED}
    assert set(TRANSITIONS[Event.REPLAY].values()) == {JobStatus.SCHEDULED}


def test_worker_outcomes_apply_only_to_held_jobs() -> None:
    for event in ATTEMPT_END:
        assert set(TRANSITIONS[event]) <= HELD


def test_a_cancel_request_is_never_lost() -> None:
    # once cancellation was requested, no outcome may lead back to scheduled or running
    for event in ATTEMPT_END:
        target = TRANSITIONS[event].get(JobStatus.CANCEL_REQUESTED)
        assert target in {JobStatus.CANCELLED, JobStatus.SUCCEEDED}


def test_every_status_is_reachable_from_the_entry_statuses() -> None:
    # jobs are created scheduled, or waiting (a schedule's occurrence buffered behind another),
    # or blocked (behind parents, depends_on)
    seen = {JobStatus.SCHEDULED, JobStatus.WAITING, JobStatus.BLOCKED}
    frontier = list(seen)
    while frontier:
        status = frontier.pop()
        for moves in TRANSITIONS.values():
            target = moves.get(status)
            if target is not None and target not in seen:
                seen.add(target)
                frontier.append(target)
    assert seen == set(JobStatus)


def test_next_status_and_allowed_from() -> None:
    assert next_status(Event.CANCEL, JobStatus.RUNNING) is JobStatus.CANCEL_REQUESTED
    assert next_status(Event.CANCEL, JobStatus.SUCCEEDED) is None
    assert allowed_from(Event.CANCEL) == [
        "blocked",
        "cancel_requested",
        "parked",
        "running",
        "scheduled",
        "waiting",
    ]


def test_a_blocked_job_is_released_or_cancelled_only() -> None:
    leaving = {e: m[JobStatus.BLOCKED] for e, m in TRANSITIONS.items() if JobStatus.BLOCKED in m}
    assert leaving == {Event.UNBLOCK: JobStatus.SCHEDULED, Event.CANCEL: JobStatus.CANCELLED}
