"""Wake-ups: the store's word that work was enqueued or falls due again, heard as it comes.

Where the feed arrives on a socket (PostgreSQL's LISTEN, a SocketListener), the event loop
watches that socket and reads each wake-up as it lands, handing it to `heard` at once: no
thread stands between the socket and the claim loop, so a wake-up waits for one process
wake-up, not for a thread's and then the loop's. Every WAIT seconds the feed's wait(0) runs
in a thread of its own, with the socket unwatched meanwhile: it makes the feed's own checks
when they are due (PostgreSQL: is the server still writable? a round trip every 5 s) and
reads what arrived. Any other blocking feed (SQLite's data_version) is read in that thread,
WAIT seconds at a time. Where the database has no feed, the service just waits for the node
to stop, and the timer's refills and the slots' poll interval find new work. A feed that
fails (the database restarted) is opened again after `retry` seconds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from duetime.core.models import Wakeup
from duetime.runtime.service import Pulse, Service
from duetime.store.base import Listener, SocketListener, Store

log = logging.getLogger("duetime.worker")
# seconds between two turns of the service's thread: each blocking wait of a feed read there
# lasts at most this long (how soon a stop is noticed), and a socket feed's checks are made
# this often at most
WAIT = 0.5


class Wakeups(Service):
    name = "wakeups"

    def __init__(
        self,
        store: Store,
        heard: Callable[[Sequence[Wakeup]], None],
        *,
        retry: float = 5.0,
    ) -> None:
        super().__init__()
        self.store = store
        self.heard = heard
        self.retry = retry
        self.received = Pulse()  # wake-ups were handed over
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="duetime-wakeups")

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while not self.stopping:
                listener: Listener | None = None
                try:
                    listener = await loop.run_in_executor(self._thread, self.store.listen)
                    if listener is None:  # no feed here: nothing to do until the node stops
                        while not self.stopping:
                            await self.pause(3600)
                        return
                    if isinstance(listener, SocketListener):
                        await self._watch(loop, listener)
                    else:
                        await self._wait_in_thread(loop, listener)
                except Exception as exc:
                    log.warning(
                        "wake-ups failed (%s); workers poll until they come back in %.0fs",
                        exc,
                        self.retry,
                    )
                    await self.pause(self.retry)
                finally:
                    if listener is not None:
                        await loop.run_in_executor(self._thread, _close, listener)
        finally:
            self._thread.shutdown(wait=False)

    def _hand(self, found: list[Wakeup]) -> None:
        if found:
            self.heard(found)
            self.received.fire()

    async def _wait_in_thread(self, loop: asyncio.AbstractEventLoop, listener: Listener) -> None:
        """Read a blocking feed in the thread, WAIT seconds at a time, until the node stops."""
        while not self.stopping:
            self._hand(await loop.run_in_executor(self._thread, listener.wait, WAIT))

    async def _watch(self, loop: asyncio.AbstractEventLoop, listener: SocketListener) -> None:
        """Read a socket feed in the event loop as it arrives; every WAIT seconds, its wait(0)
        in the thread (its checks), the socket unwatched meanwhile. Returns when the node
        stops; raises when the feed failed. An event loop that cannot watch a socket
        (Windows' proactor) reads it in the thread instead."""
        fd = listener.fileno()
        lost: list[Exception] = []

        def readable() -> None:
            try:
                self._hand(listener.arrived())
            except Exception as exc:  # the connection is gone (or `heard` failed, as a
                loop.remove_reader(fd)  # thread's wait would): run() opens a new one
                lost.append(exc)
                self.wake()

        try:
            loop.add_reader(fd, readable)
        except NotImplementedError:
            await self._wait_in_thread(loop, listener)
            return
        try:
            while not self.stopping and not lost:
                await self.pause(WAIT)
                if self.stopping or lost:
                    break
                loop.remove_reader(fd)
                self._hand(await loop.run_in_executor(self._thread, listener.wait, 0))
                loop.add_reader(fd, readable)
        finally:
            loop.remove_reader(fd)
        if lost:
            raise lost[0]


def _close(listener: Listener) -> None:
    try:
        listener.close()
    except Exception:
        pass
