"""The broker's side of outbox dispatch, on RabbitMQ through aio-pika (the `amqp` extra).

Only this module imports aio_pika: a worker without --broker-url never loads it. Publisher
confirms are on (a publish returns once the broker has taken the message, and raises when it
refused it), and messages are mandatory: one that no queue takes (its queue was deleted after
this connection declared it) is returned, not confirmed, and is sent again after the queue is
declared again. Queues are durable quorum queues named duetime.<queue>; messages are
persistent and carry the outbox event's id as their message id. See docs/outbox.md.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from duetime.core.errors import ConfigurationError
from duetime.core.outbox import OutboxEvent, broker_queue
from duetime.logs import log_event
from duetime.tracing import publish_headers

try:
    import aio_pika
    from aio_pika.abc import AbstractIncomingMessage
    from aio_pika.exceptions import ChannelPreconditionFailed, PublishError
except ImportError:  # pragma: no cover - said to the user by require()
    aio_pika = None  # type: ignore[assignment]

QUEUE_ARGUMENTS: dict[str, Any] = {"x-queue-type": "quorum"}
CONNECT_TIMEOUT = 5.0
REDECLARE_DELAY = 1.0  # seconds from a deleted queue's returned messages to its new declare

log = logging.getLogger("duetime.relay")  # only the relay publishes


class BrokerQueueMismatch(ConfigurationError):
    """A broker queue of duetime's name exists with other settings (a classic queue, say)."""

    def __init__(self, name: str, broker_said: str) -> None:
        found = re.search(r"PRECONDITION_FAILED - ([^\"]*)", broker_said)
        difference = found.group(1).strip() if found else broker_said.strip()
        super().__init__(
            f"broker queue {name} exists with other settings ({difference}); duetime needs a "
            f"durable quorum queue: move its messages elsewhere and delete it (rabbitmqctl "
            f"delete_queue {name}), and duetime declares it again"
        )


def require() -> None:
    """Fail with one line saying how to install aio-pika when it is missing."""
    if aio_pika is None:
        raise ConfigurationError("outbox dispatch needs aio-pika: pip install 'duetime[amqp]'")


