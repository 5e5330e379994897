"""Broker-fed slots: a worker's outbox-mode queues, consumed from RabbitMQ.

BrokerFeed consumes the broker queue (duetime.<queue>) of every outbox-mode queue the worker
serves, with manual acknowledgements and at most `prefetch` unacknowledged messages per
queue. For each message it waits for a free slot, then asks the store to hand it the attempt
the message names (Store.accept_dispatch: only while the job still holds that generation and
version and no worker took it before), acknowledges the message, and runs the attempt in the
worker's slots under the same lease, heartbeat, fencing and completion rules as a claimed one.
A message that is stale (the job moved on: retried, cancelled, rescheduled, succeeded) or a
duplicate (published twice, redelivered after another worker took it) is acknowledged and
dropped. A worker killed before it acknowledged leaves the message to be redelivered: if it
had taken the attempt, the copy is dropped and the reaper retries the attempt once its lease
ends. A message for a task this worker has no handler for goes back to the queue.

The feed types the slots it fills against SlotPool, the few things it asks of them: it imports
neither the worker nor runtime/slots.py (Slots implements SlotPool).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Protocol

from duetime.core.clock import Clock
from duetime.core.errors import InvalidRequest
from duetime.core.models import Claim, Outcome, variant
from duetime.core.outbox import Dispatch, Dispatched
from duetime.core.states import Event, JobStatus
from duetime.logs import error_field, log_event
from duetime.runtime.metrics import WorkerMetrics
from duetime.runtime.service import BlockingCalls, Pulse, Service
from duetime.store.base import Store
from duetime.tracing import carrier_of

if TYPE_CHECKING:
    from duetime.runtime.outbox.broker import Broker, Message

log = logging.getLogger("duetime.worker")


class SlotPool(Protocol):
    """The slots a feed fills (runtime/slots.py's Slots): a slot is reserved while a message's
    attempt is being accepted, then the attempt starts in it, or the slot is given back."""

    worker_id: str
    # an acceptance failed without an answer: it may have committed an attempt for this worker
    unsure: bool

    @property
    def registry(self) -> Mapping[str, object]:
        """The tasks the slots have handlers for, by name."""
        ...

    @property
    def finished(self) -> Pulse:
        """Fired when an attempt ends (a slot is free again)."""
        ...

    def free(self) -> int:
        """Slots free for a handler now."""
        ...

    def reserve(self) -> None:
        """Hold a free slot for a message being accepted."""
        ...

    def unreserve(self) -> None:
        """Give back a slot reserve() held."""
        ...

    def start_claim(self, claim: Claim) -> None:
        """Run an accepted attempt in a slot."""
        ...


class BrokerFeed(Service):
    """Feeds a worker's slots from the broker queues of its outbox-mode queues."""

    name = "broker-feed"

    def __init__(
        self,
        broker: Broker,
        slots: SlotPool,
        store: Store,
        clock: Clock,
        calls: BlockingCalls,
        *,
        metrics: WorkerMetrics,
        queues: list[str] | None,
        prefetch: int,
        refresh_interval: float = 2.0,
    ) -> None:
        super().__init__()
        self.broker = broker
        self.slots = slots
        self.store = store
        self.clock = clock
        self.calls = calls
        self.metrics = metrics
        self.queues = queues
        self.prefetch = prefetch
        self.refresh_interval = refresh_interval
        self.consuming: set[str] = set()
        self.accepted = 0
        self.dropped = 0
        self.handled = Pulse()  # a message was acknowledged (run or dropped) or requeued
        self.subscribed = Pulse()  # the consumers were (re)started

    async def run(self) -> None:
        backoff = 0.0
        while not self.stopping:
            try:
                await self._subscribe()
                backoff = 0.0
                await self.pause(self.refresh_interval)
            except Exception as exc:
                backoff = min(max(backoff * 2, 0.5), 5.0)
                log_event(
                    log,
                    "broker.unavailable",
                    logging.WARNING,
                    error=error_field(exc),
                    retry_in_s=backoff,
                )
                self.consuming.clear()
                await self.broker.close()
                await self.pause(backoff)
        self.consuming.clear()
        await self.broker.close()  # unacknowledged messages go back to their queues

    async def _subscribe(self) -> None:
        """Consume every outbox-mode queue this worker serves (again after a reconnect).
        A queue switched back to direct keeps its consumer: messages already published for
        it still run here."""
        if not self.broker.connected:
            self.consuming.clear()
        cancelled = await self.broker.cancelled_consumers()
        if cancelled:  # their broker queues were deleted: consume the queues declared anew
            log_event(
                log,
                "broker.consumer_cancelled",
                logging.WARNING,
                queues=",".join(cancelled),
                hint="the broker queue was deleted; this worker declares it again and consumes it",
            )
            self.consuming.difference_update(cancelled)
        settings = await self.calls(self.store.queue_settings)
        wanted = {
            q.queue
            for q in settings
            if q.dispatch is Dispatch.OUTBOX and (self.queues is None or q.queue in self.queues)
        }
        new = sorted(wanted - self.consuming)
        for queue in new:
            await self.broker.consume(queue, self._on_message, self.prefetch)
            self.consuming.add(queue)
        if new:
            log_event(log, "broker.consuming", queues=",".join(sorted(self.consuming)))
            self.subscribed.fire()

    async def _on_message(self, message: Message) -> None:
        try:
            await self._handle(message)
        finally:
            self.handled.fire()

    async def _handle(self, message: Message) -> None:
        try:
            dispatched = Dispatched.from_body(message.body)
        except InvalidRequest as exc:
            self._drop("malformed", str(exc), None)
            await _settle(message.ack())
            return
        if dispatched.task not in self.slots.registry:
            log_event(
                log,
                "broker.unknown_task",
                logging.WARNING,
                task=dispatched.task,
                job_id=dispatched.job_id,
                hint="this worker's app has no handler for it; the message goes back to its "
                "queue for a worker that has",
            )
            await asyncio.sleep(1.0)  # not at once: it would come straight back here
            await _settle(message.requeue())
            return
        await self.pause_for_slot()
        # the slot stays reserved until the attempt starts in it: till then the slots do not
        # know of the attempt, and must not take it for one a lost claim left (Slots.recover)
        self.slots.reserve()
        try:
            answered = await self._accept(message, dispatched)
        finally:
            self.slots.unreserve()
        if not answered:  # the database is unreachable: the message waits its turn
            await asyncio.sleep(1.0)
            await _settle(message.requeue())

    async def _accept(self, message: Message, dispatched: Dispatched) -> bool:
        """Take the message's attempt and start it in the reserved slot (or drop the message
        as stale); False when the store gave no answer."""
        try:
            claim = await self.calls(
                lambda: self.store.accept_dispatch(
                    dispatched,
                    self.slots.worker_id,
                    self.clock.now,  # read once the connection is held
                )
            )
        except Exception as exc:
            self.slots.unsure = True  # its answer may be lost after a commit
            log_event(
                log,
                "broker.accept_failed",
                logging.WARNING,
                job_id=dispatched.job_id,
                error=error_field(exc),
            )
            return False
        if claim is None:
            self._drop(
                "stale",
                "the job moved on (its attempt may have been withdrawn) or another worker took it",
                dispatched,
            )
            await _settle(message.ack())
            return True
        # the attempt is this worker's now, whether or not the broker hears the ack (if not,
        # the message comes again and is dropped as taken)
        await _settle(message.ack())
        self.accepted += 1
        if claim.job.status is JobStatus.CANCEL_REQUESTED:  # cancelled while in the broker
            try:
                await self.calls(
                    lambda: self.store.finish(claim.lease, Outcome(Event.STOP), self.clock.now())
                )
            except Exception as exc:  # its lease lapses and the reaper ends it cancelled
                log_event(log, "broker.stop_failed", logging.WARNING, error=error_field(exc))
            log_event(log, "job.cancelled", job_id=claim.job.id, generation=claim.job.generation)
            return True
        context = carrier_of(message.headers)
        if context is not None:  # the relay's publish span: the attempt's span goes under it
            self.slots.start_claim(Claim(variant(claim.job, trace_context=context), claim.attempt))
        else:
            self.slots.start_claim(claim)
        return True

    async def pause_for_slot(self) -> None:
        """Until a slot is free: an attempt ends, or a slot held for another message's
        acceptance is given back (checked every 50 ms)."""
        while self.slots.free() <= 0 and not self.stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.slots.finished.wait(), 0.05)

    def _drop(self, reason: str, why: str, dispatched: Dispatched | None) -> None:
        self.dropped += 1
        self.metrics.message_dropped(reason)
        log_event(
            log,
            "broker.message_dropped",
            reason=reason,
            why=why,
            job_id=dispatched.job_id if dispatched else None,
            generation=dispatched.generation if dispatched else None,
            event_id=dispatched.event_id if dispatched else None,
        )


async def _settle(done: Awaitable[None]) -> None:
    """Acknowledge or requeue; a broker gone meanwhile only means the message comes again."""
    try:
        await done
    except Exception as exc:
        log_event(log, "broker.ack_failed", logging.WARNING, error=error_field(exc))
