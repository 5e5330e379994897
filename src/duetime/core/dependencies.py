"""Dependencies between jobs (docs/workflows.md, "Dependencies"): what a blocked job does when
its parents end. Pure rules; the store applies them in the transaction that records a parent's
outcome (store/sql/dependencies.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from duetime.core.errors import InvalidRequest
from duetime.core.states import TERMINAL, JobStatus

MAX_PARENTS = 10_000  # parents of one job (depends_on), checked at the edge
MAX_RELATIVES_SHOWN = 1000  # parents, and children, listed with a job (get_job, the API...)


class OnParentFailure(StrEnum):
    """What a job does when one of its parents ends dead, cancelled or expired."""

    CANCEL = "cancel"  # it is cancelled, and its descendants that cancel too
    RUN = "run"  # it runs once every parent has ended, whatever the outcomes


FAILED: frozenset[JobStatus] = TERMINAL - {JobStatus.SUCCEEDED}


@dataclass(frozen=True)
class Verdict:
    """What a blocked job does now: `release` it (it becomes scheduled), cancel it (`failed_parent`
    names the parent whose failure cancels it), or neither (it stays blocked)."""

    release: bool = False
    failed_parent: int | None = None
    failed_status: JobStatus | None = None

    @property
    def cancel(self) -> bool:
        return self.failed_parent is not None

    def reason(self) -> str:
        """The cancelled job's reason, naming the parent."""
        return f"parent job {self.failed_parent} ended {self.failed_status}"


WAIT = Verdict()


def verdict(policy: OnParentFailure, told: Mapping[int, JobStatus], left: int) -> Verdict:
    """The verdict for a blocked job just told of the ends of the parents in `told` (id -> the
    status it ended in), with `left` parents not ended yet. It was blocked, so no parent told
    before failed (with "cancel") and its verdict only depends on these: a failed one cancels
    it (naming the lowest id), and none left releases it. A parent's outcome is the status it
    first ended in: a replayed parent does not change what its children did."""
    if policy is OnParentFailure.CANCEL:
        failed = sorted((pid, s) for pid, s in told.items() if s in FAILED)
        if failed:
            return Verdict(failed_parent=failed[0][0], failed_status=failed[0][1])
    if left > 0:
        return WAIT
    return Verdict(release=True)


def ended_status(status: JobStatus) -> JobStatus | None:
    """A parent's status as an outcome for its children: None while it has not ended."""
    return status if status in TERMINAL else None


def released_due(due_at: datetime, release_delay: float | None, now: datetime) -> datetime:
    """A released job's due instant: with a delay (enqueue's delay=), the delay counted from
    the release; else its own due instant (at=, or its enqueue), or now when that has passed."""
    if release_delay is not None:
        return now + timedelta(seconds=release_delay)
    return max(due_at, now)


def parent_ids(value: Iterable[object] | None) -> tuple[int, ...]:
    """depends_on as given (ids, or text ids), checked: positive integers, at most
    MAX_PARENTS, each once (in the order given)."""
    if value is None:
        return ()
    if isinstance(value, str | bytes | int):
        raise InvalidRequest("depends_on takes a list of job ids, e.g. depends_on=[12, 13]")
    ids: list[int] = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int | str):
            raise InvalidRequest(f"depends_on holds {item!r}, not a job id; give job ids")
        try:
            number = int(item)
        except ValueError:
            raise InvalidRequest(f"depends_on holds {item!r}, not a job id; give job ids") from None
        if number < 1 or number > 2**63 - 1:
            raise InvalidRequest(f"depends_on holds {number}, not a job id; job ids are >= 1")
        if number not in ids:
            ids.append(number)
    if len(ids) > MAX_PARENTS:
        raise InvalidRequest(
            f"depends_on names {len(ids)} jobs; a job may depend on at most {MAX_PARENTS}"
        )
    return tuple(ids)


def on_parent_failure(value: object) -> OnParentFailure:
    """on_parent_failure as given, checked."""
    try:
        return OnParentFailure(str(value))
    except ValueError:
        raise InvalidRequest(
            f"on_parent_failure is {value!r}; give 'cancel' (the default) or 'run'"
        ) from None
