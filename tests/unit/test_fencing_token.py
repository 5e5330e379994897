"""The downstream fencing token (duetime.current().fencing_token): the database's epoch above
the generation, so that it grows per job across a promotion that hands generations out again
(docs/at-least-once.md, "Fencing tokens")."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from duetime.core.models import Attempt, Claim, Job, Lease, fencing_token
from duetime.core.states import AttemptStatus, JobStatus
from duetime.runtime.context import AttemptContext

NOW = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)


def claim(generation: int, epoch: int, token: int | None = 77) -> Claim:
    job = Job(
        id=52, tenant="a", queue="default", task="t", args={}, priority=0, due_at=NOW,
        deadline_at=None, status=JobStatus.RUNNING, version=1, attempts=generation,
        max_attempts=3, generation=generation, retry_base=1, retry_cap=60, lease_seconds=30,
        timeout_seconds=None, idempotency_key=None, business_key="k", created_at=NOW,
        updated_at=NOW,
    )  # fmt: skip
    attempt = Attempt(
        118, 52, generation, "w", AttemptStatus.RUNNING, NOW + timedelta(seconds=30), NOW,
        claim_token=token, epoch=epoch,
    )  # fmt: skip
    return Claim(job, attempt)


def test_the_token_is_the_generation_where_the_epoch_is_zero() -> None:
    """SQLite and MariaDB/MySQL: epoch 0, the token is the generation as before."""
    assert AttemptContext(claim(1, 0)).fencing_token == 1
    assert AttemptContext(claim(7, 0)).fencing_token == 7


def test_a_claim_on_a_promoted_primary_outranks_every_claim_on_the_old_one() -> None:
    """Job 52 claimed up to generation 5 on timeline 1, whose last commits were lost: the new
    primary (timeline 2) hands generation 1 out again, and its token is still the greater."""
    old = [AttemptContext(claim(g, 1)).fencing_token for g in range(1, 6)]
    new = [AttemptContext(claim(g, 2)).fencing_token for g in range(1, 6)]
    assert old == sorted(old) and new == sorted(new)
    assert min(new) > max(old)
    assert new[0] == (2 << 32) | 1
    # and a third promotion outranks the second
    assert AttemptContext(claim(1, 3)).fencing_token > max(new)


def test_the_lease_carries_the_claim_token() -> None:
    c = claim(4, 1, token=123456789)
    assert c.lease == Lease(52, 118, 4, 123456789)
    assert replace(c.attempt, epoch=9).fencing_token == (9 << 32) | 4


@pytest.mark.parametrize(("epoch", "generation"), [(-1, 1), (1, -1), (1, 1 << 32)])
def test_a_token_out_of_range_is_refused(epoch: int, generation: int) -> None:
    with pytest.raises(ValueError, match="no fencing token"):
        fencing_token(epoch, generation)
