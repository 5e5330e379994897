"""The progress writer (runtime/progress.py) on a fake store: reports from any thread are
coalesced into at most one write per interval, each holding every attempt's latest report;
a report its outcome carries is not written again."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from typing import Any

from duetime.core.clock import ManualClock
from duetime.core.models import Lease
from duetime.runtime.progress import ProgressWriter
from duetime.runtime.service import BlockingCalls


class FakeStore:
    def __init__(self) -> None:
        self.writes: list[list[tuple[Lease, float, str | None]]] = []

    def record_progress(self, reports: Any, now: datetime) -> list[bool]:
        self.writes.append(list(reports))
        return [True] * len(reports)


def lease(job_id: int) -> Lease:
    return Lease(job_id, job_id * 10, 1, job_id * 100)


def writer_of(store: FakeStore, calls: BlockingCalls, interval: float) -> ProgressWriter:
    return ProgressWriter(
        store,  # type: ignore[arg-type]
        ManualClock(datetime(2026, 1, 1, tzinfo=UTC)),
        calls,
        interval=interval,
    )


def test_reports_are_coalesced_per_interval_and_the_latest_is_written() -> None:
    store = FakeStore()
    calls = BlockingCalls(1)
    writer = writer_of(store, calls, 0.2)

    async def main() -> None:
        await writer.start()
        running = asyncio.create_task(writer.run())

        def report(job_id: int) -> None:
            for i in range(1, 2001):
                writer.note(lease(job_id), i / 2000, f"{i}")

        threads = [threading.Thread(target=report, args=(n,)) for n in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        await asyncio.sleep(0.5)  # the writes under way, then one more with the latest
        writer.note(lease(3), 0.5, None)
        writer.forget(lease(3))  # its outcome carries it: never written
        await asyncio.sleep(0.3)
        writer.stop()
        await running

    asyncio.run(main())
    calls.close()
    assert 1 <= len(store.writes) <= 4, store.writes  # 4,000 reports
    last: dict[int, tuple[float, str | None]] = {}
    for batch in store.writes:
        assert len({r[0].job_id for r in batch}) == len(batch)  # one report per job and write
        for report_lease, fraction, message in batch:
            last[report_lease.job_id] = (fraction, message)
    assert last == {1: (1.0, "2000"), 2: (1.0, "2000")}
    assert writer.writes == len(store.writes)


def test_a_stale_attempts_report_does_not_replace_the_current_ones() -> None:
    # a stale attempt (its lease lost) still runs beside the current attempt of its job: the
    # store refuses the stale one's report; the current one's is written all the same
    store = FakeStore()
    calls = BlockingCalls(1)
    writer = writer_of(store, calls, 0.05)
    current, stale = Lease(1, 11, 2, 200), Lease(1, 10, 1, 100)

    async def main() -> None:
        await writer.start()
        running = asyncio.create_task(writer.run())
        writer.note(current, 0.9, "current")
        writer.note(stale, 0.1, "stale")
        writer.forget(stale)  # the stale attempt's end leaves the current report waiting
        await asyncio.sleep(0.2)
        writer.stop()
        await running

    asyncio.run(main())
    calls.close()
    assert [r for batch in store.writes for r in batch] == [(current, 0.9, "current")]
