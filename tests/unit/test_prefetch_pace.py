"""How many jobs the slots claim ahead: what they start during four claims, capped (no I/O)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from duetime.runtime.slots import Slots


def slots(concurrency: int = 10, prefetch: int = 100) -> Slots:
    runner = cast(
        Any,
        SimpleNamespace(
            threads=SimpleNamespace(orphans=0), completer=SimpleNamespace(failing=False)
        ),
    )  # all it reads
    return Slots(
        runner,
        registry={},
        worker_id="w",
        queues=None,
        concurrency=concurrency,
        poll_interval=0.5,
        grace=1.0,
        prefetch=prefetch,
    )


def paced(s: Slots, *, jobs_per_claim: int, claim_seconds: float, claims: int = 30) -> None:
    """`claims` claims in a row, each `claim_seconds` long, with `jobs_per_claim` jobs
    started in the slots between one claim's start and the next."""
    at = s._last_claim
    for _ in range(claims):
        at += claim_seconds
        s.started += jobs_per_claim
        s._paced(at, at + claim_seconds)


def test_nothing_ahead_unless_more_work_is_due() -> None:
    s = slots()
    paced(s, jobs_per_claim=40, claim_seconds=0.004)
    s.more_due = False
    assert s.ahead() == 0


def test_short_jobs_under_a_backlog_are_claimed_four_claims_ahead() -> None:
    s = slots(prefetch=1000)
    paced(s, jobs_per_claim=40, claim_seconds=0.004)  # 10,000 started per second
    s.more_due = True
    assert 150 <= s.ahead() <= 160  # 10,000/s x 4 ms x 4


def test_ahead_is_capped_by_prefetch() -> None:
    s = slots(prefetch=20)
    paced(s, jobs_per_claim=40, claim_seconds=0.004)
    s.more_due = True
    assert s.ahead() == 20
    assert slots(prefetch=0).ahead() == 0


def test_long_jobs_get_none_ahead() -> None:
    s = slots()
    paced(s, jobs_per_claim=1, claim_seconds=0.1)  # 10 jobs a second, claims of 2 ms
    s._claim_seconds = 0.002
    s.more_due = True
    assert s.ahead() == 0
    assert s.room() == s.free()  # a claim asks for the free slots only
