"""The SQL store's queue settings and transactional outbox (mixed into store/sql/front.py).

The relay's dispatch is a claim: the jobs move and their attempts start (held by
DISPATCH_HOLDER) in the transaction that writes their outbox events, so an event exists if
and only if its attempt does. See docs/outbox.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from duetime.core.flow import (
    KEEP,
    FlowControls,
    Keep,
    check_limit,
    check_paused,
    check_weight,
)
from duetime.core.models import Claim, Lease, Outcome
from duetime.core.outbox import (
    DISPATCH_HOLDER,
    Dispatch,
    Dispatched,
    OutboxEvent,
    OutboxFigures,
    QueueBacklog,
    QueueSettings,
)
from duetime.core.retry import ErrorCategory
from duetime.core.states import AttemptStatus, Event
from duetime.store.driver import Connection, Driver, Row
from duetime.store.rows import ToTime, attempt_from_row, job_from_row, moves_json
from duetime.store.sql.shared import conflicts_retried, earliest_of, withdraw_dispatched

log = logging.getLogger("duetime.store")

# how long a store trusts its copy of the outbox-mode queues' names: a switch of a queue's
# dispatch mode reaches other processes' claims within this (a job claimed meanwhile simply
# runs the other way: a claim and a dispatch both take only scheduled jobs, under row locks)
QUEUE_MODES_SECONDS = 1.0


class QueuesOutbox:
    driver: Driver
    _t: ToTime
    _outbox_queues: tuple[float, list[str]] | None = None  # (read at, monotonic; names)
    # the flow controls' copy (store/sql/flow.py): (read at, monotonic; controls)
    _controls: tuple[float, FlowControls] | None = None

    def outbox_queues(self) -> list[str]:
        """The names of the queues in outbox mode (what claim() leaves to the relay), read
        at most QUEUE_MODES_SECONDS ago: the claim's hot path does not read them each time."""
        cached = self._outbox_queues
        at = time.monotonic()
        if cached is not None and at - cached[0] < QUEUE_MODES_SECONDS:
            return cached[1]
        names = [q.queue for q in self.queue_settings() if q.dispatch is Dispatch.OUTBOX]
        self._outbox_queues = (at, names)
        return names

    # -- queue settings ---------------------------------------------------------------------

    def queue_settings(self) -> list[QueueSettings]:
        with self.driver.transaction(write=False) as c:
            rows = c.rows("queue_settings")
        return [self._settings(r) for r in rows]

    @conflicts_retried
    def set_queue(
        self,
        queue: str,
        now: datetime,
        *,
        dispatch: Dispatch | None = None,
        paused: bool | None = None,
        concurrency: int | Keep | None = KEEP,
        max_backlog: int | Keep | None = KEEP,
        weight: float | None = None,
    ) -> QueueSettings:
        with self.driver.transaction() as c:
            c.run(
                "upsert_queue",
                queue=queue,
                dispatch=str(dispatch) if dispatch is not None else None,
                paused=check_paused(paused),
                weight=check_weight(weight),
                now=now,
                **limit_params(concurrency, max_backlog),
            )
            if dispatch is Dispatch.DIRECT:  # its dispatched attempts no worker took: back
                self._withdraw_stranded(c, now)
            rows = c.rows("queue_settings")
        self._outbox_queues = None  # this process's claims see the change at once
        self._controls = None
        return next(self._settings(r) for r in rows if r["queue"] == queue)

    @conflicts_retried
    def withdraw_stranded(self, now: datetime) -> int:
        # read first (every reaper pass runs this): a write transaction only when a queue
        # not in outbox mode has an attempt held by the outbox, which a race leaves rarely
        with self.driver.transaction(write=False) as c:
            held = {r["queue"] for r in c.rows("dispatched_figures", holder=DISPATCH_HOLDER)}
            if not held:
                return 0
            modes = {r["queue"]: r["dispatch"] for r in c.rows("queue_settings")}
        if all(modes.get(q) == Dispatch.OUTBOX for q in held):
            return 0
        with self.driver.transaction() as c:
            return len(self._withdraw_stranded(c, now))

    def _withdraw_stranded(self, c: Connection, now: datetime) -> list[Row]:
        """Withdraw the attempts held by the outbox of every queue not in outbox mode (the
        relay would never publish them again, nor would a direct claim take them), so their
        jobs are claimed at once; their messages, if any, are then stale. Their attempts
        do not count. Notifies the workers of the jobs due now."""
        rows = withdraw_dispatched(c, now, direct=True)
        due = [(r["queue"], self._t(r["due_at"])) for r in rows if r["status"] == "scheduled"]
        if due:
            self.driver.notify(c, earliest_of(due))
        if rows:
            log.info(
                "withdrew %d dispatched attempts no worker took from queues not in outbox mode "
                "(jobs %s); direct workers claim them",
                len(rows),
                ", ".join(str(r["id"]) for r in rows[:20]) + (" ..." if len(rows) > 20 else ""),
            )
        return rows

    def _settings(self, r: Row) -> QueueSettings:
        return QueueSettings(
            r["queue"],
            Dispatch(r["dispatch"]),
            self._t(r["updated_at"]),
            paused=bool(r["paused"]),
            concurrency=r["concurrency"],
            max_backlog=r["max_backlog"],
            weight=float(r["weight"]),
        )

    # -- the relay ----------------------------------------------------------------------------

    def _dispatch_plain(self, now: datetime, limit: int, lease_seconds: float) -> list[OutboxEvent]:
        """The relay's dispatch when no control but pauses concerns it: one statement
        (dispatch_outbox); the controlled one is QueuesTenantsFlow.dispatch_outbox's."""
        with self.driver.transaction() as c:
            rows = c.rows(
                "dispatch_outbox",
                now=now,
                limit=limit,
                moves=moves_json(Event.CLAIM),
                holder=DISPATCH_HOLDER,
                lease_seconds=lease_seconds,
            )
        return [self._event(r) for r in rows]

    @conflicts_retried
    def take_events(
        self, relay_id: str, now: datetime, until: datetime, limit: int
    ) -> list[OutboxEvent]:
        if limit <= 0:
            return []
        with self.driver.transaction() as c:
            rows = c.rows("take_events", relay_id=relay_id, now=now, until=until, limit=limit)
        return sorted((self._event(r) for r in rows), key=lambda e: e.id)

    @conflicts_retried
    def mark_published(self, event_ids: Sequence[int], now: datetime, lease_seconds: float) -> int:
        if not event_ids:
            return 0
        with self.driver.transaction() as c:
            return c.run(
                "mark_published",
                ids=sorted(event_ids),
                now=now,
                holder=DISPATCH_HOLDER,
                lease_seconds=lease_seconds,
            )

    def _event(self, r: Row) -> OutboxEvent:
        return OutboxEvent(
            id=int(r["id"]),
            job_id=int(r["job_id"]),
            attempt_id=int(r["attempt_id"]),
            queue=r["queue"],
            task=r["task"],
            generation=int(r["generation"]),
            version=int(r["version"]),
            created_at=self._t(r["created_at"]),
            published_at=self._t(r["published_at"]) if r["published_at"] is not None else None,
        )

    # -- broker-fed workers -------------------------------------------------------------------

    @conflicts_retried
    def accept_dispatch(self, message: Dispatched, worker_id: str, now: datetime) -> Claim | None:
        with self.driver.transaction() as c:
            taken = c.run(
                "accept_dispatch",
                job_id=message.job_id,
                attempt_id=message.attempt_id,
                generation=message.generation,
                version=message.version,
                worker_id=worker_id,
                holder=DISPATCH_HOLDER,
                now=now,
            )
            row = c.one("select_claim", attempt_id=message.attempt_id)
            if taken != 1:
                if row is not None and self._too_late(row, message, now):
                    self._release_too_late(c, message, now)
                return None
        assert row is not None  # taken under the job's lock in this transaction
        return Claim(
            job_from_row(row, self._t),
            attempt_from_row(row, self._t, "attempt_"),
        )

    def _too_late(self, row: Row, message: Dispatched, now: datetime) -> bool:
        """The attempt still waits for a worker, but its job's deadline has passed."""
        return (
            row["attempt_status"] == AttemptStatus.RUNNING
            and row["attempt_worker_id"] == DISPATCH_HOLDER
            and row["generation"] == message.generation
            and row["deadline_at"] is not None
            and self._t(row["deadline_at"]) <= now
        )

    def _release_too_late(self, c: Connection, message: Dispatched, now: datetime) -> None:
        """A message that came after its job's deadline: the attempt never starts (it ends
        lost) and the job is scheduled again, due now, for the reaper to expire (a claim and
        a dispatch take no job past its deadline), as a job never claimed in time would be."""
        lease = Lease(message.job_id, message.attempt_id, message.generation)
        outcome = Outcome(
            Event.RETRY,
            due_at=now,
            error_category=ErrorCategory.INTERRUPTED,
            error_message="the job's deadline passed while its message waited in the broker",
            attempt_status=AttemptStatus.LOST,
        )
        self._finish_on(c, [(lease, outcome)], now)

    def _finish_on(
        self,
        c: Connection,
        items: Sequence[tuple[Lease, Outcome]],
        when: datetime | Callable[[], datetime],
        only_if_expired: bool = False,
    ) -> tuple[list[bool], datetime]:
        raise NotImplementedError  # SQLStore's

    # -- figures ------------------------------------------------------------------------------

    def outbox_figures(self, now: datetime, window_seconds: float = 60.0) -> OutboxFigures:
        since = now - timedelta(seconds=window_seconds)
        with self.driver.transaction(write=False) as c:
            rows = {r["queue"]: r for r in c.rows("outbox_figures", since=since)}
            held = {r["queue"]: r for r in c.rows("dispatched_figures", holder=DISPATCH_HOLDER)}
        queues = []
        for name in sorted(rows.keys() | held.keys()):
            r, h = rows.get(name), held.get(name)
            queues.append(
                QueueBacklog(
                    queue=name,
                    backlog=int(r["backlog"] or 0) if r else 0,
                    oldest_created_at=(
                        self._t(r["oldest_created_at"])
                        if r and r["oldest_created_at"] is not None
                        else None
                    ),
                    published=int(r["published"] or 0) if r else 0,
                    dispatched=int(h["dispatched"] or 0) if h else 0,
                    oldest_dispatched_at=(
                        self._t(h["oldest_dispatched_at"])
                        if h and h["oldest_dispatched_at"] is not None
                        else None
                    ),
                )
            )
        return OutboxFigures(now=now, window_seconds=window_seconds, queues=queues)

    @conflicts_retried
    def prune_outbox(self, before: datetime, limit: int) -> int:
        with self.driver.transaction() as c:
            return c.run("prune_outbox", before=before, limit=limit)


def limit_params(
    concurrency: int | Keep | None, max_backlog: int | Keep | None
) -> dict[str, object]:
    """The parameters of upsert_queue/upsert_tenant for two limits (KEEP: left as it is),
    each within its bounds (core/flow.py): no value out of range reaches a column."""
    if not isinstance(concurrency, Keep):
        check_limit(concurrency, "concurrency")
    if not isinstance(max_backlog, Keep):
        check_limit(max_backlog, "max_backlog")
    return {
        "set_concurrency": not isinstance(concurrency, Keep),
        "concurrency": None if isinstance(concurrency, Keep) else concurrency,
        "set_max_backlog": not isinstance(max_backlog, Keep),
        "max_backlog": None if isinstance(max_backlog, Keep) else max_backlog,
    }
