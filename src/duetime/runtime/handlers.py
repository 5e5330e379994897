"""Where handlers run: the thread pool of sync handlers, and what a handler may not do.

HandlerThreads counts its threads busy, and the orphans among them: threads still running
after their attempt was recorded (a sync handler past its timeout cannot be stopped), each of
which keeps a slot of the worker taken. A handler that calls sys.exit() or raises
KeyboardInterrupt fails its attempt (HandlerExit) instead of stopping the worker.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from duetime.runtime.context import AttemptContext


class HandlerThreads:
    """The threads sync handlers run in, counting those busy, and the orphans: threads still
    running after their attempt was recorded (each keeps a slot of the worker taken)."""

    def __init__(self, size: int) -> None:
        self.pool = ThreadPoolExecutor(size, thread_name_prefix="duetime-handler")
        self._lock = threading.Lock()
        self._busy: set[int] = set()  # id() of the AttemptContext of each thread running
        self.orphans = 0

    @property
    def busy(self) -> int:
        with self._lock:
            return len(self._busy)

    def start(
        self, fn: Callable[[], Any], ctx: AttemptContext, on_start: Callable[[], None]
    ) -> asyncio.Future[Any]:
        """Run `fn` in a thread; `on_start` is called on the loop when the thread begins."""
        loop = asyncio.get_running_loop()

        def in_thread() -> Any:
            with self._lock:
                self._busy.add(id(ctx))
            loop.call_soon_threadsafe(on_start)
            try:
                return fn()
            except (SystemExit, KeyboardInterrupt) as exc:
                raise HandlerExit(exc) from exc
            finally:
                with self._lock:
                    self._busy.discard(id(ctx))
                    ctx.thread_done = True
                    if ctx.orphaned:
                        self.orphans -= 1

        return loop.run_in_executor(self.pool, in_thread)

    def orphan_if_running(self, ctx: AttemptContext) -> None:
        """Its handler is over: a thread of it still running keeps its slot taken (once)."""
        if id(ctx) not in self._busy:  # an async handler's, or a thread that returned
            return
        with self._lock:
            if id(ctx) in self._busy and not ctx.orphaned:
                ctx.orphaned = True
                self.orphans += 1

    def shutdown(self) -> None:
        """Stop handing out threads; threads still running are left to finish (or not)."""
        self.pool.shutdown(wait=False, cancel_futures=True)


class HandlerExit(Exception):
    """A handler called sys.exit() or raised KeyboardInterrupt: a failed attempt, not a crash."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(f"handler raised {type(exc).__name__}({exc}); the worker keeps running")


async def guarded(coro: Coroutine[Any, Any, Any]) -> Any:
    try:
        return await coro
    except (SystemExit, KeyboardInterrupt) as exc:
        raise HandlerExit(exc) from exc
