"""How long a wake-up takes from PostgreSQL's NOTIFY to the worker's event loop
(runtime/wakeups.py), with the LISTEN socket watched in the event loop (`loop`, the worker's
way) and read by a blocking wait in the service's thread (`thread`, the way before), on an
idle machine and with BUSY processes spinning on the cores.

A sender process sends `pg_notify('duetime_due', '<its time.time()>\\t0')` every 10 ms; the
measuring process runs the Wakeups service and notes, as each wake-up reaches `heard`, its
time.time() minus the one the payload carries (one machine, one clock). The two ways
alternate, ROUNDS times each, SECONDS each; the report gives each way's p50, p99 and max
over all its rounds, and the median of its rounds' p99s.

    PYTHONPATH=bench:. .venv/bin/python bench/wakeup_latency.py --url postgresql://... \\
        --seconds 15 --rounds 3 --busy 0,4
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import psycopg

from duetime.core.models import Wakeup
from duetime.runtime import wakeups as wakeups_module
from duetime.runtime.wakeups import Wakeups
from duetime.store import open_store
from duetime.store.base import Listener


def _send(url: str, seconds: float, every: float) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        end = time.monotonic() + seconds
        k = 0
        start = time.monotonic()
        while time.monotonic() < end:
            k += 1
            conn.execute("SELECT pg_notify('duetime_due', %s)", (f"{time.time():.6f}\t0",))
            time.sleep(max(0.0, start + k * every - time.monotonic()))


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


class _InThread:
    """The listener without its socket: the service reads it by wait() in its thread."""

    def __init__(self, listener: Listener) -> None:
        self.listener = listener

    def wait(self, timeout: float) -> list[Wakeup]:
        return self.listener.wait(timeout)

    def close(self) -> None:
        self.listener.close()


class _Feed:
    def __init__(self, url: str, way: str) -> None:
        self.store = open_store(url)
        self.way = way

    def listen(self) -> Listener | None:
        listener = self.store.listen()
        if listener is None or self.way == "loop":
            return listener
        return _InThread(listener)


async def _measure(url: str, way: str, seconds: float) -> list[float]:
    feed = _Feed(url, way)
    delays: list[float] = []

    def heard(wakeups: Sequence[Wakeup]) -> None:
        now = time.time()
        for w in wakeups:
            try:
                delays.append((now - float(w.queue or "")) * 1000)
            except ValueError:
                pass

    service = Wakeups(feed, heard)  # type: ignore[arg-type]
    running = asyncio.create_task(service.run())
    await asyncio.sleep(1.0)  # the listener opens
    sender = multiprocessing.Process(target=_send, args=(url, seconds, 0.01))
    sender.start()
    while sender.is_alive():
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.2)
    service.stop()
    await running
    feed.store.close()
    return delays


def _cut(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--url", required=True)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--busy", default="0,4", help="spinning processes, one figure per count")
    args = p.parse_args(argv)
    wakeups_module.WAIT = 0.5
    for busy in (int(b) for b in args.busy.split(",")):
        found: dict[str, list[list[float]]] = {"loop": [], "thread": []}
        for _ in range(args.rounds):
            for way in ("loop", "thread"):
                spinners = [
                    multiprocessing.Process(target=_spin, args=(args.seconds + 2,))
                    for _ in range(busy)
                ]
                for s in spinners:
                    s.start()
                found[way].append(asyncio.run(_measure(args.url, way, args.seconds)))
                for s in spinners:
                    s.join()
        for way, rounds in found.items():
            every: list[float] = [d for r in rounds for d in r]
            row: dict[str, Any] = {
                "busy": busy,
                "way": way,
                "n": len(every),
                "p50_ms": round(_cut(every, 50), 3),
                "p99_ms": round(_cut(every, 99), 3),
                "max_ms": round(max(every), 3),
                "p99_of_rounds_median_ms": round(statistics.median(_cut(r, 99) for r in rounds), 3),
            }
            sys.stdout.write(json.dumps(row) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
