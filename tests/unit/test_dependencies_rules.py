"""The pure rules of dependencies (core/dependencies.py): a blocked job's verdict, its due
instant at release, and the checks of depends_on and on_parent_failure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from duetime.core.dependencies import (
    MAX_PARENTS,
    OnParentFailure,
    on_parent_failure,
    parent_ids,
    released_due,
    verdict,
)
from duetime.core.errors import InvalidRequest
from duetime.core.requests import TaskDefaults, build_new_job
from duetime.core.states import JobStatus as S

CANCEL, RUN = OnParentFailure.CANCEL, OnParentFailure.RUN
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_job_waits_until_no_parent_is_left() -> None:
    assert not verdict(CANCEL, {1: S.SUCCEEDED}, 1).release
    assert verdict(CANCEL, {1: S.SUCCEEDED, 2: S.SUCCEEDED}, 0).release


@pytest.mark.parametrize("failed", [S.DEAD, S.CANCELLED, S.EXPIRED])
def test_a_failed_parent_cancels_at_once_naming_the_first(failed: S) -> None:
    v = verdict(CANCEL, {7: failed, 5: failed, 6: S.SUCCEEDED}, 3)
    assert (v.cancel, v.release, v.failed_parent) == (True, False, 5)
    assert v.reason() == f"parent job 5 ended {failed}"
    assert verdict(CANCEL, {7: failed}, 0).cancel  # also the last one to end


def test_run_waits_for_every_parent_whatever_the_outcome() -> None:
    assert not verdict(RUN, {1: S.DEAD}, 1).release
    v = verdict(RUN, {1: S.DEAD, 2: S.SUCCEEDED}, 0)
    assert v.release and not v.cancel


def test_a_delay_counts_from_the_release_an_instant_stands() -> None:
    later = T0 + timedelta(hours=1)
    assert released_due(later, None, T0) == later
    assert released_due(T0, None, later) == later
    assert released_due(T0, 30.0, later) == later + timedelta(seconds=30)


def test_depends_on_is_checked() -> None:
    assert parent_ids([3, "4", 3]) == (3, 4)
    assert parent_ids(None) == ()
    for bad in ([0], ["x"], [True], 5, "5", [1.5]):
        with pytest.raises(InvalidRequest, match="depends_on"):
            parent_ids(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match=f"at most {MAX_PARENTS}"):
        parent_ids(range(1, MAX_PARENTS + 2))
    with pytest.raises(InvalidRequest, match=r"'cancel' .* or 'run'"):
        on_parent_failure("ignore")


def test_an_enqueue_request_carries_its_parents() -> None:
    job = build_new_job(
        "t", {}, now=T0, tenant="default", defaults=TaskDefaults(), depends_on=[2, 1], delay=60
    )
    assert (job.parents, job.on_parent_failure, job.release_delay) == ((2, 1), "cancel", 60.0)
    plain = build_new_job("t", {}, now=T0, tenant="default", defaults=TaskDefaults(), delay=60)
    assert (plain.parents, plain.on_parent_failure, plain.release_delay) == ((), None, None)
    with pytest.raises(InvalidRequest, match="on_parent_failure needs depends_on"):
        build_new_job(
            "t", {}, now=T0, tenant="default", defaults=TaskDefaults(), on_parent_failure="run"
        )


@pytest.mark.parametrize(
    "options",
    [{"sequence": "acct-1"}, {"unique_for": "10m"}, {"unique_for": 60, "unique_key": "k"}],
)
def test_parents_are_refused_with_a_sequence_or_a_unique_window(options: dict[str, Any]) -> None:
    """A job of a sequence or with a unique window goes in by its own path, which does not
    link parents: the combination is refused, before any I/O, rather than losing the parents."""
    with pytest.raises(InvalidRequest, match="depends_on cannot be combined"):
        build_new_job(
            "t", {}, now=T0, tenant="default", defaults=TaskDefaults(), depends_on=[1], **options
        )
    sequenced = TaskDefaults(sequence="{account}")
    with pytest.raises(InvalidRequest, match="depends_on cannot be combined"):
        build_new_job(
            "t", {"account": 1}, now=T0, tenant="default", defaults=sequenced, depends_on=[1]
        )


def test_a_linked_step_is_refused_with_a_sequence() -> None:
    """A chain's or group's step waits for steps made with it (linked): refused with a sequence
    as a job with depends_on is, or its link would be lost."""
    with pytest.raises(InvalidRequest, match="depends_on cannot be combined"):
        build_new_job(
            "t", {}, now=T0, tenant="default", defaults=TaskDefaults(), linked=True, sequence="s"
        )
