"""The progress writer: what handlers report with duetime.current().progress(), written to
their jobs' rows at most every PROGRESS_INTERVAL seconds per worker, whatever they report.

A report only replaces the attempt's latest one here (any thread may report: a sync handler
runs in a thread of its own). The writer wakes on the first report after a quiet spell, and
writes the latest report of every attempt that reported since its last write in one
transaction, fenced by each attempt's generation and claim token (a stale attempt writes
nothing). Reports are best effort while the job runs: a write that fails is logged and
dropped; an attempt's last report goes with its outcome, in the fenced finish
(runtime/attempt.py), so the final value is kept whatever became of the writes before it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time

from duetime.core.clock import Clock
from duetime.core.models import Lease
from duetime.runtime.service import BlockingCalls, Service
from duetime.store.base import Store

log = logging.getLogger("duetime.worker")

PROGRESS_INTERVAL = 0.5  # seconds between two progress writes of one worker, at least


class ProgressWriter(Service):
    """Writes the running attempts' progress reports, coalesced, for one worker."""

    name = "progress"

    def __init__(
        self,
        store: Store,
        clock: Clock,
        calls: BlockingCalls,
        *,
        interval: float = PROGRESS_INTERVAL,
    ) -> None:
        super().__init__()
        self.store = store
        self.clock = clock
        self.calls = calls
        self.interval = interval
        self.writes = 0  # transactions written (each with every attempt's latest report)
        self._lock = threading.Lock()
        # by attempt: a stale attempt still running beside the current one of its job (its
        # lease was lost) does not replace the current one's report
        self._pending: dict[Lease, tuple[Lease, float, str | None]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last = float("-inf")  # time.monotonic() of the last write

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()

    def note(self, lease: Lease, fraction: float, message: str | None) -> None:
        """Keep `lease`'s latest report for the next write (from any thread)."""
        with self._lock:
            first = not self._pending
            self._pending[lease] = (lease, fraction, message)
        loop = self._loop
        if first and loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self.wake)
            except RuntimeError:  # the loop closed meanwhile: the outcome carries the report
                pass

    def forget(self, lease: Lease) -> None:
        """Drop `lease`'s report not written yet: its outcome carries it (a write after the
        finish would be refused anyway; this saves the statement)."""
        with self._lock:
            self._pending.pop(lease, None)

    async def run(self) -> None:
        while not self.stopping:
            with self._lock:
                waiting = bool(self._pending)
            if not waiting:
                await self.pause(3600)
                continue
            wait = self._last + self.interval - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)  # coalesce: the reports meanwhile replace these
            with self._lock:
                reports, self._pending = list(self._pending.values()), {}
            self._last = time.monotonic()
            try:
                await self.calls(
                    functools.partial(self.store.record_progress, reports, self.clock.now())
                )
            except Exception as exc:  # best effort: the outcome carries the last report
                log.warning("could not write the progress of %d jobs: %r", len(reports), exc)
            self.writes += 1
