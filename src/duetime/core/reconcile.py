"""Ambiguous outcomes: what a task's reconcile hook may answer about a lost attempt."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from duetime.core.models import Attempt, Outcome
from duetime.core.retry import ErrorCategory
from duetime.core.states import AttemptStatus, Event


class Reconcile(StrEnum):
    """A reconcile hook's answer about the lost attempt's effect."""

    DONE = "done"  # it happened: record success without running the handler again
    NOT_DONE = "not_done"  # it did not happen: run the handler
    UNKNOWN = "unknown"  # cannot tell: park the job for an operator


def lost_attempt_to_reconcile(history: Sequence[Attempt], generation: int) -> Attempt | None:
    """The attempt whose outcome the attempt `generation` must reconcile first, if any: the
    newest earlier attempt that was lost (skipping attempts whose own reconcile failed)."""
    for attempt in sorted(history, key=lambda a: a.generation, reverse=True):
        if attempt.generation >= generation:
            continue
        if attempt.error_category is ErrorCategory.RECONCILE_FAILED:
            continue
        return attempt if attempt.status is AttemptStatus.LOST else None
    return None


def outcome_for(answer: Reconcile, lost: Attempt) -> Outcome | None:
    """The outcome of the reconciling attempt; None means: run the handler."""
    if answer is Reconcile.DONE:
        return Outcome(
            Event.SUCCEED,
            error_category=ErrorCategory.RECONCILED,
            error_message=(
                f"the reconcile hook confirmed attempt {lost.generation}'s effect; "
                "the handler was not run again"
            ),
        )
    if answer is Reconcile.UNKNOWN:
        return Outcome(
            Event.PARK,
            error_category=ErrorCategory.UNKNOWN_OUTCOME,
            error_message=(
                f"the reconcile hook cannot tell whether attempt {lost.generation}'s effect "
                "happened; resolve it with `duetime jobs resolve ID --done|--run-again`"
            ),
        )
    return None
