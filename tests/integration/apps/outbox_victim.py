"""A relay or a broker-fed consumer that SIGKILLs itself at the worst moment (test_outbox.py).

python outbox_victim.py relay DB_URL AMQP_URL
    takes every unpublished event (a 1 s relay lease), publishes them (confirmed), and
    dies before marking them published.
python outbox_victim.py worker DB_URL AMQP_URL QUEUE accept|receive
    consumes QUEUE's broker queue; on its first message it takes the attempt (accept) or
    not (receive), and dies before acknowledging.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from datetime import timedelta

from duetime import App
from duetime.core.outbox import Dispatched
from duetime.runtime.outbox.broker import Broker, Message


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


async def relay(app: App, amqp_url: str) -> None:
    now = app.clock.now()
    events = app.store.take_events("victim", now, now + timedelta(seconds=1), 1000)
    broker = Broker(amqp_url)
    confirmed = await broker.publish(events)
    assert len(confirmed) == len(events) > 0
    die()  # between publish and mark


async def worker(app: App, amqp_url: str, queue: str, accept: bool) -> None:
    broker = Broker(amqp_url)
    got = asyncio.Event()

    async def on_message(message: Message) -> None:
        if accept:
            claim = app.store.accept_dispatch(
                Dispatched.from_body(message.body), "victim", app.clock.now()
            )
            assert claim is not None
        got.set()
        die()  # received (and maybe taken), never acknowledged

    await broker.consume(queue, on_message, prefetch=5)
    await asyncio.wait_for(got.wait(), 30)


def main() -> None:
    role, db_url, amqp_url = sys.argv[1:4]
    app = App(database_url=db_url)
    if role == "relay":
        asyncio.run(relay(app, amqp_url))
    else:
        asyncio.run(worker(app, amqp_url, sys.argv[4], sys.argv[5] == "accept"))
    sys.exit("the victim should have died")


if __name__ == "__main__":
    main()
