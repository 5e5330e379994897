"""The completer: attempts' outcomes recorded in batches, each outcome fenced on its own.

An attempt hands its outcome to `record()` and waits for the answer. The completer writes
whatever outcomes are waiting in one transaction (Store.finish_many): at once when fewer than
`max_writes` batches are being written (the worker's: 2 on PostgreSQL, see
runtime/worker.py), else as soon as one of them returns; up to `max_batch` at a time, and
after lingering `linger` seconds for more when fewer than that are waiting (more outcomes
per commit, for a few milliseconds of delay; 400 by default: see Slots.claims_ahead). Batches
written side by side hold disjoint jobs (one outcome per attempt), each fenced and locked in id
order as a batch of another worker's would be. An outcome is reported done only once its
transaction committed; a stale one is refused alone while the rest of its batch commits.
While the database is unreachable the batch is tried again with backoff; an outcome that
still could not be written after its give-up time is answered None (its lease lapses and the
reaper retries the job); meanwhile one batch at a time is tried.
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
        max_batch: int = 400,
        linger: float = 0.002,
        max_writes: int = 1,
    ) -> None:
        super().__init__()
        self.store = store
        self.clock = clock
        self.calls = calls
        self.max_batch = max_batch
        self.linger = linger
        self.max_writes = max_writes  # batches written at once (each in its own transaction)
        self.overlap_at = max(1, max_batch // 4)  # outcomes waiting that start another write
        self._delay = 0.1  # the wait before a failed write is tried again
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
        if len(self._waiting) in (1, self.overlap_at):  # what the loop may be waiting for
            self.wake()
        return await answer

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def run(self) -> None:
        writes: set[asyncio.Task[None]] = set()
        while True:
            if not self._ready(len(writes)):
                if self.stopping and not self._waiting and not writes:
                    return
                if writes and self.stopping:
                    await asyncio.wait(writes, return_when=asyncio.FIRST_COMPLETED)
                else:  # until an outcome is handed over, enough wait, or a write ends
                    await self.pause(3600)
                continue
            if len(self._waiting) < self.max_batch and self.linger > 0 and not self.stopping:
                await asyncio.sleep(self.linger)  # let more outcomes join this commit
                if len(writes) >= self._writes_allowed():
                    continue  # a write failed meanwhile: one at a time now
            batch, self._waiting = self._waiting[: self.max_batch], self._waiting[self.max_batch :]
            write = asyncio.create_task(self._write(batch))
            writes.add(write)
            write.add_done_callback(functools.partial(self._written, writes))

    def _ready(self, under_way: int) -> bool:
        """Whether to write a batch now: outcomes wait and no batch is being written, or
        fewer than allowed are and a quarter of a full batch waits (a few outcomes go with
        the next write instead: a commit of its own each would cost more than it saves)."""
        if not self._waiting:
            return False
        if not under_way:
            return True
        return under_way < self._writes_allowed() and len(self._waiting) >= self.overlap_at

    def _writes_allowed(self) -> int:
        """Batches written at once: `max_writes` while the store answers, one while its writes
        fail (each retry waits for the one before)."""
        return 1 if self.failing else self.max_writes

    def _written(self, writes: set[asyncio.Task[None]], write: asyncio.Task[None]) -> None:
        writes.discard(write)
        self.wake()  # a failed write put its outcomes back: they are waiting again

    async def _write(self, batch: list[_Pending]) -> None:
        """Write one batch and answer its outcomes; on failure put back those not given up on
        (tried again first, in their order) and wait the backoff before the next try."""
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
                retry_in_s=round(self._delay, 1),
            )
            self.flushed.fire()
            delay, self._delay = self._delay, min(self._delay * 2, 5.0)
            await asyncio.sleep(delay)
            return
        self._delay = 0.1
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
