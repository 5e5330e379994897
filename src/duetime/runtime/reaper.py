"""The reaper: returns attempts whose lease ran out to the retry path. Safe to run everywhere.

Reaper.run_once() is one pass; ReaperService runs it on a node every few seconds, when the
node's turn comes: one pass serves the whole fleet, so every node asks the store for the turn
(Store.take_turn) and runs the pass only when the fleet's last one is old enough.
"""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass

from duetime.core.clock import Clock
from duetime.core.models import Outcome
from duetime.core.retry import ErrorCategory, Failure, RetryPolicy, decide
from duetime.core.states import AttemptStatus, JobStatus
from duetime.logs import log_event
from duetime.runtime.service import BlockingCalls, IntervalService
from duetime.store.base import Store

log = logging.getLogger("duetime.reaper")


@dataclass
class ReapResult:
    reaped: int = 0  # lost attempts recorded (their jobs retried, dead or cancelled)
    expired: int = 0  # scheduled jobs past their deadline
    withdrawn: int = 0  # dispatched attempts of queues switched to direct, taken back


class Reaper:
    """Every write is conditional on the lease still being expired and held by its generation,
    so any number of reapers may run at once: the loser's write simply changes nothing."""

    def __init__(
        self, store: Store, clock: Clock, *, rng: random.Random | None = None, batch: int = 100
    ) -> None:
        self.store = store
        self.clock = clock
        self.rng = rng or random.Random()
        self.batch = batch

    def run_once(self) -> ReapResult:
        result = ReapResult()
        now = self.clock.now()
        # a dispatch that raced a queue's switch to direct: its jobs go back to be claimed
        result.withdrawn = self.store.withdraw_stranded(now)
        for expired in self.store.expired_leases(now, self.batch):
            failure = Failure(
                ErrorCategory.LEASE_EXPIRED,
                "lease expired: the worker stopped renewing it (crash, pause or network loss); "
                "whether the handler finished is unknown",
            )
            decision = decide(
                failure,
                attempts=expired.attempts,
                max_attempts=expired.max_attempts,
                policy=RetryPolicy(expired.retry_base, expired.retry_cap),
                now=now,
                rng=self.rng,
            )
            outcome = Outcome(
                decision.event,
                due_at=decision.due_at,
                error_category=failure.category,
                error_message=failure.message,
                attempt_status=AttemptStatus.LOST,
            )
            if self.store.finish(expired.lease, outcome, now, only_if_expired=True):
                result.reaped += 1
                log_event(
                    log,
                    "attempt.lost",
                    job_id=expired.lease.job_id,
                    generation=expired.lease.generation,
                    next=str(decision.event),
                    was=str(expired.job_status),
                )
        result.expired = self.store.expire_overdue(now, self.batch)
        if result.expired:
            log_event(log, "jobs.expired", count=result.expired, status=str(JobStatus.EXPIRED))
        return result


# a pass runs where the fleet's last one began this share of the node's interval ago or more:
# a node alone, whose passes come a little early or late, still runs each of them
TURN_SHARE = 0.8


class ReaperService(IntervalService):
    """A reaper pass every `interval` seconds; `on_result` hears each pass's figures.

    With `holder` (the node's id), a pass runs only when the node gets the turn: the fleet's
    last pass began at least TURN_SHARE of `interval` ago (Store.take_turn), so however many
    nodes run the service, the fleet reaps about once per interval of its most frequent node,
    and a node that stops leaves the turn to the others within one interval."""

    name = "reaper"  # also the turn's name in the store

    def __init__(
        self,
        reaper: Reaper,
        calls: BlockingCalls,
        interval: float = 5.0,
        on_result: Callable[[ReapResult], None] | None = None,
        *,
        holder: str | None = None,
    ) -> None:
        super().__init__(interval)
        self.reaper = reaper
        self.calls = calls
        self.on_result = on_result
        self.holder = holder
        self.skipped = 0  # passes another node's recent pass made unnecessary

    async def run_once(self) -> None:
        if self.holder is not None:
            store = self.reaper.store
            turn = functools.partial(
                store.take_turn, self.name, self.holder, self.interval * TURN_SHARE
            )
            if not await self.calls(turn):
                self.skipped += 1
                return
        result = await self.calls(self.reaper.run_once)
        if self.on_result is not None:
            self.on_result(result)
