"""Wake-ups: the store's word that work was enqueued or falls due again, heard as it comes.

A blocking Store.listen() feed (PostgreSQL LISTEN/NOTIFY; SQLite's data_version) is read in
a thread of its own and handed to `heard` on the event loop. Where the database has no feed,
the service just waits for the node to stop, and the timer's refills and the slots' poll
interval find new work. A feed that fails (the database restarted) is opened again after
`retry` seconds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from duetime.core.models import Wakeup
from duetime.runtime.service import Pulse, Service
from duetime.store.base import Listener, Store

log = logging.getLogger("duetime.worker")
WAIT = 0.5  # seconds each blocking wait lasts at most: how soon a stop is noticed


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
                    while not self.stopping:
                        found = await loop.run_in_executor(self._thread, listener.wait, WAIT)
                        if found:
                            self.heard(found)
                            self.received.fire()
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


def _close(listener: Listener) -> None:
    try:
        listener.close()
    except Exception:
        pass
