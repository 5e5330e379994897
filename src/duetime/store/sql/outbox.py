"""The SQL store's outbox part: the relay's dispatch, the outbox events, broker-fed workers'
acceptance of a dispatched attempt, and the outbox's figures.

The relay's dispatch is a claim: the jobs move and their attempts start (held by
DISPATCH_HOLDER) in the transaction that writes their outbox events, so an event exists if
and only if its attempt does. See docs/outbox.md. The queues' dispatch modes are the flow
part's (store/sql/flow.py); a controlled dispatch is the claim part's choice
(store/sql/claim.py start_controlled).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from duetime.core.clock import Instant, read_instant
from duetime.core.flow.records import FlowControls
from duetime.core.flow.rotation import TenantRotation
from duetime.core.models import Claim, Lease, Outcome
from duetime.core.outbox import (
    DISPATCH_HOLDER,
    Dispatched,
    OutboxEvent,
    OutboxFigures,
    QueueBacklog,
)
from duetime.core.retry import ErrorCategory
from duetime.core.states import AttemptStatus, Event
from duetime.store.base import DispatchedEvents
from duetime.store.driver import Connection, Driver, Row
from duetime.store.rows import attempt_from_row, job_from_row, moves_json
from duetime.store.sql.attempt_ids import Reserved
from duetime.store.sql.claim import NOTHING_SCHEDULED, Claimer
from duetime.store.sql.finish import Finisher
from duetime.store.sql.flow import Flow
from duetime.store.sql.limits import Limits
from duetime.store.sql.shared import Part, conflicts_retried

log = logging.getLogger("duetime.store")


class Outbox(Part):
    def __init__(
        self, driver: Driver, flow: Flow, limits: Limits, claimer: Claimer, finisher: Finisher
    ) -> None:
        super().__init__(driver)
        self.flow = flow
        self.limits = limits
        self.claimer = claimer
        self.finisher = finisher

    @conflicts_retried
    def dispatch(
        self,
        now: Instant,
        limit: int,
        lease_seconds: float,
        rotation: TenantRotation | None = None,
    ) -> DispatchedEvents:
        """The relay's claim (docs/outbox.md). Without a control that concerns it (a cap or
        weight of an outbox-mode queue, a tenant's cap or weight, any limit per dependency),
        the dispatch statement alone (it honours pauses). Otherwise the controlled claim's
        choice of jobs of the outbox-mode queues (Claimer.start_controlled, limits included),
        their attempts held by DISPATCH_HOLDER with lease_seconds, and one event per started
        attempt, in one transaction. With `rotation` (the relay's TenantRotation, after a
        saturated dispatch) it rotates over the tenants with due work, through the controlled
        choice too. A callable `now` (a clock's) is read once the transaction is held."""
        if limit <= 0:
            return DispatchedEvents([])
        controls = self.flow.flow_controls()
        outbox = self.flow.outbox_queues()
        ids = self.claimer.attempt_ids.take(limit)  # before the transaction, in one of its own
        if not outbox:
            dispatched = DispatchedEvents(self._dispatch_plain(ids, now, limit, lease_seconds))
        elif (
            rotation is not None or controls.restricts_dispatch(outbox) or self.limits.limit_names()
        ):
            dispatched = self._dispatch_controlled(
                controls, outbox, ids, now, limit, lease_seconds, rotation
            )
        else:
            dispatched = DispatchedEvents(self._dispatch_plain(ids, now, limit, lease_seconds))
        ids.used({"attempt_id": e.attempt_id} for e in dispatched.events)
        self.claimer.attempt_ids.give_back(ids)  # not on an error: its ids may be written
        return dispatched

    def _dispatch_controlled(
        self,
        controls: FlowControls,
        outbox: list[str],
        ids: Reserved,
        now: Instant,
        limit: int,
        lease_seconds: float,
        rotation: TenantRotation | None,
    ) -> DispatchedEvents:
        with self.driver.transaction() as c:
            at = read_instant(now)  # once the connection is held
            started = self.claimer.start_controlled(
                c,
                controls,
                rotation,
                ids,
                leave_out=[],
                worker_id=DISPATCH_HOLDER,
                queues=outbox,
                limit=limit,
                now=at,
                tasks=None,
                dispatch_lease=lease_seconds,
            )
            ids.used(started.rows)  # every attempt started, with an event or not
            if not started.rows:
                return DispatchedEvents([], started.next_start)
            rows = c.rows(
                "insert_outbox_events",
                attempt_ids=sorted(int(r["attempt_id"]) for r in started.rows),
                job_ids=sorted(int(r["id"]) for r in started.rows),
                now=at,
                holder=DISPATCH_HOLDER,
            )
            if len(rows) != len(started.rows):
                # the row locks make this impossible; should it happen, the events written are
                # kept (a refusal never wedges the dispatch): an attempt without one is reaped
                # as lost once its dispatch lease ends, and its job is retried
                log.warning(
                    "wrote %d outbox events for %d dispatched attempts; the events are kept, the "
                    "attempts without one are reaped when their dispatch lease ends",
                    len(rows),
                    len(started.rows),
                )
        events = sorted((self._event(r) for r in rows), key=lambda e: e.id)
        return DispatchedEvents(events, started.next_start)

    # -- the relay ----------------------------------------------------------------------------

    def _dispatch_plain(
        self, ids: Reserved, now: Instant, limit: int, lease_seconds: float
    ) -> list[OutboxEvent]:
        """The relay's dispatch when no control but pauses concerns it: one statement
        (dispatch_outbox), given the priority classes where the dialect takes them."""
        with self.driver.transaction() as c:
            classes = self.claimer.due_classes(c)
            if classes == NOTHING_SCHEDULED:
                return []
            rows = c.rows(
                "dispatch_outbox",
                **classes,
                now=read_instant(now),  # once the connection is held
                limit=limit,
                moves=moves_json(Event.CLAIM),
                holder=DISPATCH_HOLDER,
                lease_seconds=lease_seconds,
                **ids.params,
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
            claim_token=r["claim_token"],
            trace_context=r["trace_context"],
        )

    # -- broker-fed workers -------------------------------------------------------------------

    @conflicts_retried
    def accept_dispatch(self, message: Dispatched, worker_id: str, now: Instant) -> Claim | None:
        with self.driver.transaction() as c:
            at = read_instant(now)  # once the connection is held
            taken = c.run(
                "accept_dispatch",
                job_id=message.job_id,
                generation=message.generation,
                claim_token=message.claim_token,
                version=message.version,
                worker_id=worker_id,
                holder=DISPATCH_HOLDER,
                now=at,
            )
            # found by its job and claim token, never by the attempt id alone (None: refused)
            row = c.one("select_claim", job_id=message.job_id, claim_token=message.claim_token)
            if taken != 1:
                if row is not None and self._too_late(row, message, at):
                    self._release_too_late(c, message, at)
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
            and row["claim_token"] == message.claim_token
            and row["deadline_at"] is not None
            and self._t(row["deadline_at"]) <= now
        )

    def _release_too_late(self, c: Connection, message: Dispatched, now: datetime) -> None:
        """A message that came after its job's deadline: the attempt never starts (it ends
        lost) and the job is scheduled again, due now, for the reaper to expire (a claim and
        a dispatch take no job past its deadline), as a job never claimed in time would be."""
        lease = Lease(message.job_id, message.attempt_id, message.generation, message.claim_token)
        outcome = Outcome(
            Event.RETRY,
            due_at=now,
            error_category=ErrorCategory.INTERRUPTED,
            error_message="the job's deadline passed while its message waited in the broker",
            attempt_status=AttemptStatus.LOST,
        )
        self.finisher.finish_on(c, [(lease, outcome)], now)

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