class Broker:
    """One connection to RabbitMQ, opened on first use and opened again after it broke."""

    def __init__(self, url: str, *, queue_arguments: dict[str, Any] | None = None) -> None:
        require()
        self.url = url
        self.queue_arguments = dict(QUEUE_ARGUMENTS if queue_arguments is None else queue_arguments)
        self._connection: Any = None
        self._channel: Any = None
        self._declared: set[str] = set()
        self._consumers: dict[str, str] = {}  # duetime queue -> consumer tag

    @property
    def connected(self) -> bool:
        return self._channel is not None and not self._channel.is_closed

    async def channel(self) -> Any:
        if self.connected:
            return self._channel
        await self.close()
        self._connection = await aio_pika.connect(self.url, timeout=CONNECT_TIMEOUT)
        # a returned (unroutable) message raises PublishError instead of counting as confirmed
        self._channel = await self._connection.channel(
            publisher_confirms=True, on_return_raises=True
        )
        self._declared.clear()
        self._consumers.clear()
        return self._channel

    async def declare(self, queue: str) -> Any:
        """The durable broker queue of duetime queue `queue` (declared once per channel)."""
        channel = await self.channel()
        name = broker_queue(queue)
        try:
            declared = await channel.declare_queue(
                name, durable=True, arguments=self.queue_arguments
            )
        except ChannelPreconditionFailed as exc:
            raise BrokerQueueMismatch(name, str(exc)) from exc
        self._declared.add(name)
        return declared

    async def publish(self, events: Sequence[OutboxEvent], timeout: float = 30.0) -> list[int]:
        """Publish events (persistent, mandatory, confirmed); return the ids the broker
        confirmed. A broken connection raises; a refused message is left out. Messages that
        no queue took (their queue was deleted since it was declared here) are sent once
        more after their queue is declared again."""
        channel = await self.channel()
        for queue in sorted({e.queue for e in events}):
            if broker_queue(queue) not in self._declared:
                await self.declare(queue)
        results = await self._send(channel, events, timeout)
        unroutable = [i for i, r in enumerate(results) if isinstance(r, PublishError)]
        if unroutable:
            queues = sorted({events[i].queue for i in unroutable})
            log_event(
                log,
                "broker.queue_declared_again",
                logging.WARNING,
                queues=",".join(queues),
                messages=len(unroutable),
                hint="the broker queue was deleted after it was declared; it is declared again "
                f"in {REDECLARE_DELAY:g} s and the messages are sent again",
            )
            # not at once: RabbitMQ answers a queue's delete before it has cancelled the
            # queue's consumers, and a quorum queue declared again in that window keeps them,
            # and hands them messages that never reach their workers
            await asyncio.sleep(REDECLARE_DELAY)
            for queue in queues:
                await self.declare(queue)
            again = await self._send(channel, [events[i] for i in unroutable], timeout)
            for i, result in zip(unroutable, again, strict=True):
                results[i] = result
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures and self._channel is not None and self._channel.is_closed:
            raise failures[0]
        return [
            e.id for e, r in zip(events, results, strict=True) if not isinstance(r, BaseException)
        ]

    @staticmethod
    async def _send(
        channel: Any, events: Sequence[OutboxEvent], timeout: float
    ) -> list[object | BaseException]:
        # each message's headers carry its job's trace context (docs/tracing.md): the span of
        # its publish when this process traces, the stored context as it is otherwise
        headers, spans = publish_headers(events)
        sends = [
            channel.default_exchange.publish(
                aio_pika.Message(
                    e.body(),
                    headers=dict(h) if h else None,
                    message_id=str(e.id),
                    content_type="application/json",
                    delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                    type="duetime.attempt",
                ),
                routing_key=broker_queue(e.queue),
                mandatory=True,
                timeout=timeout,
            )
            for e, h in zip(events, headers, strict=True)
        ]
        results = list(await asyncio.gather(*sends, return_exceptions=True))
        if spans is not None:
            spans.end(results)
        return results

    async def consume(
        self,
        queue: str,
        on_message: Callable[[Message], Awaitable[None]],
        prefetch: int,
    ) -> None:
        """Consume duetime queue `queue`'s broker queue with manual acknowledgements and at
        most `prefetch` unacknowledged messages on this connection's channel."""
        channel = await self.channel()
        await channel.set_qos(prefetch_count=prefetch)  # per consumer (quorum queues)
        declared = await self.declare(queue)

        async def deliver(message: AbstractIncomingMessage) -> None:
            await on_message(Message(message))

        self._consumers[queue] = await declared.consume(deliver, no_ack=False)

    async def cancelled_consumers(self) -> list[str]:
        """The queues whose consumers the broker cancelled (their broker queue was deleted),
        forgotten here so that consume() can start them again."""
        if not self.connected or not self._consumers:
            return []
        live = (await self._channel.get_underlay_channel()).consumers
        gone = sorted(q for q, tag in self._consumers.items() if tag not in live)
        for queue in gone:
            del self._consumers[queue]
            self._declared.discard(broker_queue(queue))
        return gone

    async def purge(self, queue: str) -> int:
        """Drop every message of `queue`'s broker queue (tests and operators)."""
        declared = await self.declare(queue)
        result = await declared.purge()
        return int(getattr(result, "message_count", 0) or 0)

    async def delete(self, queue: str) -> None:
        channel = await self.channel()
        await channel.queue_delete(broker_queue(queue))
        self._declared.discard(broker_queue(queue))
        self._consumers.pop(queue, None)

    async def __aenter__(self) -> Broker:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None:
            try:
                await connection.close()
            except Exception:
                pass


class Message:
    """A delivered message: its body, whether it was delivered before, ack()."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self.body: bytes = raw.body
        self.redelivered: bool = bool(raw.redelivered)
        self.message_id: str | None = raw.message_id
        self.headers: dict[str, Any] = dict(raw.headers or {})

    async def ack(self) -> None:
        await self._raw.ack()

    async def requeue(self) -> None:
        await self._raw.reject(requeue=True)
