"""The records the stores build from rows without running __init__ (core/models.built, made):
every field set, each equal to what __init__ makes of the same values."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from duetime.core.models import Attempt, Claim, Job, Lease, built, made
from duetime.core.retry import ErrorCategory
from duetime.core.states import AttemptStatus, JobStatus
from duetime.store.rows import (
    ATTEMPT_COLUMNS,
    CLAIMED_COLUMNS,
    attempt_from_row,
    claims_from_rows,
    claims_from_values,
    job_from_row,
)

T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def same_time(value: datetime) -> datetime:
    return value


JOB_ROW = {
    "id": 7,
    "tenant": "acme",
    "queue": "mail",
    "task": "send",
    "args": '{"to": "a@example.com"}',
    "priority": 3,
    "due_at": T,
    "deadline_at": T + timedelta(hours=1),
    "status": "running",
    "version": 4,
    "attempts": 2,
    "max_attempts": 5,
    "generation": 2,
    "retry_base": 1,
    "retry_cap": 60.0,
    "lease_seconds": 30.0,
    "timeout_seconds": None,
    "idempotency_key": "k-1",
    "request_hash": "h",
    "business_key": "mail:7",
    "cancel_requested_at": None,
    "created_at": T - timedelta(minutes=5),
    "updated_at": T,
    "schedule_id": 3,
    "schedule_name": "nightly",
    "nominal_at": T,
    "covers": '["2026-12-01T08:00:00+00:00"]',
    "origin": "tick",
    "limits": '["smtp"]',
    "result": '{"sent":1}',
    "progress": 0.5,
    "progress_message": "half",
    "progress_at": T,
    "trace_context": '{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}',
    "on_parent_failure": "run",
    "cancel_reason": None,
    "sequence_key": "acct-1",
    "sequence_hold": 1,
    "unique_key": "ab" * 32,
    "unique_until": datetime(2026, 12, 1, 9, 0, tzinfo=UTC),
}

ATTEMPT_ROW = {
    "id": 11,
    "job_id": 7,
    "generation": 2,
    "worker_id": "w-1",
    "status": "failed",
    "lease_expires_at": T + timedelta(seconds=30),
    "started_at": T,
    "finished_at": T + timedelta(seconds=2),
    "error_category": "timeout",
    "error_message": "timed out",
    "error_traceback": "Traceback ...",
    "late_outcome": None,
    "late_reported_at": None,
    "due_at": T,
    "claim_token": 5_000_000_000_000_000_001,
}


# a claim's row: its job's columns and the claim's own
CLAIM_ROW = {
    **JOB_ROW,
    "claim_token": 5_000_000_000_000_000_001,
    "attempt_id": 11,
    "attempt_lease_expires_at": T + timedelta(seconds=30),
    "claim_epoch": 3,
}


def field_names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_a_job_from_its_row_has_every_field_as_init_makes_it() -> None:
    job = job_from_row(JOB_ROW, same_time)
    assert set(vars(job)) == field_names(Job)
    assert job == Job(**vars(job))
    assert (job.args, job.status, job.retry_base, job.limits) == (
        {"to": "a@example.com"},
        JobStatus.RUNNING,
        1.0,
        ("smtp",),
    )
    assert job.covers == (datetime(2026, 12, 1, 8, 0, tzinfo=UTC),)
    assert job.to_json()["id"] == 7
    assert (job.result, job.progress, job.progress_message) == ({"sent": 1}, 0.5, "half")
    assert job.to_json()["result"] == {"sent": 1}


def test_an_attempt_from_its_row_has_every_field_as_init_makes_it() -> None:
    row = {"attempt_" + k: v for k, v in ATTEMPT_ROW.items()}
    # every column of the attempt's row, and the claim's epoch (not a column: claim_epoch)
    assert set(ATTEMPT_ROW) == set(ATTEMPT_COLUMNS) == field_names(Attempt) - {"epoch"}
    attempt = attempt_from_row(row, same_time, "attempt_", 3)
    assert set(vars(attempt)) == field_names(Attempt)
    assert attempt == Attempt(**vars(attempt))
    assert attempt.status is AttemptStatus.FAILED
    assert attempt.error_category is ErrorCategory.TIMEOUT
    assert attempt.lag_seconds == 0.0
    assert (attempt.claim_token, attempt.epoch) == (5_000_000_000_000_000_001, 3)
    assert attempt.fencing_token == (3 << 32) | 2


def test_built_records_stay_frozen_and_hashable_as_init_made_ones() -> None:
    attempt = built(Attempt, vars(attempt_from_row(ATTEMPT_ROW, same_time)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        attempt.worker_id = "other"  # type: ignore[misc]
    assert hash(attempt) == hash(Attempt(**vars(attempt)))


def test_a_claim_from_its_row_has_every_field_of_its_job_and_new_attempt() -> None:
    """A claim's row is its job's columns and three more: the rest of its attempt is the
    job's, the worker's, or what every started attempt has."""
    row = CLAIM_ROW
    [claim] = claims_from_rows([row], same_time, "w-1")
    assert claim == Claim(job_from_row(JOB_ROW, same_time), claim.attempt)
    attempt = claim.attempt
    assert set(vars(attempt)) == field_names(Attempt)
    assert attempt == Attempt(
        id=11,
        job_id=7,
        generation=2,
        worker_id="w-1",
        status=AttemptStatus.RUNNING,
        lease_expires_at=T + timedelta(seconds=30),
        started_at=T,  # the job's updated_at: the claim's now
        due_at=T,
        claim_token=5_000_000_000_000_000_001,
        epoch=3,
    )
    assert claim.lease.claim_token == 5_000_000_000_000_000_001
    # made once per claim, without Lease's __init__, equal to what it makes
    assert claim.lease == Lease(7, 11, 2, 5_000_000_000_000_000_001)
    assert hash(claim.lease) == hash(Lease(7, 11, 2, 5_000_000_000_000_000_001))
    assert claim.lease is claim.lease
    assert attempt.fencing_token == (3 << 32) | 2


class Reading(dict[str, Any]):
    """A row that notes each column read from it."""

    def __init__(self, values: dict[str, Any]) -> None:
        super().__init__(values)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)


def test_a_claimed_row_is_read_for_the_claimed_columns_and_no_other() -> None:
    """The claim statements return CLAIMED_COLUMNS (the shared part claimed_columns,
    checked in tests/contract/test_store_contract.py): every column the records read, and no
    column more (a row of every column of the jobs' table here)."""
    row = Reading(
        {
            **JOB_ROW,
            "on_parent_failure": None,
            "cancel_reason": None,
            "has_children": False,
            "parents_left": 0,
            "release_delay": None,
            "worker_id": "w-1",
            "started_at": T,
            "lease_expires_at": T + timedelta(seconds=30),
            "late_outcome": None,
            "late_reported_at": None,
            "claim_token": 5,
            "attempt_id": 11,
            "attempt_lease_expires_at": T + timedelta(seconds=30),
            "claim_epoch": 3,
        }
    )
    claims_from_rows([row], same_time, "w-1")
    assert row.read == set(CLAIMED_COLUMNS)
    assert len(CLAIMED_COLUMNS) == len(set(CLAIMED_COLUMNS))


def test_made_records_equal_init_ones_with_the_defaults_of_fields_left_out() -> None:
    given = vars(job_from_row(JOB_ROW, same_time)) | {}
    del given["result"], given["progress"]  # set in JOB_ROW, left out here
    job = made(Job, **given)
    assert set(vars(job)) == field_names(Job)
    assert job == Job(**given)
    assert (job.result, job.progress) == (None, None)


def test_made_refuses_a_record_with_a_default_factory() -> None:
    @dataclasses.dataclass(frozen=True)
    class Listed:
        items: list[int] = dataclasses.field(default_factory=list)

    with pytest.raises(TypeError, match="default_factory"):
        made(Listed)


def test_a_row_of_an_earlier_schema_reads_the_columns_added_since_as_null() -> None:
    """A migration test reads jobs before the database migrates: the columns of migrations 18
    (results, progress) and 20 (dependencies) are absent then, and only those may be."""
    later = ("result", "progress", "progress_message", "progress_at", "on_parent_failure")
    old = {k: v for k, v in JOB_ROW.items() if k not in (*later, "cancel_reason")}
    job = job_from_row(old, same_time)
    assert (job.result, job.progress, job.on_parent_failure, job.cancel_reason) == (None,) * 4
    assert job == replace(
        job_from_row(JOB_ROW, same_time),
        result=None,
        progress=None,
        progress_message=None,
        progress_at=None,
        on_parent_failure=None,
    )
    with pytest.raises(KeyError, match="queue"):
        job_from_row({k: v for k, v in JOB_ROW.items() if k != "queue"}, same_time)


def test_a_claim_reads_its_values_by_position_and_puts_another_order_in_its_own() -> None:
    """A plain claim's rows come as values (Driver.values_alone) in CLAIMED_COLUMNS' order;
    values in another order, named, give the same claim."""
    row = CLAIM_ROW
    [by_name] = claims_from_rows([row], same_time, "w-1")
    [in_order] = claims_from_values(
        CLAIMED_COLUMNS, [tuple(row[c] for c in CLAIMED_COLUMNS)], same_time, "w-1"
    )
    shuffled = ("claim_epoch", *reversed(CLAIMED_COLUMNS[:-1]))
    [reordered] = claims_from_values(shuffled, [[row[c] for c in shuffled]], same_time, "w-1")
    assert by_name == in_order == reordered
    assert (in_order.attempt.id, in_order.attempt.epoch, in_order.job.id) == (11, 3, 7)
    assert claims_from_values((), [], same_time, "w-1") == []  # no row, no names
