"""What a running handler can learn about its attempt: duetime.current()."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any

from duetime.core.errors import DuetimeError
from duetime.core.models import Claim, Lease
from duetime.core.results import check_progress


class JobCancelled(DuetimeError):
    """Raised by AttemptContext.raise_if_cancelled() once cancellation was requested."""


@dataclass
class AttemptContext:
    """The running attempt, as its handler sees it."""

    claim: Claim
    _cancelled: bool = field(default=False, repr=False)
    # made by the first wait_cancelled() only: most attempts never wait (one per job saved)
    _cancel_event: threading.Event | None = field(default=None, repr=False)
    lease_lost: bool = False
    thread_done: bool = False  # set by the worker: the sync handler's thread returned
    orphaned: bool = False  # set by the worker: its attempt was recorded while the thread ran
    completed: bool = False  # the handler's transaction() recorded the success
    # the completion transaction of this attempt's success, given the handler's result
    _completion: Callable[[AttemptContext, Any], AbstractContextManager[Any]] | None = field(
        default=None, repr=False
    )
    max_lateness: timedelta | None = None  # the task's bound, when it has one
    # the latest progress() report (written with the outcome), and where reports go while
    # the handler runs (the worker's progress writer; None: only with the outcome)
    reported: tuple[float, str | None] | None = None
    _progress_sink: Callable[[Lease, float, str | None], None] | None = field(
        default=None, repr=False
    )

    # reads the results of a job's parents that succeeded (Store.parent_results), and what it
    # read for this attempt: read once, on the first use of parent_results
    _parent_reader: Callable[[int], dict[int, Any]] | None = field(default=None, repr=False)
    _parent_results: Mapping[int, Any] | None = field(default=None, repr=False)

    @property
    def parent_results(self) -> Mapping[int, Any]:
        """The results of this job's parents (depends_on, chains, groups: docs/workflows.md),
        by parent id: each parent that succeeded maps to what its handler returned (None when
        it returned nothing). A parent that did not succeed (with on_parent_failure="run": it
        ended dead, cancelled or expired), or that was pruned meanwhile, is absent. Read from
        the database once per attempt, in one query, on first use; empty, with no read, for a
        job without parents. In an async handler, `await aparent_results()` reads it off the
        event loop."""
        if self._parent_results is None:
            reader = self._parent_reader
            if reader is None or self.claim.job.on_parent_failure is None:
                found: dict[int, Any] = {}
            else:
                found = reader(self.claim.job.id)
            self._parent_results = MappingProxyType(found)
        return self._parent_results

    async def aparent_results(self) -> Mapping[int, Any]:
        """parent_results, its one read (on first use) in a thread, not on the event loop."""
        if self._parent_results is None:
            return await asyncio.to_thread(lambda: self.parent_results)
        return self._parent_results

    @property
    def lateness(self) -> timedelta:
        """How long after its due time this attempt started (zero when not late)."""
        late = self.claim.attempt.started_at - self.claim.job.due_at
        return max(late, timedelta(0))

    @property
    def late(self) -> bool:
        """True when the task has a max_lateness and this attempt started later than that:
        a task with on_late="run" runs such a job anyway (docs/flow-control.md, Lateness)."""
        return self.max_lateness is not None and self.lateness > self.max_lateness

    @property
    def job_id(self) -> int:
        return self.claim.job.id

    @property
    def attempt(self) -> int:
        """1 for the first attempt of the current budget, 2 for the first retry, and so on."""
        return self.claim.job.attempts

    @property
    def generation(self) -> int:
        """The attempt's generation: how many times the job was claimed (the low 32 bits of
        fencing_token). Not unique across a lossy database promotion: fence with
        fencing_token."""
        return self.claim.attempt.generation

    @property
    def fencing_token(self) -> int:
        """Strictly increasing per job, across a database promotion too: pass it to systems
        that fence. The database's epoch (PostgreSQL: its timeline; 0 on SQLite and
        MariaDB/MySQL) in the high 32 bits, the attempt's generation in the low 32
        (docs/at-least-once.md, "Fencing tokens")."""
        return self.claim.attempt.fencing_token

    @property
    def business_key(self) -> str:
        """Stable across attempts, replicas and replays: the idempotency key to send downstream."""
        return self.claim.job.business_key

    @property
    def task(self) -> str:
        return self.claim.job.task

    @property
    def due_at(self) -> datetime:
        return self.claim.job.due_at

    @property
    def schedule(self) -> str | None:
        """The schedule this occurrence belongs to (None for a one-off job)."""
        return self.claim.job.schedule_name

    @property
    def nominal_at(self) -> datetime | None:
        """The tick this occurrence stands for, in UTC (None for a one-off job)."""
        return self.claim.job.nominal_at

    @property
    def covers(self) -> tuple[datetime, ...]:
        """Every nominal tick this run stands for: several for a coalesced run after a misfire."""
        job = self.claim.job
        return job.covers or ((job.nominal_at,) if job.nominal_at else ())

    @property
    def cancel_requested(self) -> bool:
        """True once an operator asked to cancel this job (or its lease was lost)."""
        return self._cancelled

    def progress(self, fraction: float, message: str | None = None) -> None:
        """Report how far this attempt got: `fraction` from 0 to 1, and an optional message of
        at most 200 characters (InvalidRequest otherwise). Call it as often as you like: the
        worker writes the latest report to the job at most twice a second, fenced by this
        attempt (a stale attempt's reports are not written), and the last one with the
        attempt's outcome. Shown by `duetime jobs show`, the API and the dashboard."""
        report = check_progress(fraction, message)
        self.reported = report
        sink = self._progress_sink
        if sink is not None:
            sink(self.claim.lease, *report)

    @contextmanager
    def transaction(self, result: Any = None) -> Iterator[Any]:
        """A transaction on duetime's database that commits together with this attempt's
        success, fenced by its generation: write your local effects on the connection it
        yields, and they apply once or not at all. `result` (JSON data) is stored as the
        job's result with that success (what the handler returns afterwards is not: the
        success is recorded already).

        On PostgreSQL the connection is a psycopg connection from duetime's pool, on
        MariaDB/MySQL a PyMySQL connection from its pool; on SQLite, the store's sqlite3
        connection (keep the block short: it holds the write lock). If this
        attempt lost its lease meanwhile, everything rolls back and duetime.StaleAttempt is
        raised. Use it once, at the end of a sync handler; the success is then recorded.
        """
        if self._completion is None:
            raise RuntimeError("transaction() is only available inside a running task handler")
        if self.completed:
            raise RuntimeError("this attempt's outcome is already recorded")
        with self._completion(self, result) as connection:
            yield connection
        self.completed = True

    def raise_if_cancelled(self) -> None:
        """Stop here if cancellation was requested: the job ends cancelled, not retried."""
        if self._cancelled:
            raise JobCancelled(f"job {self.job_id} was cancelled while running")

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Block a sync handler up to `timeout` seconds; True if cancellation was requested."""
        with _CANCEL_LOCK:
            if self._cancel_event is None:
                self._cancel_event = threading.Event()
                if self._cancelled:
                    self._cancel_event.set()
            event = self._cancel_event
        return event.wait(timeout)

    def request_cancel(self) -> None:
        with _CANCEL_LOCK:
            self._cancelled = True
            event = self._cancel_event
        if event is not None:
            event.set()


# orders request_cancel() against a wait_cancelled() making its event (in another thread)
_CANCEL_LOCK = threading.Lock()


_current: ContextVar[AttemptContext | None] = ContextVar("duetime_current_attempt", default=None)


def current() -> AttemptContext:
    """The attempt running in this handler; raises outside a handler."""
    ctx = _current.get()
    if ctx is None:
        raise RuntimeError("duetime.current() is only available inside a running task handler")
    return ctx


def set_current(ctx: AttemptContext) -> None:
    _current.set(ctx)
