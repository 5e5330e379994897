"""Attempt ids for the claims of a dialect without sequences (MariaDB/MySQL), hi/lo.

Since migration 22 an attempt's id is given at its claim and written on its job's row (the
attempt's own row comes at its end). PostgreSQL takes it from the attempts' sequence inside
the claim, and SQLite from a counter row under its one writer's lock. MariaDB/MySQL have
neither: a counter row advanced inside the claim would stay locked until the claim commits
and so serialize every claim. Instead each process reserves a block of ids from the counter
row (statement reserve_attempt_ids) in a short transaction of its own, before the claim's,
and hands them out: a claim of up to `limit` jobs takes `limit` consecutive ids, its
statement gives them in job id order, and what it did not use is given back to the block
when no other claim took ids since. Ids a process never used (it stopped, or a block ran
out) are skipped, never given twice. The dialects that allocate ids themselves answer the
reservation with no id, once, and are asked no more.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from duetime.core.errors import StoreError
from duetime.store.driver import Driver

BLOCK = 1000  # ids reserved at once: one short transaction per this many claimed jobs at most


@dataclass
class Reserved:
    """The ids of one claim: `params` for its statements ({} where the dialect allocates them
    itself, else first_attempt_id); `used` records the attempt ids its rows were given."""

    first: int | None
    count: int
    params: Mapping[str, int] = field(default_factory=dict)
    end_used: int | None = None

    def used(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Record the attempt ids the claim's rows carry (column attempt_id)."""
        if self.first is None:
            return
        top = [int(r["attempt_id"]) for r in rows]
        if top:
            self.end_used = max(max(top) + 1, self.end_used or 0)


class AttemptIds:
    """The block of attempt ids this process holds. Safe for many threads."""

    def __init__(self, driver: Driver, block: int = BLOCK) -> None:
        self.driver = driver
        self.block = block
        self._lock = threading.Lock()
        self._next = 0
        self._end = 0
        self._needed: bool | None = None  # None: not asked yet

    def take(self, count: int) -> Reserved:
        """`count` consecutive ids for one claim (none where the dialect gives them)."""
        if self._needed is False:
            return Reserved(None, count)
        with self._lock:
            if self._next + count > self._end:
                size = max(self.block, count)
                first = self._reserve(size)
                if first is None:
                    return Reserved(None, count)
                self._next, self._end = first, first + size
            first = self._next
            self._next += count
        return Reserved(first, count, {"first_attempt_id": first})

    def give_back(self, reserved: Reserved) -> None:
        """The ids a claim did not use, back to the block when no claim took ids since."""
        if reserved.first is None:
            return
        end = reserved.end_used if reserved.end_used is not None else reserved.first
        with self._lock:
            if self._next == reserved.first + reserved.count and end < self._next:
                self._next = end

    def _reserve(self, size: int) -> int | None:
        with self.driver.transaction() as c:
            row = c.one("reserve_attempt_ids", count=size)
        if row is None:
            raise StoreError(
                "the attempt id counter (duetime_attempt_ids, migration 22) has no row; "
                "restore it past the highest of duetime_attempts.id and duetime_jobs.attempt_id "
                "(docs/stores.md, Attempts)"
            )
        first = row["first_id"]
        self._needed = first is not None
        return None if first is None else int(first)
