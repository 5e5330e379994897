"""The completer: attempts' outcomes recorded in batches, each outcome fenced on its own.

An attempt hands its outcome to `record()` and waits for the answer. The completer writes
whatever outcomes are waiting in one transaction (Store.finish_many): at once when none is
being written, else as soon as the write under way returns; up to `max_batch` at a time, and
after lingering `linger` seconds for more when fewer than that are waiting (more outcomes
per commit, for a few milliseconds of delay). An outcome is reported done only once its
transaction committed; a stale one is refused alone while the rest of its batch commits.
While the database is unreachable the batch is tried again with backoff; an outcome that
still could not be written after its give-up time is answered None (its lease lapses and the
reaper retries the job).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import dataclass, field, replace
from datetime import datetime

from duetime.core.clock import Clock
from duetime.core.models import Lease, Outcome
from duetime.logs import log_event
from duetime.runtime.service import BlockingCalls, Pulse, Service
from duetime.store.base import Store

log = logging.getLogger("duetime.worker")


@dataclass
class _Pending:
    lease: Lease
    outcome: Outcome
    # when the attempt handed it over, for a retry without decided_at (see _as_of); else None
    queued_at: datetime | None
    give_up: float  # time.monotonic() after which it is answered None
    answer: asyncio.Future[bool | None] = field(repr=False)


class Completer(Service):
    """Records outcomes for every slot of a worker, in batched, fenced transactions."""

    name = "completer"

    def __init__(
        self,
        store: Store,
        clock: Clock,
        calls: BlockingCalls,
        *,
        max_batch: int = 200,
        linger: float = 0.002,
    ) -> None:
        super().__init__()
        self.store = store
        self.clock = clock
        self.calls = calls
        self.max_batch = max_batch
        self.linger = linger
        self._waiting: list[_Pending] = []
        self.flushed = Pulse()  # a batch was written (or given up on)
        # the last write failed (the store unreachable): outcomes are being tried again
        self.failing = False

    async def record(self, lease: Lease, outcome: Outcome, *, give_up_after: float) -> bool | None:
        """Record `outcome` fenced by `lease`: True once committed, False when refused (another
        attempt holds the job; the late report is kept), None when it never could be written
        within `give_up_after` seconds."""
        answer: asyncio.Future[bool | None] = asyncio.get_running_loop().create_future()
        # the clock is read only when _as_of needs it: not for a success (no due_at), nor for a
        # retry whose delay counts from when it was decided (decided_at)
        queued_at = (
            self.clock.now() if outcome.due_at is not None and outcome.decided_at is None else None
        )
        self._waiting.append(
            _Pending(lease, outcome, queued_at, time.monotonic() + give_up_after, answer)
        )
        self.wake()
        return await answer

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def run(self) -> None:
        delay = 0.1
        while True:
            if not self._waiting:
                if self.stopping:
                    return
                await self.pause(3600)
                continue
            if len(self._waiting) < self.max_batch and self.linger > 0 and not self.stopping:
                await asyncio.sleep(self.linger)  # let more outcomes join this commit
            batch, self._waiting = self._waiting[: self.max_batch], self._waiting[self.max_batch :]
            now = self.clock.now()
            try:
                # the store reads the clock again once it holds the rows: finished_at and
                # late_reported_at say when the write happened, not when it was asked for
                items = [(p.lease, _as_of(p, now)) for p in batch]
                applied = await self.calls(
                    functools.partial(self.store.finish_many, items, self.clock.now)
                )
            except Exception as exc:
                self.failing = True
                kept = self._give_up_on(batch, exc)
                self._waiting[:0] = kept  # tried again first, in their order
                log_event(
                    log,
                    "outcome.retrying",
                    logging.WARNING,
                    outcomes=len(kept),
                    error=repr(exc)[:200],
                    retry_in_s=round(delay, 1),
                )
                self.flushed.fire()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            delay = 0.1
            self.failing = False
            for pending, ok in zip(batch, applied, strict=True):
                if not pending.answer.done():
                    pending.answer.set_result(ok)
            self.flushed.fire()

    def _give_up_on(self, batch: list[_Pending], exc: Exception) -> list[_Pending]:
        """Answer None to the outcomes past their give-up time (all of them once the worker
        is stopping: their leases lapse and the reaper retries them); return the others."""
        now = time.monotonic()
        kept = []
        for pending in batch:
            if self.stopping or now > pending.give_up:
                log.error(
                    "could not record the outcome of job %s; the lease will expire and be reaped",
                    pending.lease.job_id,
                    exc_info=exc,
                )
                if not pending.answer.done():
                    pending.answer.set_result(None)
            else:
                kept.append(pending)
        return kept


def _as_of(pending: _Pending, now: datetime) -> Outcome:
    """The outcome as handed to the store at `now`: a retry's delay counts from when it is
    written, as the attempt's finished_at does (it waited in the batch since it was handed
    over; decided_at = now lets the store count on from the instant it records)."""
    outcome = pending.outcome
    if outcome.due_at is None:
        return outcome
    since = outcome.decided_at or pending.queued_at or now
    if now <= since:
        return replace(outcome, decided_at=since)
    return replace(outcome, due_at=outcome.due_at + (now - since), decided_at=now)
