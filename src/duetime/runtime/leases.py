"""Lease renewals: one batched heartbeat for the running attempts whose leases are due.

A lease is renewed at a third of its length, and at least every 2 s so that a cancel request
is noticed. The answer tells, per attempt, whether this worker still holds it (if not, the
handler is asked to stop: another attempt owns the job now) and whether cancellation was
requested.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Mapping

from duetime.core.clock import Clock
from duetime.logs import log_event
from duetime.runtime.attempt import RunningAttempt, WorkerStats, claim_fields
from duetime.runtime.metrics import WorkerMetrics
from duetime.runtime.service import BlockingCalls, IntervalService
from duetime.store.base import Store

log = logging.getLogger("duetime.worker")
CANCEL_CHECK_SECONDS = 2.0


class LeaseHeartbeats(IntervalService):
    """Renews the leases of a worker's running attempts (`running`, by attempt id)."""

    name = "leases"
    wait_first = True

    def __init__(
        self,
        running: Mapping[int, RunningAttempt],
        store: Store,
        clock: Clock,
        calls: BlockingCalls,
        *,
        stats: WorkerStats,
        metrics: WorkerMetrics,
    ) -> None:
        super().__init__(CANCEL_CHECK_SECONDS)
        self.running = running
        self.store = store
        self.clock = clock
        self.calls = calls
        self.stats = stats
        self.metrics = metrics

    def next_delay(self) -> float:
        waits = [renew_after(r) for r in self.running.values()] or [CANCEL_CHECK_SECONDS]
        return max(0.05, min(waits) / 2)

    async def run_once(self) -> None:
        await self.heartbeat_once()

    async def heartbeat_once(self) -> None:
        """Renew every lease due for renewal (see renew_after), in one batch."""
        now = time.monotonic()
        due = [r for r in self.running.values() if now - r.last_beat >= renew_after(r)]
        if not due:
            return
        try:
            states = await self.calls(
                functools.partial(
                    self.store.heartbeat, [r.claim.lease for r in due], self.clock.now()
                )
            )
        except Exception:
            log.exception("heartbeat failed; leases will be renewed on the next tick")
            return
        for running, state in zip(due, states, strict=True):
            running.last_beat = now
            if running.finishing or running.claim.attempt.id not in self.running:
                continue  # it ended while the batch was in flight: "not held" is its own doing
            if not state.held and not running.ctx.lease_lost:
                running.ctx.lease_lost = True
                self.stats.leases_lost += 1
                self.metrics.lease_lost()
                log_event(log, "lease.lost", logging.WARNING, **claim_fields(running.claim))
                running.ask_to_stop()
            elif state.cancel_requested and not running.ctx.cancel_requested:
                log_event(log, "job.cancel_seen", **claim_fields(running.claim))
                running.ask_to_stop()


def renew_after(running: RunningAttempt) -> float:
    """Renew a lease at a third of its length, and at least every 2 s to notice cancellation."""
    return min(running.claim.job.lease_seconds / 3, CANCEL_CHECK_SECONDS)
