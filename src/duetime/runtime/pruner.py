"""The pruner: deletes finished jobs (succeeded, cancelled, expired) and their attempts once
they are older than the retention, in bounded batches. Dead letters and parked jobs are kept
until an operator replays, resolves or deletes them. Safe to run on every node."""

from __future__ import annotations

import functools
import logging
from datetime import timedelta

from duetime.core.clock import Clock
from duetime.logs import log_event
from duetime.runtime.service import BlockingCalls, IntervalService
from duetime.store.base import Store

log = logging.getLogger("duetime.pruner")


class Pruner(IntervalService):
    name = "pruner"
    wait_first = True

    def __init__(
        self,
        store: Store,
        clock: Clock,
        calls: BlockingCalls,
        *,
        retention: timedelta,
        interval: float = 60.0,
        batch: int = 1000,
    ) -> None:
        super().__init__(interval)
        self.store = store
        self.clock = clock
        self.calls = calls
        self.retention = retention
        self.batch = batch
        self.deleted = 0

    async def run_once(self) -> None:
        before = self.clock.now() - self.retention
        total = 0
        while not self.stopping:  # batch after batch while whole batches come back
            count = await self.calls(functools.partial(self.store.prune, before, self.batch))
            total += count
            if count < self.batch:
                break
        self.deleted += total
        if total:
            log_event(log, "jobs.pruned", count=total, before=before.isoformat())
