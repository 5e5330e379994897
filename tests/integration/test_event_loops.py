"""Worker processes in either event loop (docs/workers.md, "The event loop"): uvloop's by
default where it is installed (a dependency of duetime here), asyncio's own with --loop
asyncio. Each runs async handlers (on the loop's timers) and sync ones (in handler threads) to
success, says in worker.started which loop it runs in, and stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest

from duetime import App
from duetime.cli import main
from duetime.core.states import JobStatus
from integration.procs import Processes, wait_until

JOBS = 40
BROKER = "amqp://guest:guest@127.0.0.1:5672/"


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("flags", "loop"), [((), "uvloop"), (("--loop", "asyncio"), "asyncio")])
def test_a_worker_runs_its_jobs_in_the_event_loop_it_was_given(
    db_url: str, procs: Processes, app: App, flags: tuple[str, ...], loop: str
) -> None:
    jobs = [
        *app.enqueue_many("nap", [{"seconds": 0.01}] * JOBS),
        *app.enqueue_many("noop", [{}] * 4),
        *app.enqueue_many("flow.hold", [{"seconds": 0.05}] * 4),  # sync: a handler thread
    ]
    worker = procs.worker(db_url, "--concurrency", "8", *flags)
    assert worker.wait_event("worker.started", 60)["loop"] == loop

    def done() -> bool:
        worker.alive()
        return all(app.get_job(j.id).status is JobStatus.SUCCEEDED for j in jobs)

    wait_until(done, 60, f"the {len(jobs)} jobs did not all succeed in {loop}", interval=0.1)
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(60) == 0
    assert worker.problems() == [], worker.tail()


@pytest.mark.parametrize("loop", ["auto", "asyncio", "uvloop"])
def test_the_relay_runs_in_the_event_loop_it_is_given(
    loop: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`duetime relay --loop` reaches the loop it runs in (its node ends at once here: the
    broker is not needed to see which loop it was handed)."""
    from duetime.runtime import node

    ran: list[str] = []
    real = node.run_until_signalled

    def stopped_at_once(main: Any, *, grace: float, loop: str = "auto") -> None:
        """The real run_until_signalled, with `main` asked to stop as it begins."""

        async def stopped(stop: asyncio.Event) -> None:
            ran.append(node.loop_name(asyncio.get_running_loop()))
            stop.set()
            await main(stop)

        real(stopped, grace=grace, loop=loop)

    monkeypatch.setattr(node, "run_until_signalled", stopped_at_once)
    argv = ["relay", "--broker-url", BROKER, "--database-url", f"sqlite:///{tmp_path}/r.db"]
    assert main([*argv, *(["--loop", loop] if loop != "auto" else [])]) == 0
    assert ran == ["asyncio" if loop == "asyncio" else "uvloop"]
